//! Replica check (issue 5 item 3): is a copied warehouse usable, and how far behind is it?
//!
//! A replica made by copying objects (bucket replication, `aws s3 sync`, a backup tool) while
//! writers commit can hold a metadata file whose data files never arrived: copying in the wrong
//! order (metadata before data), or a copy cut short. Loading such a table fails at read time,
//! long after the failover was declared done.
//!
//! For each table folder ([`rebuild::discover`]) the head is chosen as the rebuild does
//! ([`rebuild::choose_head`], without the files a `replica resync` walked over, named by the
//! records it left beside them: `super::resync_record`), and the chain of metadata files is
//! walked from the head backwards. For each metadata file every file its current snapshot
//! references is checked for existence: the manifest list, the manifests, and the live data and
//! delete files. The newest metadata file with all of them present is the newest *consistent*
//! one; the replica can be recovered to it, and what it loses is the recovery point objective:
//! the commits on the chain after it (`behind_commits`) and the `last-updated-ms` gap
//! (`behind_ms`).
//!
//! Paths in the metadata are the source's absolute paths; a [`PrefixMap`] reads them under the
//! replica's root. Nothing is written. A table whose files cannot be read (other than being
//! missing) is reported with `error` and does not stop the others.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, Manifest, ManifestList, TableMetadata};
use serde::Serialize;
use serde_json::Value;
use tidemark_journal::store::{self, ObjectStore};

use super::head::{HeadRead, choose_folder_head};
use super::rebuild::{self, DrError, TableFiles, file_name, warehouse_base};
use crate::table::TableError;
use crate::table::source::{PrefixMap, file_io};

/// Version of the JSON report.
pub const FORMAT_VERSION: u32 = 1;

/// How many missing files of one metadata file are listed (all are counted).
pub const MAX_MISSING_LISTED: usize = 20;

/// One referenced file that the replica lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MissingFile {
    /// As read (prefix map applied).
    pub path: String,
    /// `manifest list`, `manifest`, `data file` or `delete file`.
    pub what: String,
}

/// Why the files of a metadata file could not be checked. A missing file is no error (it is
/// the result); a refused read is [`TableError::AccessDenied`] (exit 8), never a missing file.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    #[error("cannot parse {what} {path}: {detail}")]
    Parse { what: String, path: String, detail: String },
    #[error(transparent)]
    Read(Box<TableError>),
}

impl From<TableError> for FilesError {
    fn from(e: TableError) -> Self {
        FilesError::Read(Box::new(e))
    }
}

/// Whether the file at `path` exists. A refused HEAD is a refusal, not a missing file: the
/// table files' storage learns its code ([`crate::catalog::table_io`]).
async fn exists(io: &FileIO, path: &str, what: &str) -> Result<bool, FilesError> {
    io.exists(path)
        .await
        .map_err(|e| crate::table::from_iceberg(format!("cannot check {what} {path}"), e).into())
}

/// One table of a [`ReplicaReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ReplicaTable {
    /// `namespace.name`.
    pub table: String,
    /// The head metadata file of the replica (full URL under the replica's root).
    pub newest_metadata: Option<String>,
    /// Files the newest metadata's current snapshot references that are missing (the first
    /// [`MAX_MISSING_LISTED`]).
    pub newest_missing: Vec<MissingFile>,
    pub newest_missing_count: usize,
    /// The newest metadata file on the chain whose current snapshot has all its files.
    pub consistent_metadata: Option<String>,
    pub consistent_snapshot_id: Option<i64>,
    /// Commits on the chain after the consistent metadata file (RPO in commits).
    pub behind_commits: Option<usize>,
    /// `last-updated-ms` of the newest minus that of the consistent metadata (RPO in time).
    pub behind_ms: Option<i64>,
    /// Metadata files checked, newest first, until the consistent one.
    pub checked: usize,
    /// Metadata files that are not valid JSON (a torn or partial copy); they are no candidates
    /// for the head, so a torn newest file shows as a replica one commit further behind.
    pub unparsable_metadata: Vec<String>,
    /// Why no head was chosen, when none was.
    pub refused: Option<String>,
    pub error: Option<String>,
    /// The table could not be checked because the replica's store refused the credentials
    /// (`error` says which request): `replica check` exits 8 for it.
    #[serde(default)]
    pub access_denied: bool,
    /// Metadata files a `replica resync` walked over (named by the resync records beside them),
    /// and those descending from one: no candidates for the head.
    pub walked_over: Vec<String>,
}

impl ReplicaTable {
    fn new(table: String) -> Self {
        ReplicaTable {
            table,
            newest_metadata: None,
            newest_missing: Vec::new(),
            newest_missing_count: 0,
            consistent_metadata: None,
            consistent_snapshot_id: None,
            behind_commits: None,
            behind_ms: None,
            checked: 0,
            unparsable_metadata: Vec::new(),
            refused: None,
            error: None,
            access_denied: false,
            walked_over: Vec::new(),
        }
    }

    /// The newest metadata file is consistent: the replica is usable as is.
    pub fn is_current(&self) -> bool {
        self.behind_commits == Some(0)
    }
}

/// The result of [`check`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ReplicaReport {
    pub format_version: u32,
    /// The replica's warehouse as table locations spell it.
    pub warehouse: String,
    pub tables: Vec<ReplicaTable>,
}

impl ReplicaReport {
    /// The tables whose check the replica's store refused (credentials): exit 8.
    pub fn refused_tables(&self) -> Vec<&str> {
        self.tables
            .iter()
            .filter(|t| t.access_denied)
            .map(|t| t.table.as_str())
            .collect()
    }

    /// Every table's newest metadata file has all its files.
    pub fn is_current(&self) -> bool {
        self.tables.iter().all(ReplicaTable::is_current)
    }
}

/// Checks every table of the replica warehouse at `warehouse_url`; `prefix_map` maps the paths
/// written in its metadata (the source's) to where the replica holds them. Errors only when
/// the warehouse cannot be listed; per-table trouble goes into the report.
pub async fn check(
    warehouse_url: &str,
    file_io_props: &HashMap<String, String>,
    prefix_map: Option<&PrefixMap>,
) -> Result<ReplicaReport, DrError> {
    let base = warehouse_base(warehouse_url)?;
    let store = store::open(warehouse_url).await.map_err(|source| DrError::Open {
        warehouse: warehouse_url.to_string(),
        source,
    })?;
    let found = rebuild::discover(store.as_ref(), None).await?;
    let io = file_io(file_io_props);
    let mut tables = Vec::with_capacity(found.len());
    for files in &found {
        let mut out = ReplicaTable::new(files.ident());
        if let Err(e) = check_table(store.as_ref(), &base, &io, prefix_map, files, &mut out).await {
            out.access_denied = tidemark_journal::store::is_refusal_text(&e);
            out.error = Some(e);
        }
        tables.push(out);
    }
    Ok(ReplicaReport {
        format_version: FORMAT_VERSION,
        warehouse: base,
        tables,
    })
}

async fn check_table(
    store: &dyn ObjectStore,
    base: &str,
    io: &FileIO,
    map: Option<&PrefixMap>,
    files: &TableFiles,
    out: &mut ReplicaTable,
) -> Result<(), String> {
    // Every file is read (the chain is checked file by file). An unparsable file (a torn copy)
    // is no candidate, the head's chain steps over it; nor is what a `replica resync` walked
    // over; a record that cannot be read refuses the table.
    let how = HeadRead {
        every_file: true,
        ..HeadRead::default()
    };
    let folder = choose_folder_head(store, files, how).await.map_err(|e| e.to_string())?;
    out.unparsable_metadata = folder.unparsable.iter().map(|(key, _)| key.clone()).collect();
    if folder.unreadable_record.is_some() {
        out.refused = folder.choice.refused;
        return Ok(());
    }
    out.walked_over = folder.excluded.keys.clone();
    if folder.choice.head.is_none() {
        out.refused = folder.choice.refused;
        return Ok(());
    }
    let parsed = &folder.parsed;
    let by_name: HashMap<&str, &Value> = parsed.iter().map(|(k, j)| (file_name(k), j)).collect();
    let key_of: HashMap<&str, &str> = parsed.iter().map(|(k, _)| (file_name(k), k.as_str())).collect();
    let chain = folder.chain_names();
    let url = |name: &str| format!("{base}/{}", key_of[name]);
    out.newest_metadata = Some(url(chain[0]));
    let head_ms = by_name[chain[0]].get("last-updated-ms").and_then(Value::as_i64);

    let mut exists_cache: HashMap<String, bool> = HashMap::new();
    for (position, name) in chain.iter().enumerate() {
        let Some(json) = by_name.get(name) else {
            continue; // not in the replica: cannot be recovered to
        };
        out.checked += 1;
        let (missing, snapshot_id, _) = missing_files(io, map, name, json, &mut exists_cache)
            .await
            .map_err(|e| e.to_string())?;
        if position == 0 {
            out.newest_missing_count = missing.len();
            out.newest_missing = missing.iter().take(MAX_MISSING_LISTED).cloned().collect();
        }
        if missing.is_empty() {
            out.consistent_metadata = Some(url(name));
            out.consistent_snapshot_id = snapshot_id;
            out.behind_commits = Some(position);
            let ms = json.get("last-updated-ms").and_then(Value::as_i64);
            out.behind_ms = head_ms.zip(ms).map(|(h, c)| h - c);
            break;
        }
    }
    Ok(())
}

/// The files of the metadata's current snapshot that do not exist, that snapshot's id, and how
/// many referenced files were checked (a file that is missing hides what it would reference).
pub(crate) async fn missing_files(
    io: &FileIO,
    map: Option<&PrefixMap>,
    name: &str,
    json: &Value,
    cache: &mut HashMap<String, bool>,
) -> Result<(Vec<MissingFile>, Option<i64>, usize), FilesError> {
    let parse = |what: &str, path: &str| {
        let (what, path) = (what.to_string(), path.to_string());
        move |e: &dyn std::fmt::Display| FilesError::Parse {
            what,
            path,
            detail: e.to_string(),
        }
    };
    let meta: TableMetadata = serde_json::from_value(json.clone()).map_err(|e| parse("metadata file", name)(&e))?;
    let Some(snapshot) = meta.current_snapshot() else {
        return Ok((Vec::new(), None, 0));
    };
    let mut missing = Vec::new();
    let mut checked = 0;
    let mut present = async |path: String, what: &str, missing: &mut Vec<MissingFile>| -> Result<bool, FilesError> {
        checked += 1;
        let found = match cache.get(&path) {
            Some(b) => *b,
            None => {
                let b = exists(io, &path, what).await?;
                cache.insert(path.clone(), b);
                b
            }
        };
        if !found {
            missing.push(MissingFile {
                path,
                what: what.to_string(),
            });
        }
        Ok(found)
    };
    let read = async |path: &str, what: &str| -> Result<bytes::Bytes, FilesError> {
        let input = io
            .new_input(path)
            .map_err(crate::table::iceberg_err(format!("cannot open {what} {path}")))?;
        Ok(input
            .read()
            .await
            .map_err(crate::table::iceberg_err(format!("cannot read {what} {path}")))?)
    };

    let list_path = PrefixMap::apply(map, snapshot.manifest_list());
    if !present(list_path.clone(), "manifest list", &mut missing).await? {
        return Ok((missing, Some(snapshot.snapshot_id()), checked));
    }
    let list = ManifestList::parse_with_version(&read(&list_path, "manifest list").await?, meta.format_version())
        .map_err(|e| parse("manifest list", &list_path)(&e))?;
    for mf in list.entries() {
        let path = PrefixMap::apply(map, &mf.manifest_path);
        if !present(path.clone(), "manifest", &mut missing).await? {
            continue;
        }
        let manifest =
            Manifest::parse_avro(&read(&path, "manifest").await?).map_err(|e| parse("manifest", &path)(&e))?;
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let f = entry.data_file();
            let what = match f.content_type() {
                DataContentType::Data => "data file",
                _ => "delete file",
            };
            present(PrefixMap::apply(map, f.file_path()), what, &mut missing).await?;
        }
    }
    Ok((missing, Some(snapshot.snapshot_id()), checked))
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
