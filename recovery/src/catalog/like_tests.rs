//! `table::create_table_like` on every backend: a table made like a source whose schema has a
//! gap in its field ids (a column another writer dropped) keeps the source's field ids and
//! `last-column-id`, and, where the catalog swaps metadata pointers (SQLite, S3 Tables), its
//! schema id too. The REST and S3 Tables cases run on the sandbox's servers (see
//! `server_tests`).

use std::collections::HashMap;

use iceberg::spec::{NestedField, PrimitiveType, Schema, TableMetadata, Type};
use iceberg::{TableRequirement, TableUpdate};
use tidemark_journal::spec::CompiledSpec;

use super::CatalogHandle;
use super::contract::CommitRequest;
use super::server_tests::{rest_handle, rest_props, s3tables_handle, s3tables_props, unique_ns};
use crate::table;
use crate::table::test_support::catalog_in;

/// A SQLite table of the orders spec that another writer changed: `note` (id 10) added, then a
/// schema with `extra` (id 11) and without `note` made current (schema id 2).
async fn gapped_source(dir: &std::path::Path) -> TableMetadata {
    let handle = catalog_in(dir).await;
    let t = table::create_or_load_table(&handle, "shop.orders", &CompiledSpec::orders())
        .await
        .unwrap();
    let base = t.metadata().current_schema().as_ref().clone();
    let string = || Type::Primitive(PrimitiveType::String);
    let with = |id: i32, extra: NestedField| -> Schema {
        base.clone()
            .into_builder()
            .with_schema_id(id)
            .with_fields([extra.into()])
            .build()
            .unwrap()
    };
    let request = CommitRequest {
        requirements: vec![TableRequirement::UuidMatch {
            uuid: t.metadata().uuid(),
        }],
        updates: vec![
            TableUpdate::AddSchema {
                schema: with(1, NestedField::optional(10, "note", string())),
            },
            TableUpdate::AddSchema {
                schema: with(2, NestedField::optional(11, "extra", string())),
            },
            TableUpdate::SetCurrentSchema { schema_id: -1 },
        ],
    };
    let t = handle.commit(&t, request).await.unwrap();
    let meta = t.metadata().clone();
    assert_eq!((meta.current_schema_id(), meta.last_column_id()), (2, 11));
    meta
}

fn field_ids(schema: &Schema) -> Vec<(i32, String)> {
    schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| (f.id, f.name.clone()))
        .collect()
}

/// Makes `ns.copy` like `source` in `handle`; checks the ids on the table as the catalog loads it.
async fn check_like(handle: &CatalogHandle, ns: &str, source: &TableMetadata, schema_id_kept: bool) {
    let name = format!("{ns}.copy");
    let schema = source.current_schema();
    table::create_table_like(handle, &name, source, schema, HashMap::new())
        .await
        .unwrap();
    let loaded = table::load_table(handle, &name).await.unwrap();
    let meta = loaded.metadata();
    assert_eq!(field_ids(meta.current_schema()), field_ids(schema), "{name}");
    assert_eq!(meta.last_column_id(), 11, "{name}");
    let order = |m: &TableMetadata| -> Vec<i32> { m.default_sort_order().fields.iter().map(|f| f.source_id).collect() };
    assert_eq!(order(meta), order(source), "{name}");
    assert_eq!(
        meta.current_schema().identifier_field_ids().collect::<Vec<_>>(),
        vec![1]
    );
    if schema_id_kept {
        assert_eq!(meta.current_schema_id(), 2, "{name}");
        assert_eq!(meta.default_sort_order().order_id, source.default_sort_order().order_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_like_a_source_with_a_field_id_gap_keeps_its_ids_in_every_catalog() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("source")).unwrap();
    let source = gapped_source(&dir.path().join("source")).await;
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    let sqlite = catalog_in(&dir.path().join("target")).await;
    check_like(&sqlite, "shop", &source, true).await;
    if let Some(props) = s3tables_props() {
        check_like(&s3tables_handle(&props).await, &unique_ns("like"), &source, true).await;
    }
    if let Some(props) = rest_props() {
        check_like(&rest_handle(&props).await, &unique_ns("like"), &source, false).await;
    }
}
