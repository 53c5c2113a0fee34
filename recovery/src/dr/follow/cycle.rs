//! One cycle of the warm follower ([`cycle`]): every table folder of the replica, its head, its
//! target and its move (the steps in the module above).

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;
use tidemark_journal::clock::Clock;
use tidemark_journal::store::{self, ObjectStore};

use super::publish;
use super::recognise;
use super::step::{Step, rewrite_name, snapshot_id_of};
use super::target::{Target, Way, way};
use crate::catalog::CatalogHandle;
use crate::dr::follow_state::{FollowMode, FollowerState, TableState, TableStatus, WaitingFile};
use crate::dr::head::{FolderHead, HeadRead, choose_folder_head};
use crate::dr::lease::{Lease, LeaseError};
use crate::dr::rebuild::{self, DrError, TableFiles, file_name, warehouse_base};
use crate::dr::replica::{self, MAX_MISSING_LISTED};
use crate::dr::resync_record;
use crate::table::source::{PrefixMap, file_io};
use crate::table::{TableError, load_table, parse_ident};

/// What to follow, and how.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// The replica warehouse (folder or `s3://…`).
    pub warehouse: String,
    pub namespace: Option<String>,
    pub mode: FollowMode,
    pub prefix_map: Option<PrefixMap>,
    /// FileIO properties to read the replica's files with.
    pub file_io_props: HashMap<String, String>,
    pub holder: String,
    pub interval_ms: Option<u64>,
}

/// Why a cycle stopped before it finished.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Dr(#[from] DrError),
    #[error(transparent)]
    Catalog(#[from] TableError),
}

/// Refuses a catalog the follower cannot write, before anything changes (see
/// [`super::publish`] for what each kind of catalog needs).
pub fn require_capabilities(handle: &CatalogHandle) -> Result<(), TableError> {
    super::target::require_capabilities(handle)
}

/// One scan of the replica and the moves it allows. `previous` is the state the last cycle
/// wrote. Per-table trouble goes into the state; an error means the follower must stop (its
/// lease is lost, or the warehouse cannot be listed).
pub async fn cycle(
    opts: &FollowOptions,
    handle: &CatalogHandle,
    lease: &Lease,
    previous: Option<&FollowerState>,
    cycle_no: u64,
    clock: &dyn Clock,
) -> Result<FollowerState, FollowError> {
    let started = Instant::now();
    require_capabilities(handle)?;
    // A fenced follower stops before it reads anything (and checks again before every write).
    lease.check().await?;
    let base = warehouse_base(&opts.warehouse)?;
    let store = store::open(&opts.warehouse).await.map_err(|source| DrError::Open {
        warehouse: opts.warehouse.clone(),
        source,
    })?;
    let now = clock.now();
    let found = rebuild::discover(store.as_ref(), opts.namespace.as_deref()).await?;
    let ctx = Ctx {
        opts,
        handle,
        lease,
        base: &base,
        store: store.as_ref(),
        now,
    };
    let mut tables = Vec::with_capacity(found.len());
    for files in &found {
        let prev = previous.and_then(|p| p.table(&files.ident()));
        match follow_table(&ctx, files, prev).await {
            Ok(t) => tables.push(t),
            // A lost lease stops the whole follower: nothing more is written.
            Err(Step::Lease(e)) => return Err(e.into()),
            Err(Step::Other(reason)) => tables.push(failed(files.ident(), prev, reason, now)),
        }
    }
    // A table the replica no longer has keeps its last standing, held, so it is not forgotten.
    if let Some(p) = previous {
        for t in &p.tables {
            if !tables.iter().any(|n| n.table == t.table) {
                let mut kept = t.clone();
                kept.status = TableStatus::Held;
                kept.reason = "no metadata file of this table is on the replica any more; nothing moved".into();
                kept.last_scan_at = stamp(now);
                tables.push(kept);
            }
        }
    }
    tables.sort_by(|a, b| a.table.cmp(&b.table));
    Ok(FollowerState {
        format_version: crate::dr::follow_state::FORMAT_VERSION,
        catalog: handle.reference().to_string(),
        warehouse: base,
        namespace: opts.namespace.clone(),
        mode: opts.mode,
        prefix_map: opts.prefix_map.as_ref().map(|m| format!("{}={}", m.from, m.to)),
        holder: opts.holder.clone(),
        cycle: cycle_no,
        interval_ms: opts.interval_ms,
        last_scan_at: stamp(now),
        scan_ms: started.elapsed().as_millis() as u64,
        tables,
    })
}

pub(in crate::dr) struct Ctx<'a> {
    pub(in crate::dr) opts: &'a FollowOptions,
    pub(in crate::dr) handle: &'a CatalogHandle,
    pub(in crate::dr) lease: &'a Lease,
    pub(in crate::dr) base: &'a str,
    pub(in crate::dr) store: &'a dyn ObjectStore,
    pub(in crate::dr) now: DateTime<Utc>,
}

impl<'a> Ctx<'a> {
    /// What [`publish`] needs of this cycle.
    pub(in crate::dr) fn target(&self) -> Target<'a> {
        Target {
            handle: self.handle,
            base: self.base,
            prefix_map: self.opts.prefix_map.as_ref(),
            file_io_props: &self.opts.file_io_props,
            lease: Some(self.lease),
        }
    }
}

pub(crate) fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A table whose scan failed keeps what the DR catalog holds.
fn failed(table: String, prev: Option<&TableState>, reason: String, now: DateTime<Utc>) -> TableState {
    let mut t = prev.cloned().unwrap_or_else(|| blank(table, now));
    // A refusal of the credentials is its own standing (exit 8), not a failed read.
    t.status = if tidemark_journal::store::is_refusal_text(&reason) {
        TableStatus::Refused
    } else {
        TableStatus::Failed
    };
    t.reason = reason;
    t.last_scan_at = stamp(now);
    t
}

fn blank(table: String, now: DateTime<Utc>) -> TableState {
    TableState {
        table,
        status: TableStatus::Held,
        reason: String::new(),
        verified_metadata: None,
        verified_snapshot_id: None,
        verified_ms: None,
        verified_position: None,
        registered_metadata: None,
        latest_metadata: None,
        latest_ms: None,
        latest_position: None,
        versions_behind: None,
        behind_ms: None,
        missing: Vec::new(),
        missing_count: 0,
        strays: Vec::new(),
        head_choice: String::new(),
        last_advanced_at: None,
        last_scan_at: stamp(now),
    }
}

/// The journal position a metadata file's table holds: `tidemark.last-position` of its current
/// snapshot or the nearest ancestor that records one.
pub(crate) fn position_of(json: &Value) -> Option<u64> {
    let snapshots = json.get("snapshots")?.as_array()?;
    let by_id = |id: i64| {
        snapshots
            .iter()
            .find(|s| s.get("snapshot-id").and_then(Value::as_i64) == Some(id))
    };
    let mut next = json.get("current-snapshot-id").and_then(Value::as_i64);
    while let Some(s) = next.and_then(by_id) {
        if let Some(p) = s
            .pointer("/summary/tidemark.last-position")
            .and_then(Value::as_str)
            .and_then(|p| p.parse().ok())
        {
            return Some(p);
        }
        next = s.get("parent-snapshot-id").and_then(Value::as_i64);
    }
    None
}

fn ms_of(json: &Value) -> Option<i64> {
    json.get("last-updated-ms").and_then(Value::as_i64)
}

/// The follower's own rewrites are never heads: a file named as the rewrite of the file its log
/// ends with.
fn is_own_rewrite(key: &str, json: &Value) -> bool {
    let last = json
        .get("metadata-log")
        .and_then(Value::as_array)
        .and_then(|l| l.last())
        .and_then(|e| e.get("metadata-file"))
        .and_then(Value::as_str);
    last.and_then(rewrite_name).is_some_and(|n| n == file_name(key))
}

async fn follow_table(ctx: &Ctx<'_>, files: &TableFiles, prev: Option<&TableState>) -> Result<TableState, Step> {
    let table = files.ident();
    let ident = parse_ident(&table)?;
    let now = ctx.now;
    let mut out = prev.cloned().unwrap_or_else(|| blank(table.clone(), now));
    out.last_scan_at = stamp(now);
    out.missing.clear();
    out.missing_count = 0;

    // Every file is read (the target is chosen along the chain); the follower's own rewrites
    // and what a `replica resync` walked over (and what descends from it) are never heads. A
    // record that is there but cannot be read may name the very file that would be chosen: held.
    let hint = prev.and_then(|p| p.latest_metadata.clone().or(p.verified_metadata.clone()));
    let how = HeadRead {
        hint: hint.as_deref(),
        every_file: true,
        not_candidate: Some(is_own_rewrite),
    };
    let folder = choose_folder_head(ctx.store, files, how).await?;
    // A file named as this follower's rewrite of a replica file here is its own, torn by a run
    // stopped while writing it (before its pointer moved): written again when that version is
    // published, never a head. Any other file that does not parse may be the newest head.
    let own_rewrites: Vec<String> = folder.parsed.iter().filter_map(|(k, _)| rewrite_name(k)).collect();
    let unknown: Vec<&str> = folder
        .unparsable_off_chain()
        .into_iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !own_rewrites.iter().any(|r| r == file_name(k)))
        .collect();
    let chain = folder.chain_names();
    let FolderHead {
        parsed,
        excluded,
        unreadable_record,
        choice,
        ..
    } = &folder;
    if let Some(reason) = unreadable_record {
        out.status = TableStatus::Held;
        out.reason = format!("{reason}; nothing moved");
        return Ok(out);
    }
    let resync_record::Excluded {
        keys: walked,
        note: walked_note,
        snapshots: walked_snapshots,
    } = excluded;
    if parsed.is_empty() && !walked.is_empty() {
        out.status = TableStatus::Held;
        out.strays = walked.clone();
        out.head_choice = walked_note.clone();
        out.reason = "every metadata file of this table was walked over by replica resync: nothing to follow until \
                      the new primary's files arrive; nothing moved"
            .into();
        return Ok(out);
    }
    out.strays = choice.strays.clone();
    out.strays.extend(walked.iter().cloned());
    out.strays.sort();
    out.head_choice = format!("{}{walked_note}", choice.reason);
    let Some(head_key) = choice.head.clone() else {
        out.status = TableStatus::Held;
        out.reason = choice.refused.clone().unwrap_or(choice.reason.clone());
        return Ok(out);
    };
    let by_name: HashMap<&str, &Value> = parsed.iter().map(|(k, j)| (file_name(k), j)).collect();
    let key_of: HashMap<&str, &str> = parsed.iter().map(|(k, _)| (file_name(k), k.as_str())).collect();
    if !unknown.is_empty() {
        out.status = TableStatus::Held;
        out.reason = format!(
            "metadata file(s) {} cannot be parsed (a copy still arriving, or torn) and the head {head_key} does \
             not name them: one may be the newest head; nothing moved",
            unknown.join(", ")
        );
        return Ok(out);
    }
    let head_json = by_name[chain[0]];
    out.latest_metadata = Some(head_key.clone());
    out.latest_ms = ms_of(head_json);
    out.latest_position = position_of(head_json);

    // Who else touched the DR pointer?
    let pointer = ctx.handle.metadata_pointer(&ident).await?;
    let on_walked = match (way(ctx.handle), pointer.as_deref()) {
        (_, None) => None,
        // A REST table's pointer is the server's newest file, which logs the walked-over files
        // even once main is walked back: judged by main's snapshot.
        (Way::Commit, Some(p)) if !walked_snapshots.is_empty() => {
            let dr = load_table(ctx.handle, &table).await?;
            dr.metadata()
                .current_snapshot_id()
                .filter(|id| walked_snapshots.contains(id))
                .map(|id| format!("{p} (main at snapshot {id})"))
        }
        (Way::Commit, Some(_)) => None,
        (_, Some(p)) => walked
            .iter()
            .any(|w| file_name(w) == file_name(p))
            .then(|| p.to_string()),
    };
    if let Some(p) = on_walked {
        out.status = TableStatus::Held;
        out.reason = format!(
            "the catalog points at {p}, a version replica resync walked over (or one descending from it): the resync \
             stopped before its move, or another writer committed after it; run tidemark replica resync again; \
             nothing moved"
        );
        return Ok(out);
    }
    let mine = prev.and_then(|p| p.registered_metadata.as_deref());
    let prev_held: Option<&str> = prev.and_then(|p| p.verified_metadata.as_deref()).map(file_name);
    let mut held_name: Option<&str> = prev_held;
    match (mine, pointer.as_deref()) {
        (Some(m), Some(p)) if m == p => {}
        (Some(m), None) => {
            out.status = TableStatus::Conflict;
            out.reason = format!(
                "the DR catalog points at nothing (the table was dropped) but this follower last registered {m}: \
                 someone else changed it; not touched"
            );
            return Ok(out);
        }
        (None, None) => held_name = None,
        (mine, Some(p)) => {
            let holds =
                recognise::recognise(&ctx.target(), &table, p, mine.is_some(), &chain, &key_of, &by_name).await?;
            // A version at or after the one the state records is this follower's own write, from
            // a run stopped before it wrote its state: adopted. Anything else is someone else's.
            let pos = |n: &str| chain.iter().position(|c| *c == n);
            let adopted = match holds {
                recognise::Holds::At(n) => match prev_held.map(|h| (pos(h), pos(n))) {
                    None => Some(Some(n)),
                    Some((Some(h), Some(i))) if i <= h => Some(Some(n)),
                    _ => None,
                },
                recognise::Holds::Created if mine.is_none() => Some(None),
                _ => None,
            };
            let Some(at) = adopted else {
                out.status = TableStatus::Conflict;
                out.reason = match mine {
                    Some(m) => format!(
                        "the DR catalog points at {p} but this follower last registered {m}: someone else changed \
                         it; not touched"
                    ),
                    None => format!(
                        "the DR catalog already has this table at {p}, which is no metadata file of the replica's \
                         chain: registered by someone else; not touched"
                    ),
                };
                return Ok(out);
            };
            if mine.is_some() {
                out.head_choice = format!(
                    "{}; the DR pointer {p} is this follower's own write for {}, from a run stopped before it wrote \
                     its state: adopted",
                    out.head_choice,
                    at.unwrap_or("(the created table)")
                );
            }
            held_name = at;
            out.registered_metadata = Some(p.to_string());
        }
    }
    let held_at = match held_name {
        Some(h) => match chain.iter().position(|n| *n == h) {
            Some(i) => Some(i),
            None => {
                out.status = TableStatus::Held;
                out.reason = format!(
                    "the newest chain (head {head_key}) does not pass through {h}, the version the DR catalog \
                     holds: a fork or a primary rolled back; not moved backwards or sideways"
                );
                return Ok(out);
            }
        },
        None => None,
    };

    // The target: never past (older than) what is held.
    let io = file_io(&ctx.opts.file_io_props);
    let map = ctx.opts.prefix_map.as_ref();
    let mut cache = HashMap::new();
    let limit = held_at.unwrap_or(chain.len());
    let mut target: Option<usize> = held_at;
    let mut head_missing = Vec::new();
    for (i, name) in chain.iter().enumerate().take(limit) {
        let Some(json) = by_name.get(name) else { continue };
        let (missing, _, _) = replica::missing_files(&io, map, name, json, &mut cache).await?;
        if i == 0 {
            head_missing = missing.clone();
        }
        if missing.is_empty() || ctx.opts.mode == FollowMode::Eventual {
            target = Some(i);
            break;
        }
    }
    let since: HashMap<&str, &str> = prev
        .map(|p| {
            p.missing
                .iter()
                .map(|m| (m.path.as_str(), m.missing_since.as_str()))
                .collect()
        })
        .unwrap_or_default();
    out.missing_count = head_missing.len();
    out.missing = head_missing
        .iter()
        .take(MAX_MISSING_LISTED)
        .map(|m| WaitingFile {
            path: m.path.clone(),
            what: m.what.clone(),
            missing_since: since.get(m.path.as_str()).map_or_else(|| stamp(now), |s| s.to_string()),
        })
        .collect();

    let Some(t) = target else {
        out.status = TableStatus::MissingFiles;
        out.reason = "no version on the chain has all its files yet; nothing registered".into();
        out.versions_behind = None;
        out.behind_ms = None;
        return Ok(out);
    };
    let target_name = chain[t];
    let target_key = key_of[target_name];
    let target_json = by_name[target_name];
    if held_at != Some(t) {
        let held_json = held_name.and_then(|h| by_name.get(h)).copied();
        let moved = publish::publish(&ctx.target(), &ident, &table, pointer.as_deref(), target_key, held_json).await?;
        match moved {
            publish::Moved::To(location) => {
                tidemark_journal::failpoint::hit("follow:after-table");
                out.registered_metadata = Some(location);
                out.last_advanced_at = Some(stamp(now));
            }
            publish::Moved::Conflict(reason) => {
                out.status = TableStatus::Conflict;
                out.reason = reason;
                return Ok(out);
            }
            publish::Moved::Held(reason) => {
                out.status = TableStatus::Held;
                out.reason = reason;
                return Ok(out);
            }
        }
    }
    out.verified_metadata = Some(target_key.to_string());
    out.verified_snapshot_id = snapshot_id_of(target_json);
    out.verified_ms = ms_of(target_json);
    out.verified_position = position_of(target_json);
    out.versions_behind = Some(t);
    out.behind_ms = out.latest_ms.zip(out.verified_ms).map(|(l, v)| l - v);
    (out.status, out.reason) = if !head_missing.is_empty() {
        let n = head_missing.len();
        let how = match ctx.opts.mode {
            FollowMode::Strict => format!("holding {target_name}, {t} versions behind"),
            FollowMode::Eventual => format!("registered {target_name} all the same (eventual)"),
        };
        (
            TableStatus::MissingFiles,
            format!("the newest version {} lacks {n} files; {how}", chain[0]),
        )
    } else if t > 0 {
        (TableStatus::Behind, format!("{t} versions behind {}", chain[0]))
    } else {
        (
            TableStatus::Ok,
            format!("at {target_name}, the newest version, every file present"),
        )
    };
    Ok(out)
}

#[cfg(test)]
#[path = "cycle_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "resume_tests.rs"]
mod resume_tests;
