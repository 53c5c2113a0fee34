//! The spilled copy-on-write merge (the replay of a recovery's range, `apply_spill`) under a tiny
//! memory budget: the same table, row for row, and the same counts as the in-memory merge and
//! the reference fold, also when range cuts fall inside data files; conflicts stop it with
//! nothing committed; its spill files are removed.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use tidemark_journal::Journal;
use tidemark_journal::spec::POSITION_COLUMN;

use crate::apply::spill::{EventSpill, SpilledEvents};
use crate::apply::tests::{clock, generated_site, reference_of, table_rows};
use crate::apply::{ApplyError, ApplyOptions, MERGE_CHUNK_ROWS, UnitEvents, apply, merge_and_commit, read_events};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::merge::MergeStats;
use crate::table::read::{chunk_of, key_bounds};
use crate::table::{self, live_data_files};

/// Events of the first apply (the table's state), then of the merge under test.
const BASE: u64 = 1_500;
pub(crate) const EVENTS: u64 = 3_000;

/// `name` holding positions `1..=BASE` of `j`, applied 250 at a time: each unit's new keys go to
/// new files, so the table's files overlap in key range.
pub(crate) async fn base_table(j: &Journal, handle: &CatalogHandle, name: &str, seed: u64) -> iceberg::table::Table {
    let opts = ApplyOptions {
        until: Some(BASE),
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    apply(j, handle, name, &opts, &clock(), &SeededIds::new(seed), &mut |_| {})
        .await
        .unwrap();
    table::load_table(handle, name).await.unwrap()
}

/// The events of positions `(BASE, EVENTS]`; then again the event at `BASE + 10` (an identical
/// retry) and an event of the table's state whose key the range does not touch (an old version
/// delivered late), each at a new position.
pub(crate) async fn range_events(j: &Journal) -> Vec<RecordBatch> {
    let chain = tidemark_journal::verify::verify(j, &Default::default(), &mut |_| {})
        .await
        .unwrap();
    let mut events = read_events(j, &chain.range(BASE, EVENTS).collect::<Vec<_>>(), BASE, EVENTS)
        .await
        .unwrap();
    let retry = events[0].slice(9, 1);
    let keys: std::collections::BTreeSet<String> = events.iter().flat_map(|b| strings(b, "order_id")).collect();
    let stored = read_events(j, &chain.range(0, BASE).collect::<Vec<_>>(), 0, BASE)
        .await
        .unwrap();
    let late = stored
        .iter()
        .find_map(|b| {
            let r = strings(b, "order_id").iter().position(|k| !keys.contains(k))?;
            Some(b.slice(r, 1))
        })
        .expect("a key the range does not touch");
    for (b, p) in [(retry, EVENTS + 1), (late, EVENTS + 4)] {
        events.push(with_column(
            &b,
            POSITION_COLUMN,
            Arc::new(Int64Array::from(vec![p as i64])),
        ));
    }
    events
}

pub(crate) fn strings(b: &RecordBatch, column: &str) -> Vec<String> {
    let c = b.column_by_name(column).unwrap();
    let c = c.as_any().downcast_ref::<StringArray>().unwrap();
    (0..c.len()).map(|r| c.value(r).to_string()).collect()
}

pub(crate) fn with_column(b: &RecordBatch, name: &str, col: ArrayRef) -> RecordBatch {
    let i = b.schema().index_of(name).unwrap();
    let mut cols = b.columns().to_vec();
    cols[i] = col;
    RecordBatch::try_new(b.schema(), cols).unwrap()
}

pub(crate) fn spill(j: &Journal, dir: &std::path::Path, events: &[RecordBatch]) -> SpilledEvents {
    let mut s = EventSpill::create(&j.spec, dir).unwrap();
    for b in events {
        s.write(b).unwrap();
    }
    s.finish().unwrap()
}

/// `events` merged into `t` as one unit and committed (ids seeded `seed`): its counts.
pub(super) async fn merge(
    handle: &CatalogHandle,
    t: iceberg::table::Table,
    j: &Journal,
    events: UnitEvents,
    chunk_rows: u64,
    range_events: u64,
    seed: u64,
) -> Result<MergeStats, ApplyError> {
    let (_, stats, _, _) = merge_and_commit(
        handle,
        t,
        &j.spec,
        events,
        HashMap::new(),
        &clock(),
        &SeededIds::new(seed),
        1,
        None,
        None,
        chunk_rows,
        range_events,
        None,
    )
    .await?;
    Ok(stats)
}

/// `events` merged into the table `in_memory` as one unit in memory, and, spilled as `s`, into
/// the table `spilled` under a budget of 150 rows a chunk and 100 events a range: the two give
/// the same counts, which are returned.
async fn in_memory_and_spilled(
    handle: &CatalogHandle,
    [in_memory, spilled]: [iceberg::table::Table; 2],
    j: &Journal,
    events: &[RecordBatch],
    s: SpilledEvents,
) -> MergeStats {
    let whole = UnitEvents::Batches(events.to_vec());
    let a = merge(handle, in_memory, j, whole, MERGE_CHUNK_ROWS, MERGE_CHUNK_ROWS, 7)
        .await
        .unwrap();
    let b = merge(handle, spilled, j, UnitEvents::Spilled(s), 150, 100, 7)
        .await
        .unwrap();
    assert_eq!(a, b, "in memory vs spilled");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spilled_merge_under_a_tiny_budget_equals_the_in_memory_merge_and_the_reference() {
    let (dir, j, handle) = generated_site(11, 600, EVENTS, 250).await;
    let in_memory = base_table(&j, &handle, "shop.in_memory", 1).await;
    let spilled = base_table(&j, &handle, "shop.spilled", 1).await;
    let events = range_events(&j).await;

    let spill_dir = dir.path().join("spill");
    let s = spill(&j, &spill_dir, &events);
    assert_eq!(s.rows(), EVENTS - BASE + 2);
    // The budget: ranges of about 100 events and 150 table rows; some range cuts fall inside
    // a data file's key range (a rewritten file's other rows must be carried over).
    let files = live_data_files(&spilled).await.unwrap();
    let key_field = spilled
        .metadata()
        .current_schema()
        .field_by_name("order_id")
        .unwrap()
        .id;
    let cuts = s.cuts(&files.iter().collect::<Vec<_>>(), key_field, 150, 100);
    assert!(cuts.len() >= 14, "{} cuts", cuts.len());
    assert!(
        files.iter().any(|f| {
            let (lo, hi) = key_bounds(f, key_field).unwrap();
            chunk_of(&cuts, &lo) != chunk_of(&cuts, &hi)
        }),
        "no file spans a cut"
    );

    let b = in_memory_and_spilled(&handle, [in_memory, spilled], &j, &events, s).await;
    assert_eq!(b.events, EVENTS - BASE + 2);
    assert!(
        b.updated > 0 && b.inserted > 0 && b.unchanged > 0 && b.tombstones_written > 0,
        "{b:?}"
    );
    assert!(b.files_rewritten > 0 && b.rows_kept > 0, "{b:?}");
    let want = reference_of(&j).await.rows;
    assert_eq!(table_rows(&handle, "shop.in_memory").await, want);
    assert_eq!(table_rows(&handle, "shop.spilled").await, want);
    // The merge consumed the spill: its folder is gone.
    assert!(!spill_dir.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_in_spilled_events_stops_the_merge_with_nothing_committed() {
    let (dir, j, handle) = generated_site(12, 600, EVENTS, 250).await;
    let t = base_table(&j, &handle, "shop.orders", 2).await;
    let before = t.metadata().current_snapshot_id();
    let mut events = range_events(&j).await;
    // The event at BASE + 20 again at a new position with another payload: same key and
    // version, a conflict among the events (it lands in one range with the first).
    let twin = events[0].slice(19, 1);
    let twin = with_column(
        &twin,
        POSITION_COLUMN,
        Arc::new(Int64Array::from(vec![EVENTS as i64 + 2])),
    );
    events.push(with_column(
        &twin,
        "status",
        Arc::new(StringArray::from(vec![other_status(&twin)])),
    ));
    let s = spill(&j, &dir.path().join("spill"), &events);
    let err = merge(&handle, t, &j, UnitEvents::Spilled(s), 150, 100, 8)
        .await
        .unwrap_err();
    match &err {
        ApplyError::Merge(crate::merge::MergeError::ConflictInEvents {
            first_position,
            second_position,
            ..
        }) => assert_eq!((*first_position, *second_position), (BASE + 20, EVENTS + 2)),
        other => panic!("{other}"),
    }
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(t.metadata().current_snapshot_id(), before);

    // A stored row's key and version with another payload: a conflict with the table. The
    // event of a table row is read from the journal at the row's position.
    let rows = table_rows(&handle, "shop.orders").await;
    let p = rows.values().map(|r| r.position).min().unwrap();
    let chain = tidemark_journal::verify::verify(&j, &Default::default(), &mut |_| {})
        .await
        .unwrap();
    let stored = read_events(&j, &chain.range(p - 1, p).collect::<Vec<_>>(), p - 1, p)
        .await
        .unwrap();
    let row = with_column(
        &stored[0],
        POSITION_COLUMN,
        Arc::new(Int64Array::from(vec![EVENTS as i64 + 3])),
    );
    let row = with_column(&row, "status", Arc::new(StringArray::from(vec![other_status(&row)])));
    let mut events = range_events(&j).await;
    events.push(row);
    let s = spill(&j, &dir.path().join("spill2"), &events);
    let err = merge(&handle, t, &j, UnitEvents::Spilled(s), 150, 100, 9)
        .await
        .unwrap_err();
    match &err {
        ApplyError::Merge(crate::merge::MergeError::ConflictWithTable {
            table_position,
            event_position,
            ..
        }) => assert_eq!((*table_position, *event_position), (p, EVENTS + 3)),
        other => panic!("{other}"),
    }
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(t.metadata().current_snapshot_id(), before);
}

/// A status other than the one row 0 of `b` has.
pub(crate) fn other_status(b: &RecordBatch) -> &'static str {
    let status = b.column_by_name("status").unwrap();
    if status.as_any().downcast_ref::<StringArray>().unwrap().value(0) == "paid" {
        "shipped"
    } else {
        "paid"
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_rewritten_file_in_ranges_that_did_not_rewrite_it_are_carried_over() {
    let (dir, j, handle) = generated_site(13, 600, EVENTS, 250).await;
    let in_memory = base_table(&j, &handle, "shop.in_memory", 3).await;
    let spilled = base_table(&j, &handle, "shop.spilled", 3).await;
    // Updates of the lower half of the keys; the upper half gets only old versions delivered
    // late (no change). The table's files span both halves, so the ranges of the upper half
    // rewrite nothing while those of the lower half rewrite every file.
    let half = |b: &RecordBatch, lower: bool| {
        let mask: BooleanArray = strings(b, "order_id")
            .iter()
            .map(|k| Some((k.as_str() < "o-00000300") == lower))
            .collect();
        arrow::compute::filter_record_batch(b, &mask).unwrap()
    };
    let chain = tidemark_journal::verify::verify(&j, &Default::default(), &mut |_| {})
        .await
        .unwrap();
    let mut events: Vec<RecordBatch> = read_events(&j, &chain.range(BASE, EVENTS).collect::<Vec<_>>(), BASE, EVENTS)
        .await
        .unwrap()
        .iter()
        .map(|b| half(b, true))
        .collect();
    let mut next = EVENTS as i64 + 1;
    for b in read_events(&j, &chain.range(0, BASE).collect::<Vec<_>>(), 0, BASE)
        .await
        .unwrap()
    {
        let b = half(&b, false);
        let positions: Vec<i64> = (next..next + b.num_rows() as i64).collect();
        next += b.num_rows() as i64;
        events.push(with_column(&b, POSITION_COLUMN, Arc::new(Int64Array::from(positions))));
    }
    let s = spill(&j, &dir.path().join("spill"), &events);
    let b = in_memory_and_spilled(&handle, [in_memory, spilled], &j, &events, s).await;
    assert!(b.unchanged > 0 && b.updated > 0 && b.rows_kept > 0, "{b:?}");
    let rows = table_rows(&handle, "shop.spilled").await;
    assert!(rows.keys().any(|k| k.to_string().as_str() >= "o-00000300"));
    assert_eq!(table_rows(&handle, "shop.in_memory").await, rows);
}
