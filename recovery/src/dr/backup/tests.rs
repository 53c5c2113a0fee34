//! Tests of catalog backup and restore: idempotent content-derived ids, a restore over a moved
//! catalog refused without `allow_replace`, a missing object refusing the whole restore.

use std::path::Path;

use iceberg::TableIdent;
use tidemark_journal::store::{ObjectStore, PutMode, local::LocalStore};

use super::{BackupError, Expected, RestoreAction, backup, load, restore, state};
use crate::catalog::{CatalogConfig, CatalogHandle, open_catalog};
use crate::dr::test_support::{append, row_count, table_with, tag_and_branch};
use crate::ids::SeededIds;
use crate::table::test_support::catalog_in;
use crate::table::{live_data_files, load_table, parse_ident};

async fn pointer(handle: &CatalogHandle, table: &str) -> Option<String> {
    let ident: TableIdent = parse_ident(table).unwrap();
    handle.metadata_pointer(&ident).await.unwrap()
}

/// A second catalog database on the same warehouse (the catalog that was lost and recreated).
async fn fresh_catalog(dir: &Path, handle: &CatalogHandle) -> CatalogHandle {
    open_catalog(&CatalogConfig {
        uri: dir.join("catalog-2.db").display().to_string(),
        warehouse: handle.warehouse().to_string(),
        name: "tidemark".into(),
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn backup_is_idempotent_and_restore_refuses_a_moved_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(71);
    let handle = catalog_in(dir.path()).await;
    let mut orders = table_with(&handle, "shop.orders", &ids, 1..=2).await;
    orders = tag_and_branch(&handle, &orders, "eod", "audit").await;
    table_with(&handle, "shop.customers", &ids, 9..=9).await;
    let store = LocalStore::create(dir.path().join("backups")).unwrap();

    let first = backup(&handle, None, &store).await.unwrap();
    assert!(!first.already_stored);
    assert_eq!(first.tables, 2);
    assert!(first.id.starts_with("sha256:"), "{}", first.id);
    let again = backup(&handle, None, &store).await.unwrap();
    assert_eq!(again.id, first.id);
    assert!(again.already_stored);
    let b = load(&store, &first.id).await.unwrap();
    assert_eq!(b.tables.len(), 2);
    assert_eq!(b.tables[1].table, "shop.orders");
    assert_eq!(b.tables[1].metadata_location, orders.metadata_location().unwrap());
    // manifest list + 2 manifests + 2 data files (one manifest per append).
    assert!(
        b.tables[1].watermark.referenced_objects >= 3,
        "{:?}",
        b.tables[1].watermark
    );
    let before = state(&handle, &["shop.customers".into(), "shop.orders".into()])
        .await
        .unwrap();
    assert!(before.id.starts_with("sha256:"));

    // The catalog moves: a bad write to orders.
    orders = append(&handle, &orders, &ids, 3).await;
    let moved_to = orders.metadata_location().unwrap().to_string();
    let r = restore(&handle, &b, &Expected::State(before.clone()), false)
        .await
        .unwrap();
    assert!(!r.applied);
    assert!(r.refused.as_deref().unwrap().contains("1 tables moved"), "{r:?}");
    assert_ne!(r.current_state, before.id);
    let o = r.tables.iter().find(|t| t.table == "shop.orders").unwrap();
    assert_eq!(o.action, RestoreAction::Conflict);
    assert_eq!(o.current.as_deref(), Some(moved_to.as_str()));
    assert!(o.problem.as_deref().unwrap().contains(&moved_to));
    let c = r.tables.iter().find(|t| t.table == "shop.customers").unwrap();
    assert_eq!(c.action, RestoreAction::Unchanged);
    assert_eq!(
        pointer(&handle, "shop.orders").await.as_deref(),
        Some(moved_to.as_str())
    );

    // With --allow-replace, the backup's pointer comes back.
    let r = restore(&handle, &b, &Expected::State(before.clone()), true)
        .await
        .unwrap();
    assert!(r.applied && r.refused.is_none(), "{r:?}");
    let o = r.tables.iter().find(|t| t.table == "shop.orders").unwrap();
    assert_eq!(o.action, RestoreAction::Replace);
    assert_eq!(
        pointer(&handle, "shop.orders").await.as_deref(),
        Some(b.tables[1].metadata_location.as_str())
    );
    let restored = load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(row_count(&restored).await.unwrap(), 20);
    assert!(restored.metadata().snapshot_for_ref("eod").is_some());
    // A second restore changes nothing.
    let now = state(&handle, &["shop.customers".into(), "shop.orders".into()])
        .await
        .unwrap();
    let r = restore(&handle, &b, &Expected::State(now), false).await.unwrap();
    assert!(r.applied);
    assert!(r.tables.iter().all(|t| t.action == RestoreAction::Unchanged), "{r:?}");

    // A changed backup file is refused by its digest.
    let key = super::CatalogBackup::key(&b.id);
    let text = String::from_utf8(store.get(&key, None).await.unwrap().body.to_vec()).unwrap();
    store
        .put(
            &key,
            text.replace("shop.customers", "shop.customerz").into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let e = load(&store, &b.id).await.unwrap_err();
    assert!(matches!(e, BackupError::Invalid { .. }), "{e}");
    assert!(e.to_string().contains("changed"), "{e}");
}

#[tokio::test]
async fn restore_into_a_new_catalog_verifies_every_object_before_changing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(72);
    let handle = catalog_in(dir.path()).await;
    let orders = table_with(&handle, "shop.orders", &ids, 1..=2).await;
    let customers = table_with(&handle, "shop.customers", &ids, 9..=9).await;
    let store = LocalStore::create(dir.path().join("backups")).unwrap();
    let id = backup(&handle, None, &store).await.unwrap().id;
    let b = load(&store, &id).await.unwrap();

    // The catalog is lost; a data file of one table too.
    let fresh = fresh_catalog(dir.path(), &handle).await;
    let lost = live_data_files(&customers).await.unwrap()[0].file_path().to_string();
    let lost_path = lost.strip_prefix("file://").unwrap();
    let kept = std::fs::read(lost_path).unwrap();
    std::fs::remove_file(lost_path).unwrap();
    let r = restore(&fresh, &b, &Expected::Empty, false).await.unwrap();
    assert!(!r.applied, "{r:?}");
    assert!(r.refused.as_deref().unwrap().contains("nothing was changed"));
    let c = r.tables.iter().find(|t| t.table == "shop.customers").unwrap();
    assert_eq!(c.action, RestoreAction::Conflict);
    assert_eq!(c.missing.len(), 1);
    assert_eq!(c.missing[0].path, lost);
    assert!(fresh.pointers(None).await.unwrap().is_empty(), "nothing registered");

    // The file comes back: the restore registers both tables.
    std::fs::write(lost_path, kept).unwrap();
    let r = restore(&fresh, &b, &Expected::Empty, false).await.unwrap();
    assert!(r.applied, "{r:?}");
    assert!(r.tables.iter().all(|t| t.action == RestoreAction::Register));
    assert_eq!(
        pointer(&fresh, "shop.orders").await.as_deref(),
        orders.metadata_location()
    );
    assert_eq!(
        row_count(&load_table(&fresh, "shop.orders").await.unwrap())
            .await
            .unwrap(),
        20
    );
    // Run again (as after a crash half-way): tables at the backup's pointer are left as they are.
    let again = restore(&fresh, &b, &Expected::Empty, false).await.unwrap();
    assert!(again.applied, "{again:?}");
    assert!(again.tables.iter().all(|t| t.action == RestoreAction::Unchanged));
}

#[tokio::test]
async fn restore_after_a_byte_identical_copy_of_the_warehouse_goes_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(73);
    let handle = catalog_in(dir.path()).await;
    let orders = table_with(&handle, "shop.orders", &ids, 1..=2).await;
    let store = LocalStore::create(dir.path().join("backups")).unwrap();
    let id = backup(&handle, None, &store).await.unwrap().id;
    let b = load(&store, &id).await.unwrap();

    // The warehouse comes back from backup media: every file a new inode and mtime, same bytes.
    let meta = orders
        .metadata_location()
        .unwrap()
        .strip_prefix("file://")
        .unwrap()
        .to_string();
    let bytes = std::fs::read(&meta).unwrap();
    std::fs::remove_file(&meta).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    std::fs::write(&meta, &bytes).unwrap();
    let fresh = fresh_catalog(dir.path(), &handle).await;
    let r = restore(&fresh, &b, &Expected::Empty, false).await.unwrap();
    assert!(r.applied, "{r:?}");
    assert_eq!(
        pointer(&fresh, "shop.orders").await.as_deref(),
        orders.metadata_location()
    );

    // A metadata file whose bytes did change is still refused.
    std::fs::create_dir_all(dir.path().join("x")).unwrap();
    let other = fresh_catalog(&dir.path().join("x"), &handle).await;
    let mut changed = bytes.clone();
    changed.push(b'\n');
    std::fs::write(&meta, &changed).unwrap();
    let r = restore(&other, &b, &Expected::Empty, false).await.unwrap();
    assert!(!r.applied, "{r:?}");
    let o = r.tables.iter().find(|t| t.table == "shop.orders").unwrap();
    assert!(
        o.problem.as_deref().unwrap().contains("changed since the backup"),
        "{o:?}"
    );
}

/// A backup whose write lost its reply (or met its own file as a conflict on a retry) is stored
/// once and reported as written, not refused; the restore from it works.
#[tokio::test]
async fn backup_with_a_lost_reply_is_its_own() {
    use std::sync::Arc;
    use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(72);
    let handle = catalog_in(dir.path()).await;
    table_with(&handle, "shop.orders", &ids, 1..=2).await;
    let inner: Arc<dyn ObjectStore> = Arc::new(LocalStore::create(dir.path().join("backups")).unwrap());
    for fault in [Fault::LostReply, Fault::LostReplyRetried] {
        let store = FaultyStore::new(
            inner.clone(),
            5,
            vec![Rule::new(Op::Put, fault).mode(ModeFilter::Create).times(1)],
        );
        let out = backup(&handle, None, &store).await.unwrap();
        assert_eq!(store.injected(), 1, "{fault:?}");
        let versions = inner.list_versions("catalog-backups/").await.unwrap();
        assert_eq!(versions.len(), 1, "{fault:?}: one backup file, written once");
        assert_eq!(load(&store, &out.id).await.unwrap().tables.len(), 1);
    }
}

#[path = "restore_faults_tests.rs"]
mod faults;
