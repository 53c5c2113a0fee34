//! Tests of the replica check: a warehouse copied in the unsafe order under a live writer, then
//! completed.

use std::collections::HashMap;
use std::path::Path;

use super::check;
use crate::dr::rebuild::warehouse_base;
use crate::dr::test_support::{append, append_each, record_walk, source_catalog, table_with};
use crate::ids::SeededIds;
use crate::recover::snapshot::PrefixMap;
use crate::table::live_data_files;
use crate::table::test_support::catalog_in;

/// Copies the files under `src` that `dst` lacks; the `data` folder first, as a replication
/// that copies data before metadata would, unless `with_data` is false.
fn copy_new(src: &Path, dst: &Path, with_data: bool) {
    for folder in ["data", "metadata"] {
        if folder == "data" && !with_data {
            continue;
        }
        let (from, to) = (src.join(folder), dst.join(folder));
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if !target.exists() {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
}

fn file_name(location: &str) -> &str {
    location.rsplit('/').next().unwrap()
}

#[tokio::test]
async fn an_unsafe_copy_falls_back_to_the_newest_consistent_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(21);
    let handle = source_catalog(dir.path()).await;
    let mut table = table_with(&handle, "shop.orders", &ids, 1..=2).await;
    let consistent = table.metadata_location().unwrap().to_string();
    let consistent_snapshot = table.metadata().current_snapshot_id();
    let before: Vec<String> = live_data_files(&table)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_path().to_string())
        .collect();

    let src = dir.path().join("src/warehouse/shop/orders");
    let replica = dir.path().join("replica");
    let dst = replica.join("shop/orders");
    copy_new(&src, &dst, true);

    // The live writer goes on; the next pass copies the new metadata folder files only.
    for n in 3..=4 {
        table = append(&handle, &table, &ids, n).await;
    }
    copy_new(&src, &dst, false);

    let map = PrefixMap {
        from: handle.warehouse().to_string(),
        to: warehouse_base(&replica.display().to_string()).unwrap(),
    };
    let report = check(&replica.display().to_string(), &HashMap::new(), Some(&map))
        .await
        .unwrap();
    assert_eq!(report.format_version, 1);
    assert!(!report.is_current());
    assert_eq!(report.tables.len(), 1);
    let t = &report.tables[0];
    assert_eq!(t.table, "shop.orders");
    assert!(t.error.is_none() && t.refused.is_none(), "{t:?}");
    let head = t.newest_metadata.as_deref().unwrap();
    assert!(head.starts_with(&map.to), "{head}");
    assert_eq!(file_name(head), file_name(table.metadata_location().unwrap()));

    // The two data files written after the first pass are missing; nothing else is.
    let mut new_files: Vec<String> = live_data_files(&table)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_path().to_string())
        .filter(|p| !before.contains(p))
        .map(|p| PrefixMap::apply(Some(&map), &p))
        .collect();
    new_files.sort();
    let mut missing: Vec<String> = t.newest_missing.iter().map(|m| m.path.clone()).collect();
    missing.sort();
    assert_eq!(missing, new_files);
    assert_eq!(t.newest_missing_count, 2);
    assert!(t.newest_missing.iter().all(|m| m.what == "data file"));

    // The newest consistent metadata is the one of the first pass: two commits behind.
    let chosen = t.consistent_metadata.as_deref().unwrap();
    assert_eq!(file_name(chosen), file_name(&consistent));
    assert_eq!(t.consistent_snapshot_id, consistent_snapshot);
    assert_eq!(t.behind_commits, Some(2));
    assert_eq!(t.behind_ms, Some(2_000));
    assert_eq!(t.checked, 3);
    assert!(t.unparsable_metadata.is_empty());
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["tables"][0]["behind_commits"], 2);

    // The data arrives: the replica is current.
    copy_new(&src, &dst, true);
    let report = check(&replica.display().to_string(), &HashMap::new(), Some(&map))
        .await
        .unwrap();
    assert!(report.is_current(), "{report:?}");
    let t = &report.tables[0];
    assert!(t.newest_missing.is_empty());
    assert_eq!(t.newest_missing_count, 0);
    assert_eq!(t.behind_commits, Some(0));
    assert_eq!(t.behind_ms, Some(0));
    assert_eq!(t.consistent_metadata, t.newest_metadata);
    assert_eq!(t.consistent_snapshot_id, table.metadata().current_snapshot_id());
}

/// A warehouse a `replica resync` walked back: the walked-over branch is the longest chain, and
/// without its record it would be reported as the newest metadata.
#[tokio::test]
async fn files_a_resync_walked_over_are_not_the_replicas_newest_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(22);
    let handle = catalog_in(dir.path()).await;
    let table = table_with(&handle, "shop.orders", &ids, 1..=1).await;
    let kept = table.metadata_location().unwrap().to_string();
    let (_, walked) = append_each(&handle, &table, &ids, 2..=3).await;
    let warehouse = dir.path().join("warehouse").display().to_string();
    let before = check(&warehouse, &HashMap::new(), None).await.unwrap();
    assert_eq!(
        before.tables[0].newest_metadata.as_deref().map(file_name),
        Some(file_name(&walked[0]))
    );

    record_walk(&kept, &walked).await;
    let report = check(&warehouse, &HashMap::new(), None).await.unwrap();
    let t = &report.tables[0];
    assert_eq!(
        t.newest_metadata.as_deref().map(file_name),
        Some(file_name(&kept)),
        "{t:?}"
    );
    assert!(report.is_current(), "{report:?}");
    let mut over: Vec<&str> = t.walked_over.iter().map(|k| file_name(k)).collect();
    over.sort();
    let mut expected: Vec<&str> = walked.iter().map(|w| file_name(w)).collect();
    expected.sort();
    assert_eq!(over, expected);
}
