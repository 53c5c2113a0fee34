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
use tidemark_recovery::apply::{ApplyOptions, PROP_LAST_POSITION, apply};
use tidemark_recovery::apply_mor::MergeMode;
use tidemark_recovery::benchdata::peak_rss_mb;
use tidemark_recovery::compact::{CompactOptions, compact};
use tidemark_recovery::ids::{Ids, RandomIds};
use tidemark_recovery::table::mor::PROP_MERGE_MODE;
use tidemark_recovery::table::read::read_table;
use tidemark_recovery::table::{self, CommitStamp, commit_overwrite, create_table_like, live_data_files};

/// The runs: (mode, journal batches per commit, events at most).
pub const RUNS: [(&str, usize, u64); 3] = [
    ("copy-on-write", 10, 200_000),
    ("merge-on-read", 10, 500_000),
    ("merge-on-read", 1, 100_000),
];

fn run_table(mode: &str, per_commit: usize) -> String {
    format!("bench.apply_{}_{per_commit}", mode.replace('-', "_"))
}

/// Runs every applier step for the dataset in `dir` (each in a process of its own).
pub fn orchestrate(dir: &Path, child: &dyn Fn(&Path, &str, &[&str]) -> Value) -> Value {
    let mut runs = Vec::new();
    for (mode, per_commit, events) in RUNS {
        eprintln!("suite: applier {mode}, {per_commit} batches a commit");
        runs.push(child(
            dir,
            "apply",
            &[mode, &per_commit.to_string(), &events.to_string()],
        ));
    }
    eprintln!("suite: compaction of the merge-on-read table");
    let compacted = child(dir, "compact", &[&run_table("merge-on-read", 10)]);
    json!({"runs": runs, "compaction": compacted})
}

/// `__step apply DIR MODE PER_COMMIT EVENTS`.
pub async fn apply_step(dir: &Path, args: &[String], snapshot_table: &str) -> Value {
    let (mode, per_commit, max_events) = (
        args[0].as_str(),
        args[1].parse::<usize>().unwrap(),
        args[2].parse::<u64>().unwrap(),
    );
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
        batches_per_commit: per_commit,
        merge_mode: MergeMode::parse(mode),
        ..Default::default()
    };
    let t = Instant::now();
    let r = apply(&j, &handle, &name, &opts, &SystemClock, &RandomIds, &mut |_| {})
        .await
        .unwrap();
    let s = t.elapsed().as_secs_f64();
    let n = r.applied_to_position - r.started_after_position;
    let written = r.writes.data_bytes_written + r.writes.delete_bytes_written;
    json!({
        "mode": mode, "batches_per_commit": per_commit, "table": name,
        "events": n, "commits": r.commits, "seconds": s, "events_per_s": n as f64 / s,
        "bytes_written": written, "bytes_per_event": written as f64 / n.max(1) as f64,
        "writes": r.writes, "compactions": r.compactions, "compaction_ms": r.compaction_ms,
        "compaction_writes": r.compaction_writes,
        "peak_rss_mb": peak_rss_mb(),
    })
}

/// `__step compact DIR TABLE`: a full read of the table, the compaction, a full read again.
pub async fn compact_step(dir: &Path, args: &[String]) -> Value {
    let handle = super::open(dir).await;
    let t = table::load_table(&handle, &args[0]).await.unwrap();
    let t0 = Instant::now();
    let rows_before: usize = read_table(&t).await.unwrap().iter().map(|b| b.num_rows()).sum();
    let read_before = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let (r, t) = compact(&handle, t, &CompactOptions::default(), &SystemClock, &RandomIds)
        .await
        .unwrap();
    let seconds = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let rows_after: usize = read_table(&t).await.unwrap().iter().map(|b| b.num_rows()).sum();
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
            "applier {} ({} batches/commit): {} events/s ({} events, {} commits), {} bytes written/event, peak RSS {} MB",
            r["mode"].as_str().unwrap_or("-"),
            r["batches_per_commit"],
            n(&r["events_per_s"]),
            r["events"],
            r["commits"],
            n(&r["bytes_per_event"]),
            n(&r["peak_rss_mb"])
        );
    }
    let c = &apply["compaction"];
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
