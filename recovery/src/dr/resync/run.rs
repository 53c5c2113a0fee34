//! The resync's run ([`resync`]): every table of either catalog, one at a time, its action
//! chosen (see the module above).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;

use super::report::{FORMAT_VERSION, KeptFile, ResyncAction, ResyncError, ResyncReport, ResyncTable};
use super::rest::aside_of;
use super::walk::{LogWalk, record_walk, referenced, walk_log};
use crate::catalog::CatalogHandle;
use crate::dr::follow::{Way, way};
use crate::dr::follow_state::{FollowerState, TableStatus};
use crate::dr::head::{HeadRead, choose_folder_head};
use crate::dr::rebuild;
use crate::table::parse_ident;
use crate::table::source::file_io;

const RESYNC: &str = "resync the demoted catalog";

/// Resyncs `demoted` onto `primary` (see the module documentation). `follower` is the new
/// primary's follower state, when it had one: a table with missing files there refuses the resync.
pub async fn resync(
    demoted: &CatalogHandle,
    primary: &CatalogHandle,
    namespace: Option<&str>,
    follower: Option<&FollowerState>,
    dry_run: bool,
) -> Result<ResyncReport, ResyncError> {
    if let Some(f) = follower {
        let missing: Vec<&str> = f
            .tables
            .iter()
            // The version the new primary holds lacks files (an eventual follower registered it);
            // a strict follower's newer versions waiting on files are not the new primary's.
            .filter(|t| t.status == TableStatus::MissingFiles && t.versions_behind == Some(0))
            .map(|t| t.table.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(ResyncError::PrimaryIncomplete {
                tables: missing.join(", "),
            });
        }
    }
    // SQL: swap (and register, to restore); S3 Tables: swap; REST: commits.
    match way(demoted) {
        Way::Pointer => demoted.require(true, true, RESYNC, crate::catalog::INSTEAD_OF_REGISTER)?,
        Way::S3Tables => demoted.require(false, true, RESYNC, crate::catalog::INSTEAD_OF_REGISTER)?,
        Way::Commit => {}
    }
    let d: BTreeMap<String, Option<String>> = demoted.pointers(namespace).await?.into_iter().collect();
    let p: BTreeMap<String, Option<String>> = primary.pointers(namespace).await?.into_iter().collect();
    let names: BTreeSet<&String> = d.keys().chain(p.keys()).collect();
    let io = file_io(demoted.file_io_props());
    let mut tables = Vec::new();
    for name in names {
        let dp = d.get(name).cloned().flatten();
        let pp = p.get(name).cloned().flatten();
        let mut t = ResyncTable {
            table: name.clone(),
            action: ResyncAction::InStep,
            reason: String::new(),
            demoted_pointer: dp.clone(),
            primary_pointer: pp.clone(),
            walked_back_to: None,
            walked_back_to_snapshot: None,
            walked_over: Vec::new(),
            diverged_snapshots: Vec::new(),
            kept_files: Vec::new(),
            kept_aside: None,
            record: None,
        };
        let asides: Vec<&str> = d
            .keys()
            .filter(|n| aside_of(n) == Some(name.as_str()))
            .map(String::as_str)
            .collect();
        if let Err(e) = resync_table(demoted, primary, &io, &asides, &mut t, dry_run).await {
            t.action = ResyncAction::Failed;
            t.reason = e;
        }
        tables.push(t);
    }
    Ok(ResyncReport {
        format_version: FORMAT_VERSION,
        demoted: demoted.reference().to_string(),
        primary: primary.reference().to_string(),
        dry_run,
        tables,
    })
}

async fn resync_table(
    demoted: &CatalogHandle,
    primary: &CatalogHandle,
    io: &FileIO,
    asides: &[&str],
    t: &mut ResyncTable,
    dry_run: bool,
) -> Result<(), String> {
    if let Some(of) = aside_of(&t.table) {
        t.action = ResyncAction::KeptAside;
        t.reason = format!(
            "the walked-over version of {of}, renamed aside by an earlier resync: kept with every file, not \
             resynced, restored or deleted (keep it: {of}, created again, reads files under its location)"
        );
        return Ok(());
    }
    if t.primary_pointer.is_none() {
        t.action = ResyncAction::OnlyOnDemoted;
        t.reason = "the new primary has no such table; reported, not deleted".into();
        return Ok(());
    }
    let ident = parse_ident(&t.table).map_err(|e| e.to_string())?;
    let primary_table = primary.catalog().load_table(&ident).await.map_err(|e| e.to_string())?;
    let held: HashSet<i64> = primary_table.metadata().snapshots().map(|s| s.snapshot_id()).collect();
    if way(demoted) == Way::Commit {
        let sides = super::rest::Sides {
            demoted,
            primary,
            primary_table: &primary_table,
            held: &held,
            io,
        };
        return super::rest::resync(&sides, asides, t, dry_run).await;
    }
    if way(demoted) == Way::S3Tables
        && (t.demoted_pointer.is_none() || super::restore::interrupted(demoted, t, &primary_table).await?)
    {
        return super::restore::restore(demoted, primary, &primary_table, t, dry_run).await;
    }

    // The demoted head: its pointer, or (deleted there) the head of its own files.
    let (start, restoring) = match &t.demoted_pointer {
        Some(p) => (p.clone(), false),
        None => match demoted_head(demoted, &t.table).await? {
            Ok(head) => (head, true),
            Err(why) => {
                t.action = ResyncAction::NotRestorable;
                t.reason = why;
                return Ok(());
            }
        },
    };
    let LogWalk { walked, newest, common } = walk_log(io, &start, &held).await?;
    let Some((common_loc, common_json)) = common else {
        t.action = ResyncAction::NoCommonVersion;
        t.walked_over = walked;
        t.reason = "no version of the demoted chain has a current snapshot the new primary holds; nothing moved".into();
        return Ok(());
    };
    // Files only the walked-over versions reference.
    let newest = newest.expect("the common version was read, so the pointer's file was");
    let newest_meta: TableMetadata = serde_json::from_value(newest).map_err(|e| e.to_string())?;
    let common_meta: TableMetadata = serde_json::from_value(common_json).map_err(|e| e.to_string())?;
    let common_ids: HashSet<i64> = common_meta.snapshots().map(|s| s.snapshot_id()).collect();
    let diverged: Vec<i64> = newest_meta
        .snapshots()
        .map(|s| s.snapshot_id())
        .filter(|id| !common_ids.contains(id) && !held.contains(id))
        .collect();
    let walked_files = referenced(io, &newest_meta, &diverged).await?;
    let kept_ids: Vec<i64> = common_ids.iter().copied().collect();
    let kept_by_common = referenced(io, &common_meta, &kept_ids).await?;
    let mut kept: Vec<KeptFile> = walked_files.difference(&kept_by_common).cloned().collect();
    kept.sort();
    t.diverged_snapshots = diverged;
    t.kept_files = kept;
    t.walked_over = walked;
    t.walked_back_to = Some(common_loc.clone());
    t.walked_back_to_snapshot = common_meta.current_snapshot_id();
    // Recorded before the move, so a later follower into this table never chooses them.
    if !dry_run && !record_walk(demoted, t, &start, &common_loc).await? {
        return Ok(());
    }

    if restoring {
        t.action = ResyncAction::Restored;
        t.reason = format!("deleted only on the demoted side; registered again at {common_loc}");
        if !dry_run {
            demoted
                .register_table(&ident, &common_loc)
                .await
                .map_err(|e| e.to_string())?;
        }
        return Ok(());
    }
    if common_loc == start {
        t.action = ResyncAction::InStep;
        t.reason = "at a version the new primary holds".into();
        return Ok(());
    }
    t.action = ResyncAction::WalkedBack;
    t.reason = format!(
        "{} versions only the demoted side has, walked back to {common_loc}; {} files kept and listed",
        t.walked_over.len(),
        t.kept_files.len()
    );
    if dry_run {
        return Ok(());
    }
    tidemark_journal::failpoint::pause("resync:before-move");
    if !demoted
        .swap_metadata_pointer(&ident, &start, &common_loc)
        .await
        .map_err(|e| e.to_string())?
    {
        t.action = ResyncAction::Conflict;
        t.reason = format!(
            "the demoted pointer moved away from {start} while the resync ran (another writer); nothing of this table \
             moved: run the resync again once that writer stops"
        );
    }
    Ok(())
}

/// The head of a table's own metadata files in the demoted catalog's warehouse, chosen as the
/// follower and `catalog rebuild` choose (files a resync walked over, and their descendants, are
/// never a head: `resync_record`); `Ok(Err(why))` when there is none to restore from.
async fn demoted_head(demoted: &CatalogHandle, table: &str) -> Result<Result<String, String>, String> {
    const NONE: &str = "deleted on the demoted side and its warehouse holds no metadata file of it; create it from the \
                        new primary";
    let warehouse = demoted.warehouse();
    if warehouse.is_empty() {
        return Ok(Err(NONE.into()));
    }
    let store = tidemark_journal::store::open(warehouse)
        .await
        .map_err(|e| e.to_string())?;
    let ns = table.rsplit_once('.').map(|(ns, _)| ns);
    let found = rebuild::discover(store.as_ref(), ns).await.map_err(|e| e.to_string())?;
    let Some(files) = found.iter().find(|f| f.ident() == table) else {
        return Ok(Err(NONE.into()));
    };
    let folder = choose_folder_head(store.as_ref(), files, HeadRead::default())
        .await
        .map_err(|e| e.to_string())?;
    if let Some(reason) = &folder.unreadable_record {
        return Err(reason.clone());
    }
    let (choice, excluded) = (&folder.choice, &folder.excluded);
    // The head only says where the walk back starts: it ends at the newest version the new
    // primary holds from any file of the chain. When the files outside the walked-over ones tie,
    // the head of all of them is taken (a walked-over file: its walk ends at the same version).
    let head = choice.head.clone().or_else(|| folder.head_of_all_files());
    Ok(match head {
        Some(k) => Ok(format!("{}/{k}", warehouse.trim_end_matches('/'))),
        None => Err(format!(
            "deleted on the demoted side, and its own metadata files give no head to restore from: {}{}; create it \
             from the new primary",
            choice.reason, excluded.note
        )),
    })
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
