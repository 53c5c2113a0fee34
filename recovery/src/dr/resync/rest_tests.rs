//! `replica resync` of a REST demoted side on SeaweedFS's Iceberg REST catalog
//! (sandbox/seaweedfs.sh; skipped with TIDEMARK_SKIP_SEAWEEDFS=1): the table is renamed aside with
//! every file and created again at the common snapshot, so that the new primary's next snapshot
//! (sequence number one above the common one) is accepted; the dry run changes nothing; a run
//! stopped after the rename (restored from the new primary) or after the create (filled from the
//! aside) is finished by the next.
//!
//! The new primary is a SQLite catalog registering the REST table's metadata file at the common
//! version (same snapshot ids, as a follower's DR table has). The stopped runs are made by hand
//! here (the state a `TIDEMARK_FAILPOINT` stop leaves, which exits the process);
//! `replica_catalogs::warm_replica_into_a_rest_catalog` stops the real command there.

use std::collections::HashMap;

use iceberg::TableUpdate;
use iceberg::spec::Snapshot;
use iceberg::table::Table;

use super::*;
use crate::catalog::server_tests::{rest_handle, rest_props, unique_ns};
use crate::catalog::{CatalogConfig, CatalogHandle, CommitRequest, open_catalog_with_props};
use crate::dr::follow_publish::{SOURCE_UUID_PROP, based_on, main_branch};
use crate::dr::resync::{ResyncAction, ResyncReport, resync};
use crate::dr::test_support::{append, row_count, table_with};
use crate::ids::SeededIds;

/// A REST table `ns.name` with two commits the new primary holds and two more it does not (the
/// demoted head), and the new primary (a SQLite catalog in `dir`).
struct Diverged {
    rest: CatalogHandle,
    primary: CatalogHandle,
    name: String,
    common: i64,
    common_seq: i64,
    head: Table,
}

async fn diverged(dir: &std::path::Path, props: &HashMap<String, String>, ns: &str, name: &str, seed: u64) -> Diverged {
    let rest = rest_handle(props).await;
    let name = format!("{ns}.{name}");
    let ids = SeededIds::new(seed);
    let t = table_with(&rest, &name, &ids, 1..=2).await;
    let common = t.metadata().current_snapshot_id().unwrap();
    let common_seq = t.metadata().snapshot_by_id(common).unwrap().sequence_number();
    let s3: HashMap<String, String> = props
        .iter()
        .filter(|(k, _)| k.starts_with("s3."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let primary = open_catalog_with_props(
        &CatalogConfig {
            uri: dir.join("primary.db").display().to_string(),
            warehouse: dir.join("wh").display().to_string(),
            name: "tidemark".into(),
        },
        s3,
    )
    .await
    .unwrap();
    let ident = parse_ident(&name).unwrap();
    crate::dr::follow::ensure_namespace(&primary, &ident).await.unwrap();
    primary
        .register_table(&ident, t.metadata_location().unwrap())
        .await
        .unwrap();
    let mut head = t;
    for n in 3..=4 {
        head = append(&rest, &head, &ids, n).await;
    }
    Diverged {
        rest,
        primary,
        name,
        common,
        common_seq,
        head,
    }
}

impl Diverged {
    /// The uuid of the primary's table.
    async fn primary_uuid(&self) -> String {
        let t = load_table(&self.primary, &self.name).await.unwrap();
        t.metadata().uuid().to_string()
    }
}

fn by<'r>(r: &'r ResyncReport, name: &str) -> &'r crate::dr::resync::ResyncTable {
    r.tables
        .iter()
        .find(|t| t.table == name)
        .unwrap_or_else(|| panic!("no {name} in {r:?}"))
}

async fn exists(rest: &CatalogHandle, name: &str) -> bool {
    rest.metadata_pointer(&parse_ident(name).unwrap())
        .await
        .unwrap()
        .is_some()
}

/// The checks on a finished re-create: the table at the common snapshot with the common
/// sequence number as its last, marked; the aside at the old head with every kept file; the new
/// primary's next snapshot accepted.
/// `from`: the aside named by the table created again (`None`: restored from the new primary).
async fn check_recreated(d: &Diverged, aside: &str, from: Option<&str>, kept: &[crate::dr::resync::KeptFile]) {
    let again = load_table(&d.rest, &d.name).await.unwrap();
    let meta = again.metadata();
    assert_eq!(meta.current_snapshot_id(), Some(d.common));
    assert_eq!(
        meta.last_sequence_number(),
        d.common_seq,
        "the walked-over snapshots are not in it"
    );
    assert_eq!(meta.snapshots().count(), 2);
    assert_ne!(meta.uuid(), d.head.metadata().uuid(), "a new table");
    let primary_uuid = d.primary_uuid().await;
    assert_eq!(meta.properties().get(SOURCE_UUID_PROP), Some(&primary_uuid));
    assert_eq!(meta.properties().get(RECREATED_FROM_PROP).map(String::as_str), from);
    assert_eq!(row_count(&again).await.unwrap(), 20);

    let kept_aside = load_table(&d.rest, aside).await.unwrap();
    let head = d.head.metadata();
    assert_eq!(kept_aside.metadata().uuid(), head.uuid());
    assert_eq!(kept_aside.metadata().current_snapshot_id(), head.current_snapshot_id());
    assert_eq!(
        kept_aside.metadata_location(),
        d.head.metadata_location(),
        "the aside is as it was"
    );
    assert_eq!(row_count(&kept_aside).await.unwrap(), 40);
    assert!(kept.iter().any(|f| f.what == "data file") && kept.iter().any(|f| f.what == "manifest list"));
    for f in kept {
        assert!(
            kept_aside.file_io().exists(&f.path).await.unwrap(),
            "{} was deleted",
            f.path
        );
    }

    // The new primary's next snapshot, as the follower adds it (sequence number one above the
    // common snapshot's), is accepted: the walked-back table refused it.
    let like = d
        .head
        .metadata()
        .snapshot_by_id(d.head.metadata().current_snapshot_id().unwrap())
        .unwrap();
    let next = Snapshot::builder()
        .with_snapshot_id(7_313_131_313)
        .with_parent_snapshot_id(Some(d.common))
        .with_sequence_number(d.common_seq + 1)
        .with_timestamp_ms(like.timestamp_ms())
        .with_manifest_list(like.manifest_list())
        .with_summary(like.summary().clone())
        .build();
    let request = CommitRequest {
        requirements: based_on(&again),
        updates: vec![
            TableUpdate::AddSnapshot { snapshot: next },
            TableUpdate::SetSnapshotRef {
                ref_name: "main".into(),
                reference: main_branch(7_313_131_313),
            },
        ],
    };
    let after = d.rest.commit(&again, request).await.unwrap();
    assert_eq!(after.metadata().current_snapshot_id(), Some(7_313_131_313));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rest_table_is_renamed_aside_and_created_again_and_a_stopped_run_is_finished() {
    let Some(mut props) = rest_props() else { return };
    // What `open_catalog` adds for a local endpoint; the resync reads the files through it.
    props.insert("s3.path-style-access".into(), "true".into());
    let dir = tempfile::tempdir().unwrap();
    let ns = unique_ns("resync_rest");
    let d = diverged(dir.path(), &props, &ns, "orders", 1313).await;
    let aside = aside_name(&d.name, &d.head.metadata().uuid());

    // The plan names the aside and the snapshot, and changes nothing.
    let plan = resync(&d.rest, &d.primary, Some(&ns), None, true).await.unwrap();
    let t = by(&plan, &d.name);
    assert_eq!(t.action, ResyncAction::WalkedBack, "{t:?}");
    assert_eq!(t.kept_aside.as_ref().map(|a| a.table.as_str()), Some(aside.as_str()));
    assert_eq!(t.walked_back_to_snapshot, Some(d.common));
    assert_eq!(t.diverged_snapshots.len(), 2, "{t:?}");
    assert!(
        t.reason.contains(&aside) && t.reason.contains("created again"),
        "{}",
        t.reason
    );
    let kept = t.kept_files.clone();
    assert_eq!(
        d.rest
            .metadata_pointer(&parse_ident(&d.name).unwrap())
            .await
            .unwrap()
            .as_deref(),
        d.head.metadata_location()
    );
    assert!(!exists(&d.rest, &aside).await, "the dry run renamed nothing");

    let done = resync(&d.rest, &d.primary, Some(&ns), None, false).await.unwrap();
    let t = by(&done, &d.name);
    assert_eq!(t.action, ResyncAction::WalkedBack, "{t:?}");
    assert_eq!(t.kept_files, kept);
    assert_eq!(
        t.kept_aside.as_ref().map(|a| a.location.as_str()),
        Some(d.head.metadata().location())
    );
    // Run again: in step, and the aside is kept.
    let again = resync(&d.rest, &d.primary, Some(&ns), None, false).await.unwrap();
    assert_eq!(by(&again, &d.name).action, ResyncAction::InStep, "{again:?}");
    assert_eq!(by(&again, &aside).action, ResyncAction::KeptAside);
    check_recreated(&d, &aside, Some(&aside), &kept).await;

    // Stopped after the rename (`resync:after-rename`): the name is missing, the aside is there.
    // Finished as a table deleted only here: restored at the new primary's version, the aside and
    // what only it holds listed.
    let ns = unique_ns("resync_rest");
    let d = diverged(dir.path(), &props, &ns, "second", 1314).await;
    let aside = aside_name(&d.name, &d.head.metadata().uuid());
    let kept = by(
        &resync(&d.rest, &d.primary, Some(&ns), None, true).await.unwrap(),
        &d.name,
    )
    .kept_files
    .clone();
    d.rest
        .catalog()
        .rename_table(&parse_ident(&d.name).unwrap(), &parse_ident(&aside).unwrap())
        .await
        .unwrap();
    let plan = resync(&d.rest, &d.primary, Some(&ns), None, true).await.unwrap();
    assert_eq!(by(&plan, &d.name).action, ResyncAction::Restored, "{plan:?}");
    assert_eq!(by(&plan, &aside).action, ResyncAction::KeptAside, "{plan:?}");
    assert!(!exists(&d.rest, &d.name).await, "the dry run created nothing");
    let done = resync(&d.rest, &d.primary, Some(&ns), None, false).await.unwrap();
    let t = by(&done, &d.name);
    assert_eq!(t.action, ResyncAction::Restored, "{t:?}");
    assert!(t.reason.contains(&aside), "{}", t.reason);
    assert_eq!(t.kept_aside.as_ref().map(|a| a.table.as_str()), Some(aside.as_str()));
    assert_eq!(t.kept_files, kept);
    assert_eq!(t.walked_back_to_snapshot, Some(d.common));
    check_recreated(&d, &aside, None, &kept).await;

    // Stopped after the create (`resync:after-create`): an empty table marked with the aside,
    // filled from it by the next run.
    let ns = unique_ns("resync_rest");
    let d = diverged(dir.path(), &props, &ns, "third", 1315).await;
    let aside = aside_name(&d.name, &d.head.metadata().uuid());
    d.rest
        .catalog()
        .rename_table(&parse_ident(&d.name).unwrap(), &parse_ident(&aside).unwrap())
        .await
        .unwrap();
    let primary_uuid = d.primary_uuid().await;
    let marker = HashMap::from([
        (SOURCE_UUID_PROP.to_string(), primary_uuid),
        (RECREATED_FROM_PROP.to_string(), aside.clone()),
    ]);
    let meta = d.head.metadata();
    create_table_like(&d.rest, &d.name, meta, meta.current_schema(), marker)
        .await
        .unwrap();
    let done = resync(&d.rest, &d.primary, Some(&ns), None, false).await.unwrap();
    let t = by(&done, &d.name);
    assert_eq!(t.action, ResyncAction::WalkedBack, "{t:?}");
    assert!(t.reason.contains("stopped before filling"), "{}", t.reason);
    let kept = t.kept_files.clone();
    check_recreated(&d, &aside, Some(&aside), &kept).await;
}

#[test]
fn aside_names() {
    let uuid = uuid::Uuid::parse_str("1a2b3c4d-0000-4000-8000-000000000000").unwrap();
    assert_eq!(aside_name("shop.orders", &uuid), "shop.orders__walked_1a2b3c4d");
    assert_eq!(aside_of("shop.orders__walked_1a2b3c4d"), Some("shop.orders"));
    assert_eq!(aside_of("shop.orders__walked_1a2b3c4"), None);
    assert_eq!(aside_of("shop.orders__walked_1A2B3C4D"), None);
    assert_eq!(aside_of("shop.__walked_1a2b3c4d"), None);
    assert_eq!(aside_of("shop.orders"), None);
}
