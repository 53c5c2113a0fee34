//! The suite's drill figure (issue 32): the weekly drill of a real table (`tidemark drill
//! --source-table`) beside `tidemark recover --dry-run` of the same table, both as users run
//! them (the `tidemark` binary of this build, each in a process of its own), total seconds and
//! peak resident memory.
//!
//! The table is made as production makes it, so that its snapshot is trusted: the journal holds
//! one insert per order (`ROWS` events), the applier commits them (its own commits, checkpoints
//! and summaries), then `EVENTS` more events are journaled and not applied. Both commands then
//! choose the applier's snapshot at position `ROWS`, seed it, replay the `EVENTS` after it and
//! validate; the drill adds the scratch checks, the audit of the table's history, the journal's
//! retention check, its record in a drill history and the cleanup.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidemark_journal::clock::SystemClock;
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_recovery::apply::{ApplyOptions, apply};
use tidemark_recovery::benchdata::order_id;
use tidemark_recovery::ids::RandomIds;

/// The inserts are journaled this many at a time (bounded memory for the NDJSON text).
const INSERT_CHUNK: u64 = 1_000_000;

/// Runs the drill section for `ROWS` + `EVENTS` in `dir` (each step in a process of its own).
pub fn orchestrate(dir: &Path, rows: u64, events: u64, child: &dyn Fn(&Path, &str, &[&str]) -> Value) -> Value {
    eprintln!(
        "suite: drill: journaling {rows} inserts + {events} events and applying the inserts in {}",
        dir.display()
    );
    let made = child(dir, "drillgen", &[&rows.to_string(), &events.to_string()]);
    eprintln!("suite: drill: recover --dry-run");
    let dry = child(dir, "cli", &["recover"]);
    eprintln!("suite: drill: drill of the real table");
    let drill = child(dir, "cli", &["drill"]);
    let ratio = dry["seconds"]
        .as_f64()
        .zip(drill["seconds"].as_f64())
        .map(|(r, d)| d / r);
    json!({"rows": rows, "events": events, "setup": made, "recover_dry_run": dry, "drill": drill,
           "drill_vs_recover_dry_run_time": ratio})
}

/// `__step drillgen DIR ROWS EVENTS`: the journal, the applier's table at position ROWS, and
/// EVENTS more events journaled after it.
pub async fn gen_step(dir: &Path, rows: u64, events: u64) -> Value {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("journal")).unwrap();
    let j = tidemark_journal::Journal::init(
        std::sync::Arc::new(tidemark_journal::store::local::LocalStore::open(dir.join("journal")).unwrap()),
        tidemark_journal::spec::orders_spec(),
        "bench".into(),
        &SystemClock,
    )
    .await
    .unwrap();
    let t = Instant::now();
    let opts = |batch_size| AppendOptions {
        batch_size,
        writer_id: "bench".into(),
        source_name: "bench".into(),
    };
    let mut first = 0;
    while first < rows {
        let end = (first + INSERT_CHUNK).min(rows);
        let text = inserts_ndjson(first, end);
        append(&j, text.as_slice(), &opts(100_000), &SystemClock, &mut |_| {})
            .await
            .unwrap();
        first = end;
    }
    let journal_s = t.elapsed().as_secs_f64();
    // The catalog as the `tidemark` binary names a SQLite file's catalog.
    let handle = tidemark_recovery::catalog::open_catalog(&tidemark_recovery::catalog::CatalogConfig::in_folder(
        dir, "tidemark",
    ))
    .await
    .unwrap();
    let t = Instant::now();
    let applied = apply(
        &j,
        &handle,
        super::TABLE,
        &ApplyOptions {
            until: Some(rows),
            ..Default::default()
        },
        &SystemClock,
        &RandomIds,
        &mut |_| {},
    )
    .await
    .unwrap();
    let apply_s = t.elapsed().as_secs_f64();
    assert_eq!(applied.applied_to_position, rows);
    let text = super::events_ndjson(rows, events, 7, rows + 1);
    // A hundred batches, so that the audit section's applier makes a hundred commits.
    append(
        &j,
        text.as_slice(),
        &opts((events / 100).max(1) as usize),
        &SystemClock,
        &mut |_| {},
    )
    .await
    .unwrap();
    json!({"journal_inserts_s": journal_s, "apply_inserts_s": apply_s, "commits": applied.commits})
}

/// One insert per order `first..end` (order `i` at position `i + 1`), as the recovery dataset's
/// snapshot holds it: the version and delete flag of [`super::snapshot_row`].
fn inserts_ndjson(first: u64, end: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((end - first) as usize * 230);
    for i in first..end {
        let (version, deleted) = super::snapshot_row(i);
        let secs = i % 86_400;
        writeln!(
            out,
            r#"{{"position":{},"order_id":"{}","order_version":{version},"customer_id":"c-{:06}","status":"{}","amount":"{}.{:02}","currency":"EUR","is_deleted":{deleted},"event_time":"2026-11-28T{:02}:{:02}:{:02}Z"}}"#,
            i + 1,
            order_id(i),
            i % 100_000,
            if deleted { "cancelled" } else { "placed" },
            (i * 7919) % 1000,
            i % 100,
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        )
        .unwrap();
    }
    out
}

/// `__step cli DIR recover|drill`: the command as a user runs it ([`tidemark`]).
pub fn cli_step(dir: &Path, what: &str) -> Value {
    let s = |p: &str| dir.join(p).display().to_string();
    let (catalog, history) = (s("catalog.db"), s("drill-history"));
    // A table of its own each run (the dataset's folder goes when the section ends).
    let into = format!("bench.dry_run_{}", std::process::id());
    let common = [
        "--journal",
        &s("journal"),
        "--catalog",
        &catalog,
        "--warehouse",
        &s("warehouse"),
        "--source-table",
        super::TABLE,
        "--json",
    ];
    let args: Vec<&str> = match what {
        "recover" => [&["recover"][..], &common[..], &["--into", &into, "--dry-run"]].concat(),
        "drill" => [
            &["drill"][..],
            &common[..],
            &["--scratch", "bench_drills", "--history", &history],
        ]
        .concat(),
        other => panic!("cli step {other}: recover or drill"),
    };
    let run = tidemark(&args);
    assert_eq!(run["exit"], 0, "tidemark {what}: {run:#}");
    run
}

/// Runs the `tidemark` binary of this build with `args` (`--json` among them): its wall
/// seconds, peak resident memory (the child's `VmHWM`, read until it exits), exit code and JSON.
pub fn tidemark(args: &[&str]) -> Value {
    let t = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0f64;
    let stdout = std::thread::spawn({
        let mut out = child.stdout.take().unwrap();
        move || {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut out, &mut buf).unwrap();
            buf
        }
    });
    let code = loop {
        if let Some(hwm) = std::fs::read_to_string(&status).ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        }) {
            peak_kb = peak_kb.max(hwm);
        }
        if let Some(code) = child.try_wait().unwrap() {
            break code;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = t.elapsed().as_secs_f64();
    let out: Value = serde_json::from_slice(&stdout.join().unwrap()).unwrap_or(Value::Null);
    json!({"command": format!("tidemark {}", args.join(" ")), "seconds": seconds,
           "peak_rss_mb": peak_kb / 1024.0, "exit": code.code(), "output": out})
}
