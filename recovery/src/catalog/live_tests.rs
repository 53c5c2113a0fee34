//! The REST and S3 Tables backends on their real servers, through the contract alone: a table
//! created, an (empty) snapshot committed as requirements + updates, a stale commit refused as
//! a conflict, and the commit found again by [`resolve_unknown`]'s reload. The full conformance
//! suite runs on both in `server_tests.rs`.
//!
//! Servers and their definitions: those of `server_tests.rs` (`bash sandbox/test.sh`;
//! TIDEMARK_SKIP_SEAWEEDFS=1 / TIDEMARK_SKIP_S3TABLES=1 skip them).

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    ManifestListWriter, NestedField, Operation, PrimitiveType, Schema, Snapshot, SnapshotReference, SnapshotRetention,
    Summary, Type,
};
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableCreation, TableRequirement, TableUpdate};

use super::contract::{CatalogBackend, CommitError, CommitRequest, resolve_unknown};
use super::server_tests::{rest_props, s3tables_props, unique_ns};
use super::{rest, s3tables};
use crate::ids::{Ids, RandomIds};

/// A snapshot commit on top of `table`: a snapshot with an empty manifest list, set as main.
async fn snapshot_commit(table: &Table) -> CommitRequest {
    let meta = table.metadata();
    let id = (RandomIds.uuid().as_u128() as i64).abs();
    let seq = meta.next_sequence_number();
    let list = format!("{}/metadata/snap-{id}-1-{}.avro", meta.location(), RandomIds.uuid());
    let out = table.file_io().new_output(&list).unwrap().writer().await.unwrap();
    ManifestListWriter::v2(out, id, meta.current_snapshot_id(), seq)
        .close()
        .await
        .unwrap();
    let snapshot = Snapshot::builder()
        .with_snapshot_id(id)
        .with_parent_snapshot_id(meta.current_snapshot_id())
        .with_sequence_number(seq)
        .with_timestamp_ms(meta.last_updated_ms() + 1)
        .with_manifest_list(list)
        .with_summary(Summary {
            operation: Operation::Append,
            additional_properties: HashMap::new(),
        })
        .with_schema_id(meta.current_schema_id())
        .build();
    CommitRequest {
        requirements: vec![
            TableRequirement::UuidMatch { uuid: meta.uuid() },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: meta.current_snapshot_id(),
            },
        ],
        updates: vec![
            TableUpdate::AddSnapshot { snapshot },
            TableUpdate::SetSnapshotRef {
                ref_name: "main".into(),
                reference: SnapshotReference::new(id, SnapshotRetention::branch(None, None, None)),
            },
        ],
    }
}

async fn commit_story(backend: Arc<dyn CatalogBackend>, purpose: &str) {
    let catalog = backend.iceberg();
    let ns = NamespaceIdent::new(unique_ns(purpose));
    catalog.create_namespace(&ns, HashMap::new()).await.unwrap();
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
        ])
        .build()
        .unwrap();
    let creation = TableCreation::builder().name("t".into()).schema(schema).build();
    let t0 = catalog.create_table(&ns, creation).await.unwrap();
    let ident = t0.identifier().clone();
    assert_eq!(
        backend.pointer(&ident).await.unwrap().as_deref(),
        t0.metadata_location()
    );

    let first = snapshot_commit(&t0).await;
    let t1 = backend.commit(&t0, first.clone()).await.unwrap();
    let reloaded = catalog.load_table(&ident).await.unwrap();
    assert_eq!(reloaded.metadata_location(), t1.metadata_location());
    assert_eq!(
        reloaded.metadata().current_snapshot_id(),
        t1.metadata().current_snapshot_id()
    );
    assert_eq!(
        backend.pointer(&ident).await.unwrap().as_deref(),
        t1.metadata_location()
    );

    // Based on t0 again: main moved, so it is a conflict, and nothing changes.
    let stale = snapshot_commit(&t0).await;
    let err = backend.commit(&t0, stale.clone()).await.unwrap_err();
    assert!(matches!(err, CommitError::Conflict { .. }), "{err}");
    assert_eq!(
        backend.pointer(&ident).await.unwrap().as_deref(),
        t1.metadata_location()
    );

    // A lost reply: found by reloading (the first commit), or reported not applied (the stale one).
    let found = resolve_unknown(backend.as_ref(), &t0, &first, "test".into())
        .await
        .unwrap();
    assert_eq!(found.metadata_location(), t1.metadata_location());
    let err = resolve_unknown(backend.as_ref(), &t0, &stale, "test".into())
        .await
        .unwrap_err();
    assert!(matches!(err, CommitError::NotApplied { .. }), "{err}");

    // A second snapshot on top of the first.
    let t2 = backend.commit(&t1, snapshot_commit(&t1).await).await.unwrap();
    assert_eq!(t2.metadata().snapshots().count(), 2);
}

#[tokio::test]
async fn rest_commits_on_seaweedfs() {
    let Some(props) = rest_props() else { return };
    let backend = rest::open("sw", &props, &HashMap::new()).await.unwrap();
    let shown = format!("{backend:?} {:?}", backend.reference());
    assert!(!shown.contains(&props["credential"]), "{shown}");
    commit_story(backend, "live").await;
}

#[tokio::test]
async fn s3tables_commits_on_moto() {
    let Some(props) = s3tables_props() else { return };
    let backend = s3tables::open("st", &props).await.unwrap();
    commit_story(backend, "live").await;
}
