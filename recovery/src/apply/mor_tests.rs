//! The applier in merge-on-read mode and `compact`: the table equals the reference fold (read by
//! tidemark and by iceberg-rust's scan, which applies position deletes on its own), no data file
//! is ever removed by an apply commit, retries and conflicts behave as in copy-on-write, a
//! compaction drops every spent delete file and changes no row, and a recovery from a
//! merge-on-read snapshot validates.

use std::collections::{BTreeMap, HashMap};

use arrow::array::StringArray;
use iceberg::table::Table;
use tidemark_journal::{Journal, generate};

use crate::apply::compact::{CompactOptions, compact};
use crate::apply::mor::MergeMode;
use crate::apply::tests::{apply_seeded, clock, generated_site, journal_in, reference_of, table_rows};
use crate::apply::{ApplyError, ApplyOptions, apply};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::recover::snapshot::{SnapshotChoice, SnapshotSource};
use crate::recover::{RecoverOptions, recover};
use crate::table::commit::current_files;
use crate::table::mor::PROP_MERGE_MODE;
use crate::table::read::read_table;
use crate::table::test_support::{catalog_in, scanned_versions, summary, versions_by_key};
use crate::table::{self, commit_properties};

const TABLE: &str = "shop.orders";

/// Merge-on-read, never compacting, a commit per batch (so that a journal of a few batches makes
/// a few commits and delete files).
fn mor() -> ApplyOptions {
    ApplyOptions {
        merge_mode: Some(MergeMode::MergeOnRead),
        compact_at: Some(0.0),
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    }
}

/// Applies all of `j` merge-on-read with `ids`: the table then, and its rows by iceberg-rust's
/// scan (what the compaction tests start from and compare the compacted table with).
async fn applied_mor(j: &Journal, handle: &CatalogHandle, ids: &SeededIds) -> (Table, BTreeMap<String, (i64, i64)>) {
    apply(j, handle, TABLE, &mor(), &clock(), ids, &mut |_| {})
        .await
        .unwrap();
    let t = table::load_table(handle, TABLE).await.unwrap();
    let rows = scanned_versions(&t).await;
    (t, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_read_equals_the_reference_and_removes_no_data_file() {
    let (_dir, j, handle) = generated_site(3, 40, 300, 50).await;
    let ids = SeededIds::new(1);
    let first = ApplyOptions {
        until: Some(120),
        ..mor()
    };
    let r = apply(&j, &handle, TABLE, &first, &clock(), &ids, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(r.merge_mode, MergeMode::MergeOnRead);
    let before = table::load_table(&handle, TABLE).await.unwrap();
    let rows_before: u64 = summary(&before)["total-records"].parse().unwrap();
    let r = apply(&j, &handle, TABLE, &mor(), &clock(), &ids, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(r.applied_to_position, 300);
    // Four units, and each file's keys are decoded once at most: the files this run wrote are
    // in the key index from the start, the others from their first scan.
    assert!(r.writes.keys_scanned <= rows_before, "{:?} vs {rows_before}", r.writes);
    assert!(r.writes.position_deletes_written > 0, "{:?}", r.writes);
    assert_eq!(r.writes.data_files_removed, 0, "{:?}", r.writes);
    // Most replaced rows are older than every event of their key: known by key and version.
    assert!(r.writes.rows_known_by_version > 0, "{:?}", r.writes);
    assert_eq!(r.merge.files_rewritten, 0);
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
    let t = table::load_table(&handle, TABLE).await.unwrap();
    // Every apply commit only added files; the last one holds delete files.
    let meta = t.metadata();
    for s in meta.snapshots() {
        let p = &s.summary().additional_properties;
        assert_eq!(p.get("deleted-data-files").map(String::as_str), Some("0"), "{p:?}");
    }
    assert!(!current_files(&t).await.unwrap().deletes.is_empty());
    assert_eq!(
        scanned_versions(&t).await,
        versions_by_key(&read_table(&t).await.unwrap())
    );
    // Nothing left: an identical second run commits nothing.
    let again = apply(&j, &handle, TABLE, &mor(), &clock(), &ids, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(again.commits, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_property_chooses_merge_on_read() {
    let (_dir, j, handle) = generated_site(5, 20, 100, 25).await;
    let t = table::create_or_load_table(&handle, TABLE, &j.spec).await.unwrap();
    let props = HashMap::from([(PROP_MERGE_MODE.to_string(), "merge-on-read".to_string())]);
    commit_properties(&handle, &t, props).await.unwrap();
    let one = ApplyOptions {
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    let r = apply(&j, &handle, TABLE, &one, &clock(), &SeededIds::new(2), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(r.merge_mode, MergeMode::MergeOnRead);
    assert!(r.writes.delete_files_written > 0);
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
    // An unknown mode is refused before anything is written.
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let props = HashMap::from([(PROP_MERGE_MODE.to_string(), "merge-on-write".to_string())]);
    commit_properties(&handle, &t, props).await.unwrap();
    let err = apply_seeded(&j, &handle, TABLE, &ApplyOptions::default(), &clock(), 3)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("write.merge.mode = \"merge-on-write\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_merge_on_read_appliers_lose_nothing() {
    let (_dir, j, handle) = generated_site(9, 25, 150, 30).await;
    table::create_or_load_table(&handle, TABLE, &j.spec).await.unwrap();
    let opts = mor();
    crate::apply::tests::two_appliers_at_once(&j, &handle, TABLE, &opts).await;
    apply(&j, &handle, TABLE, &opts, &clock(), &SeededIds::new(12), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
    let t = table::load_table(&handle, TABLE).await.unwrap();
    assert_eq!(
        scanned_versions(&t).await,
        versions_by_key(&read_table(&t).await.unwrap())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_the_table_commits_nothing_in_merge_on_read() {
    let e = |p: u64, version: i64, status: &str| {
        format!(
            r#"{{"position":{p},"order_id":"o-1","order_version":{version},"customer_id":"c","status":"{status}","amount":"1.00","currency":"EUR","is_deleted":false,"event_time":"2026-11-29T08:00:00Z"}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{}\n{}\n", e(1, 1, "placed"), e(2, 2, "paid"));
    let j = journal_in(&dir.path().join("journal"), &text, 1).await;
    let handle = catalog_in(dir.path()).await;
    let r = apply(&j, &handle, TABLE, &mor(), &clock(), &SeededIds::new(1), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(r.commits, 2);
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let before = t.metadata().current_snapshot_id();
    // The same key and version with another payload: a second journal's events merged into
    // this table (the journal itself refuses such an event, so the table check is reached so).
    let other = format!("{}\n{}\n", e(1, 1, "placed"), e(2, 2, "cancelled"));
    let j2 = journal_in(&dir.path().join("journal2"), &other, 2).await;
    let chain = tidemark_journal::verify::verify(&j2, &Default::default(), &mut |_| {})
        .await
        .unwrap();
    let manifests: Vec<_> = chain.manifests.iter().collect();
    let bad = crate::apply::read_events(&j2, &manifests, 0, 2).await.unwrap();
    let spec = &j.spec;
    let unit = crate::apply::UnitOptions {
        renames: None,
        max_attempts: 1,
        skip_if_applied: None,
        guard: None,
        chunk_rows: crate::apply::MERGE_CHUNK_ROWS,
        range_events: crate::apply::MERGE_CHUNK_ROWS,
        mode: MergeMode::MergeOnRead,
        key_index: None,
        deletes_cache: None,
    };
    let err = crate::apply::merge_and_commit_unit(
        &handle,
        t,
        spec,
        bad.into(),
        HashMap::new(),
        &clock(),
        &SeededIds::new(5),
        &unit,
    )
    .await
    .err()
    .expect("a conflict");
    assert!(matches!(&err, ApplyError::Merge(m) if m.is_conflict()), "{err}");
    let t = table::load_table(&handle, TABLE).await.unwrap();
    assert_eq!(t.metadata().current_snapshot_id(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_drops_every_delete_file_and_changes_no_row() {
    let (_dir, j, handle) = generated_site(4, 30, 240, 40).await;
    let ids = SeededIds::new(1);
    let (t, rows) = applied_mor(&j, &handle, &ids).await;
    let deletes = current_files(&t).await.unwrap().deletes.len();
    assert!(deletes > 0);
    let (r, t) = compact(&handle, t, &CompactOptions::default(), &clock(), &ids)
        .await
        .unwrap();
    assert_eq!(r.delete_files_before, deletes as u64);
    assert_eq!(r.delete_files_after, 0, "{r:?}");
    assert!(r.rows_dropped > 0, "{r:?}");
    let s = summary(&t);
    assert_eq!(s.get("total-delete-files").map(String::as_str), Some("0"), "{s:?}");
    assert_eq!(s.get("removed-delete-files"), Some(&deletes.to_string()), "{s:?}");
    assert_eq!(scanned_versions(&t).await, rows);
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
    // Nothing left to compact: no commit.
    let (again, t2) = compact(&handle, t.clone(), &CompactOptions::default(), &clock(), &ids)
        .await
        .unwrap();
    assert_eq!(again.snapshot_id, None, "{again:?}");
    assert_eq!(t2.metadata().current_snapshot_id(), t.metadata().current_snapshot_id());
    // The applier goes on from the compacted table.
    let more: String = (1..=20u64)
        .map(|i| {
            format!(
                r#"{{"position":{},"order_id":"o-{:08}","order_version":100,"customer_id":"c","status":"paid","amount":"1.00","currency":"EUR","is_deleted":{},"event_time":"2026-11-29T08:00:00Z"}}"#,
                240 + i,
                i,
                i % 4 == 0
            ) + "\n"
        })
        .collect();
    let opts = crate::apply::tests::append_opts(40, "gen");
    crate::apply::tests::append_with(&j, &more, &opts).await.unwrap();
    apply(&j, &handle, TABLE, &mor(), &clock(), &ids, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applier_compacts_at_its_threshold() {
    let (_dir, j, handle) = generated_site(7, 30, 240, 40).await;
    let opts = ApplyOptions {
        compact_at: Some(0.05),
        ..mor()
    };
    let r = apply(&j, &handle, TABLE, &opts, &clock(), &SeededIds::new(1), &mut |_| {})
        .await
        .unwrap();
    assert!(r.compactions > 0, "{r:?}");
    assert!(r.compaction_writes.data_files_removed > 0, "{r:?}");
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
    let t = table::load_table(&handle, TABLE).await.unwrap();
    assert_eq!(
        scanned_versions(&t).await,
        versions_by_key(&read_table(&t).await.unwrap())
    );
    // The applied position survives the compaction commits (they carry none of their own).
    assert_eq!(crate::apply::applied_state(&t).position, 240);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_from_a_merge_on_read_snapshot_validates() {
    let (_dir, j, handle) = generated_site(8, 30, 200, 40).await;
    let first = ApplyOptions {
        until: Some(160),
        ..mor()
    };
    apply(&j, &handle, TABLE, &first, &clock(), &SeededIds::new(1), &mut |_| {})
        .await
        .unwrap();
    let t = table::load_table(&handle, TABLE).await.unwrap();
    assert!(!current_files(&t).await.unwrap().deletes.is_empty());
    let opts = RecoverOptions::new(
        "rec-mor",
        SnapshotSource::at(t.metadata_location().unwrap()),
        SnapshotChoice::SnapshotId(t.metadata().current_snapshot_id().unwrap()),
        "shop.recovered",
    );
    let (report, _) = recover(&j, &handle, &opts, &clock(), &SeededIds::new(9), &mut |_| {})
        .await
        .unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    assert_eq!(table_rows(&handle, "shop.recovered").await, reference_of(&j).await.rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_between_a_merge_on_read_commit_and_its_checkpoint_changes_nothing() {
    let (_dir, j, handle) = generated_site(5, 30, 200, 40).await;
    let crash = ApplyOptions {
        failpoint: Some("after-commit:2".into()),
        ..mor()
    };
    let err = apply(&j, &handle, TABLE, &crash, &clock(), &SeededIds::new(2), &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, ApplyError::Failpoint(_)), "{err}");
    let r = apply(&j, &handle, TABLE, &mor(), &clock(), &SeededIds::new(3), &mut |_| {})
        .await
        .unwrap();
    assert!(r.recovered_checkpoint, "the missing checkpoint is detected and written");
    assert_eq!(r.started_after_position, 80, "positions 41..=80 are not applied twice");
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
}

/// The compaction sorts within its memory budget: a table larger than the budget is sorted in
/// runs spilled to temporary files and merged (before, it held every row it rewrote: the 100M
/// merge-on-read table of the bench was killed by the OOM killer at 24 GB); the rows are the
/// same, and every file written is sorted by key, files of the rewrite covering disjoint keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_larger_than_its_memory_spills_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(
        &dir.path().join("journal"),
        &generate::ndjson(11, 30_000, 1, 40_000),
        10_000,
    )
    .await;
    let handle = catalog_in(dir.path()).await;
    let ids = SeededIds::new(1);
    let (t, rows) = applied_mor(&j, &handle, &ids).await;
    let spill = dir.path().join("spill");
    let opts = CompactOptions {
        memory_bytes: 4 << 20,
        spill_dir: Some(spill.clone()),
        ..Default::default()
    };
    let (r, t) = compact(&handle, t, &opts, &clock(), &ids).await.unwrap();
    assert!(r.spilled_bytes > 0, "{r:?}");
    assert!(!spill.exists(), "the sort's runs are removed");
    assert_eq!(r.delete_files_after, 0, "{r:?}");
    assert_eq!(r.rows_read as usize, rows.len(), "{r:?}");
    assert_eq!(scanned_versions(&t).await, rows);
    assert_eq!(table_rows(&handle, TABLE).await, reference_of(&j).await.rows);
    // Each file's keys ascend, and the files' key ranges do not overlap.
    let (files, deletes) = crate::table::read::live_files(&t).await.unwrap();
    let schema = table::arrow_schema(&t).unwrap();
    let mut ranges = Vec::new();
    for f in &files {
        let keys: Vec<String> = crate::table::read::read_files(&t, &[f], &schema, None, &deletes)
            .await
            .unwrap()
            .iter()
            .flat_map(|b| {
                let c = b.column_by_name("order_id").unwrap();
                let c = c.as_any().downcast_ref::<StringArray>().unwrap();
                (0..b.num_rows()).map(|i| c.value(i).to_string()).collect::<Vec<_>>()
            })
            .collect();
        assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "{} is not sorted by key",
            f.file_path()
        );
        ranges.push((keys[0].clone(), keys[keys.len() - 1].clone()));
    }
    ranges.sort();
    assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "{ranges:?}");
}
