//! `replica resync` of a demoted **Iceberg REST** catalog: the server writes every metadata file
//! itself and moves a table only through commits, so a table is walked back by snapshots, not by
//! metadata files; and since a v2 table refuses a new snapshot whose sequence number is not above
//! its `last-sequence-number`, which the walked-over snapshots raised, the table is **created
//! again** at the common snapshot rather than having `main` moved back (which would leave the new
//! primary's next snapshots refused when the follower brings them, issue 13).
//!
//! Per table: main's ancestry is walked from the current snapshot back to the newest snapshot the
//! new primary also holds (by snapshot id). Then:
//! 1. the server's metadata files on the walked-over branch (its metadata log from the pointer
//!    back to the newest file whose main the new primary holds) are recorded beside them
//!    (`resync_record_write`), as on the other kinds;
//! 2. the table is re-read (moved since the plan: someone else's commit, a `conflict`, nothing
//!    moved) and **renamed aside** to `<table>__walked_<first 8 hex digits of its uuid>` in the
//!    same namespace (the REST rename endpoint). Renaming moves no file (SeaweedFS 4.48: the
//!    catalog entry only; the files stay at the table's location) and deletes nothing: the aside
//!    keeps every snapshot, branch, tag and file the table had, and is reported (`kept_aside`) with
//!    every file only the walked-over snapshots reference (`kept_files`). A later resync reports
//!    it as `kept_aside`, on either side, and never resyncs, restores or deletes it; the follower
//!    ignores it (it follows the replica's tables);
//! 3. a table is created at the original name like the aside at the common snapshot (its schema
//!    then, default partition spec and sort order with their field ids, and its properties then),
//!    marked with [`SOURCE_UUID_PROP`] (the new primary's uuid, as the follower's tables are) and
//!    [`RECREATED_FROM_PROP`] (the aside's name);
//! 4. one commit adds main's ancestry up to and including the common snapshot, oldest first, with
//!    the aside's own manifest lists (snapshot ids, parents, sequence numbers, timestamps and
//!    summaries kept), and sets main there (`follow::publish::commit_towards`): the table's last
//!    sequence number is the common snapshot's, and a follower of the new primary into this
//!    catalog recognises it (main at a snapshot of the replica's chain, same properties) and adds
//!    the new primary's later snapshots.
//!
//! The aside's own manifest lists, not the new primary's: they are the files this catalog's table
//! read at that snapshot, in its own storage, while the new primary's are on the other site; the
//! follower judges a REST table by snapshot ids and properties, never by manifest list paths.
//!
//! A run stopped after the create (`resync:after-create`: an empty table marked with
//! [`RECREATED_FROM_PROP`]) is finished by the next run, which fills it from that aside. One
//! stopped after the rename (`resync:after-rename`: the name is missing while the new primary has
//! it) looks like a table deleted only on the demoted side, and is finished as one, as on S3
//! Tables (`restore.rs`): created like the new primary's table at its current version; the
//! report then names the newest aside of it (by its last update) whose main reaches a snapshot the
//! new primary holds, with what only that aside holds. (A table created again and dropped since
//! leaves the same state; telling the two apart would need a mark on the aside, a commit to the
//! walked-over table, which a skewed commit clock can make the server refuse.)

use std::collections::{HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use serde_json::{Value, json};

use super::report::{AsideTable, KeptFile, ResyncAction, ResyncTable};
use super::walk::{LogWalk, record_walk, referenced, walk_log};
use crate::catalog::CatalogHandle;
use crate::dr::follow::Step;
use crate::dr::follow::publish::{Moved, commit_towards};
use crate::dr::follow::{SOURCE_UUID_PROP, Target};
use crate::table::{create_table_like, load_table, parse_ident};

/// Set on a table `replica resync` created again: the name of the walked-over table it renamed
/// aside (so that a run stopped after the create finishes from it).
pub const RECREATED_FROM_PROP: &str = "tidemark.resync.recreated-from";

const ASIDE_MARK: &str = "__walked_";

/// What the resync of one REST table reads: both sides, and the new primary's snapshot ids.
pub(in crate::dr) struct Sides<'a> {
    pub(in crate::dr) demoted: &'a CatalogHandle,
    pub(in crate::dr) primary: &'a CatalogHandle,
    pub(in crate::dr) primary_table: &'a Table,
    pub(in crate::dr) held: &'a HashSet<i64>,
    pub(in crate::dr) io: &'a FileIO,
}

/// The name `table` (`ns.name`) is renamed aside to: `ns.name__walked_<8 hex digits of uuid>`.
pub(in crate::dr) fn aside_name(table: &str, uuid: &uuid::Uuid) -> String {
    format!("{table}{ASIDE_MARK}{}", &uuid.simple().to_string()[..8])
}

/// The table `name` is the aside of, when it is one (`ns.name__walked_<8 hex digits>`).
pub(crate) fn aside_of(name: &str) -> Option<&str> {
    let (of, tag) = name.rsplit_once(ASIDE_MARK)?;
    let short = tag.len() == 8 && tag.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    (short && !of.is_empty() && !of.ends_with('.')).then_some(of)
}

/// Resyncs the REST table `t` (see the module documentation). `asides`: the demoted catalog's
/// tables that are asides of `t`.
pub(in crate::dr) async fn resync(
    s: &Sides<'_>,
    asides: &[&str],
    t: &mut ResyncTable,
    dry_run: bool,
) -> Result<(), String> {
    let table = match &t.demoted_pointer {
        Some(_) => Some(load_table(s.demoted, &t.table).await.map_err(|e| e.to_string())?),
        None => None,
    };
    if let Some(aside) = pending(s, table.as_ref(), asides).await? {
        return recreate(s, &aside, table, t, dry_run, None).await;
    }
    // Deleted only here (or a restore a run before began): restored as on S3 Tables.
    let restore = match &table {
        None => true,
        Some(_) => super::restore::interrupted(s.demoted, t, s.primary_table).await?,
    };
    if let (false, Some(table)) = (restore, table) {
        return walk_back(s, table, t, dry_run).await;
    }
    // With an aside of it (a run stopped after its rename, or the table created again was dropped
    // since): the aside is reported with what only it holds.
    if let Some(aside) = &newest_aside(s, asides).await? {
        t.kept_aside = Some(AsideTable {
            table: aside.identifier().to_string(),
            location: aside.metadata().location().to_string(),
        });
        plan(s, aside, t).await?;
        t.walked_back_to = None;
    }
    super::restore::restore(s.demoted, s.primary, s.primary_table, t, dry_run).await?;
    if let Some(a) = &t.kept_aside {
        t.reason = format!(
            "{}; {} is this table renamed aside by a resync before (kept, with every file: the snapshots only it \
             holds and their files are listed)",
            t.reason, a.table
        );
    }
    Ok(())
}

/// A re-create a run before began and did not finish filling: the table at the name is empty
/// and marked with the name of an aside of it; that aside.
async fn pending(s: &Sides<'_>, table: Option<&Table>, asides: &[&str]) -> Result<Option<Table>, String> {
    let Some(meta) = table.map(Table::metadata) else {
        return Ok(None);
    };
    match meta.properties().get(RECREATED_FROM_PROP) {
        Some(from) if meta.snapshots().next().is_none() && asides.contains(&from.as_str()) => {
            Ok(Some(load_table(s.demoted, from).await.map_err(|e| e.to_string())?))
        }
        _ => Ok(None),
    }
}

/// The newest aside of a table (by its last update) whose main reaches a snapshot the new
/// primary holds.
async fn newest_aside(s: &Sides<'_>, asides: &[&str]) -> Result<Option<Table>, String> {
    let mut newest: Option<Table> = None;
    for name in asides {
        let aside = load_table(s.demoted, name).await.map_err(|e| e.to_string())?;
        if common_of(aside.metadata(), s.held).is_none() {
            continue;
        }
        if newest
            .as_ref()
            .is_none_or(|n| aside.metadata().last_updated_ms() > n.metadata().last_updated_ms())
        {
            newest = Some(aside);
        }
    }
    Ok(newest)
}

/// Main's ancestry from the current snapshot, newest first, down to the newest snapshot in `held`:
/// (the snapshots walked over, that snapshot); `None` when no snapshot of it is held (or there is
/// no snapshot).
fn common_of(meta: &TableMetadata, held: &HashSet<i64>) -> Option<(Vec<i64>, i64)> {
    let mut walked = Vec::new();
    let mut next = meta.current_snapshot_id();
    while let Some(id) = next {
        if held.contains(&id) {
            return Some((walked, id));
        }
        walked.push(id);
        next = meta.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
    }
    None
}

/// The walk back of `table` (planned, not done): main's walked-over snapshots, the common one,
/// and main's properties at the common snapshot when a metadata file of the server says them.
struct Plan {
    walked: Vec<i64>,
    common: i64,
    properties: Option<Value>,
}

/// Plans the walk back of `table` into `t` (snapshots and files kept, metadata files walked
/// over); `None` when it has no snapshot or none the new primary holds (`t` says which).
async fn plan(s: &Sides<'_>, table: &Table, t: &mut ResyncTable) -> Result<Option<Plan>, String> {
    let meta = table.metadata();
    if meta.current_snapshot_id().is_none() {
        t.action = ResyncAction::InStep;
        t.reason = "no snapshot on the demoted side".into();
        return Ok(None);
    }
    let Some((walked, common)) = common_of(meta, s.held) else {
        let mut next = meta.current_snapshot_id();
        t.diverged_snapshots.clear();
        while let Some(id) = next {
            t.diverged_snapshots.push(id);
            next = meta.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
        }
        t.action = ResyncAction::NoCommonVersion;
        t.reason = "no snapshot of the demoted main's ancestry is held by the new primary; nothing moved".into();
        return Ok(None);
    };
    t.walked_back_to_snapshot = Some(common);
    if walked.is_empty() {
        return Ok(Some(Plan {
            walked,
            common,
            properties: None,
        }));
    }
    // Every snapshot the new primary lacks (main's walked over, and any other branch's), and the
    // files only they reference.
    let (diverged, common_ids): (Vec<i64>, Vec<i64>) = meta
        .snapshots()
        .map(|s| s.snapshot_id())
        .partition(|id| !s.held.contains(id));
    let walked_files = referenced(s.io, meta, &diverged).await?;
    let kept_by_common = referenced(s.io, meta, &common_ids).await?;
    let mut kept: Vec<KeptFile> = walked_files.difference(&kept_by_common).cloned().collect();
    kept.sort();
    t.diverged_snapshots = diverged;
    t.kept_files = kept;
    // The server's metadata files on main's walked-over branch, newest first: its log from the
    // pointer back to the newest file whose main the new primary holds.
    let pointer = table.metadata_location().unwrap_or_default().to_string();
    let LogWalk {
        walked: files,
        common: common_file,
        ..
    } = walk_log(s.io, &pointer, s.held).await?;
    t.walked_over = if files.is_empty() { vec![pointer] } else { files };
    let properties = common_file
        .as_ref()
        .filter(|(_, j)| j.get("current-snapshot-id").and_then(Value::as_i64) == Some(common))
        .and_then(|(_, j)| j.get("properties").cloned());
    t.walked_back_to = common_file.map(|(location, _)| location);
    Ok(Some(Plan {
        walked,
        common,
        properties,
    }))
}

fn ids(walked: &[i64]) -> String {
    walked.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// Walks the loaded REST table `table` back: plan, record, rename aside, create again.
async fn walk_back(s: &Sides<'_>, table: Table, t: &mut ResyncTable, dry_run: bool) -> Result<(), String> {
    let Some(p) = plan(s, &table, t).await? else {
        return Ok(());
    };
    if p.walked.is_empty() {
        t.action = ResyncAction::InStep;
        t.reason = "at a snapshot the new primary holds".into();
        return Ok(());
    }
    let meta = table.metadata();
    let aside = aside_name(&t.table, &meta.uuid());
    t.kept_aside = Some(AsideTable {
        table: aside.clone(),
        location: meta.location().to_string(),
    });
    t.action = ResyncAction::WalkedBack;
    t.reason = format!(
        "{} snapshots of main only the demoted side has ({}): the table is renamed aside to {aside} (kept, with \
         every file) and created again at snapshot {}; {} files kept and listed",
        p.walked.len(),
        ids(&p.walked),
        p.common,
        t.kept_files.len()
    );
    if dry_run {
        return Ok(());
    }
    // Recorded before anything moves, as on the other kinds, so that a follower or a rebuild
    // reading this table's folder never chooses a walked-over file, however long its chain.
    let pointer = table.metadata_location().unwrap_or_default().to_string();
    let said = t.reason.len();
    if !record(s, &table, p.common, t).await? {
        return Ok(());
    }
    let note = t.reason[said..].to_string();
    tidemark_journal::failpoint::pause("resync:before-move");
    // A rename has no requirements: the table is read again first (a commit landing between this
    // read and the rename is in the aside, kept, and the plan is made again from the aside).
    let now = load_table(s.demoted, &t.table).await.map_err(|e| e.to_string())?;
    if now.metadata_location() != Some(pointer.as_str()) {
        t.action = ResyncAction::Conflict;
        t.kept_aside = None;
        t.reason = format!(
            "the demoted table moved away from {pointer} while the resync ran (another writer, now at {}); \
             nothing of this table moved: run the resync again once that writer stops",
            now.metadata_location().unwrap_or("nothing")
        );
        return Ok(());
    }
    let (from, into) = (
        parse_ident(&t.table).map_err(|e| e.to_string())?,
        parse_ident(&aside).map_err(|e| e.to_string())?,
    );
    s.demoted
        .catalog()
        .rename_table(&from, &into)
        .await
        .map_err(|e| format!("cannot rename {} aside to {aside}: {e}", t.table))?;
    tidemark_journal::failpoint::hit("resync:after-rename");
    let aside_table = load_table(s.demoted, &aside).await.map_err(|e| e.to_string())?;
    recreate(s, &aside_table, None, t, false, Some(note)).await
}

/// Records the walk of `table` back to `common` (`t.walked_over`) beside its files
/// (`resync::record_walk`): `Ok(false)` when that was a conflict (`t` says so).
async fn record(s: &Sides<'_>, table: &Table, common: i64, t: &mut ResyncTable) -> Result<bool, String> {
    let pointer = table.metadata_location().unwrap_or_default().to_string();
    let to = t.walked_back_to.clone().unwrap_or_else(|| format!("snapshot {common}"));
    record_walk(s.demoted, t, &pointer, &to).await
}

/// `meta` as of main at `common`: main there, its schema current, and `properties` (main's at
/// `common`, when known) as the table's.
fn at_snapshot(meta: &TableMetadata, common: i64, properties: Option<Value>) -> Result<TableMetadata, String> {
    let mut j = serde_json::to_value(meta).map_err(|e| format!("cannot serialize the table's metadata: {e}"))?;
    j["current-snapshot-id"] = json!(common);
    j["refs"] = json!({ "main": { "snapshot-id": common, "type": "branch" } });
    if let Some(schema) = meta.snapshot_by_id(common).and_then(|s| s.schema_id()) {
        j["current-schema-id"] = json!(schema);
    }
    if let Some(p) = properties {
        j["properties"] = p;
    }
    serde_json::from_value(j).map_err(|e| format!("the table's metadata at snapshot {common} is not valid: {e}"))
}

/// Creates `t` again from the aside `aside` at the newest snapshot the new primary holds (or
/// fills `created`, the table a run before created and left empty). `recorded`: the note of this
/// run's record of the walk (`None`: finishing what a run before began, which records it again;
/// a record holding the walk already is left as it is).
async fn recreate(
    s: &Sides<'_>,
    aside: &Table,
    created: Option<Table>,
    t: &mut ResyncTable,
    dry_run: bool,
    recorded: Option<String>,
) -> Result<(), String> {
    let resumed = recorded.is_none();
    let aside_name = aside.identifier().to_string();
    t.kept_aside = Some(AsideTable {
        table: aside_name.clone(),
        location: aside.metadata().location().to_string(),
    });
    let Some(p) = plan(s, aside, t).await? else {
        return Ok(());
    };
    t.action = ResyncAction::WalkedBack;
    let begun = if resumed {
        format!(
            "a resync before renamed it aside to {aside_name} and stopped before filling the table it created again: "
        )
    } else {
        String::new()
    };
    t.reason = format!(
        "{begun}{} snapshots of main only the demoted side has ({}): renamed aside to {aside_name} (kept, with every \
         file) and created again at snapshot {}; {} files kept and listed{}",
        p.walked.len(),
        ids(&p.walked),
        p.common,
        t.kept_files.len(),
        recorded.unwrap_or_default()
    );
    if dry_run || (resumed && !record(s, aside, p.common, t).await?) {
        return Ok(());
    }
    let want = at_snapshot(aside.metadata(), p.common, p.properties)?;
    let created = match created {
        Some(c) => c,
        None => {
            let marker = HashMap::from([
                (
                    SOURCE_UUID_PROP.to_string(),
                    s.primary_table.metadata().uuid().to_string(),
                ),
                (RECREATED_FROM_PROP.to_string(), aside_name.clone()),
            ]);
            let c = create_table_like(s.demoted, &t.table, &want, want.current_schema(), marker)
                .await
                .map_err(|e| format!("creating it again: {e}"))?;
            tidemark_journal::failpoint::hit("resync:after-create");
            c
        }
    };
    let target = Target {
        handle: s.demoted,
        base: "",
        prefix_map: None,
        file_io_props: s.demoted.file_io_props(),
        lease: None,
    };
    match commit_towards(&target, created, &want, None).await {
        Ok(Moved::To(location)) => t.walked_back_to = Some(location),
        Ok(Moved::Conflict(why)) => {
            t.action = ResyncAction::Conflict;
            t.reason = format!(
                "{}; filling the table created again: {why} (the aside {aside_name} keeps everything; run the \
                 resync again once that writer stops)",
                t.reason
            );
        }
        Ok(Moved::Held(why)) => {
            t.action = ResyncAction::Failed;
            t.reason = format!("{}; cannot fill the table created again: {why}", t.reason);
        }
        Err(Step::Lease(e)) => return Err(e.to_string()),
        Err(Step::Other(e)) => return Err(format!("filling the table created again: {e}")),
    }
    Ok(())
}

#[cfg(test)]
#[path = "rest_tests.rs"]
mod tests;
