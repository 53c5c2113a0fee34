//! The walk back of a demoted chain: through `metadata-log` to the newest version the new
//! primary holds ([`walk_log`]), its record beside the files walked over ([`record_walk`]), and
//! the files only the walked-over snapshots reference ([`referenced`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, Manifest, ManifestList, TableMetadata};
use serde_json::Value;

use super::report::{KeptFile, ResyncAction, ResyncTable};
use crate::catalog::CatalogHandle;
use crate::dr::follow::{Way, way};

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

/// The demoted chain from a pointer back to the newest version the new primary holds.
pub(in crate::dr) struct LogWalk {
    /// The metadata files walked over, newest first.
    pub(in crate::dr) walked: Vec<String>,
    /// The pointer's own metadata (`None`: its file is not there).
    pub(in crate::dr) newest: Option<Value>,
    /// The newest version whose current snapshot the new primary holds (or that has none), and
    /// its metadata; `None` when the chain has no such version (or a file of it is gone).
    pub(in crate::dr) common: Option<(String, Value)>,
}

/// Walks back through `metadata-log` from `start`, newest first, to a version whose current
/// snapshot is in `held` (the new primary's snapshot ids).
pub(in crate::dr) async fn walk_log(io: &FileIO, start: &str, held: &HashSet<i64>) -> Result<LogWalk, String> {
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
/// its reason: its walked-over metadata files stay with the table renamed aside (`rest.rs`),
/// whose history they are.
pub(in crate::dr) async fn record_walk(
    demoted: &CatalogHandle,
    t: &mut ResyncTable,
    from: &str,
    to: &str,
) -> Result<bool, String> {
    let walk = crate::dr::resync_record::Walk {
        from: from.to_string(),
        walked_back_to: to.to_string(),
        walked_over: t.walked_over.clone(),
    };
    let whose = demoted.reference().to_string();
    match crate::dr::resync_record_write::record(demoted.file_io_props(), &t.table, &whose, &walk).await {
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

/// Every file the snapshots `ids` of `meta` reference.
pub(in crate::dr) async fn referenced(
    io: &FileIO,
    meta: &TableMetadata,
    ids: &[i64],
) -> Result<BTreeSet<KeptFile>, String> {
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
