//! Merge benchmark (not a test): merge throughput (events/s) and peak memory of the applier's
//! unit of work — read the candidate files, run the DataFusion MERGE, write the rewritten and new
//! files, commit the overwrite — on a table of N rows (default 1,000,000) with batches of 10,000
//! and 100,000 events, copy-on-write and merge-on-read (new files plus position deletes), with
//! the bytes of data and delete files written per event. Each batch size and mode runs in its
//! own process so that peak memory (VmHWM) is its own.
//!
//! `cargo bench -p tidemark-recovery --bench merge [-- ROWS [BATCH ...]]`
//!
//! Event shape: 80% of events touch the newest 10% of orders (recent orders change most), 15%
//! touch any order, 5% are new orders; 5% are tombstones.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use tidemark_journal::clock::SystemClock;
use tidemark_journal::generate::Rng;
use tidemark_journal::spec::CompiledSpec;
use tidemark_recovery::apply::mor::{MergeMode, WriteStats};
use tidemark_recovery::apply::{MERGE_CHUNK_ROWS, UnitOptions, merge_and_commit_unit};
use tidemark_recovery::benchdata::{commit_orders, order_columns as columns, peak_rss_mb};
use tidemark_recovery::catalog::{CatalogConfig, open_catalog};
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::table;

fn run_case(rows: u64, batch: u64, mode: MergeMode) {
    let rt = tidemark_recovery::benchdata::runtime();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let spec = CompiledSpec::orders();
        let cfg = CatalogConfig::in_folder(dir.path(), "bench");
        let handle = open_catalog(&cfg).await.unwrap();
        let mut t = table::create_or_load_table(&handle, "bench.orders", &spec).await.unwrap();
        // Seed: `rows` orders at version 1, in sorted files of 100,000 rows.
        let seed_start = Instant::now();
        #[allow(clippy::disallowed_methods)] // a benchmark reads the wall clock
        let now = chrono::Utc::now();
        t = commit_orders(&handle, &t, rows, |i| (1, false, i as i64 + 1), Default::default(), &RandomIds, now).await.unwrap();
        let seed_s = seed_start.elapsed().as_secs_f64();

        let mut rng = Rng::new(batch);
        let mut versions = vec![1i64; rows as usize];
        let mut new_orders = rows;
        let mut position = rows;
        let mut times = Vec::new();
        let mut writes = WriteStats::default();
        let key_index = std::sync::Mutex::new(Default::default());
        for _ in 0..3 {
            let (mut ids, mut vers, mut del, mut pos) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..batch {
                let roll = rng.below(100);
                let id = if roll < 80 {
                    rows - 1 - rng.below((rows / 10).max(1))
                } else if roll < 95 {
                    rng.below(rows)
                } else {
                    new_orders += 1;
                    versions.push(0);
                    new_orders - 1
                };
                versions[id as usize] += 1;
                position += 1;
                ids.push(id);
                vers.push(versions[id as usize]);
                del.push(versions[id as usize] > 1 && rng.chance(5));
                pos.push(position as i64);
            }
            let mut cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(pos))];
            cols.extend(columns(&ids, &vers, &del));
            let events = RecordBatch::try_new(spec.event_schema.clone(), cols).unwrap();
            let started = Instant::now();
            let unit = UnitOptions { max_attempts: 3, skip_if_applied: None, guard: None, chunk_rows: MERGE_CHUNK_ROWS, range_events: MERGE_CHUNK_ROWS, mode, key_index: Some(&key_index), deletes_cache: None, renames: None };
            let c = merge_and_commit_unit(&handle, t, &spec, vec![events].into(), Default::default(), &SystemClock, &RandomIds, &unit)
                .await
                .unwrap();
            times.push((started.elapsed().as_secs_f64(), c.stats.files_rewritten, c.stats.updated, c.stats.inserted));
            writes.add(&c.writes);
            t = c.table;
        }
        let total: f64 = times.iter().map(|t| t.0).sum();
        println!(
            "{rows:>10} rows  batch {batch:>7}  {:<13}  seed {seed_s:>6.2}s  merge {:>7.3}s/batch  {:>9.0} events/s  files rewritten/batch {:>4}  {:>6.0} bytes/event  peak RSS {:>7.0} MB",
            mode.as_str(),
            total / times.len() as f64,
            batch as f64 * times.len() as f64 / total,
            times.iter().map(|t| t.1).sum::<u64>() / times.len() as u64,
            writes.bytes_written() as f64 / (batch * times.len() as u64) as f64,
            peak_rss_mb()
        );
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    if let (Ok(rows), Ok(batch)) = (
        std::env::var("TIDEMARK_BENCH_ROWS"),
        std::env::var("TIDEMARK_BENCH_BATCH"),
    ) {
        let mode = std::env::var("TIDEMARK_BENCH_MODE")
            .ok()
            .and_then(|m| MergeMode::parse(&m))
            .unwrap_or_default();
        run_case(rows.parse().unwrap(), batch.parse().unwrap(), mode);
        return;
    }
    let rows: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let batches: Vec<u64> = if args.len() > 1 {
        args[1..].iter().filter_map(|a| a.parse().ok()).collect()
    } else {
        vec![10_000, 100_000]
    };
    println!("merge benchmark: 3 batches per size and mode; each in its own process");
    for batch in batches {
        for mode in [MergeMode::CopyOnWrite, MergeMode::MergeOnRead] {
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .env("TIDEMARK_BENCH_ROWS", rows.to_string())
                .env("TIDEMARK_BENCH_BATCH", batch.to_string())
                .env("TIDEMARK_BENCH_MODE", mode.as_str())
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
}
