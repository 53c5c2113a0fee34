//! Tests of the replica copy: the safe order keeps every replica state consistent (also when cut
//! short), resumes, repairs torn objects; the data-first order under a live writer does not.

use std::collections::HashMap;
use std::path::Path;

use iceberg::table::Table;
use tidemark_journal::spec::CompiledSpec;

use super::{CopyOptions, CopyOrder, Phase, Verify, copy, copy_phase};
use crate::catalog::CatalogHandle;
use crate::catalog::sql::write_stray;
use crate::dr::rebuild::warehouse_base;
use crate::dr::replica::check;
use crate::dr::test_support::{
    append, append_each, record_walk, register, row_count, source_catalog, table_with, tag_and_branch,
};
use crate::ids::SeededIds;
use crate::recover::snapshot::PrefixMap;
use crate::table::create_or_load_table;
use crate::table::test_support::catalog_in;

/// A source catalog in `dir/src` with `shop.orders` (3 commits, a tag and a branch) and
/// `shop.customers` (1 commit).
async fn source(dir: &Path, ids: &SeededIds) -> (CatalogHandle, Table) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let handle = catalog_in(&dir.join("src")).await;
    let mut orders = table_with(&handle, "shop.orders", ids, 1..=2).await;
    orders = tag_and_branch(&handle, &orders, "eod", "audit").await;
    orders = append(&handle, &orders, ids, 3).await;
    table_with(&handle, "shop.customers", ids, 9..=9).await;
    (handle, orders)
}

fn map(handle: &CatalogHandle, replica: &Path) -> PrefixMap {
    PrefixMap {
        from: handle.warehouse().to_string(),
        to: warehouse_base(&replica.display().to_string()).unwrap(),
    }
}

#[tokio::test]
async fn a_safe_copy_is_consistent_at_every_stop_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(61);
    let (handle, orders) = source(dir.path(), &ids).await;
    let from = dir.path().join("src/warehouse").display().to_string();
    let replica = dir.path().join("replica");
    let to = replica.display().to_string();
    let m = map(&handle, &replica);

    // Cut the copy short after every possible number of objects: the replica is never broken.
    let full = copy(&from, &to, &CopyOptions::default(), &mut |_| {}).await.unwrap();
    assert!(full.is_complete(), "{full:?}");
    let total = full.copied;
    assert!(total > 10, "{full:?}");
    for stop in (1..total).step_by(3).chain([total / 2]) {
        if replica.exists() {
            std::fs::remove_dir_all(&replica).unwrap();
        }
        let opts = CopyOptions {
            stop_after: Some(stop),
            ..Default::default()
        };
        let r = copy(&from, &to, &opts, &mut |_| {}).await.unwrap();
        assert!(r.interrupted && !r.is_complete());
        if replica.exists() {
            let check = check(&to, &HashMap::new(), Some(&m)).await.unwrap();
            for t in &check.tables {
                assert_eq!(t.newest_missing_count, 0, "stop after {stop}: {t:?}");
                assert!(t.is_current(), "stop after {stop}: {t:?}");
            }
        }
    }
    // The next run finishes, reusing what the last cut-short run left.
    let r = copy(&from, &to, &CopyOptions::default(), &mut |_| {}).await.unwrap();
    assert!(r.is_complete(), "{r:?}");
    assert!(r.skipped > 0 && r.copied > 0 && r.copied + r.skipped == total, "{r:?}");
    let check_all = check(&to, &HashMap::new(), Some(&m)).await.unwrap();
    assert!(check_all.is_current(), "{check_all:?}");
    assert_eq!(check_all.tables.len(), 2);

    // A repeated copy writes nothing; a torn object is found and copied again.
    let again = copy(&from, &to, &CopyOptions::default(), &mut |_| {}).await.unwrap();
    assert_eq!((again.copied, again.repaired, again.skipped), (0, 0, total));
    let data = std::fs::read_dir(replica.join("shop/orders/data"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let len = std::fs::metadata(&data).unwrap().len();
    std::fs::write(&data, vec![0u8; len as usize / 2]).unwrap();
    let repaired = copy(&from, &to, &CopyOptions::default(), &mut |_| {}).await.unwrap();
    assert_eq!((repaired.copied, repaired.repaired), (0, 1), "{repaired:?}");
    // Same size, other bytes: only the checksum sees it.
    std::fs::write(&data, vec![0u8; len as usize]).unwrap();
    let by_size = copy(&from, &to, &CopyOptions::default(), &mut |_| {}).await.unwrap();
    assert_eq!(by_size.repaired, 0);
    let opts = CopyOptions {
        verify: Verify::Sha256,
        ..Default::default()
    };
    let by_sum = copy(&from, &to, &opts, &mut |_| {}).await.unwrap();
    assert_eq!(by_sum.repaired, 1, "{by_sum:?}");

    // The source goes away; the replica, put where the source was, has every row, tag and branch.
    let head = orders.metadata_location().unwrap().to_string();
    let src = dir.path().join("src/warehouse");
    std::fs::remove_dir_all(&src).unwrap();
    std::fs::rename(&replica, &src).unwrap();
    let restored = register(&dir.path().join("dr"), &head).await;
    assert_eq!(row_count(&restored).await.unwrap(), 30);
    let tagged = restored.metadata().snapshot_for_ref("eod").unwrap().snapshot_id();
    assert_eq!(
        restored.metadata().snapshot_for_ref("audit").unwrap().snapshot_id(),
        tagged
    );
    assert_ne!(restored.metadata().current_snapshot_id(), Some(tagged));
}

#[tokio::test]
async fn a_data_first_copy_under_a_live_writer_is_caught_then_healed_by_a_safe_copy() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(62);
    let (handle, mut orders) = source(dir.path(), &ids).await;
    let from = dir.path().join("src/warehouse").display().to_string();
    let replica = dir.path().join("replica");
    let to = replica.display().to_string();
    let m = map(&handle, &replica);
    let opts = CopyOptions {
        order: CopyOrder::DataFirst,
        tables: Some(vec!["shop.orders".into()]),
        ..Default::default()
    };

    copy_phase(&from, &to, &opts, Phase::Data, &mut |_| {}).await.unwrap();
    orders = append(&handle, &orders, &ids, 4).await; // the live writer commits meanwhile
    let r = copy_phase(&from, &to, &opts, Phase::Metadata, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(r.tables.len(), 1);

    let report = check(&to, &HashMap::new(), Some(&m)).await.unwrap();
    let t = &report.tables[0];
    assert_eq!(t.table, "shop.orders");
    assert_eq!(t.newest_missing_count, 1, "{t:?}");
    assert_eq!(t.newest_missing[0].what, "data file");
    assert_eq!(t.behind_commits, Some(1));
    assert_eq!(t.behind_ms, Some(1_000));
    assert!(!report.is_current());

    // The safe copy brings the missing file.
    let safe = CopyOptions {
        tables: Some(vec!["shop.orders".into()]),
        ..Default::default()
    };
    let r = copy(&from, &to, &safe, &mut |_| {}).await.unwrap();
    assert!(r.is_complete());
    assert_eq!(r.copied, 1, "{r:?}");
    assert_eq!(
        r.tables[0].head.as_deref().map(|h| h.rsplit('/').next().unwrap()),
        orders.metadata_location().map(|l| l.rsplit('/').next().unwrap())
    );
    let report = check(&to, &HashMap::new(), Some(&m)).await.unwrap();
    assert!(report.is_current(), "{report:?}");

    // An unknown table is an error naming it.
    let bad = CopyOptions {
        tables: Some(vec!["shop.nope".into()]),
        ..Default::default()
    };
    let e = copy(&from, &to, &bad, &mut |_| {}).await.unwrap_err().to_string();
    assert!(e.contains("shop.nope"), "{e}");
}

#[tokio::test]
async fn an_undecidable_head_is_refused_unless_a_hint_decides() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(63);
    let handle = source_catalog(dir.path()).await;
    let mut t = create_or_load_table(&handle, "shop.orders", &CompiledSpec::orders())
        .await
        .unwrap();
    t = append(&handle, &t, &ids, 1).await;
    let before = t.clone();
    t = append(&handle, &t, &ids, 2).await;
    // A writer one commit behind died before its swap: its file ties with the head.
    write_stray(&before, "a writer one commit behind").await.unwrap();
    let from = dir.path().join("src/warehouse").display().to_string();
    let to = dir.path().join("replica").display().to_string();
    let r = copy(&from, &to, &CopyOptions::default(), &mut |_| {}).await.unwrap();
    assert!(r.tables[0].refused.is_some(), "{r:?}");
    assert!(!r.is_complete());
    let head = t.metadata_location().unwrap().rsplit('/').next().unwrap().to_string();
    let opts = CopyOptions {
        hints: HashMap::from([("shop.orders".to_string(), head.clone())]),
        ..Default::default()
    };
    let r = copy(&from, &to, &opts, &mut |_| {}).await.unwrap();
    assert!(r.is_complete(), "{r:?}");
    assert!(r.tables[0].head.as_deref().unwrap().ends_with(&head));
}

/// A source a `replica resync` walked back: the walked-over branch is the longest chain, yet the
/// safe copy goes up to the version walked back to and leaves the walked-over files behind.
#[tokio::test]
async fn a_safe_copy_never_takes_a_file_a_resync_walked_over_as_the_head() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(62);
    let handle = source_catalog(dir.path()).await;
    let orders = table_with(&handle, "shop.orders", &ids, 1..=1).await;
    let kept = orders.metadata_location().unwrap().to_string();
    let (_, walked) = append_each(&handle, &orders, &ids, 2..=3).await;
    record_walk(&kept, &walked).await;
    let from = dir.path().join("src/warehouse").display().to_string();
    let replica = dir.path().join("replica");
    let r = copy(
        &from,
        &replica.display().to_string(),
        &CopyOptions::default(),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert!(r.is_complete(), "{r:?}");
    let name = |l: &str| l.rsplit('/').next().unwrap().to_string();
    let t = &r.tables[0];
    assert_eq!(t.head.as_deref().map(name), Some(name(&kept)), "{t:?}");
    let metadata = replica.join("shop/orders/metadata");
    assert!(metadata.join(name(&kept)).exists());
    for w in &walked {
        assert!(!metadata.join(name(w)).exists(), "{w} was copied");
    }
}
