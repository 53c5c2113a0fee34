//! Reading a table for a backup or a restore: its metadata file (key, ETag, size) and the
//! watermark of what its current snapshot references.

use std::collections::HashMap;

use serde_json::Value;
use tidemark_journal::store::{GetResult, ObjectStore, StoreError};

use super::report::{BackupError, BackupTable, Watermark};
use crate::catalog::CatalogHandle;
use crate::dr::rebuild::DrError;
use crate::dr::replica::{MissingFile, missing_files};
use crate::table::TableError;
use crate::table::source::file_io;

pub(super) fn table_err(table: &str) -> impl FnOnce(TableError) -> BackupError + '_ {
    move |source| BackupError::Table {
        table: table.to_string(),
        source: Box::new(source),
    }
}

/// The key of `location` in the warehouse `base`, if it is under it.
pub(super) fn key_in<'a>(base: &str, location: &'a str) -> Option<&'a str> {
    location.strip_prefix(base)?.strip_prefix('/')
}

/// The current version of the metadata file `location` in the warehouse at `base`; the outer
/// error says the file is outside the warehouse.
pub(super) async fn get_metadata(
    warehouse: &dyn ObjectStore,
    base: &str,
    location: &str,
) -> Result<Result<GetResult, StoreError>, String> {
    let key =
        key_in(base, location).ok_or_else(|| format!("metadata file {location} is outside the warehouse {base}"))?;
    Ok(warehouse.get(key, None).await)
}

/// What [`BackupTable`] records for `table` whose metadata file `location` was read as `got`:
/// the file's ETag and size, and the watermark (with the referenced objects that are missing).
pub(super) async fn describe(
    handle: &CatalogHandle,
    table: &str,
    location: &str,
    got: &GetResult,
) -> Result<(BackupTable, Vec<MissingFile>), BackupError> {
    let not = |reason: String| BackupError::NotBackedUp {
        table: table.to_string(),
        reason,
    };
    let json: Value =
        serde_json::from_slice(&got.body).map_err(|e| not(format!("metadata file {location} is not JSON: {e}")))?;
    let io = file_io(handle.file_io_props());
    let (missing, snapshot_id, referenced) = missing_files(&io, None, location, &json, &mut HashMap::new())
        .await
        .map_err(|source| BackupError::Files {
            table: table.to_string(),
            source,
        })?;
    let entry = BackupTable {
        table: table.to_string(),
        metadata_location: location.to_string(),
        metadata_etag: got.meta.etag.clone(),
        metadata_size: got.meta.size,
        watermark: Watermark {
            current_snapshot_id: snapshot_id,
            last_sequence_number: json.get("last-sequence-number").and_then(Value::as_i64).unwrap_or(0),
            referenced_objects: referenced,
        },
    };
    Ok((entry, missing))
}

pub(super) fn open_warehouse_err(handle: &CatalogHandle) -> impl FnOnce(StoreError) -> BackupError + '_ {
    move |source| {
        BackupError::Dr(DrError::Open {
            warehouse: handle.warehouse().to_string(),
            source,
        })
    }
}
