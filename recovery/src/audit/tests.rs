//! The audit on a local folder and SQLite catalog: applier commits continue their positions, a
//! bad delete is found (its snapshot, writer, counts and keys) and the snapshot before it is the
//! trusted one, a compaction is neutral, records make the next audit incremental, a deep audit
//! catches an applier commit whose rows are wrong, a gap in positions is a divergence, another
//! writer's second row of a key stops the applier.

use std::collections::HashMap;
use std::sync::Arc;

use tidemark_journal::Journal;
use tidemark_journal::generate;
use tidemark_journal::store::ObjectStore;
use tidemark_journal::store::local::LocalStore;

use super::*;
use crate::apply::tests::{apply_seeded, clock, journal_in};
use crate::apply::{ApplyOptions, Grouping, apply};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::provenance::{PROP_FIRST_POSITION, PROP_JOURNAL_ID, PROP_LAST_POSITION};
use crate::rehearse::fault::delete_rows;
use crate::table::test_support::catalog_in;
use crate::table::{self, CommitStamp, commit_overwrite, live_data_files, write_data_file};

async fn applied(dir: &std::path::Path, events: u64) -> (Journal, CatalogHandle) {
    let j = journal_in(&dir.join("journal"), &generate::ndjson(21, 50, 1, events), 50).await;
    let handle = catalog_in(dir).await;
    (j, handle)
}

async fn apply_to(j: &Journal, handle: &CatalogHandle, until: u64, seed: u64) {
    let opts = ApplyOptions {
        until: Some(until),
        grouping: Grouping::Fixed(1),
        ..Default::default()
    };
    apply_with(j, handle, &opts, seed).await;
}

/// `apply` of `j` into `shop.orders` with `opts` (ids seeded `seed`), which must succeed.
async fn apply_with(j: &Journal, handle: &CatalogHandle, opts: &ApplyOptions, seed: u64) {
    apply(
        j,
        handle,
        "shop.orders",
        opts,
        &clock(),
        &SeededIds::new(seed),
        &mut |_| {},
    )
    .await
    .unwrap();
}

async fn source(handle: &CatalogHandle) -> SnapshotSource {
    let t = table::load_table(handle, "shop.orders").await.unwrap();
    SnapshotSource::at(t.metadata_location().unwrap())
}

async fn run(j: &Journal, handle: &CatalogHandle, opts: &AuditOptions) -> AuditReport {
    audit(j, &source(handle).await, opts, &mut |_| {}).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applied_history_is_trusted_to_its_newest_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 300).await;
    apply_to(&j, &handle, 300, 1).await;
    let r = run(&j, &handle, &AuditOptions::default()).await;
    assert!(r.ok, "{r:?}");
    assert_eq!(r.timeline.len(), 6);
    assert!(
        r.timeline.iter().all(|e| e.verdict == Verdict::Applied && e.trusted),
        "{r:?}"
    );
    let t = r.trusted.unwrap();
    assert_eq!(t.position, Some(300));
    let head = table::load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(Some(t.snapshot_id), head.metadata().current_snapshot_id());
    assert!(t.checkpoint.is_some(), "the checkpoint of the newest snapshot is named");
    assert_eq!(r.files_read, 0, "applier commits are checked by their records alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_delete_is_found_and_the_snapshot_before_it_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 400).await;
    apply_to(&j, &handle, 200, 1).await;
    let before = table::load_table(&handle, "shop.orders").await.unwrap();
    let rows_before = crate::apply::tests::table_rows(&handle, "shop.orders").await;
    let fault = delete_rows(
        &handle,
        "shop.orders",
        "status = 'placed'",
        &clock(),
        &SeededIds::new(2),
    )
    .await
    .unwrap();
    assert!(fault.rows_deleted > 0);
    let faulted = table::load_table(&handle, "shop.orders").await.unwrap();
    let r = run(&j, &handle, &AuditOptions::default()).await;
    assert!(!r.ok);
    let d = r.first_divergence.clone().unwrap();
    assert_eq!(Some(d.snapshot_id), faulted.metadata().current_snapshot_id());
    assert_eq!(d.writer, "tidemark fault delete");
    assert_eq!(d.position, Some(200));
    assert_eq!(d.counts.removed, fault.rows_deleted);
    assert_eq!((d.counts.changed, d.counts.added), (0, 0));
    let deleted: Vec<String> = rows_before
        .iter()
        .filter(|(_, r)| {
            r.cells[j.spec.spec.columns.iter().position(|c| c.name == "status").unwrap()].to_string() == "placed"
        })
        .map(|(k, _)| format!("removed {k}"))
        .collect();
    assert!(d.sample_keys.iter().all(|s| deleted.contains(s)), "{:?}", d.sample_keys);
    let t = r.trusted.unwrap();
    assert_eq!(Some(t.snapshot_id), before.metadata().current_snapshot_id());
    assert_eq!(t.position, Some(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_is_neutral() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 300).await;
    let opts = ApplyOptions {
        merge_mode: Some(crate::table::mor::MergeMode::MergeOnRead),
        compact_at: Some(0.0),
        grouping: Grouping::Fixed(1),
        ..Default::default()
    };
    apply_seeded(&j, &handle, "shop.orders", &opts, &clock(), 1)
        .await
        .unwrap();
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    let copts = crate::apply::compact::CompactOptions {
        min_deleted_fraction: 0.0,
        ..Default::default()
    };
    let (c, _) = crate::apply::compact::compact(&handle, t, &copts, &clock(), &SeededIds::new(3))
        .await
        .unwrap();
    assert!(c.data_files_rewritten > 0, "{c:?}");
    let r = run(&j, &handle, &AuditOptions::default()).await;
    assert!(r.ok, "{:?}", r.first_divergence);
    let last = r.timeline.last().unwrap();
    assert_eq!(
        (last.kind.as_str(), last.verdict),
        ("other", Verdict::Neutral),
        "{last:?}"
    );
    assert!(r.files_read > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_make_the_next_audit_start_after_the_newest_audited_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 300).await;
    apply_to(&j, &handle, 150, 1).await;
    let records: Arc<dyn ObjectStore> = j.store.clone();
    let opts = AuditOptions {
        records: Some(records.clone()),
        ..Default::default()
    };
    let first = run(&j, &handle, &opts).await;
    assert_eq!((first.audited, first.records_written, first.resumed_from), (3, 3, None));
    let again = run(&j, &handle, &opts).await;
    assert_eq!(again.audited, 0);
    assert_eq!(again.resumed_from, first.timeline.last().map(|e| e.snapshot_id));
    assert_eq!(again.trusted, first.trusted);
    delete_rows(&handle, "shop.orders", "status = 'paid'", &clock(), &SeededIds::new(2))
        .await
        .unwrap();
    let third = run(&j, &handle, &opts).await;
    assert_eq!((third.audited, third.resumed_from), (1, again.resumed_from));
    assert_eq!(third.timeline[0].verdict, Verdict::Divergence);
    assert!(!third.ok);
    // The fourth run resumes after the divergence and still reports it (the records carry it).
    let fourth = run(&j, &handle, &opts).await;
    assert_eq!(fourth.audited, 0);
    assert!(!fourth.ok);
    assert_eq!(fourth.first_divergence, third.first_divergence);
    assert_eq!(fourth.trusted, first.trusted);
    // The applier stops on it; an operator's acceptance (recorded in its next commit) closes it.
    let stop = ApplyOptions {
        until: Some(300),
        ..Default::default()
    };
    let err = apply_seeded(&j, &handle, "shop.orders", &stop, &clock(), 8)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, crate::apply::ApplyError::Divergence(d) if d.snapshot_id == third.timeline[0].snapshot_id),
        "{err}"
    );
    assert!(err.to_string().contains("--on-divergence continue"), "{err}");
    apply_to_continuing(&j, &handle, 300).await;
    let fifth = run(&j, &handle, &opts).await;
    assert!(fifth.ok, "{:?}", fifth.first_divergence);
    assert_eq!(fifth.trusted.unwrap().position, Some(300));
}

async fn apply_to_continuing(j: &Journal, handle: &CatalogHandle, until: u64) {
    let opts = ApplyOptions {
        until: Some(until),
        on_divergence: crate::apply::OnDivergence::Continue {
            reason: "test: the applier goes on past a divergence".into(),
        },
        ..Default::default()
    };
    apply_with(j, handle, &opts, 9).await;
}

/// An applier commit that claims positions but whose rows lack one of its parent's keys.
async fn commit_wrong_rows(j: &Journal, handle: &CatalogHandle, first: u64, last: u64) {
    let t = table::load_table(handle, "shop.orders").await.unwrap();
    let batches = crate::table::read::read_table(&t).await.unwrap();
    let mut kept: Vec<arrow::array::RecordBatch> = Vec::new();
    for (i, b) in batches.into_iter().enumerate() {
        kept.push(if i == 0 { b.slice(1, b.num_rows() - 1) } else { b });
    }
    let added = write_data_file(&t, &kept, uuid::Uuid::from_u128(77)).await.unwrap();
    let removed: Vec<String> = live_data_files(&t)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_path().to_string())
        .collect();
    let summary = HashMap::from([
        (PROP_JOURNAL_ID.to_string(), j.header.journal_id.clone()),
        (PROP_FIRST_POSITION.to_string(), first.to_string()),
        (PROP_LAST_POSITION.to_string(), last.to_string()),
    ]);
    let stamp = CommitStamp {
        id: uuid::Uuid::from_u128(78),
        at: chrono::DateTime::from_timestamp(1_790_000_500, 0).unwrap(),
    };
    commit_overwrite(handle, &t, &removed, added, summary, stamp)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_audit_catches_an_applier_commit_whose_rows_are_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 300).await;
    apply_to(&j, &handle, 200, 1).await;
    commit_wrong_rows(&j, &handle, 201, 210).await;
    let shallow = run(&j, &handle, &AuditOptions::default()).await;
    assert!(shallow.ok, "without --deep only positions are checked");
    let deep = run(
        &j,
        &handle,
        &AuditOptions {
            deep: true,
            ..Default::default()
        },
    )
    .await;
    assert!(!deep.ok);
    let d = deep.first_divergence.unwrap();
    assert!(d.counts.removed + d.counts.changed >= 1, "{d:?}");
    assert!(
        deep.timeline[..deep.timeline.len() - 1]
            .iter()
            .all(|e| e.verdict == Verdict::Applied),
        "{:?}",
        deep.timeline
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_in_positions_is_a_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 300).await;
    apply_to(&j, &handle, 100, 1).await;
    commit_wrong_rows(&j, &handle, 151, 160).await;
    let r = run(&j, &handle, &AuditOptions::default()).await;
    let d = r.first_divergence.unwrap();
    assert!(d.detail.contains("101..=150 were never applied"), "{}", d.detail);
    assert_eq!(r.trusted.unwrap().position, Some(100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_of_another_journal_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 100).await;
    apply_to(&j, &handle, 100, 1).await;
    std::fs::create_dir_all(dir.path().join("other")).unwrap();
    let other = Journal::init(
        Arc::new(LocalStore::open(dir.path().join("other")).unwrap()),
        tidemark_journal::spec::orders_spec(),
        "j-other".into(),
        &clock(),
    )
    .await
    .unwrap();
    let r = run(&other, &handle, &AuditOptions::default()).await;
    let d = r.first_divergence.unwrap();
    assert!(d.detail.contains("not this journal"), "{}", d.detail);
    assert!(r.trusted.is_none());
}

/// Another writer appends a second row of a key the table holds (same key, same version, same
/// values: a foreign retry): the applier's audit of foreign commits counts it and stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_second_row_of_a_key_stops_the_applier() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = applied(dir.path(), 300).await;
    apply_to(&j, &handle, 100, 1).await;
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    let batches = crate::table::read::read_table(&t).await.unwrap();
    let one = batches.iter().find(|b| b.num_rows() > 0).unwrap().slice(0, 1);
    let added = write_data_file(&t, &[one], uuid::Uuid::from_u128(91)).await.unwrap();
    let stamp = CommitStamp {
        id: uuid::Uuid::from_u128(92),
        at: chrono::DateTime::from_timestamp(1_790_000_600, 0).unwrap(),
    };
    commit_overwrite(&handle, &t, &[], added, HashMap::new(), stamp)
        .await
        .unwrap();
    let foreign = table::load_table(&handle, "shop.orders").await.unwrap();
    let err = crate::apply::apply_all(&j, &handle, "shop.orders", &clock(), &SeededIds::new(3))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, crate::apply::ApplyError::Divergence(d)
            if Some(d.snapshot_id) == foreign.metadata().current_snapshot_id() && d.added + d.changed >= 1),
        "{err}"
    );
    let r = run(&j, &handle, &AuditOptions::default()).await;
    assert_eq!(r.trusted.unwrap().position, Some(100));
}
