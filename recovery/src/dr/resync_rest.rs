//! `replica resync` of a demoted **Iceberg REST** catalog: the pointer moves only through the
//! server's commits, and the server writes every metadata file itself, so a table is walked back
//! by snapshots, not by metadata files.
//!
//! Per table: main's ancestry is walked from the current snapshot back to the newest snapshot
//! the new primary also holds (by snapshot id), and one commit moves main there: requirements
//! `assert-table-uuid` + `assert-ref-snapshot-id(main, the current snapshot read)` (someone else
//! moved it: a conflict, nothing changed), update `set-snapshot-ref(main → the common snapshot)`.
//! The server writes a new metadata file; the later snapshots stay in the table's metadata (until
//! someone expires them), and they and every file only they reference are listed in the report
//! and never deleted.
//!
//! Before the commit, the server's metadata files on the walked-over branch (its metadata log
//! from the pointer back to the newest file whose main the new primary holds) are recorded beside
//! them (`resync_record_write`), as on the other kinds: the commit's own file logs them, and so
//! does every later one, so a follower or `catalog rebuild` reading this folder never takes the
//! server's files written since the walk back as a head either (the new primary's replicated
//! files are the chain to follow), and the follower judges a REST pointer by its main snapshot.

use std::collections::HashSet;

use iceberg::io::FileIO;

use super::follow_publish::{based_on, main_branch};
use super::resync::{KeptFile, LogWalk, ResyncAction, ResyncTable, record_walk, referenced, walk_log};
use crate::catalog::{CatalogHandle, CommitError, CommitRequest};
use crate::table::load_table;

/// Walks the REST table `t` of `demoted` back to the newest snapshot of main's ancestry in
/// `held` (the new primary's snapshot ids); see the module documentation.
pub(super) async fn walk_back(
    demoted: &CatalogHandle,
    io: &FileIO,
    held: &HashSet<i64>,
    t: &mut ResyncTable,
    dry_run: bool,
) -> Result<(), String> {
    let table = load_table(demoted, &t.table).await.map_err(|e| e.to_string())?;
    let meta = table.metadata();
    let Some(current) = meta.current_snapshot_id() else {
        t.action = ResyncAction::InStep;
        t.reason = "no snapshot on the demoted side".into();
        return Ok(());
    };
    // Main's ancestry, newest first, down to a snapshot the new primary holds.
    let mut walked = Vec::new();
    let mut next = Some(current);
    let common = loop {
        let Some(id) = next else { break None };
        if held.contains(&id) {
            break Some(id);
        }
        walked.push(id);
        next = meta.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
    };
    let Some(common) = common else {
        t.action = ResyncAction::NoCommonVersion;
        t.diverged_snapshots = walked;
        t.reason = "no snapshot of the demoted main's ancestry is held by the new primary; nothing moved".into();
        return Ok(());
    };
    t.walked_back_to_snapshot = Some(common);
    if common == current {
        t.action = ResyncAction::InStep;
        t.reason = "at a snapshot the new primary holds".into();
        return Ok(());
    }
    // Every snapshot the new primary lacks (main's walked over, and any other branch's), and the
    // files only they reference.
    let (diverged, common_ids): (Vec<i64>, Vec<i64>) = meta
        .snapshots()
        .map(|s| s.snapshot_id())
        .partition(|id| !held.contains(id));
    let walked_files = referenced(io, meta, &diverged).await?;
    let kept_by_common = referenced(io, meta, &common_ids).await?;
    let mut kept: Vec<KeptFile> = walked_files.difference(&kept_by_common).cloned().collect();
    kept.sort();
    t.diverged_snapshots = diverged;
    t.kept_files = kept;
    // The server's metadata files on main's walked-over branch, newest first: its log from the
    // pointer back to the newest file whose main the new primary holds.
    let pointer = t.demoted_pointer.clone().unwrap_or_default();
    let LogWalk {
        walked: files,
        common: common_file,
        ..
    } = walk_log(io, &pointer, held).await?;
    t.walked_over = if files.is_empty() { vec![pointer.clone()] } else { files };
    t.walked_back_to = common_file.map(|(location, _)| location);
    t.action = ResyncAction::WalkedBack;
    t.reason = format!(
        "{} snapshots of main only the demoted side has ({}), main walked back to snapshot {common} by one commit; \
         they stay in the table's metadata until expired; {} files kept and listed",
        walked.len(),
        walked.iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
        t.kept_files.len()
    );
    if dry_run {
        return Ok(());
    }
    // Recorded before the commit, as on the other kinds, so that a follower or a rebuild reading
    // this table's folder never chooses a walked-over file, however long its chain.
    let to = t.walked_back_to.clone().unwrap_or_else(|| format!("snapshot {common}"));
    if !record_walk(demoted, t, &pointer, &to).await? {
        return Ok(());
    }
    let request = CommitRequest {
        requirements: based_on(&table),
        updates: vec![iceberg::TableUpdate::SetSnapshotRef {
            ref_name: "main".into(),
            reference: main_branch(common),
        }],
    };
    tidemark_journal::failpoint::pause("resync:before-move");
    match demoted.commit(&table, request).await {
        Ok(after) => t.walked_back_to = after.metadata_location().map(str::to_string),
        Err(CommitError::Conflict { detail, .. }) => {
            t.action = ResyncAction::Conflict;
            t.reason = format!(
                "the demoted table moved while the resync ran (another writer: {detail}); nothing of this table \
                 moved: run the resync again once that writer stops"
            );
        }
        Err(e) => return Err(e.to_string()),
    }
    Ok(())
}
