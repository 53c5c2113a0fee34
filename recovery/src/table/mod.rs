//! tidemark's Iceberg tables: creating or loading a spec's table ([`create_or_load_table`]), its
//! schema ([`schema`]), and the copy-on-write commits that iceberg-rust 0.10.1 lacks
//! ([`commit`]).
//!
//! Tables are format version 2, unpartitioned, sorted by the key column, Parquet. A table name is
//! `namespace.name` (a dotted namespace is allowed: `a.b.name`).
//!
//! The children: [`error`] (what table and catalog work fails with, [`TableError`]; below every
//! other module of `table` and `catalog`), [`refused`] (credentials the store refused), [`load`]
//! (a table named and loaded), [`schema`] (the spec's columns in Iceberg), [`like`] (the ids of a
//! table made like another), [`files`] (the files of a snapshot), [`deletes`] (other writers'
//! deletes, applied to every Parquet read), [`read`] (a table's live rows, pruned and chunked by
//! key), [`mor`] (merge-on-read: rows located, position deletes written), [`key_index`],
//! [`commit`] (the commits iceberg-rust lacks), [`avro_codec`] (manifests re-encoded), [`source`]
//! (a snapshot read from its metadata file, without a catalog).

pub mod avro_codec;
pub mod commit;
pub mod deletes;
#[cfg(test)]
mod deletes_tests;
pub mod error;
pub mod files;
pub mod key_index;
mod like;
pub mod load;
pub mod mor;
pub mod read;
pub mod refused;
pub mod schema;
pub mod source;

use std::collections::HashMap;

use arrow_schema::SchemaRef;
use iceberg::spec::{FormatVersion, NullOrder, SortDirection, SortField, SortOrder, Transform};
use iceberg::table::Table;
use iceberg::{ErrorKind, NamespaceIdent, TableCreation, TableIdent};
use tidemark_journal::spec::CompiledSpec;

use crate::catalog::CatalogHandle;

pub use commit::{
    CommitStamp, check_supported, commit_overwrite, commit_properties, commit_refs, commit_row_delta, live_data_files,
    write_data_file,
};
pub use error::TableError;
pub(crate) use error::{from_iceberg, iceberg_err};
pub use load::{load_table, parse_ident};
pub use schema::{Renames, check_schema, check_schema_in, iceberg_schema};

/// Loads the table `ident` and checks its schema against `spec`, or creates it (and its
/// namespace) when it does not exist.
pub async fn create_or_load_table(
    handle: &CatalogHandle,
    ident: &str,
    spec: &CompiledSpec,
) -> Result<Table, TableError> {
    let id = parse_ident(ident)?;
    let catalog = handle.catalog();
    let exists = catalog
        .table_exists(&id)
        .await
        .map_err(iceberg_err(format!("look up table {ident}")))?;
    if !exists {
        match create_table(handle, &id, spec, HashMap::new()).await {
            Ok(table) => return Ok(table),
            // Another process created it between our check and our insert: use theirs.
            Err(TableError::Iceberg { source, .. }) if source.kind() == ErrorKind::TableAlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let table = load_table(handle, ident).await?;
    spec_arrow_schema(&table, spec).map_err(|e| match e {
        TableError::SchemaMismatch {
            column,
            expected,
            found,
            ..
        } => TableError::SchemaMismatch {
            table: ident.to_string(),
            column,
            expected,
            found,
        },
        other => other,
    })?;
    Ok(table)
}

/// Creates a new table from the spec with extra table properties (refused if it exists).
pub async fn create_table_with_properties(
    handle: &CatalogHandle,
    ident: &str,
    spec: &CompiledSpec,
    properties: HashMap<String, String>,
) -> Result<Table, TableError> {
    create_table(handle, &parse_ident(ident)?, spec, properties).await
}

async fn create_table(
    handle: &CatalogHandle,
    id: &TableIdent,
    spec: &CompiledSpec,
    mut properties: HashMap<String, String>,
) -> Result<Table, TableError> {
    let schema = iceberg_schema(spec);
    // Rewrites are copy-on-write per data file holding a touched key. Sorting by key keeps each
    // key's rows in a narrow range of files, so a batch of touched keys rewrites few files.
    let key_field = SortField::builder()
        .source_id(spec.key_index as i32 + 1)
        .transform(Transform::Identity)
        .direction(SortDirection::Ascending)
        .null_order(NullOrder::First)
        .build();
    let sort_order = SortOrder::builder()
        .with_order_id(1)
        .with_sort_field(key_field)
        .build(&schema)
        .map_err(iceberg_err("build the key sort order"))?;
    properties.insert("write.format.default".to_string(), "parquet".to_string());
    create_with(handle, id, schema, None, sort_order, properties).await
}

/// Creates a new table like the one whose metadata is `like`: its current schema (`schema`,
/// e.g. a snapshot's), default partition spec, default sort order and properties, with
/// `properties` added over them (refused if the table exists; `tidemark.*` keys of `like` are
/// not copied). The field ids, schema id, `last-column-id`, partition spec (its id and field ids)
/// and sort order (its id and source ids) are `like`'s exactly ([`like`]): a drop-in replacement,
/// even where another writer's dropped column left a gap in the ids.
pub async fn create_table_like(
    handle: &CatalogHandle,
    ident: &str,
    like: &iceberg::spec::TableMetadata,
    schema: &iceberg::spec::Schema,
    properties: HashMap<String, String>,
) -> Result<Table, TableError> {
    let mut props = like.properties().clone();
    // Reserved keys are refused by the catalog; tidemark's own bookkeeping (`tidemark.*`, e.g.
    // a recovery id) belongs to the table it was set on, not to a copy.
    props.retain(|k, _| {
        !iceberg::spec::TableProperties::RESERVED_PROPERTIES.contains(&k.as_str()) && !k.starts_with("tidemark.")
    });
    props.extend(properties);
    let spec = like.default_partition_spec().as_ref().clone().into_unbound();
    let order = like.default_sort_order().as_ref().clone();
    let created = create_with(handle, &parse_ident(ident)?, schema.clone(), Some(spec), order, props).await?;
    like::keep_ids(handle, created, like, schema).await
}

async fn create_with(
    handle: &CatalogHandle,
    id: &TableIdent,
    schema: iceberg::spec::Schema,
    partition_spec: Option<iceberg::spec::UnboundPartitionSpec>,
    sort_order: SortOrder,
    properties: HashMap<String, String>,
) -> Result<Table, TableError> {
    let catalog = handle.catalog();
    let ns = id.namespace();
    let ns_exists = catalog
        .namespace_exists(ns)
        .await
        .map_err(iceberg_err(format!("look up namespace {ns:?}")))?;
    if !ns_exists {
        create_namespace(handle, ns).await?;
    }
    let creation = TableCreation::builder()
        .name(id.name().to_string())
        .schema(schema)
        .partition_spec_opt(partition_spec)
        .sort_order(sort_order)
        .properties(properties)
        // "format-version" as a property is refused by iceberg-rust; the builder field is the way.
        .format_version(FormatVersion::V2)
        .build();
    let table = catalog
        .create_table(ns, creation)
        .await
        .map_err(iceberg_err(format!("create table {id}")))?;
    // iceberg-catalog-sql ignores a failed commit: the row it reported written is made sure of
    // (a full disk is named instead of a table that "does not exist" a step later).
    // Its first metadata file, which no row names then, is removed (or named as left behind).
    if let (Some(sql), Some(location)) = (handle.sql(), table.metadata_location())
        && let Err(e) = sql.ensure_table_row(id, location).await
    {
        return Err(match (table.file_io().delete(location).await, e) {
            (Err(_), TableError::CatalogWriteFailed { uri, action, cause }) => TableError::CatalogWriteFailed {
                uri,
                action: format!(
                    "{action} (its metadata file was left behind, referenced by nothing; delete it: {location})"
                ),
                cause,
            },
            (_, e) => e,
        });
    }
    Ok(table)
}

/// Creates the namespace `ns`; one that exists (made by another process meanwhile) is no
/// error. A SQL catalog's is written by tidemark ([`crate::catalog::sql::SqlBackend::create_namespace`]:
/// iceberg-catalog-sql ignores a failed commit, so a full disk went unreported).
pub async fn create_namespace(handle: &CatalogHandle, ns: &NamespaceIdent) -> Result<(), TableError> {
    if let Some(sql) = handle.sql() {
        return sql.create_namespace(ns).await;
    }
    match handle.catalog().create_namespace(ns, HashMap::new()).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NamespaceAlreadyExists => Ok(()),
        Err(e) => Err(iceberg_err(format!("create namespace {}", ns.join(".")))(e)),
    }
}

/// The table's Arrow schema with the Iceberg field ids in each field's metadata, which the
/// Parquet writer needs to map columns.
/// The table's Arrow schema under the journal's column names: a spec column another writer
/// renamed is named as the spec names it (same field id, see [`schema::Renames`]). Errors as
/// [`check_schema`] when the table does not hold the spec's columns.
pub fn spec_arrow_schema(table: &Table, spec: &CompiledSpec) -> Result<SchemaRef, TableError> {
    let meta = table.metadata();
    let renames = check_schema_in(spec, meta.current_schema(), meta.schemas_iter())?;
    Ok(renames.spec_view(&arrow_schema(table)?))
}

pub fn arrow_schema(table: &Table) -> Result<SchemaRef, TableError> {
    let schema = iceberg::arrow::schema_to_arrow_schema(table.metadata().current_schema()).map_err(iceberg_err(
        format!("convert the schema of {} to Arrow", table.identifier()),
    ))?;
    Ok(std::sync::Arc::new(schema))
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::collections::{BTreeMap, HashMap};

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow_schema::DataType;
    use futures::TryStreamExt;
    use iceberg::table::Table;

    use crate::catalog::{CatalogConfig, CatalogHandle, open_catalog_with_props};

    /// Every row iceberg-rust's own scan returns at `snapshot_id` (default: the current
    /// snapshot), position and equality deletes applied by iceberg-rust itself: a reader that
    /// shares no code with tidemark's.
    pub async fn iceberg_scan(table: &Table, snapshot_id: Option<i64>) -> Vec<RecordBatch> {
        let mut scan = table.scan();
        if let Some(id) = snapshot_id {
            scan = scan.snapshot_id(id);
        }
        scan.build()
            .unwrap()
            .to_arrow()
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    }

    /// `order_id → (order_version, journal_position)` of `batches`; a key twice fails the test.
    pub fn versions_by_key(batches: &[RecordBatch]) -> BTreeMap<String, (i64, i64)> {
        let mut out = BTreeMap::new();
        for b in batches {
            let col = |n: &str| b.column_by_name(n).unwrap().clone();
            let ids = arrow::compute::cast(&col("order_id"), &DataType::Utf8).unwrap();
            let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
            let versions = col("order_version");
            let versions = versions.as_any().downcast_ref::<Int64Array>().unwrap();
            let positions = col("journal_position");
            let positions = positions.as_any().downcast_ref::<Int64Array>().unwrap();
            for r in 0..b.num_rows() {
                let prev = out.insert(ids.value(r).to_string(), (versions.value(r), positions.value(r)));
                assert!(prev.is_none(), "key {} twice", ids.value(r));
            }
        }
        out
    }

    /// The summary properties of `t`'s current snapshot.
    pub fn summary(t: &Table) -> HashMap<String, String> {
        t.metadata()
            .current_snapshot()
            .unwrap()
            .summary()
            .additional_properties
            .clone()
    }

    /// [`versions_by_key`] of iceberg-rust's scan of the current snapshot.
    pub async fn scanned_versions(table: &Table) -> BTreeMap<String, (i64, i64)> {
        versions_by_key(&iceberg_scan(table, None).await)
    }

    /// The orders spec's event columns without the leading position column: the columns a test's
    /// orders table starts with (generated input of the merge's and the validation's tests).
    pub fn orders_table_fields() -> Vec<arrow_schema::Field> {
        let spec = tidemark_journal::spec::CompiledSpec::orders();
        spec.event_schema
            .fields()
            .iter()
            .skip(1)
            .map(|f| f.as_ref().clone())
            .collect()
    }

    /// A SQLite catalog and a local warehouse in `dir`.
    pub async fn catalog_in(dir: &std::path::Path) -> CatalogHandle {
        let cfg = CatalogConfig::in_folder(dir, "tidemark");
        open_catalog_with_props(&cfg, HashMap::new())
            .await
            .expect("open the test catalog")
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
    use tidemark_journal::spec::POSITION_COLUMN;

    use super::test_support::catalog_in;
    use super::*;

    #[test]
    fn idents_parse() {
        let id = parse_ident("shop.orders").unwrap();
        assert_eq!(id.namespace().join("."), "shop");
        assert_eq!(id.name(), "orders");
        assert_eq!(parse_ident("a.b.t").unwrap().namespace().join("."), "a.b");
        for bad in ["orders", ".orders", "shop.", "a..t"] {
            assert!(
                matches!(parse_ident(bad), Err(TableError::InvalidIdent { .. })),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn create_then_reload_checks_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let spec = CompiledSpec::orders();
        let created = create_or_load_table(&handle, "shop.orders", &spec).await.unwrap();
        let meta = created.metadata();
        assert_eq!(meta.format_version(), FormatVersion::V2);
        assert!(meta.default_partition_spec().is_unpartitioned());
        assert_eq!(
            meta.properties().get("write.format.default").map(String::as_str),
            Some("parquet")
        );
        let order = meta.default_sort_order();
        assert_eq!(order.fields.len(), 1);
        assert_eq!(order.fields[0].source_id, 1);
        assert!(meta.current_snapshot().is_none());

        let loaded = create_or_load_table(&handle, "shop.orders", &spec).await.unwrap();
        assert_eq!(loaded.metadata_location(), created.metadata_location());
        assert_eq!(loaded.metadata().uuid(), created.metadata().uuid());
        assert!(
            loaded
                .metadata()
                .current_schema()
                .field_by_name(POSITION_COLUMN)
                .is_some()
        );

        let arrow = arrow_schema(&loaded).unwrap();
        assert_eq!(arrow.fields().len(), 9);
        assert_eq!(
            arrow.field(0).metadata().get("PARQUET:field_id").map(String::as_str),
            Some("1")
        );
        assert_eq!(arrow.field(7).data_type(), &spec.types[7].arrow_type());
    }

    #[tokio::test]
    async fn a_table_with_another_schema_is_refused_naming_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let ns = NamespaceIdent::new("shop".into());
        handle.catalog().create_namespace(&ns, HashMap::new()).await.unwrap();
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "order_id", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::required(2, "order_version", Type::Primitive(PrimitiveType::Int)).into(),
            ])
            .build()
            .unwrap();
        let creation = TableCreation::builder().name("orders".into()).schema(schema).build();
        handle.catalog().create_table(&ns, creation).await.unwrap();

        let err = create_or_load_table(&handle, "shop.orders", &CompiledSpec::orders())
            .await
            .unwrap_err();
        match &err {
            TableError::SchemaMismatch {
                table,
                column,
                expected,
                found,
            } => {
                assert_eq!(table, "shop.orders");
                assert_eq!(column, "order_version");
                assert_eq!((expected.as_str(), found.as_str()), ("long", "int"));
            }
            other => panic!("unexpected {other}"),
        }
        assert!(err.to_string().contains("order_version"), "{err}");
    }

    #[tokio::test]
    async fn a_missing_table_is_reported_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let err = load_table(&handle, "shop.nothing").await.unwrap_err();
        assert!(matches!(err, TableError::TableNotFound { .. }), "{err}");
    }
}
