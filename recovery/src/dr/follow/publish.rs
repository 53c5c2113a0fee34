//! How the warm follower moves a DR table to the version it chose, per kind of DR catalog
//! ([`publish`]), and how it tells what a DR table holds when the pointer is not the one its
//! state records (`recognise.rs`: a run killed between its catalog write and its state write).
//!
//! - **SQL** (SQLite, PostgreSQL): the replica's metadata file (or, with a prefix map, its rewrite
//!   to the replica's paths) is registered, and the pointer then swapped (compare-and-swap from
//!   the pointer read) to each newer one. Everything is the replica's: ids, metadata file names
//!   and the metadata log.
//! - **AWS S3 Tables**: it has no register call, and a metadata location must be inside the
//!   table's own warehouse. The first time, the table is created like the source (CreateTable,
//!   the source's ids, property [`SOURCE_UUID_PROP`]). Each version is written as a copy of the
//!   (rewritten) metadata file into `<table warehouse>/metadata/` under the follower's rewrite
//!   name, with `location` set to the table's warehouse (files written there after a failover land
//!   in the table bucket), and the pointer moved by UpdateTableMetadataLocation with the version
//!   token read with it (a stale token: a conflict, nothing moved). Kept: everything in the
//!   metadata (table uuid, snapshot, schema and spec ids, sequence numbers, refs, the metadata log,
//!   which ends with the replica's file); manifest lists, manifests and data stay at the replica's
//!   paths and are read with the catalog's S3 settings.
//! - **Iceberg REST**: the pointer moves only through the server's commits. The first time, the
//!   table is created like the source (field ids kept, property [`SOURCE_UUID_PROP`]). Each
//!   advance is one commit: requirements `assert-table-uuid` + `assert-ref-snapshot-id(main, the
//!   DR's current snapshot)` (someone else moved it: a conflict, nothing changed), updates
//!   `add-snapshot` for every snapshot of main's ancestry newer than the DR's, oldest first, with
//!   the (rewritten) manifest list, then `set-snapshot-ref(main)` and `set-properties` /
//!   `remove-properties` for the properties that changed. A schema or partition spec the DR table
//!   lacks is added first, in a commit of its own. Kept: snapshot ids, parents, sequence numbers,
//!   timestamps, summaries, manifest lists, field ids, partition spec ids. Not kept: schema ids (the
//!   server numbers them; each snapshot names the DR's id of the same schema), metadata file names
//!   and the metadata log (the server writes its own), the table uuid and location (the
//!   server's), branches and tags other than `main`, sort order changes. A table whose partition
//!   spec ids the server numbers differently from the replica's (manifests name them) is held.

use std::collections::HashMap;

use bytes::Bytes;
use iceberg::spec::{Snapshot, SnapshotReference, SnapshotRetention, TableMetadata};
use iceberg::table::Table;
use iceberg::{TableIdent, TableRequirement, TableUpdate};
use serde_json::Value;

use super::step::{Step, dir_of, ensure_namespace, rewrite_name};
pub use super::target::{SOURCE_UUID_PROP, require_capabilities};
use super::target::{Target, Way, ours, way};
use crate::catalog::{CommitError, CommitRequest};
use crate::table::source::file_io;
use crate::table::{create_table_like, load_table};

/// The outcome of [`publish`].
pub(in crate::dr) enum Moved {
    /// The DR table now points at this metadata location.
    To(String),
    /// Someone else moved the table while this cycle ran: nothing changed.
    Conflict(String),
    /// This version cannot be followed into this catalog (why): nothing changed.
    Held(String),
}

/// Moves the DR table `table` (pointer `pointer`, `None`: no table yet) to the replica's
/// metadata file `target_key`. `held` is the version the DR table holds (for properties removed
/// since). The lease is checked before every write.
pub(in crate::dr) async fn publish(
    ctx: &Target<'_>,
    ident: &TableIdent,
    table: &str,
    pointer: Option<&str>,
    target_key: &str,
    held: Option<&Value>,
) -> Result<Moved, Step> {
    ctx.guard().await?;
    match way(ctx.handle) {
        Way::Pointer => {
            let location = match ctx.prefix_map {
                None => format!("{}/{target_key}", ctx.base),
                Some(_) => replica_rewrite(ctx, target_key).await?,
            };
            ctx.guard().await?;
            let won = match pointer {
                None => {
                    ensure_namespace(ctx.handle, ident).await?;
                    ctx.handle.register_table(ident, &location).await?;
                    true
                }
                Some(p) => ctx.handle.swap_metadata_pointer(ident, p, &location).await?,
            };
            Ok(if won {
                Moved::To(location)
            } else {
                Moved::Conflict(moved_away(pointer))
            })
        }
        Way::S3Tables => publish_s3tables(ctx, ident, table, pointer, target_key).await,
        Way::Commit => publish_commit(ctx, table, pointer, target_key, held).await,
    }
}

fn moved_away(pointer: Option<&str>) -> String {
    format!(
        "the DR pointer moved away from {} while this cycle ran; not touched",
        pointer.unwrap_or("nothing")
    )
}

/// The rewrite of `target_key` to the replica's paths, beside it in the replica (reused when a
/// cycle that stopped before registering it wrote it already).
async fn replica_rewrite(ctx: &Target<'_>, target_key: &str) -> Result<String, Step> {
    let map = ctx.prefix_map.expect("called with a prefix map");
    let source = format!("{}/{target_key}", ctx.base);
    let name = rewrite_name(target_key).ok_or_else(|| {
        Step::Other(format!(
            "{target_key}: the file name does not start with a version number"
        ))
    })?;
    let location = format!("{}/{name}", dir_of(&source));
    let io = file_io(ctx.file_io_props);
    match intact(&io, &location).await? {
        Some(true) => return Ok(location),
        // Torn by a process killed while writing it (a local file written in place): the name is
        // this follower's own, so it is written again.
        Some(false) => io.delete(&location).await?,
        None => {}
    }
    Ok(
        crate::dr::rewrite::rewrite_paths_as(&source, &map.from, &map.to, ctx.file_io_props, Some(&name))
            .await?
            .new_metadata,
    )
}

/// The metadata to publish for `target_key`: the replica's file (its log extended by the file
/// itself, which it derives from) or, with a prefix map, its rewrite.
async fn published_json(ctx: &Target<'_>, target_key: &str) -> Result<Value, Step> {
    let source = format!("{}/{target_key}", ctx.base);
    let read = match ctx.prefix_map {
        None => source.clone(),
        Some(_) => replica_rewrite(ctx, target_key).await?,
    };
    let bytes = file_io(ctx.file_io_props).new_input(&read)?.read().await?;
    let mut json: Value =
        serde_json::from_slice(&bytes).map_err(|e| Step::Other(format!("metadata file {read}: {e}")))?;
    if ctx.prefix_map.is_none() {
        let entry = serde_json::json!({
            "timestamp-ms": json.get("last-updated-ms").cloned().unwrap_or(Value::Null),
            "metadata-file": source,
        });
        match json.get_mut("metadata-log") {
            Some(Value::Array(log)) => log.push(entry),
            _ => json["metadata-log"] = Value::Array(vec![entry]),
        }
    }
    Ok(json)
}

/// Whether the metadata file the follower writes at `location` is there (`None`: it is not) and
/// whole (valid JSON).
async fn intact(io: &iceberg::io::FileIO, location: &str) -> Result<Option<bool>, Step> {
    if !io.exists(location).await? {
        return Ok(None);
    }
    let bytes = io.new_input(location)?.read().await?;
    Ok(Some(serde_json::from_slice::<Value>(&bytes).is_ok()))
}

fn metadata_of(json: &Value, what: &str) -> Result<TableMetadata, Step> {
    serde_json::from_value(json.clone()).map_err(|e| Step::Other(format!("{what} is not valid table metadata: {e}")))
}

/// The DR table: loaded, or created like the replica's (`want`) when it does not exist yet.
async fn dr_table(ctx: &Target<'_>, table: &str, pointer: Option<&str>, want: &TableMetadata) -> Result<Table, Step> {
    if pointer.is_some() {
        return Ok(load_table(ctx.handle, table).await?);
    }
    ctx.guard().await?;
    let marker = HashMap::from([(SOURCE_UUID_PROP.to_string(), want.uuid().to_string())]);
    let created = create_table_like(ctx.handle, table, want, want.current_schema(), marker).await?;
    tidemark_journal::failpoint::hit("publish:after-create");
    Ok(created)
}

async fn publish_s3tables(
    ctx: &Target<'_>,
    ident: &TableIdent,
    table: &str,
    pointer: Option<&str>,
    target_key: &str,
) -> Result<Moved, Step> {
    let mut json = published_json(ctx, target_key).await?;
    let want = metadata_of(&json, target_key)?;
    let dr = dr_table(ctx, table, pointer, &want).await?;
    let from = match pointer {
        Some(p) => p.to_string(),
        None => dr.metadata_location().unwrap_or_default().to_string(),
    };
    let home = dr.metadata().location().trim_end_matches('/').to_string();
    let name = rewrite_name(target_key).ok_or_else(|| {
        Step::Other(format!(
            "{target_key}: the file name does not start with a version number"
        ))
    })?;
    let location = format!("{home}/metadata/{name}");
    json["location"] = Value::String(home);
    let io = dr.file_io();
    // Written by a cycle that stopped before moving the pointer: the same bytes (a torn one,
    // written again).
    if intact(io, &location).await? != Some(true) {
        let body = serde_json::to_vec_pretty(&json).map_err(|e| Step::Other(e.to_string()))?;
        ctx.guard().await?;
        io.new_output(&location)?.write(Bytes::from(body)).await?;
    }
    ctx.guard().await?;
    Ok(if ctx.handle.swap_metadata_pointer(ident, &from, &location).await? {
        Moved::To(location)
    } else {
        Moved::Conflict(moved_away(Some(&from)))
    })
}

pub(in crate::dr) fn main_branch(id: i64) -> SnapshotReference {
    SnapshotReference::new(
        id,
        SnapshotRetention::Branch {
            min_snapshots_to_keep: None,
            max_snapshot_age_ms: None,
            max_ref_age_ms: None,
        },
    )
}

/// The requirements of every follower commit: the table is the one read, at the snapshot read.
pub(in crate::dr) fn based_on(dr: &Table) -> Vec<TableRequirement> {
    vec![
        TableRequirement::UuidMatch {
            uuid: dr.metadata().uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".into(),
            snapshot_id: dr.metadata().current_snapshot_id(),
        },
    ]
}

/// Commits `updates`; a failed requirement is someone else's change.
async fn commit(ctx: &Target<'_>, dr: &Table, updates: Vec<TableUpdate>) -> Result<Result<Table, String>, Step> {
    ctx.guard().await?;
    let request = CommitRequest {
        requirements: based_on(dr),
        updates,
    };
    match ctx.handle.commit(dr, request).await {
        Ok(t) => Ok(Ok(t)),
        Err(CommitError::Conflict { detail, .. }) => Ok(Err(format!(
            "the DR table changed while this cycle ran ({detail}); not touched"
        ))),
        Err(e) => Err(Step::Other(e.to_string())),
    }
}

/// The schema and partition-spec updates the DR table needs before `want`'s snapshots, or why
/// it cannot take them.
fn schema_and_spec_updates(dr: &TableMetadata, want: &TableMetadata) -> Result<Vec<TableUpdate>, String> {
    let mut updates = Vec::new();
    let current = want.current_schema();
    match dr.schemas_iter().find(|s| s.as_struct() == current.as_struct()) {
        None => updates.extend([
            TableUpdate::AddSchema {
                schema: current.as_ref().clone(),
            },
            TableUpdate::SetCurrentSchema { schema_id: -1 },
        ]),
        Some(s) if s.schema_id() != dr.current_schema_id() => {
            updates.push(TableUpdate::SetCurrentSchema {
                schema_id: s.schema_id(),
            });
        }
        Some(_) => {}
    }
    for spec in want.partition_specs_iter() {
        match dr.partition_spec_by_id(spec.spec_id()) {
            Some(d) if d.fields() == spec.fields() => {}
            Some(_) => {
                return Err(format!(
                    "the DR table's partition spec {} differs from the replica's (the REST server numbers specs \
                     itself, and manifests name them): not followed",
                    spec.spec_id()
                ));
            }
            None => updates.push(TableUpdate::AddSpec {
                spec: spec.as_ref().clone().into_unbound(),
            }),
        }
    }
    if dr.default_partition_spec_id() != want.default_partition_spec_id() {
        updates.push(TableUpdate::SetDefaultSpec {
            spec_id: want.default_partition_spec_id(),
        });
    }
    Ok(updates)
}

/// The property updates from what the DR table has (and the version it held had) to `want`'s.
fn property_updates(dr: &TableMetadata, want: &TableMetadata, held: Option<&Value>) -> Vec<TableUpdate> {
    let have = dr.properties();
    let set: HashMap<String, String> = want
        .properties()
        .iter()
        .filter(|(k, v)| ours(k) && have.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut removals: Vec<String> = held
        .and_then(|h| h.get("properties"))
        .and_then(Value::as_object)
        .map(|o| {
            o.keys()
                .filter(|k| ours(k) && !want.properties().contains_key(*k) && have.contains_key(*k))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    removals.sort();
    let mut updates = Vec::new();
    if !set.is_empty() {
        updates.push(TableUpdate::SetProperties { updates: set });
    }
    if !removals.is_empty() {
        updates.push(TableUpdate::RemoveProperties { removals });
    }
    updates
}

/// `want`'s snapshots on main's ancestry newer than the DR's current one, oldest first, each
/// naming the DR's id of its schema; `Err` when the DR's snapshot is not an ancestor.
fn new_snapshots(dr: &TableMetadata, want: &TableMetadata) -> Result<Vec<Snapshot>, String> {
    let stop = dr.current_snapshot_id();
    let mut out = Vec::new();
    let mut next = want.current_snapshot_id();
    while let Some(id) = next {
        if Some(id) == stop {
            break;
        }
        let Some(s) = want.snapshot_by_id(id) else {
            // Expired on the primary: the first follow starts from the oldest snapshot kept.
            if let Some(stop) = stop {
                return Err(format!(
                    "the replica's main ancestry reaches snapshot {id}, expired from its metadata, before the DR \
                     table's current snapshot {stop}: the DR table fell behind past the primary's snapshot expiry; \
                     not followed"
                ));
            }
            break;
        };
        let schema_id = s
            .schema_id()
            .and_then(|sid| want.schema_by_id(sid))
            .and_then(|ws| dr.schemas_iter().find(|d| d.as_struct() == ws.as_struct()))
            .map(|d| d.schema_id());
        out.push(
            Snapshot::builder()
                .with_snapshot_id(s.snapshot_id())
                .with_parent_snapshot_id(s.parent_snapshot_id())
                .with_sequence_number(s.sequence_number())
                .with_timestamp_ms(s.timestamp_ms())
                .with_manifest_list(s.manifest_list())
                .with_summary(s.summary().clone())
                .schema_id_opt(schema_id)
                .build(),
        );
        next = s.parent_snapshot_id();
    }
    if let (Some(stop), None) = (stop, next) {
        return Err(format!(
            "the DR table's current snapshot {stop} is not an ancestor of the replica's: not moved backwards or \
             sideways"
        ));
    }
    out.reverse();
    Ok(out)
}

async fn publish_commit(
    ctx: &Target<'_>,
    table: &str,
    pointer: Option<&str>,
    target_key: &str,
    held: Option<&Value>,
) -> Result<Moved, Step> {
    let json = published_json(ctx, target_key).await?;
    let want = metadata_of(&json, target_key)?;
    let dr = dr_table(ctx, table, pointer, &want).await?;
    commit_towards(ctx, dr, &want, held).await
}

/// Moves the REST table `dr` to `want`'s main (its schema and specs first, then the snapshots of
/// main's ancestry it lacks, oldest first, and the properties that changed), in the commits
/// [`publish`] describes. Also how `replica resync` fills a table it created again
/// (`resync_rest`).
pub(in crate::dr) async fn commit_towards(
    ctx: &Target<'_>,
    mut dr: Table,
    want: &TableMetadata,
    held: Option<&Value>,
) -> Result<Moved, Step> {
    let pre = match schema_and_spec_updates(dr.metadata(), want) {
        Ok(u) => u,
        Err(why) => return Ok(Moved::Held(why)),
    };
    if !pre.is_empty() {
        dr = match commit(ctx, &dr, pre).await? {
            Ok(t) => t,
            Err(why) => return Ok(Moved::Conflict(why)),
        };
        for spec in want.partition_specs_iter() {
            if dr.metadata().partition_spec_by_id(spec.spec_id()).map(|d| d.fields()) != Some(spec.fields()) {
                return Ok(Moved::Held(format!(
                    "the REST server numbered the replica's partition spec {} differently (manifests name it): not \
                     followed",
                    spec.spec_id()
                )));
            }
        }
    }
    let snapshots = match new_snapshots(dr.metadata(), want) {
        Ok(s) => s,
        Err(why) => return Ok(Moved::Conflict(why)),
    };
    let mut updates: Vec<TableUpdate> = Vec::new();
    if let (Some(last), false) = (want.current_snapshot_id(), snapshots.is_empty()) {
        updates.extend(
            snapshots
                .into_iter()
                .map(|snapshot| TableUpdate::AddSnapshot { snapshot }),
        );
        updates.push(TableUpdate::SetSnapshotRef {
            ref_name: "main".into(),
            reference: main_branch(last),
        });
    }
    updates.extend(property_updates(dr.metadata(), want, held));
    if updates.is_empty() {
        return Ok(Moved::To(dr.metadata_location().unwrap_or_default().to_string()));
    }
    Ok(match commit(ctx, &dr, updates).await? {
        Ok(t) => Moved::To(t.metadata_location().unwrap_or_default().to_string()),
        Err(why) => Moved::Conflict(why),
    })
}

#[cfg(test)]
#[path = "publish_tests.rs"]
mod tests;
