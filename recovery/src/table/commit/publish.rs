//! Publishing a commit through the catalog contract: the requirements and updates that turn the
//! loaded metadata into the new one, and the metadata-only commits (references, properties).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, TableMetadata};
use iceberg::table::Table;
use iceberg::{TableRequirement, TableUpdate};

use super::super::TableError;
use crate::catalog::{CatalogHandle, CommitRequest};

/// Adds or moves references (tags and branches other than `main`) of `table` to existing
/// snapshots, in a metadata-only commit published like [`commit_overwrite`]'s: required, the
/// table's uuid and each reference where it was when `table` was loaded; updates, one
/// `set-snapshot-ref` per reference. `at` is the caller's time of the decision; the catalog stamps
/// the metadata itself. Returns the table as committed.
pub async fn commit_refs(
    handle: &CatalogHandle,
    table: &Table,
    refs: Vec<(String, SnapshotReference)>,
    _at: DateTime<Utc>,
) -> Result<Table, TableError> {
    let name = table.identifier().to_string();
    let meta = table.metadata();
    let invalid = |reason: String| TableError::Unsupported {
        table: name.clone(),
        reason,
    };
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: meta.uuid() }];
    let mut updates = Vec::with_capacity(refs.len());
    for (ref_name, reference) in refs {
        if ref_name == MAIN_BRANCH {
            return Err(invalid(
                "commit_refs does not move main; commit a snapshot instead".into(),
            ));
        }
        if meta.snapshot_by_id(reference.snapshot_id).is_none() {
            return Err(invalid(format!(
                "reference {ref_name} names snapshot {}, which the table does not have",
                reference.snapshot_id
            )));
        }
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: ref_name.clone(),
            snapshot_id: meta.snapshot_for_ref(&ref_name).map(|s| s.snapshot_id()),
        });
        updates.push(TableUpdate::SetSnapshotRef { ref_name, reference });
    }
    Ok(handle.commit(table, CommitRequest { requirements, updates }).await?)
}

/// Sets table properties of `table` in a metadata-only commit (no new snapshot), through the
/// catalog contract like every commit. Returns the table as committed.
pub async fn commit_properties(
    handle: &CatalogHandle,
    table: &Table,
    properties: HashMap<String, String>,
) -> Result<Table, TableError> {
    let request = CommitRequest {
        requirements: vec![TableRequirement::UuidMatch {
            uuid: table.metadata().uuid(),
        }],
        updates: vec![TableUpdate::SetProperties { updates: properties }],
    };
    Ok(handle.commit(table, request).await?)
}

/// Publishes `new_metadata` (built from `table`'s metadata) through the catalog as a commit:
/// the snapshots it adds and the references it adds or moves, required to apply to the table as
/// it was loaded (its uuid, each moved reference where it was). A moved table is a
/// [`TableError::CommitConflict`]; a lost reply is resolved by reloading (see
/// [`crate::catalog::contract`]).
pub(super) async fn publish(
    handle: &CatalogHandle,
    table: &Table,
    _expected: &str,
    new_metadata: TableMetadata,
) -> Result<Table, TableError> {
    let request = commit_request(table, &new_metadata)?;
    Ok(handle.commit(table, request).await?)
}

/// The commit that turns `table`'s metadata into `new`, as requirements and updates.
fn commit_request(table: &Table, new: &TableMetadata) -> Result<CommitRequest, TableError> {
    let base = table.metadata();
    let name = table.identifier().to_string();
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: base.uuid() }];
    let mut updates = Vec::new();
    let mut added: Vec<_> = new
        .snapshots()
        .filter(|s| base.snapshot_by_id(s.snapshot_id()).is_none())
        .collect();
    added.sort_by_key(|s| s.sequence_number());
    for snapshot in added {
        updates.push(TableUpdate::AddSnapshot {
            snapshot: snapshot.as_ref().clone(),
        });
    }
    // The refs map has no accessor in iceberg-rust 0.10.1; it is read from the serialized form.
    let refs = |m: &TableMetadata| -> Result<serde_json::Map<String, serde_json::Value>, TableError> {
        let json = serde_json::to_value(m).map_err(|e| TableError::Unsupported {
            table: name.clone(),
            reason: format!("cannot serialize the metadata: {e}"),
        })?;
        Ok(json
            .get("refs")
            .and_then(|r| r.as_object())
            .cloned()
            .unwrap_or_default())
    };
    let (before, after) = (refs(base)?, refs(new)?);
    // `main` first, as fast_append orders them.
    let mut names: Vec<&String> = after.keys().collect();
    names.sort_by_key(|n| (n.as_str() != MAIN_BRANCH, n.as_str()));
    for ref_name in names {
        let value = &after[ref_name];
        if before.get(ref_name) == Some(value) {
            continue;
        }
        let reference: SnapshotReference =
            serde_json::from_value(value.clone()).map_err(|e| TableError::Unsupported {
                table: name.clone(),
                reason: format!("reference {ref_name} does not parse: {e}"),
            })?;
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: ref_name.clone(),
            snapshot_id: base.snapshot_for_ref(ref_name).map(|s| s.snapshot_id()),
        });
        updates.push(TableUpdate::SetSnapshotRef {
            ref_name: ref_name.clone(),
            reference,
        });
    }
    if let Some(gone) = before.keys().find(|n| !after.contains_key(*n)) {
        return Err(TableError::Unsupported {
            table: name,
            reason: format!("the commit would remove reference {gone}, which tidemark never does"),
        });
    }
    Ok(CommitRequest { requirements, updates })
}
