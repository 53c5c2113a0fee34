//! The benchmark suite (issue 6): tidemark beside the tools users would otherwise pick, on the same
//! data and machine, in one run, reported as ratios. Not a test. Run it through
//! `bash sandbox/bench.sh` (installs the peers), or directly:
//!
//! `cargo bench -p tidemark-recovery --bench suite -- [--sizes 1m,10m,100m] [--upsert-size SIZE]
//!  [--work DIR] [--out FILE.json] [--engines local,ballista-standalone,ballista://HOST:PORT]`
//!
//! `--engines` (built with `--features tidemark-recovery/ballista-engine`; default `local`) runs
//! the recovery step once per engine on the same dataset, each in its own process (`recover
//! --engine`, issue 15): each engine's step seconds and peak RSS (of the coordinator; a cluster's
//! executors are other processes) sit beside the local one's in the JSON
//! (`tidemark.recovery_by_engine`) and the table, with the ratio to the fastest checked peer. One
//! step alone, on a dataset made before: `suite __step recover DIR [ENGINE]` (DIR as `--work`'s
//! `size-*` folders).
//! `TIDEMARK_BENCH_VALIDATION_SPLIT=key-hash` makes the recovery's validation split by key hash
//! (the default splits by key range when the manifests' bounds allow it); the JSON names the split.
//!
//! Per size (`1m` = 1,000,000 snapshot rows + 100,000 events, `10m` = 10,000,000 + 1,000,000; any
//! `ROWSxEVENTS` too): a deterministic dataset (`gen`), then each measured step in a process of its
//! own, so that its peak resident memory is its own: journal verify; recovery (seed, replay,
//! validate; the final state's figures are read after the peak was taken); the applier's sustained
//! throughput into the snapshot table, copy-on-write and merge-on-read, with bytes written per
//! event, and the compaction of the merge-on-read table (`suite/apply.rs`). Beside them: `sha256sum` over
//! the journal's event objects; the peers computing the same final state from the same Parquet files
//! (sandbox/bench/peers.py, each printing its query or call): DuckDB without and with the merge
//! rules' conflict check (`duckdb-state`, `duckdb-checked`), delta-rs's `merge` into a Delta table of
//! the snapshot's rows (`deltalake-merge`, no conflict check) and Polars (`polars`, checked); and (at
//! `--upsert-size`, default the largest size up to 10M rows) PyIceberg's `upsert()` doing the replay
//! step, with tidemark's replay measured on that same dataset. The ratios are to the fastest peer
//! doing the same rules (`*_vs_fastest_checked_peer`, issue 33) and to the fastest that computes the
//! final state only (`*_vs_fastest_state_only_peer`), each naming that peer. The peers run with
//! `$TIDEMARK_BENCH_PYTHON` (sandbox/bench_peers.sh); without it they are reported as skipped.
//!
//! `--drill-size SIZE` (default: the largest of `--sizes`; `none` skips it): the weekly drill of
//! a real table beside `recover --dry-run` of the same table, both through the `tidemark` binary
//! (`suite/drill.rs`, issue 32).
//!
//! Every tool's final state is summarized as (rows, tombstones, sum of versions) and compared, so
//! a fast wrong answer shows.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, BooleanArray, Int64Array};
use serde_json::{Value, json};
use tidemark_journal::Journal;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::verify::verify;
use tidemark_recovery::benchdata::{cpu_seconds, peak_rss_mb, runtime};
use tidemark_recovery::catalog::{CatalogConfig, CatalogHandle, open_catalog};
use tidemark_recovery::ids::{Ids, RandomIds};
use tidemark_recovery::recover::RecoverOptions;
use tidemark_recovery::recover::snapshot::{SnapshotChoice, SnapshotSource};
use tidemark_recovery::table::read::{live_files, read_files};
use tidemark_recovery::table::{self, arrow_schema};

const TABLE: &str = "bench.orders";

/// Why the runs accept the generated snapshot, which no journal explains.
const BENCH_SNAPSHOT_ACCEPTED: &str = "the benchmark's snapshot is generated outside the journal";

/// The `tidemark` binary's allocator, so that the suite measures what users run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "suite/apply.rs"]
mod apply_runs;
#[path = "suite/audit.rs"]
mod audit_runs;
#[path = "suite/dataset.rs"]
mod dataset;
#[path = "suite/drill.rs"]
mod drill_runs;
#[path = "suite/report.rs"]
mod report;

use dataset::{events_ndjson, gen_step, snapshot_row};
use report::print_table;

fn main() {
    // As the `tidemark` binary's commands that end (tidemark_recovery::allocator).
    tidemark_recovery::allocator::configure(tidemark_recovery::allocator::Process::OneShot);
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("__step") {
        let out = runtime().block_on(step(&args[1], Path::new(&args[2]), &args[3..]));
        println!("{out}");
        return;
    }
    orchestrate(&args);
}

fn opt<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// `1m`, `10m`, `100m`, `100k` or `ROWSxEVENTS`. `100m` (100,000,000 rows + 10,000,000 events)
/// runs only when asked for: its dataset takes about 20 GB of disk and the run most of an hour.
fn size(spec: &str) -> (u64, u64) {
    match spec {
        "100m" => (100_000_000, 10_000_000),
        "10m" => (10_000_000, 1_000_000),
        "1m" => (1_000_000, 100_000),
        "100k" => (100_000, 10_000),
        other => {
            let (r, e) = other
                .split_once('x')
                .unwrap_or_else(|| panic!("size {other:?}: 1m, 10m, 100m, 100k or ROWSxEVENTS"));
            (r.parse().unwrap(), e.parse().unwrap())
        }
    }
}

/// Runs a step of this benchmark in a process of its own; its JSON result.
fn child(dir: &Path, name: &str, extra: &[&str]) -> Value {
    let v = child_or_failure(dir, name, extra);
    if let Some(failed) = v.get("failed") {
        panic!("{failed}");
    }
    v
}

/// [`child`], with a failed step's exit (and the signal that ended it) as `{"failed": …}`.
fn child_or_failure(dir: &Path, name: &str, extra: &[&str]) -> Value {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .arg("__step")
        .arg(name)
        .arg(dir)
        .args(extra)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    if !out.status.success() {
        use std::os::unix::process::ExitStatusExt;
        let how = match out.status.signal() {
            Some(9) => "killed (signal 9: the kernel's OOM killer, or a kill)".to_string(),
            Some(s) => format!("signal {s}"),
            None => format!("exit {}", out.status.code().unwrap_or(-1)),
        };
        eprintln!("suite: step {name} {extra:?} failed: {how}; recorded, the suite goes on");
        return json!({"failed": format!("step {name} {}: {how}", extra.join(" "))});
    }
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("step {name}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn peer(python: Option<&str>, args: &[&str]) -> Value {
    let Some(py) = python else {
        return json!({"skipped": "TIDEMARK_BENCH_PYTHON is not set (run sandbox/bench.sh)"});
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandbox/bench/peers.py");
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    if !out.status.success() {
        return json!({"failed": format!("exit {:?}", out.status.code())});
    }
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| json!({"failed": e.to_string()}))
}

fn sha256sum(files: &[Value]) -> Value {
    let t = Instant::now();
    let out = Command::new("sha256sum")
        .args(files.iter().map(|f| f.as_str().unwrap()))
        .output()
        .unwrap();
    let s = t.elapsed().as_secs_f64();
    assert!(out.status.success());
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f.as_str().unwrap()).unwrap().len())
        .sum();
    json!({"seconds": s, "bytes": bytes, "mb_per_s": bytes as f64 / 1e6 / s})
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for p in path {
        v = v.get(p)?;
    }
    v.as_f64()
}

fn same_state(a: &Value, b: &Value) -> Option<bool> {
    let fig = |v: &Value| {
        Some((
            v.get("rows")?.as_u64()?,
            v.get("tombstones")?.as_u64()?,
            v.get("version_sum")?.as_u64()?,
        ))
    };
    Some(fig(a)? == fig(b)?)
}

/// The peers that compute the final state from the same Parquet files (sandbox/bench/peers.py,
/// which describes each; issue 33): DuckDB without and with the merge rules' conflict check,
/// delta-rs's `merge` into a Delta table of the snapshot's rows, and Polars.
const STATE_PEERS: [&str; 4] = ["duckdb-state", "duckdb-checked", "deltalake-merge", "polars"];

/// Every state peer on the dataset of one size, each writing into a folder removed afterwards.
fn state_peers(python: Option<&str>, label: &str, dir: &Path, dataset: &Value) -> serde_json::Map<String, Value> {
    let input = dataset["peers_input"].as_str().unwrap();
    let mut out = serde_json::Map::new();
    for p in STATE_PEERS {
        eprintln!("suite: {label}: {p}");
        let scratch = dir.join(format!("{p}-out"));
        let _ = std::fs::remove_dir_all(&scratch);
        out.insert(p.into(), peer(python, &[p, input, scratch.to_str().unwrap()]));
        let _ = std::fs::remove_dir_all(&scratch);
    }
    out
}

/// The fastest peer that did the conflict check (`checked`) or only the final state, among those
/// whose final state is tidemark's (and, checked, that found no conflict: the recovery found
/// none, or it would have stopped): its name and seconds. A peer with another answer is not
/// a peer to compare times with; the table and `same_final_state` show it.
fn fastest_peer(peers: &serde_json::Map<String, Value>, rec: &Value, checked: bool) -> Option<(String, f64)> {
    peers
        .iter()
        .filter(|(_, v)| v["conflict_check"].as_bool() == Some(checked))
        .filter(|(_, v)| same_state(&rec["final_state"], v) == Some(true))
        .filter(|(_, v)| !checked || v["conflicts"].as_u64() == Some(0))
        .filter_map(|(p, v)| Some((p.clone(), f(v, &["seconds"])?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    json!({"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), "cpu": cpu, "memory": mem})
}

fn orchestrate(args: &[String]) {
    let sizes: Vec<&str> = opt(args, "--sizes").unwrap_or("1m").split(',').collect();
    // By default PyIceberg runs at the largest size up to 10M rows (it finishes 10M + 1M in under
    // two minutes and 4 GB; 100M would not fit in memory), so that `--sizes 1m,10m,100m` is one run.
    let upsert = opt(args, "--upsert-size").unwrap_or_else(|| {
        let fits = sizes.iter().copied().filter(|s| size(s).0 <= 10_000_000);
        fits.max_by_key(|s| size(s).0).unwrap_or("1m")
    });
    let scratch = tempfile::tempdir().unwrap();
    let work = opt(args, "--work")
        .map(PathBuf::from)
        .unwrap_or_else(|| scratch.path().to_path_buf());
    let out_path = opt(args, "--out")
        .map(PathBuf::from)
        .unwrap_or_else(|| work.join("bench-suite.json"));
    let python = std::env::var("TIDEMARK_BENCH_PYTHON").ok().filter(|p| !p.is_empty());
    let python = python.as_deref();
    let engines: Vec<&str> = opt(args, "--engines").unwrap_or("local").split(',').collect();
    if cfg!(not(feature = "ballista-engine")) && engines.iter().any(|e| *e != "local") {
        panic!("--engines {engines:?}: build the suite with --features tidemark-recovery/ballista-engine");
    }
    let mut results = Vec::new();
    for s in &sizes {
        let (rows, events) = size(s);
        let dir = work.join(format!("size-{rows}x{events}"));
        eprintln!(
            "suite: {s}: generating {rows} rows + {events} events in {}",
            dir.display()
        );
        let dataset = child(&dir, "gen", &[&rows.to_string(), &events.to_string()]);
        eprintln!("suite: {s}: journal verify");
        let verify = child(&dir, "verify", &[]);
        eprintln!("suite: {s}: sha256sum");
        let sha = sha256sum(dataset["event_files"].as_array().unwrap());
        eprintln!("suite: {s}: recovery");
        let rec = child(&dir, "recover", &[]);
        let mut by_engine = serde_json::Map::new();
        by_engine.insert("local".into(), rec.clone());
        for e in engines.iter().filter(|e| **e != "local") {
            eprintln!("suite: {s}: recovery on {e}");
            by_engine.insert(e.to_string(), child(&dir, "recover", &[e]));
        }
        let peers = state_peers(python, s, &dir, &dataset);
        eprintln!("suite: {s}: applier throughput");
        // A failed applier or compaction step is recorded (`failed`) and the suite goes on: its
        // recovery and peer figures are worth keeping (at 100M the compaction was once killed for
        // memory, docs/runs/history.md, "table compact fits in memory at 100M rows").
        let applied = apply_runs::orchestrate(&dir, &child_or_failure);
        let (checked, state_only) = (fastest_peer(&peers, &rec, true), fastest_peer(&peers, &rec, false));
        let vs =
            |r: &Value, step: &str, p: &Option<(String, f64)>| f(r, &[step]).zip(p.as_ref()).map(|(a, (_, b))| a / b);
        let ratios = json!({
            "verify_vs_sha256sum_throughput": f(&verify, &["mb_per_s"]).zip(f(&sha, &["mb_per_s"])).map(|(a, b)| a / b),
            "fastest_checked_peer": checked.as_ref().map(|p| &p.0),
            "replay_vs_fastest_checked_peer": vs(&rec, "replay_s", &checked),
            "recovery_vs_fastest_checked_peer": vs(&rec, "total_s", &checked),
            // The same in CPU seconds (user + system), which a busy host moves much less.
            "recovery_cpu_vs_fastest_checked_peer": checked.as_ref().and_then(|(p, _)| {
                f(&rec, &["cpu_s"]).zip(f(&peers[p], &["cpu_seconds"])).map(|(a, b)| a / b)
            }),
            "fastest_state_only_peer": state_only.as_ref().map(|p| &p.0),
            "replay_vs_fastest_state_only_peer": vs(&rec, "replay_s", &state_only),
            "recovery_vs_fastest_state_only_peer": vs(&rec, "total_s", &state_only),
            "recovery_vs_fastest_checked_peer_by_engine": by_engine.iter().map(|(e, r)| {
                (e.clone(), json!(vs(r, "total_s", &checked)))
            }).collect::<serde_json::Map<_, _>>(),
        });
        let same: serde_json::Map<_, _> = peers
            .iter()
            .map(|(p, v)| (p.clone(), json!(same_state(&rec["final_state"], v))))
            .collect();
        let mut all_peers = peers;
        all_peers.insert("sha256sum".into(), sha);
        results.push(json!({
            "size": s, "rows": rows, "events": events, "dataset": dataset,
            "tidemark": {"verify": verify, "recovery": rec, "recovery_by_engine": by_engine, "apply": applied},
            "peers": all_peers,
            "ratios": ratios,
            "same_final_state": same,
        }));
    }
    // PyIceberg upsert at a size it finishes; tidemark's replay on the same dataset.
    let (rows, events) = size(upsert);
    eprintln!("suite: PyIceberg upsert at {rows} rows + {events} events");
    // The dataset of that size when the suite has one (its recovery already measured).
    let measured = results
        .iter()
        .find(|r| r["rows"] == rows && r["events"] == events)
        .map(|r| (r["dataset"].clone(), r["tidemark"]["recovery"].clone()));
    let (dataset, rec) = match measured {
        Some(m) => m,
        None => {
            let dir = work.join(format!("upsert-{rows}x{events}"));
            let dataset = child(&dir, "gen", &[&rows.to_string(), &events.to_string()]);
            let rec = child(&dir, "recover", &[]);
            (dataset, rec)
        }
    };
    let up = peer(python, &["pyiceberg-upsert", dataset["peers_input"].as_str().unwrap()]);
    let upsert_result = json!({
        "rows": rows, "events": events,
        "tidemark_replay_s": rec["replay_s"], "tidemark_recovery": rec,
        "pyiceberg_upsert": up,
        "upsert_vs_tidemark_replay_time": f(&up, &["seconds"]).zip(f(&rec, &["replay_s"])).map(|(a, b)| a / b),
        "same_final_state": same_state(&rec["final_state"], &up),
    });
    // The drill of a real table beside `recover --dry-run` (issue 32), at `--drill-size`.
    let drill = match opt(args, "--drill-size").unwrap_or_else(|| sizes.last().copied().unwrap_or("1m")) {
        "none" => Value::Null,
        spec => {
            let (rows, events) = size(spec);
            let dir = work.join(format!("drill-{rows}x{events}"));
            let mut d = drill_runs::orchestrate(&dir, rows, events, &child);
            // The audit figures (issue 30) on the same table, which the drill left unchanged.
            d["audit"] = audit_runs::orchestrate(&dir, rows, python, &child);
            let _ = std::fs::remove_dir_all(&dir);
            d
        }
    };
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let report = json!({
        "format_version": 1,
        "machine": machine(),
        "commit": commit,
        "sizes": results,
        "pyiceberg": upsert_result,
        "drill": drill,
    });
    std::fs::write(&out_path, serde_json::to_vec_pretty(&report).unwrap()).unwrap();
    print_table(&report);
    println!("\nall figures: {}", out_path.display());
}

// ---- steps (each in its own process) ----

async fn open(dir: &Path) -> CatalogHandle {
    open_catalog(&CatalogConfig::in_folder(dir, "bench")).await.unwrap()
}

async fn journal(dir: &Path) -> Journal {
    Journal::open(Arc::new(LocalStore::open(dir.join("journal")).unwrap()))
        .await
        .unwrap()
}

async fn step(name: &str, dir: &Path, args: &[String]) -> Value {
    match name {
        "gen" => gen_step(dir, args[0].parse().unwrap(), args[1].parse().unwrap()).await,
        "verify" => {
            let j = journal(dir).await;
            let t = Instant::now();
            let chain = verify(&j, &Default::default(), &mut |_| {}).await.unwrap();
            let s = t.elapsed().as_secs_f64();
            assert!(chain.report.ok);
            let bytes: u64 = chain.manifests.iter().map(|m| m.manifest.object_size).sum();
            json!({"seconds": s, "bytes": bytes, "mb_per_s": bytes as f64 / 1e6 / s, "peak_rss_mb": peak_rss_mb()})
        }
        "recover" => recover_step(dir, args.first().map_or("local", String::as_str)).await,
        "drillgen" => drill_runs::gen_step(dir, args[0].parse().unwrap(), args[1].parse().unwrap()).await,
        "cli" => drill_runs::cli_step(dir, &args[0]),
        "touched" => audit_runs::touched_step(dir).await,
        "apply" => apply_runs::apply_step(dir, args, TABLE).await,
        "compact" => apply_runs::compact_step(dir, args).await,
        other => panic!("unknown step {other}"),
    }
}

/// The recovery of the dataset in `dir` on `engine` (`local` without the feature); the
/// recovered table is dropped and its files removed afterwards (a 10M table is about 300 MB).
async fn recover_step(dir: &Path, engine: &str) -> Value {
    let ds: Value = serde_json::from_slice(&std::fs::read(dir.join("dataset.json")).unwrap()).unwrap();
    let j = journal(dir).await;
    let handle = open(dir).await;
    let events = ds["events"].as_u64().unwrap();
    let (t, cpu) = (Instant::now(), cpu_seconds());
    let chain = verify(&j, &Default::default(), &mut |_| {}).await.unwrap();
    assert!(chain.report.ok);
    let verify_s = t.elapsed().as_secs_f64();
    let into = format!("bench.recovered_{}", RandomIds.uuid().simple());
    let ropts = RecoverOptions {
        recovery_id: into.clone(),
        source: SnapshotSource::at(ds["snapshot_metadata"].as_str().unwrap()),
        choice: SnapshotChoice::SnapshotId(ds["snapshot_id"].as_i64().unwrap()),
        to: Some(events),
        into: into.clone(),
        partition_rows: None,
        // `TIDEMARK_BENCH_VALIDATION_SPLIT=key-hash`: the validation's split by key hash, to
        // compare with the default (`auto`: by key range when the bounds allow it).
        validation_split: match std::env::var("TIDEMARK_BENCH_VALIDATION_SPLIT").as_deref() {
            Ok("key-hash") => tidemark_recovery::recover::validate::Split::KeyHash,
            _ => tidemark_recovery::recover::validate::Split::Auto,
        },
        // The dataset's snapshot is made outside the journal (generated rows at position 0):
        // the recovery's audit calls it a divergence, accepted here as a user would.
        trust: tidemark_recovery::recover::audited::TrustOptions {
            accept_divergence: Some(BENCH_SNAPSHOT_ACCEPTED.into()),
            ..Default::default()
        },
    };
    // Peak memory per step: read at the end of each step, then reset (Linux: clear_refs 5).
    let mut step_peaks = serde_json::Map::new();
    let mut overall = peak_rss_mb();
    let t = Instant::now();
    let mut progress = |s: &tidemark_recovery::recover::StepTiming| {
        let p = peak_rss_mb();
        overall = overall.max(p);
        step_peaks.insert(s.step.clone(), json!(p));
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    };
    #[cfg(feature = "ballista-engine")]
    let (report, _) = {
        let engine: tidemark_recovery::recover::engine::Engine = engine.parse().unwrap();
        tidemark_recovery::recover::engine::recover(
            &j,
            &handle,
            &ropts,
            &engine,
            &SystemClock,
            &RandomIds,
            &mut progress,
        )
        .await
        .unwrap()
    };
    #[cfg(not(feature = "ballista-engine"))]
    let (report, _) = {
        assert_eq!(
            engine, "local",
            "build with --features tidemark-recovery/ballista-engine"
        );
        tidemark_recovery::recover::recover(&j, &handle, &ropts, &SystemClock, &RandomIds, &mut progress)
            .await
            .unwrap()
    };
    let recover_s = t.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu;
    assert!(report.validation.ok, "{:?}", report.validation);
    let peak = overall.max(peak_rss_mb());
    let ms = |name: &str| report.steps.iter().find(|s| s.step == name).map_or(0, |s| s.ms) as f64 / 1000.0;
    // Not measured: the final state's figures, for the comparison with the peers.
    let table = table::load_table(&handle, &into).await.unwrap();
    let (files, deletes) = live_files(&table).await.unwrap();
    let schema = arrow_schema(&table).unwrap();
    let (mut rows, mut tombstones, mut version_sum) = (0u64, 0u64, 0u64);
    for file in &files {
        for b in read_files(&table, &[file], &schema, None, &deletes).await.unwrap() {
            rows += b.num_rows() as u64;
            let d = b
                .column_by_name("is_deleted")
                .unwrap()
                .as_any()
                .downcast_ref::<BooleanArray>()
                .unwrap();
            tombstones += d.true_count() as u64;
            let v = b
                .column_by_name("order_version")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            version_sum += v.iter().flatten().sum::<i64>() as u64;
            debug_assert_eq!(v.null_count(), 0);
        }
    }
    // The new table's data files' bytes, for the writer's settings (codec level, dictionaries).
    let data_mb = files.iter().map(|f| f.file_size_in_bytes()).sum::<u64>() as f64 / 1e6;
    let location = table.metadata().location().trim_start_matches("file://").to_string();
    let ident = table::parse_ident(&into).unwrap();
    handle.catalog().drop_table(&ident).await.unwrap();
    let _ = std::fs::remove_dir_all(&location);
    json!({
        "engine": engine,
        "verify_s": verify_s, "choose_s": ms("choose snapshot"), "seed_s": ms("seed"), "replay_s": ms("replay"),
        "validate_s": ms("validate"), "total_s": verify_s + recover_s, "cpu_s": cpu_s, "peak_rss_mb": peak,
        "step_peak_rss_mb": step_peaks,
        // Every step's seconds (audit, boundary and commit included).
        "steps_s": report.steps.iter().map(|s| (s.step.clone(), json!(s.ms as f64 / 1000.0))).collect::<serde_json::Map<_, _>>(),
        "keys_validated": report.validation.keys_expected,
        "validation_split": report.validation.split, "validation_partitions": report.validation.partitions,
        "final_state": {"rows": rows, "tombstones": tombstones, "version_sum": version_sum},
        "data_mb": data_mb,
    })
}
