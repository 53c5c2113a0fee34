//! Tests of the path rewrite: a table copied under another root, its original deleted.

use std::collections::HashMap;
use std::path::Path;

use super::rewrite_paths;
use crate::dr::rebuild::warehouse_base;
use crate::dr::test_support::{copy_dir, register, row_count, source_catalog, table_with};
use crate::ids::SeededIds;
use crate::table::live_data_files;

#[tokio::test]
async fn a_copy_under_another_root_reads_after_the_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(51);
    let handle = source_catalog(dir.path()).await;
    let table = table_with(&handle, "shop.orders", &ids, 1..=2).await;
    let rows = row_count(&table).await.unwrap();
    assert_eq!(rows, 20);
    let metadata_name = table
        .metadata_location()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();

    // Copy the table folder to another root and delete the original.
    let old_root = dir.path().join("src/warehouse");
    let new_root = dir.path().join("copy/warehouse");
    copy_dir(&old_root.join("shop/orders"), &new_root.join("shop/orders"));
    std::fs::remove_dir_all(old_root.join("shop/orders")).unwrap();
    let from = warehouse_base(&old_root.display().to_string()).unwrap();
    let to = warehouse_base(&new_root.display().to_string()).unwrap();
    assert!(
        table.metadata().location().starts_with(&from),
        "{}",
        table.metadata().location()
    );
    let copied = format!("{to}/shop/orders/metadata/{metadata_name}");

    // Before the rewrite the copy points at the deleted original.
    let before = register(&dir.path().join("before"), &copied).await;
    let err = row_count(&before).await.unwrap_err().to_string();
    // The original's manifest list is gone; the copy's metadata still names it.
    assert!(
        err.contains("src/warehouse/shop/orders/metadata/snap-") && err.contains("NotFound"),
        "{err}"
    );

    let report = rewrite_paths(&copied, &from, &to, &HashMap::new()).await.unwrap();
    assert_eq!(report.format_version, 1);
    assert_eq!(report.old_metadata, copied);
    assert!(report.new_metadata.starts_with(&format!("{to}/shop/orders/metadata/")));
    assert!(
        report.new_metadata.ends_with("-rewritten.metadata.json"),
        "{}",
        report.new_metadata
    );
    assert_eq!(report.manifest_lists_rewritten, 2);
    // One manifest per commit, each listed by its own snapshot only.
    assert_eq!(report.manifests_rewritten, 2);
    assert!(report.paths_rewritten > 0);
    assert!(!report.copy_plan.is_empty());
    for (old, new) in &report.copy_plan {
        assert!(old.starts_with(&from) && new.starts_with(&to), "{old} -> {new}");
        assert!(Path::new(new.strip_prefix("file://").unwrap()).exists(), "{new}");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["format_version"], 1);

    let after = register(&dir.path().join("after"), &report.new_metadata).await;
    assert_eq!(after.metadata().location(), format!("{to}/shop/orders"));
    assert_eq!(after.metadata().snapshots().count(), 2);
    assert_eq!(row_count(&after).await.unwrap(), rows);
    for file in live_data_files(&after).await.unwrap() {
        assert!(file.file_path().starts_with(&to), "{}", file.file_path());
    }
    // The first snapshot reads too: its own manifest list was rewritten.
    let first = after
        .metadata()
        .snapshots()
        .find(|s| s.parent_snapshot_id().is_none())
        .unwrap();
    assert!(first.manifest_list().starts_with(&to));
    let list = after.manifest_list_reader(first).load().await.unwrap();
    assert_eq!(list.entries().len(), 1);
    assert!(list.entries()[0].manifest_path.starts_with(&to));

    // Nothing was overwritten: a second rewrite writes new names.
    let again = rewrite_paths(&copied, &from, &to, &HashMap::new()).await.unwrap();
    assert_ne!(again.new_metadata, report.new_metadata);

    // A plain absolute path names the same file (it used to fail: "relative URL without a base").
    let plain = copied.strip_prefix("file://").unwrap();
    let third = rewrite_paths(plain, &from, &to, &HashMap::new()).await.unwrap();
    assert_eq!(third.old_metadata, copied);
    assert!(third.new_metadata.starts_with(&format!("{to}/shop/orders/metadata/")));
    let reread = register(&dir.path().join("plain"), &third.new_metadata).await;
    assert_eq!(row_count(&reread).await.unwrap(), rows);
}
