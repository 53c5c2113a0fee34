//! The suite's applier steps (issue 14, target 3): sustained throughput into the snapshot table
//! in both write modes, with write amplification (bytes of data and delete files written per
//! event), and the cost of compacting the merge-on-read table afterwards (and of reading it
//! before and after, the price merge-on-read puts on readers).
//!
//! Each run applies into a table of its own that starts as the snapshot: a copy of the
//! snapshot table's metadata listing the same data files (nothing is copied), so that the runs
//! start from the same state and the snapshot table stays as the recovery step found it.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use tidemark_journal::clock::SystemClock;
use tidemark_recovery::apply::compact::{CompactOptions, compact};
use tidemark_recovery::apply::mor::MergeMode;
use tidemark_recovery::apply::{ApplyOptions, Grouping, PROP_LAST_POSITION, apply};
use tidemark_recovery::benchdata::peak_rss_mb;
use tidemark_recovery::ids::{Ids, RandomIds};
use tidemark_recovery::table::mor::PROP_MERGE_MODE;
use tidemark_recovery::table::read::{count_live_rows, live_files};
use tidemark_recovery::table::{self, CommitStamp, commit_overwrite, create_table_like, live_data_files};

/// The runs: (mode, journal batches per commit, events at most). `default` is the applier's
/// default grouping (every batch waiting, up to its bound: `apply_group`).
pub const RUNS: [(&str, &str, u64); 3] = [
    ("copy-on-write", "10", 200_000),
    ("merge-on-read", "default", 500_000),
    ("merge-on-read", "1", 100_000),
];

fn run_table(mode: &str, per_commit: &str) -> String {
    format!("bench.apply_{}_{per_commit}", mode.replace('-', "_"))
}

/// Runs every applier step for the dataset in `dir` (each in a process of its own).
pub fn orchestrate(dir: &Path, child: &dyn Fn(&Path, &str, &[&str]) -> Value) -> Value {
    let mut runs = Vec::new();
    for (mode, per_commit, events) in RUNS {
        eprintln!("suite: applier {mode}, {per_commit} batches a commit");
        runs.push(child(dir, "apply", &[mode, per_commit, &events.to_string()]));
    }
    eprintln!("suite: compaction of the merge-on-read table");
    let compacted = child(dir, "compact", &[&run_table("merge-on-read", "default")]);
    json!({"runs": runs, "compaction": compacted})
}

/// `__step apply DIR MODE PER_COMMIT EVENTS` (PER_COMMIT a number or `default`). Besides the
/// whole run's figures, the sustained ones: from the end of the first unit (which also verifies
/// the chain and builds the merge-on-read key index) to the end.
pub async fn apply_step(dir: &Path, args: &[String], snapshot_table: &str) -> Value {
    let (mode, per_commit, max_events) = (args[0].as_str(), args[1].as_str(), args[2].parse::<u64>().unwrap());
    let grouping = Grouping::of(per_commit.parse::<usize>().ok());
    let j = super::journal(dir).await;
    let handle = super::open(dir).await;
    let name = run_table(mode, per_commit);
    // A run again on the same dataset starts afresh.
    let ident = table::parse_ident(&name).unwrap();
    if handle.catalog().table_exists(&ident).await.unwrap() {
        handle.catalog().drop_table(&ident).await.unwrap();
    }
    let src = table::load_table(&handle, snapshot_table).await.unwrap();
    let props = HashMap::from([(PROP_MERGE_MODE.to_string(), mode.to_string())]);
    let copy = create_table_like(&handle, &name, src.metadata(), src.metadata().current_schema(), props)
        .await
        .unwrap();
    let files = live_data_files(&src).await.unwrap();
    let summary = HashMap::from([(PROP_LAST_POSITION.to_string(), "0".to_string())]);
    #[allow(clippy::disallowed_methods)] // a benchmark reads the wall clock
    let stamp = CommitStamp {
        id: RandomIds.uuid(),
        at: chrono::Utc::now(),
    };
    commit_overwrite(&handle, &copy, &[], files, summary, stamp)
        .await
        .unwrap();
    let ds: Value = serde_json::from_slice(&std::fs::read(dir.join("dataset.json")).unwrap()).unwrap();
    let until = ds["events"].as_u64().unwrap().min(max_events);
    let opts = ApplyOptions {
        until: Some(until),
        on_divergence: tidemark_recovery::apply::OnDivergence::Continue {
            reason: super::BENCH_SNAPSHOT_ACCEPTED.into(),
        },
        grouping,
        merge_mode: MergeMode::parse(mode),
        ..Default::default()
    };
    let t = Instant::now();
    // (seconds, position, bytes written) at the end of each unit.
    let mut units: Vec<(f64, u64, u64)> = Vec::new();
    let r = apply(&j, &handle, &name, &opts, &SystemClock, &RandomIds, &mut |p| {
        units.push((t.elapsed().as_secs_f64(), p.position, p.bytes_written))
    })
    .await
    .unwrap();
    let s = t.elapsed().as_secs_f64();
    let n = r.applied_to_position - r.started_after_position;
    let written = r.writes.data_bytes_written + r.writes.delete_bytes_written;
    let sustained = match (units.first(), units.last()) {
        (Some(a), Some(b)) if b.1 > a.1 => {
            let (events, secs) = ((b.1 - a.1) as f64, b.0 - a.0);
            json!({"events": b.1 - a.1, "units": units.len() - 1, "seconds": secs,
                   "events_per_s": events / secs, "bytes_per_event": (b.2 - a.2) as f64 / events})
        }
        _ => Value::Null,
    };
    let ms = |us: u64| us as f64 / 1e3;
    let p = &r.phases;
    json!({
        "mode": mode, "batches_per_commit": per_commit, "grouping": format!("{grouping:?}"), "table": name,
        "events": n, "commits": r.commits, "seconds": s, "events_per_s": n as f64 / s,
        "bytes_written": written, "bytes_per_event": written as f64 / n.max(1) as f64,
        "first_unit_s": units.first().map(|u| u.0),
        "sustained": sustained,
        "phases_ms": {"verify": ms(p.verify_us), "read_events": ms(p.read_events_us),
            "table_files": ms(p.table_files_us), "locate": ms(p.locate_us), "merge": ms(p.merge_us),
            "write": ms(p.write_us), "commit": ms(p.commit_us), "checkpoint": ms(p.checkpoint_us)},
        "writes": r.writes, "compactions": r.compactions, "compaction_ms": r.compaction_ms,
        "compaction_writes": r.compaction_writes,
        "load_average": load_average(),
        "peak_rss_mb": peak_rss_mb(),
    })
}

/// The machine's 1-minute load average (`/proc/loadavg`), to read a run's figures by.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Every live row of `table` read (deletes applied) one data file at a time, and counted: a
/// full read that holds one file, not the table (which at 100M rows is more than the machine).
async fn full_read(table: &iceberg::table::Table) -> u64 {
    let (files, deletes) = live_files(table).await.unwrap();
    count_live_rows(table, &files, &deletes).await.unwrap()
}

/// `__step compact DIR TABLE`: a full read of the table, the compaction, a full read again.
pub async fn compact_step(dir: &Path, args: &[String]) -> Value {
    let handle = super::open(dir).await;
    let t = table::load_table(&handle, &args[0]).await.unwrap();
    let t0 = Instant::now();
    let rows_before = full_read(&t).await;
    let read_before = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let (r, t) = compact(&handle, t, &CompactOptions::default(), &SystemClock, &RandomIds)
        .await
        .unwrap();
    let seconds = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let rows_after = full_read(&t).await;
    let read_after = t2.elapsed().as_secs_f64();
    assert_eq!(rows_before, rows_after, "compaction changed the row count");
    json!({
        "table": args[0], "seconds": seconds, "report": r,
        "bytes_written": r.writes.data_bytes_written,
        "full_read_s_before": read_before, "full_read_s_after": read_after, "rows": rows_after,
        "peak_rss_mb": peak_rss_mb(),
    })
}

/// The applier lines of the printed table.
pub fn print(apply: &Value) {
    let n = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.0}"));
    let n2 = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.2}"));
    for r in apply["runs"].as_array().into_iter().flatten() {
        println!(
            "applier {} ({} batches/commit): {} events/s ({} events, {} commits), {} bytes written/event; sustained after the first unit {} events/s, {} bytes/event; peak RSS {} MB, load {}",
            r["mode"].as_str().unwrap_or("-"),
            r["batches_per_commit"].as_str().unwrap_or("-"),
            n(&r["events_per_s"]),
            r["events"],
            r["commits"],
            n(&r["bytes_per_event"]),
            n(&r["sustained"]["events_per_s"]),
            n(&r["sustained"]["bytes_per_event"]),
            n(&r["peak_rss_mb"]),
            n2(&r["load_average"])
        );
    }
    let c = &apply["compaction"];
    if let Some(failed) = c["failed"].as_str() {
        println!("compaction of the merge-on-read table: FAILED, {failed}");
        return;
    }
    println!(
        "compaction of the merge-on-read table: {} s, {} data files rewritten, {} delete files dropped, {} MB written; full read {} s before, {} s after",
        n2(&c["seconds"]),
        c["report"]["data_files_rewritten"],
        c["report"]["delete_files_before"],
        n(&Value::from(c["bytes_written"].as_f64().unwrap_or(0.0) / 1e6)),
        n2(&c["full_read_s_before"]),
        n2(&c["full_read_s_after"])
    );
}
