//! `replica resync` of a table deleted only on an **S3 Tables** or **Iceberg REST** demoted side
//! and live on the new primary: restored by creating it again, as the warm follower creates a
//! DR table (`follow_publish`).
//!
//! Neither kind can register a metadata file, and the table's own files went with it (S3 Tables
//! keeps them in the table's bucket, SeaweedFS's drop deletes them), so there is no demoted
//! version to walk back to: the table is created like the new primary's (its ids; property
//! [`SOURCE_UUID_PROP`] names the new primary's table uuid) and moved to the new primary's
//! current version: on S3 Tables a copy of its metadata file in the table's warehouse and
//! UpdateTableMetadataLocation with the version token; on REST one commit adding main's
//! snapshots (`assert-table-uuid`, `assert-ref-snapshot-id`). Manifest lists, manifests and data
//! stay at the new primary's paths. Nothing of the demoted side is walked over, so nothing is
//! listed as kept.
//!
//! A run stopped between the create and the move leaves an empty table marked with the new
//! primary's uuid: the next run recognises it ([`interrupted`]) and finishes the move.

use iceberg::table::Table;

use super::report::{ResyncAction, ResyncTable};
use crate::catalog::CatalogHandle;
use crate::dr::follow::Step;
use crate::dr::follow::publish::{Moved, publish};
use crate::dr::follow::{SOURCE_UUID_PROP, Target};
use crate::table::{load_table, parse_ident};

/// Whether the demoted table `t` is one a restore created and did not move yet (empty, marked
/// with the new primary's table uuid), while the new primary's table has a snapshot to move to.
pub(in crate::dr) async fn interrupted(
    demoted: &CatalogHandle,
    t: &ResyncTable,
    primary: &Table,
) -> Result<bool, String> {
    if primary.metadata().current_snapshot_id().is_none() {
        return Ok(false);
    }
    let table = load_table(demoted, &t.table).await.map_err(|e| e.to_string())?;
    let meta = table.metadata();
    let uuid = primary.metadata().uuid().to_string();
    Ok(meta.snapshots().next().is_none() && meta.properties().get(SOURCE_UUID_PROP) == Some(&uuid))
}

/// Restores `t` in `demoted` at the new primary's current version (`primary_table`, read from
/// `primary`); `t.demoted_pointer` is `None`, or the empty table an interrupted restore created.
pub(in crate::dr) async fn restore(
    demoted: &CatalogHandle,
    primary: &CatalogHandle,
    primary_table: &Table,
    t: &mut ResyncTable,
    dry_run: bool,
) -> Result<(), String> {
    let pointer = t
        .primary_pointer
        .clone()
        .ok_or_else(|| format!("{}: the new primary's table has no metadata location", t.table))?;
    let (base, key) = pointer
        .rsplit_once('/')
        .ok_or_else(|| format!("{pointer}: not a metadata file location"))?;
    t.action = ResyncAction::Restored;
    t.walked_back_to_snapshot = primary_table.metadata().current_snapshot_id();
    let how = if t.demoted_pointer.is_some() {
        "the restore a run before began (the table it created, empty) is finished"
    } else {
        "created again like the new primary's table"
    };
    t.reason = format!(
        "deleted only on the demoted side, whose catalog ({}) cannot register a metadata file and whose own files went \
         with the table: {how}, at the new primary's version {pointer}",
        demoted.reference()
    );
    if dry_run {
        return Ok(());
    }
    let ident = parse_ident(&t.table).map_err(|e| e.to_string())?;
    let target = Target {
        handle: demoted,
        base,
        prefix_map: None,
        file_io_props: primary.file_io_props(),
        lease: None,
    };
    match publish(&target, &ident, &t.table, t.demoted_pointer.as_deref(), key, None).await {
        Ok(Moved::To(location)) => t.walked_back_to = Some(location),
        Ok(Moved::Conflict(why)) => {
            t.action = ResyncAction::Conflict;
            t.reason = format!("restoring it: {why}");
        }
        Ok(Moved::Held(why)) => {
            t.action = ResyncAction::Failed;
            t.reason = format!("cannot restore it: {why}");
        }
        Err(Step::Lease(e)) => return Err(e.to_string()),
        Err(Step::Other(e)) => return Err(format!("restoring it: {e}")),
    }
    Ok(())
}
