//! Chunks merged two at a time ([`crate::apply::chunks`]): results in chunk order, file ids drawn
//! in chunk order, no more than two chunks held at once, the first error in chunk order wins;
//! and the copy-on-write merges (in memory and spilled) give the same files, row for row and
//! name for name, with two chunks in flight as with one, and a conflict in the second chunk
//! stops everything with nothing committed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use tidemark_journal::Journal;
use tidemark_journal::generate;
use tidemark_journal::spec::POSITION_COLUMN;

use crate::apply::chunks::{LIMIT, in_order};
use crate::apply::spill_tests::{EVENTS, base_table, other_status, range_events, spill, strings, with_column};
use crate::apply::tests::{clock, journal_in, six_ranges_text};
use crate::apply::{ApplyError, MERGE_CHUNK_ROWS, UnitEvents, read_events};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::merge::{MergeError, MergeStats};
use crate::table::read::{chunk_by_key, live_files, read_files};
use crate::table::test_support::catalog_in;
use crate::table::{self, arrow_schema};

/// Chunks computing or writing now, and the most seen at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Gauge {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

fn conflict(i: u64) -> ApplyError {
    MergeError::ConflictInEvents {
        key: format!("k{i}"),
        version: 1,
        first_position: i,
        second_position: i + 100,
    }
    .into()
}

/// Item `i` computes for `ms(i)` milliseconds and fails when `fail(i)`; its write takes 5 ms.
/// Returns the result, the order the writes were started in and the gauge.
async fn run(
    n: u64,
    ms: impl Fn(u64) -> u64,
    fail: impl Fn(u64) -> bool,
) -> (Result<Vec<u64>, ApplyError>, Vec<u64>, Arc<Gauge>) {
    let gauge = Arc::new(Gauge::default());
    let started = Mutex::new(Vec::new());
    let r = in_order(
        0..n,
        2,
        |i| {
            let (gauge, ms, fail) = (gauge.clone(), ms(i), fail(i));
            async move {
                gauge.enter();
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if fail {
                    gauge.leave();
                    return Err(conflict(i));
                }
                Ok(i)
            }
        },
        |i| {
            started.lock().unwrap().push(i);
            let gauge = gauge.clone();
            Ok(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                gauge.leave();
                Ok(i)
            })
        },
    )
    .await
    .map_err(|f| f.error);
    let started = started.into_inner().unwrap();
    (r, started, gauge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_and_write_starts_come_in_chunk_order_whatever_finishes_first() {
    // Later items compute faster: with two in flight, the second finishes before the first.
    let (r, started, gauge) = run(8, |i| 10 * (8 - i), |_| false).await;
    assert_eq!(r.unwrap(), (0..8).collect::<Vec<_>>());
    assert_eq!(started, (0..8).collect::<Vec<_>>());
    assert_eq!(gauge.most.load(Ordering::SeqCst), 2, "two chunks ran at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_than_two_chunks_are_held_at_once() {
    // A chunk counts from the start of its compute to the end of its write.
    for seed in 0..4u64 {
        let (r, _, gauge) = run(12, |i| (i * 7 + seed * 3) % 11, |_| false).await;
        assert_eq!(r.unwrap().len(), 12);
        assert!(gauge.most.load(Ordering::SeqCst) <= 2, "seed {seed}");
        assert_eq!(gauge.now.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_in_the_second_chunk_stops_everything_while_the_first_still_runs() {
    let (r, started, gauge) = run(6, |i| if i == 0 { 100 } else { 1 }, |i| i == 1).await;
    match r {
        Err(ApplyError::Merge(MergeError::ConflictInEvents { first_position, .. })) => {
            assert_eq!(first_position, 1)
        }
        other => panic!("{:?}", other.map_err(|e| e.to_string())),
    }
    // Chunk 0 was written (it came first), nothing after the failed chunk was started.
    assert_eq!(started, vec![0]);
    assert!(gauge.most.load(Ordering::SeqCst) <= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_failure_in_chunk_order_wins_over_an_earlier_finished_one() {
    // Chunk 0 fails late, chunk 1 early: chunk 0's failure is the one reported, as when the
    // chunks ran one after the other.
    let (r, started, _) = run(4, |i| if i == 0 { 80 } else { 1 }, |i| i <= 1).await;
    match r {
        Err(ApplyError::Merge(MergeError::ConflictInEvents { first_position, .. })) => {
            assert_eq!(first_position, 0)
        }
        other => panic!("{:?}", other.map_err(|e| e.to_string())),
    }
    assert!(started.is_empty());
}

/// Every live data file of `name`: its file name (the id it was written under), and its rows
/// in file order.
async fn files_of(handle: &CatalogHandle, name: &str) -> Vec<(String, Vec<RecordBatch>)> {
    let t = table::load_table(handle, name).await.unwrap();
    let (files, deletes) = live_files(&t).await.unwrap();
    let schema = arrow_schema(&t).unwrap();
    let mut out = Vec::new();
    for f in &files {
        let rows = read_files(&t, &[f], &schema, None, &deletes).await.unwrap();
        out.push((f.file_path().rsplit('/').next().unwrap().to_string(), rows));
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn merge_with(
    limit: usize,
    handle: &CatalogHandle,
    name: &str,
    j: &Journal,
    events: UnitEvents,
    chunk_rows: u64,
    range_events: u64,
    seed: u64,
) -> Result<MergeStats, ApplyError> {
    let t = table::load_table(handle, name).await.unwrap();
    let f = super::spill_tests::merge(handle, t, j, events, chunk_rows, range_events, seed);
    LIMIT.scope(limit, f).await
}

/// `name` in `handle` holding positions `1..=60` of `j` (six files, disjoint key ranges: see
/// [`six_ranges_text`]).
async fn six_files(j: &Journal, handle: &CatalogHandle, name: &str) {
    let opts = crate::apply::ApplyOptions {
        until: Some(60),
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    crate::apply::apply(j, handle, name, &opts, &clock(), &SeededIds::new(1), &mut |_| {})
        .await
        .unwrap();
    let t = table::load_table(handle, name).await.unwrap();
    let (files, _) = live_files(&t).await.unwrap();
    let key_field = t.metadata().current_schema().field_by_name("order_id").unwrap().id;
    let (chunks, _) = chunk_by_key(&files.iter().collect::<Vec<_>>(), key_field, 1);
    assert_eq!(chunks.len(), 6, "one chunk per file");
}

/// The events of positions `(after, to]` of `j`.
async fn events_of(j: &Journal, after: u64, to: u64) -> Vec<RecordBatch> {
    let chain = tidemark_journal::verify::verify(j, &Default::default(), &mut |_| {})
        .await
        .unwrap();
    read_events(j, &chain.range(after, to).collect::<Vec<_>>(), after, to)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_chunks_in_flight_write_the_same_files_as_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    // In memory: six chunks (one row a chunk: one file each), every one with events.
    let j = journal_in(&dir.path().join("six"), &six_ranges_text(), 10).await;
    let handle = catalog_in(dir.path()).await;
    let events = events_of(&j, 60, 101).await;
    let mut stats = Vec::new();
    for limit in [1, 2] {
        let name = format!("shop.mem_{limit}");
        six_files(&j, &handle, &name).await;
        let events = UnitEvents::Batches(events.clone());
        stats.push(
            merge_with(limit, &handle, &name, &j, events, 1, MERGE_CHUNK_ROWS, 7)
                .await
                .unwrap(),
        );
    }
    // Spilled: ranges of about 100 events and 150 table rows (at least 14 cuts, see
    // `apply_spill_tests`), with rows carried over from files rewritten by another range.
    let g = journal_in(&dir.path().join("gen"), &generate::ndjson(14, 600, 1, EVENTS), 250).await;
    let events = range_events(&g).await;
    for limit in [1, 2] {
        let name = format!("shop.spill_{limit}");
        base_table(&g, &handle, &name, 4).await;
        let s = spill(&g, &dir.path().join(format!("spill{limit}")), &events);
        stats.push(
            merge_with(limit, &handle, &name, &g, UnitEvents::Spilled(s), 150, 100, 8)
                .await
                .unwrap(),
        );
    }
    assert_eq!(stats[0], stats[1], "in memory");
    assert_eq!(stats[2], stats[3], "spilled");
    assert!(stats[0].files_rewritten >= 4 && stats[0].inserted > 0, "{:?}", stats[0]);
    assert!(stats[2].updated > 0 && stats[2].rows_kept > 0, "{:?}", stats[2]);
    for kind in ["mem", "spill"] {
        let one = files_of(&handle, &format!("shop.{kind}_1")).await;
        let two = files_of(&handle, &format!("shop.{kind}_2")).await;
        assert!(one.len() >= 6, "{kind}: {} files", one.len());
        assert_eq!(
            one.iter().map(|f| &f.0).collect::<Vec<_>>(),
            two.iter().map(|f| &f.0).collect::<Vec<_>>(),
            "{kind}: the same file names, in the same order"
        );
        assert!(one == two, "{kind}: the same rows in every file");
    }
}

/// The event of `key` among `events` again at `position`, with another status: same key and
/// version, another payload.
fn twin(events: &[RecordBatch], key: &str, position: i64) -> RecordBatch {
    let b = events
        .iter()
        .find_map(|b| {
            let r = strings(b, "order_id").iter().position(|k| k == key)?;
            Some(b.slice(r, 1))
        })
        .expect("the key's event");
    let b = with_column(&b, POSITION_COLUMN, Arc::new(Int64Array::from(vec![position])));
    with_column(&b, "status", Arc::new(StringArray::from(vec![other_status(&b)])))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_in_the_second_of_two_concurrent_chunks_commits_nothing() {
    // Six files (chunks); the unit of positions 61..=101 touches each. A conflict in chunk 1
    // (k013, in the second file) and then also one in chunk 0 (k003): the first in chunk
    // order is reported, with one chunk in flight as with two, and nothing is committed.
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &six_ranges_text(), 10).await;
    let handle = catalog_in(dir.path()).await;
    six_files(&j, &handle, "shop.orders").await;
    let before = table::load_table(&handle, "shop.orders").await.unwrap();
    let events = events_of(&j, 60, 101).await;
    let mut second = events.clone();
    second.push(twin(&events, "k013", 200));
    let mut both = second.clone();
    both.push(twin(&events, "k003", 201));
    let position_of = |key: &str| {
        events
            .iter()
            .flat_map(|b| {
                let keys = strings(b, "order_id");
                let p = b.column_by_name(POSITION_COLUMN).unwrap().clone();
                let p = p.as_any().downcast_ref::<Int64Array>().unwrap().clone();
                keys.into_iter().zip(p.values().to_vec())
            })
            .find(|(k, _)| k == key)
            .map(|(_, p)| p as u64)
            .unwrap()
    };
    for (case, events, want, seed) in [
        ("second", second, (position_of("k013"), 200), 10),
        ("both", both, (position_of("k003"), 201), 20),
    ] {
        let mut errors = Vec::new();
        for limit in [1, 2] {
            // Chunks before the conflict may have written files (never committed): fresh ids.
            let seed = seed + limit as u64;
            let err = merge_with(limit, &handle, "shop.orders", &j, events.clone().into(), 1, 1, seed)
                .await
                .unwrap_err();
            match &err {
                ApplyError::Merge(MergeError::ConflictInEvents {
                    first_position,
                    second_position,
                    ..
                }) => assert_eq!((*first_position, *second_position), want, "{case}"),
                other => panic!("{case}: {other}"),
            }
            errors.push(err.to_string());
            let t = table::load_table(&handle, "shop.orders").await.unwrap();
            assert_eq!(
                t.metadata().current_snapshot_id(),
                before.metadata().current_snapshot_id(),
                "{case}: nothing committed"
            );
        }
        assert_eq!(errors[0], errors[1], "{case}");
    }
}

/// Every file under the table's location (its data and metadata folders).
/// `err` is the merge's conflict itself, and the merge left no file under `t`'s location beside
/// the files `before` (a listing of [`files_at`]); `what` names the case.
fn assert_a_clean_conflict(err: &ApplyError, t: &iceberg::table::Table, before: &BTreeSet<PathBuf>, what: &str) {
    assert!(
        matches!(err, ApplyError::Merge(m) if m.is_conflict()),
        "{what}: the conflict itself: {err}"
    );
    assert_eq!(
        files_at(t).difference(before).collect::<Vec<_>>(),
        Vec::<&PathBuf>::new(),
        "{what}: files left under the table's location"
    );
}

fn files_at(t: &iceberg::table::Table) -> BTreeSet<PathBuf> {
    let loc = t.metadata().location();
    let root = loc
        .strip_prefix("file://")
        .or_else(|| loc.strip_prefix("file:"))
        .unwrap_or(loc);
    let mut out = BTreeSet::new();
    let mut dirs = vec![PathBuf::from(root)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.insert(p);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_in_a_later_chunk_leaves_no_file_behind() {
    // The applier's unit (in memory): six chunks, a conflict in the second (k013); the first
    // chunk's files are written before the conflict is seen, and must not stay behind.
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &six_ranges_text(), 10).await;
    let handle = catalog_in(dir.path()).await;
    six_files(&j, &handle, "shop.orders").await;
    let events = events_of(&j, 60, 101).await;
    let mut second = events.clone();
    second.push(twin(&events, "k013", 200));
    for limit in [1, 2] {
        let t = table::load_table(&handle, "shop.orders").await.unwrap();
        let before = files_at(&t);
        let err = merge_with(
            limit,
            &handle,
            "shop.orders",
            &j,
            second.clone().into(),
            1,
            1,
            30 + limit as u64,
        )
        .await
        .unwrap_err();
        assert_a_clean_conflict(&err, &t, &before, &format!("limit {limit}"));
    }
    // The replay's spilled merge: ranges of about 100 events, a conflict in the last one.
    let g = journal_in(&dir.path().join("gen"), &generate::ndjson(14, 600, 1, EVENTS), 250).await;
    let mut events = range_events(&g).await;
    let last_key = events.iter().flat_map(|b| strings(b, "order_id")).max().unwrap();
    events.push(twin(&events, &last_key, 100_000));
    for limit in [1, 2] {
        let name = format!("shop.spill_orphans_{limit}");
        let t = base_table(&g, &handle, &name, 40 + limit as u64).await;
        let before = files_at(&t);
        let s = spill(&g, &dir.path().join(format!("orphans{limit}")), &events);
        let err = merge_with(
            limit,
            &handle,
            &name,
            &g,
            UnitEvents::Spilled(s),
            150,
            100,
            50 + limit as u64,
        )
        .await
        .unwrap_err();
        assert_a_clean_conflict(&err, &t, &before, &format!("spilled, limit {limit}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_cannot_be_deleted_is_named_beside_the_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &six_ranges_text(), 10).await;
    let handle = catalog_in(dir.path()).await;
    six_files(&j, &handle, "shop.orders").await;
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    let (files, _) = live_files(&t).await.unwrap();
    // A file this table's storage cannot delete (another scheme), and one it can.
    let mut gone = iceberg::spec::DataFileBuilder::default();
    gone.content(iceberg::spec::DataContentType::Data)
        .file_path("s3://nowhere/gone.parquet".into())
        .file_format(iceberg::spec::DataFileFormat::Parquet)
        .partition(iceberg::spec::Struct::empty())
        .record_count(1)
        .file_size_in_bytes(1);
    let deletable = files[0].clone();
    let err = crate::apply::chunks::discard(&t, conflict(7), vec![gone.build().unwrap(), deletable.clone()]).await;
    assert!(err.is_conflict(), "still the conflict: {err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&conflict(7).to_string())
            && msg.contains("1 file(s)")
            && msg.contains("s3://nowhere/gone.parquet"),
        "{msg}"
    );
    assert!(!msg.contains(deletable.file_path()), "{msg}");
    assert_eq!(
        crate::exit::code_of(&anyhow::Error::new(err)),
        crate::exit::VERIFY_FAILED
    );
    let path = deletable.file_path();
    let local = path
        .strip_prefix("file://")
        .or_else(|| path.strip_prefix("file:"))
        .unwrap_or(path);
    assert!(!std::path::Path::new(local).exists(), "the other file was deleted");
}

/// A data file of `rows` rows (no bounds: only its row count is read).
fn file_of(rows: u64) -> iceberg::spec::DataFile {
    let mut f = iceberg::spec::DataFileBuilder::default();
    f.content(iceberg::spec::DataContentType::Data)
        .file_path(format!("file:///t/{rows}.parquet"))
        .file_format(iceberg::spec::DataFileFormat::Parquet)
        .partition(iceberg::spec::Struct::empty())
        .record_count(rows)
        .file_size_in_bytes(1);
    f.build().unwrap()
}

/// A table smaller than two chunks still makes two (both cores merge; before, a 1M-row table was
/// one chunk on one core), never chunks smaller than a file; a chunk size asked for below that
/// is kept (the tests' chunks of one row).
#[test]
fn a_table_below_two_chunks_is_cut_in_two_but_never_below_a_file() {
    let ten: Vec<_> = (0..10).map(|_| file_of(100_000)).collect();
    let ten: Vec<&iceberg::spec::DataFile> = ten.iter().collect();
    let rows_for = |files: &[&iceberg::spec::DataFile], asked| {
        LIMIT.sync_scope(2, || crate::apply::chunks::chunk_rows_for(files, asked))
    };
    assert_eq!(rows_for(&ten, MERGE_CHUNK_ROWS), 500_000);
    assert_eq!(rows_for(&ten, 300_000), 300_000);
    assert_eq!(rows_for(&ten, 1), 1);
    let small = file_of(150_000);
    assert_eq!(rows_for(&[&small], MERGE_CHUNK_ROWS), 100_000);
    let big: Vec<_> = (0..100).map(|_| file_of(100_000)).collect();
    let big: Vec<&iceberg::spec::DataFile> = big.iter().collect();
    assert_eq!(rows_for(&big, MERGE_CHUNK_ROWS), MERGE_CHUNK_ROWS);
    // One chunk in flight: no cut for the cores' sake.
    let one = LIMIT.sync_scope(1, || crate::apply::chunks::chunk_rows_for(&ten, MERGE_CHUNK_ROWS));
    assert_eq!(one, MERGE_CHUNK_ROWS);
}
