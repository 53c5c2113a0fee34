//! The suite's deterministic dataset (`__step gen`): a snapshot table of `rows` orders committed
//! through the catalog, and a journal of `events` order events after it, with the mix of updates,
//! deletes, late events and retries the recovery meets in production.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tidemark_journal::Journal;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::generate::Rng;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::verify::verify;
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_recovery::apply::PROP_LAST_POSITION;
use tidemark_recovery::benchdata::{commit_orders, order_id};
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::table::{self, live_data_files};

use super::{TABLE, open};

/// Snapshot version and delete flag of order `i` (deterministic, nothing stored).
pub(crate) fn snapshot_row(i: u64) -> (i64, bool) {
    (1 + (i % 3) as i64, i.is_multiple_of(50))
}

#[derive(Clone)]
struct Ev {
    id: u64,
    version: i64,
    deleted: bool,
    status: &'static str,
    amount: u64,
    time: String,
}

/// The journal: most events touch recent orders (80% the newest tenth, 15% any), 5% new orders;
/// updates, 5% tombstones, re-inserts of deleted orders, 3% late events (old event time, new
/// position), 2% identical retries of a recent event. Positions from `first`.
pub(crate) fn events_ndjson(rows: u64, events: u64, seed: u64, first: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut state: HashMap<u64, (i64, bool)> = HashMap::new();
    let mut recent: Vec<Ev> = Vec::with_capacity(1024);
    let mut out = Vec::with_capacity(events as usize * 230);
    let mut new_id = rows;
    for p in 1..=events {
        let r = rng.below(100);
        let ev = if r < 2 && !recent.is_empty() {
            recent[rng.below(recent.len() as u64) as usize].clone()
        } else {
            let id = if r < 7 {
                new_id += 1;
                new_id
            } else if rng.below(100) < 84 {
                rows - 1 - rng.below((rows / 10).max(1))
            } else {
                rng.below(rows)
            };
            let (v, d) = state
                .get(&id)
                .copied()
                .unwrap_or(if id < rows { snapshot_row(id) } else { (0, true) });
            let deleted = !d && rng.chance(5);
            let late = rng.chance(3);
            let secs = p % 86_400;
            let time = if late {
                format!(
                    "2026-10-01T{:02}:{:02}:{:02}Z",
                    secs / 3600,
                    (secs / 60) % 60,
                    secs % 60
                )
            } else {
                format!(
                    "2026-11-29T{:02}:{:02}:{:02}Z",
                    secs / 3600,
                    (secs / 60) % 60,
                    secs % 60
                )
            };
            let ev = Ev {
                id,
                version: v + 1,
                deleted,
                status: if deleted {
                    "cancelled"
                } else if v == 0 {
                    "placed"
                } else {
                    "paid"
                },
                amount: rng.below(100_000),
                time,
            };
            state.insert(id, (ev.version, ev.deleted));
            if recent.len() == 1024 {
                recent[(p % 1024) as usize] = ev.clone();
            } else {
                recent.push(ev.clone());
            }
            ev
        };
        writeln!(
            out,
            r#"{{"position":{},"order_id":"{}","order_version":{},"customer_id":"c-{:06}","status":"{}","amount":"{}.{:02}","currency":"EUR","is_deleted":{},"event_time":"{}"}}"#,
            first + p - 1,
            order_id(ev.id),
            ev.version,
            ev.id % 100_000,
            ev.status,
            ev.amount / 100,
            ev.amount % 100,
            ev.deleted,
            ev.time
        )
        .unwrap();
    }
    out
}

pub(crate) async fn gen_step(dir: &Path, rows: u64, events: u64) -> Value {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("journal")).unwrap();
    let t0 = Instant::now();
    let j = Journal::init(
        Arc::new(LocalStore::open(dir.join("journal")).unwrap()),
        orders_spec(),
        "bench".into(),
        &SystemClock,
    )
    .await
    .unwrap();
    let handle = open(dir).await;
    let src = table::create_or_load_table(&handle, TABLE, &j.spec).await.unwrap();
    let summary = HashMap::from([(PROP_LAST_POSITION.to_string(), "0".to_string())]);
    let row = |i: u64| {
        let (version, deleted) = snapshot_row(i);
        (version, deleted, 0)
    };
    #[allow(clippy::disallowed_methods)] // a benchmark reads the wall clock
    let src = commit_orders(&handle, &src, rows, row, summary, &RandomIds, chrono::Utc::now())
        .await
        .unwrap();
    let snapshot_files: Vec<String> = live_data_files(&src)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_path().trim_start_matches("file://").to_string())
        .collect();
    let text = events_ndjson(rows, events, 7, 1);
    let opts = AppendOptions {
        batch_size: 10_000,
        writer_id: "bench".into(),
        source_name: "bench".into(),
    };
    append(&j, text.as_slice(), &opts, &SystemClock, &mut |_| {})
        .await
        .unwrap();
    let chain = verify(&j, &Default::default(), &mut |_| {}).await.unwrap();
    let event_files: Vec<String> = chain
        .manifests
        .iter()
        .map(|m| dir.join("journal").join(&m.manifest.object_key).display().to_string())
        .collect();
    let peers_input = dir.join("peers-input.json");
    let input = json!({
        "snapshot_files": snapshot_files, "event_files": event_files,
        "catalog_db": dir.join("catalog.db"), "warehouse": dir.join("warehouse"),
        "catalog_name": "bench", "snapshot_table": TABLE,
        "key": "order_id", "version": "order_version", "delete": "is_deleted", "position": "journal_position",
    });
    std::fs::write(&peers_input, serde_json::to_vec_pretty(&input).unwrap()).unwrap();
    let ds = json!({
        "rows": rows, "events": events,
        "snapshot_metadata": src.metadata_location().unwrap(),
        "snapshot_id": src.metadata().current_snapshot_id().unwrap(),
        "snapshot_files": snapshot_files.len(), "event_files": event_files,
        "ndjson_mb": text.len() as f64 / 1e6,
        "peers_input": peers_input, "setup_s": t0.elapsed().as_secs_f64(),
    });
    std::fs::write(dir.join("dataset.json"), serde_json::to_vec_pretty(&ds).unwrap()).unwrap();
    ds
}
