//! The ids of a table made like another ([`super::create_table_like`]): the catalog's create
//! renumbers field ids from 1 (iceberg-rust's `TableMetadataBuilder::new`), which changes a
//! schema whose ids have gaps (a column another writer dropped) and the source ids of its
//! partition spec and sort order. A drop-in replacement keeps them exactly: the schema with its
//! field ids and schema id, `last-column-id`, the partition spec with its spec id and field ids,
//! `last-partition-id`, and the sort order with its id.
//!
//! Where the catalog can swap metadata pointers (SQL, S3 Tables), the new table's metadata is
//! rewritten with exactly those and the pointer moved from the created file to it. Elsewhere
//! (REST) the schema, spec and order are added as a metadata-only commit and made current,
//! which keeps every field, partition-field and source id (the schema and spec ids are then the
//! catalog's next ones).

use iceberg::spec::{Schema, TableMetadata};
use iceberg::table::Table;
use iceberg::{MetadataLocation, TableRequirement, TableUpdate};
use serde_json::{Value, json};

use super::{TableError, iceberg_err, load_table};
use crate::catalog::CatalogHandle;
use crate::catalog::contract::CommitRequest;

/// `created` (just made by the catalog from `like` and `schema`) with `like`'s ids; `created`
/// itself when the catalog's numbering already gave them.
pub(super) async fn keep_ids(
    handle: &CatalogHandle,
    created: Table,
    like: &TableMetadata,
    schema: &Schema,
) -> Result<Table, TableError> {
    let name = created.identifier().to_string();
    let meta = created.metadata();
    let spec = like.default_partition_spec();
    let order = like.default_sort_order();
    let last_column_id = like.last_column_id().max(schema.highest_field_id());
    let last_partition_id = like.last_partition_id();
    let json_of = |v: Result<Value, serde_json::Error>| {
        v.map_err(|e| TableError::Unsupported {
            table: name.clone(),
            reason: format!("cannot serialize the source's schema, spec or sort order: {e}"),
        })
    };
    let (want_schema, want_spec, want_order) = (
        json_of(serde_json::to_value(schema))?,
        json_of(serde_json::to_value(spec.as_ref()))?,
        json_of(serde_json::to_value(order.as_ref()))?,
    );
    let same = json_of(serde_json::to_value(meta.current_schema().as_ref()))? == want_schema
        && json_of(serde_json::to_value(meta.default_partition_spec().as_ref()))? == want_spec
        && json_of(serde_json::to_value(meta.default_sort_order().as_ref()))? == want_order
        && meta.last_column_id() == last_column_id
        && meta.last_partition_id() == last_partition_id;
    if same {
        return Ok(created);
    }
    if !handle.capabilities().swap_pointer {
        let request = CommitRequest {
            requirements: vec![TableRequirement::UuidMatch { uuid: meta.uuid() }],
            updates: vec![
                TableUpdate::AddSchema { schema: schema.clone() },
                TableUpdate::SetCurrentSchema { schema_id: -1 },
                TableUpdate::AddSpec {
                    spec: spec.as_ref().clone().into_unbound(),
                },
                TableUpdate::SetDefaultSpec { spec_id: -1 },
                TableUpdate::AddSortOrder {
                    sort_order: order.as_ref().clone(),
                },
                TableUpdate::SetDefaultSortOrder { sort_order_id: -1 },
            ],
        };
        return Ok(handle.commit(&created, request).await?);
    }
    let created_at = created
        .metadata_location_result()
        .map_err(iceberg_err(format!("read the metadata location of {name}")))?;
    let mut json = json_of(serde_json::to_value(meta))?;
    let obj = json.as_object_mut().expect("table metadata serializes as an object");
    obj.insert("schemas".into(), json!([want_schema]));
    obj.insert("current-schema-id".into(), json!(schema.schema_id()));
    obj.insert("last-column-id".into(), json!(last_column_id));
    obj.insert("partition-specs".into(), json!([want_spec]));
    obj.insert("default-spec-id".into(), json!(spec.spec_id()));
    obj.insert("last-partition-id".into(), json!(last_partition_id));
    obj.insert("sort-orders".into(), json!([want_order]));
    obj.insert("default-sort-order-id".into(), json!(order.order_id));
    obj.insert(
        "metadata-log".into(),
        json!([{ "metadata-file": created_at, "timestamp-ms": meta.last_updated_ms() }]),
    );
    let exact: TableMetadata = serde_json::from_value(json).map_err(|e| TableError::Unsupported {
        table: name.clone(),
        reason: format!("the source's schema, partition spec and sort order do not make valid metadata: {e}"),
    })?;
    let location = created_at
        .parse::<MetadataLocation>()
        .map_err(iceberg_err(format!("parse the metadata location of {name}")))?
        .with_next_version()
        .with_new_metadata(&exact);
    exact
        .write_to(created.file_io(), &location)
        .await
        .map_err(iceberg_err(format!("write the metadata of {name} at {location}")))?;
    let won = handle
        .swap_metadata_pointer(created.identifier(), created_at, &location.to_string())
        .await?;
    if !won {
        return Err(TableError::CommitConflict {
            table: name,
            detail: "the table changed while its ids were set to the source's".into(),
        });
    }
    load_table(handle, &created.identifier().to_string()).await
}
