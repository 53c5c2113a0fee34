//! `tidemark replica resync` (failback): make the demoted old primary converge on the new
//! primary without losing anything silently.
//!
//! Per table of either catalog:
//! - **on both**: the demoted pointer's metadata chain is walked back (through `metadata-log`)
//!   to the newest version whose current snapshot the new primary also holds (by snapshot id);
//!   the demoted pointer is swapped to it (compare-and-swap from the pointer read), after the
//!   metadata files walked over are recorded beside them (`super::resync_record`), so that a
//!   follower into the demoted catalog never chooses them as a head. The versions
//!   walked over and every file only their snapshots reference (manifest lists, manifests, data
//!   and delete files) are listed in the report and **never deleted**, so diverged data can be
//!   inspected and replayed. A table already at a common version is left alone; one whose chain
//!   shares no version with the new primary is held and named.
//! - **only on the demoted side**: reported, not deleted.
//! - **only on the new primary** (deleted, or dropped, only on the demoted side): restored from
//!   the demoted warehouse's own metadata files (head by the chain, walked back as above) and
//!   registered; when the demoted warehouse has no file of it, reported as not restorable.
//!
//! Per kind of demoted catalog:
//! - **SQL** (SQLite, PostgreSQL): as above, the pointer swapped by compare-and-swap.
//! - **AWS S3 Tables**: the same walk (the metadata files are in the table's own warehouse, each
//!   logging the one before); the pointer is moved by UpdateTableMetadataLocation with the version
//!   token read with the pointer (a stale token: someone else moved it, a conflict, nothing moved),
//!   the call the follower uses. A table deleted only there is created again like the new
//!   primary's, at its current version, as the follower creates one (see `resync_restore`).
//! - **Iceberg REST**: walked back by snapshots (see `resync_rest`): the table is renamed aside
//!   (kept, with every file) and created again at the newest snapshot both sides hold, so that
//!   its last sequence number is that snapshot's and the new primary's later snapshots can be
//!   added; the server's metadata files on the walked-over branch are recorded as on the other
//!   kinds. A table deleted only there: as S3 Tables. A table an earlier resync renamed aside is
//!   reported (`kept_aside`), on either side, never resynced or restored.
//!
//! Each walk gets a record of its own, named by the walk (`super::resync_record`), written
//! conditionally (`super::resync_record_write`): a walk is never lost to a concurrent resync of
//! the same table, nor to a replication that brings the other side's records back; one that
//! keeps losing that write is a `conflict`.
//!
//! `dry_run` plans and changes nothing. Refused while the new primary's follower state shows a
//! table whose registered version lacks files (eventual mode). After a resync, a follower of the new primary into the
//! demoted catalog (replication reversed) advances every table from a version on its chain.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, Manifest, ManifestList, TableMetadata};
use serde::Serialize;
use serde_json::Value;

use super::follow_publish::{Way, way};
use super::follow_state::{FollowerState, TableStatus};
use super::head::{HeadRead, choose_folder_head};
use super::rebuild;
use super::resync_rest::aside_of;
use crate::catalog::CatalogHandle;
use crate::table::source::file_io;
use crate::table::{TableError, parse_ident};

const RESYNC: &str = "resync the demoted catalog";

/// Version of the JSON report.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResyncAction {
    /// The demoted pointer is at a version the new primary holds.
    InStep,
    /// Walked back to the newest common version (planned, under `dry_run`).
    WalkedBack,
    /// Only the demoted side has it: reported, not deleted.
    OnlyOnDemoted,
    /// Deleted only on the demoted side: registered again at a common version.
    Restored,
    /// Deleted only on the demoted side, and its warehouse has no metadata file of it.
    NotRestorable,
    /// No version of the demoted chain is held by the new primary: nothing moved.
    NoCommonVersion,
    /// The demoted pointer moved while the resync ran: nothing moved.
    Conflict,
    /// A REST table an earlier resync renamed aside (the walked-over version, see
    /// `resync_rest`): kept with every file, never resynced, restored or deleted.
    KeptAside,
    Failed,
}

/// The walked-over REST table, renamed aside and kept (`resync_rest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AsideTable {
    /// Its name now: `<table>__walked_<the first 8 hex digits of its uuid>`, same namespace.
    pub table: String,
    /// Its location, where its metadata and data files stay.
    pub location: String,
}

/// A file only the walked-over versions reference: kept, listed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
pub struct KeptFile {
    pub path: String,
    /// `manifest list`, `manifest`, `data file`, `delete file`.
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ResyncTable {
    pub table: String,
    pub action: ResyncAction,
    pub reason: String,
    pub demoted_pointer: Option<String>,
    pub primary_pointer: Option<String>,
    /// Where the demoted pointer is (or would be) after the resync.
    pub walked_back_to: Option<String>,
    /// The newest snapshot both sides hold, where the table is (or would be) walked back to or
    /// restored at; `None` when the table has no snapshot there, or no such snapshot was found.
    pub walked_back_to_snapshot: Option<i64>,
    /// Metadata files walked over, newest first (REST: the server's files on main's walked-over
    /// branch; the snapshots walked over are `diverged_snapshots`).
    pub walked_over: Vec<String>,
    /// Snapshots only the demoted side has.
    pub diverged_snapshots: Vec<i64>,
    /// Every file only the walked-over versions reference: kept, never deleted.
    pub kept_files: Vec<KeptFile>,
    /// REST: the walked-over table, renamed aside (kept, with every file) before the table was
    /// created again at `walked_back_to_snapshot`; `None` on the other kinds.
    pub kept_aside: Option<AsideTable>,
    /// The resync record that names this walk (`<table>/metadata/tidemark-resync-<id>.json`),
    /// written before the move or found holding it; null under `dry_run`, when nothing was
    /// walked over, or when the storage refused it (the reason says so).
    pub record: Option<String>,
}

/// The result of [`resync`] (`tidemark replica resync --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ResyncReport {
    pub format_version: u32,
    pub demoted: String,
    pub primary: String,
    pub dry_run: bool,
    pub tables: Vec<ResyncTable>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResyncError {
    #[error(
        "the new primary's follower registered versions with missing files for {tables}: resync only once the new primary is complete (tidemark replica status)"
    )]
    PrimaryIncomplete { tables: String },
    #[error(transparent)]
    Catalog(#[from] TableError),
}

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

async fn read_json(io: &FileIO, location: &str) -> Result<Option<Value>, String> {
    let input = io
        .new_input(location)
        .map_err(|e| format!("cannot open {location}: {e}"))?;
    if !input
        .exists()
        .await
        .map_err(|e| format!("cannot check {location}: {e}"))?
    {
        return Ok(None);
    }
    let bytes = input.read().await.map_err(|e| format!("cannot read {location}: {e}"))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("metadata file {location} is not valid JSON: {e}"))
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
        let sides = super::resync_rest::Sides {
            demoted,
            primary,
            primary_table: &primary_table,
            held: &held,
            io,
        };
        return super::resync_rest::resync(&sides, asides, t, dry_run).await;
    }
    if way(demoted) == Way::S3Tables
        && (t.demoted_pointer.is_none() || super::resync_restore::interrupted(demoted, t, &primary_table).await?)
    {
        return super::resync_restore::restore(demoted, primary, &primary_table, t, dry_run).await;
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

/// The demoted chain from a pointer back to the newest version the new primary holds.
pub(super) struct LogWalk {
    /// The metadata files walked over, newest first.
    pub(super) walked: Vec<String>,
    /// The pointer's own metadata (`None`: its file is not there).
    pub(super) newest: Option<Value>,
    /// The newest version whose current snapshot the new primary holds (or that has none), and
    /// its metadata; `None` when the chain has no such version (or a file of it is gone).
    pub(super) common: Option<(String, Value)>,
}

/// Walks back through `metadata-log` from `start`, newest first, to a version whose current
/// snapshot is in `held` (the new primary's snapshot ids).
pub(super) async fn walk_log(io: &FileIO, start: &str, held: &HashSet<i64>) -> Result<LogWalk, String> {
    let mut location = start.to_string();
    let mut walked = Vec::new();
    let mut newest: Option<Value> = None;
    let common = loop {
        let Some(json) = read_json(io, &location).await? else {
            break None;
        };
        let current = json
            .get("current-snapshot-id")
            .and_then(Value::as_i64)
            .filter(|id| *id >= 0);
        if newest.is_none() {
            newest = Some(json.clone());
        }
        if current.is_none_or(|id| held.contains(&id)) {
            break Some((location.clone(), json));
        }
        walked.push(location.clone());
        let Some(prev) = json
            .get("metadata-log")
            .and_then(Value::as_array)
            .and_then(|l| l.last())
            .and_then(|e| e.get("metadata-file"))
            .and_then(Value::as_str)
        else {
            break None;
        };
        location = prev.to_string();
    };
    Ok(LogWalk { walked, newest, common })
}

/// Records `t.walked_over` (walked from `from` back to `to`) beside them before the move, in a
/// record of this walk's own (`resync_record_write`; its location goes to `t.record`):
/// `Ok(false)` when another resync of this table kept winning the record's write (`t` is then a
/// conflict naming the record; nothing moved). A REST table whose storage refuses the record
/// (SeaweedFS's table buckets take only Iceberg-shaped names) is walked back without one, said in
/// its reason: its walked-over metadata files stay with the table renamed aside (`resync_rest`),
/// whose history they are.
pub(super) async fn record_walk(
    demoted: &CatalogHandle,
    t: &mut ResyncTable,
    from: &str,
    to: &str,
) -> Result<bool, String> {
    let walk = super::resync_record::Walk {
        from: from.to_string(),
        walked_back_to: to.to_string(),
        walked_over: t.walked_over.clone(),
    };
    let whose = demoted.reference().to_string();
    match super::resync_record_write::record(demoted.file_io_props(), &t.table, &whose, &walk).await {
        Ok(location) => {
            t.record = location;
            Ok(true)
        }
        Err(e) if e.is_contended() => {
            t.action = ResyncAction::Conflict;
            t.reason = e.to_string();
            Ok(false)
        }
        Err(e) if e.is_refused() && way(demoted) == Way::Commit => {
            t.reason = format!(
                "{}; no resync record: the catalog's storage refuses it ({e}); the walked-over metadata files stay \
                 with the table renamed aside, whose history they are",
                t.reason
            );
            Ok(true)
        }
        Err(e) => Err(e.to_string()),
    }
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

/// Every file the snapshots `ids` of `meta` reference.
pub(super) async fn referenced(io: &FileIO, meta: &TableMetadata, ids: &[i64]) -> Result<BTreeSet<KeptFile>, String> {
    let mut out = BTreeSet::new();
    let mut seen_manifests: HashMap<String, ()> = HashMap::new();
    let file = |path: &str, what: &str| KeptFile {
        path: path.to_string(),
        what: what.to_string(),
    };
    for id in ids {
        let Some(snapshot) = meta.snapshot_by_id(*id) else {
            continue;
        };
        let list_path = snapshot.manifest_list();
        out.insert(file(list_path, "manifest list"));
        let Some(bytes) = read_opt(io, list_path).await? else {
            continue;
        };
        let list = ManifestList::parse_with_version(&bytes, meta.format_version())
            .map_err(|e| format!("cannot parse manifest list {list_path}: {e}"))?;
        for m in list.entries() {
            out.insert(file(&m.manifest_path, "manifest"));
            if seen_manifests.insert(m.manifest_path.clone(), ()).is_some() {
                continue;
            }
            let Some(bytes) = read_opt(io, &m.manifest_path).await? else {
                continue;
            };
            let manifest =
                Manifest::parse_avro(&bytes).map_err(|e| format!("cannot parse manifest {}: {e}", m.manifest_path))?;
            for entry in manifest.entries() {
                let f = entry.data_file();
                let what = match f.content_type() {
                    DataContentType::Data => "data file",
                    _ => "delete file",
                };
                out.insert(file(f.file_path(), what));
            }
        }
    }
    Ok(out)
}

async fn read_opt(io: &FileIO, path: &str) -> Result<Option<bytes::Bytes>, String> {
    let input = io.new_input(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    if !input.exists().await.map_err(|e| format!("cannot check {path}: {e}"))? {
        return Ok(None);
    }
    input
        .read()
        .await
        .map(Some)
        .map_err(|e| format!("cannot read {path}: {e}"))
}

#[cfg(test)]
#[path = "resync_tests.rs"]
mod tests;
