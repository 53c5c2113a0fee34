//! Catalog backup and restore (issue 5 item 6): `tidemark catalog backup | state | restore`.
//!
//! A catalog is one pointer per table, so a backup is that list plus what proves each pointer is
//! still good: per table, the metadata file's ETag and size, and a *watermark* of the objects
//! its current snapshot references (the snapshot id, the last sequence number and the number of
//! referenced objects: manifest list, manifests, data and delete files).
//!
//! Backups are immutable and idempotent: the id is the sha256 of the backup's canonical JSON
//! (which holds no clock reading), and the file `catalog-backups/<hex>.json` is written
//! create-only. Backing up an unchanged catalog again finds the same id and writes nothing; a
//! different backup can never overwrite it.
//!
//! Restore fails closed, in this order, changing nothing until every check passed:
//! 1. **Expected state.** The caller says what it expects the catalog to hold for the backup's
//!    tables: `empty` (a new or rebuilt catalog) or a state id printed by `tidemark catalog
//!    state` (a digest of the tables' current pointers). If the catalog moved since, the restore
//!    is refused with a conflict report naming every table whose pointer differs from the
//!    backup, unless `allow_replace` is set.
//! 2. **Referenced objects.** For every table: the metadata file exists with the recorded ETag,
//!    and every object its current snapshot references exists, as many as the watermark says.
//!    Anything missing or changed refuses the whole restore.
//! 3. **Apply.** A table not in the catalog is registered; one at another pointer is swapped with
//!    the catalog's compare-and-swap from the pointer seen in step 1, so a commit that lands
//!    during the restore makes that table a conflict instead of being overwritten silently.
//!    Tables in the catalog but not in the backup are left alone.

use std::collections::{BTreeMap, HashMap};

use iceberg::{ErrorKind, NamespaceIdent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tidemark_journal::store::{self, GetResult, ObjectStore, PutMode, StoreError};

use super::rebuild::{DrError, warehouse_base};
use super::replica::{MissingFile, missing_files};
use crate::catalog::{CatalogHandle, INSTEAD_OF_REGISTER};
use crate::table::source::file_io;
use crate::table::{TableError, parse_ident};

/// Version of the backup format and of the restore report.
pub const FORMAT_VERSION: u32 = 1;

/// Folder of the backup files in the backup store.
pub const BACKUP_PREFIX: &str = "catalog-backups";

/// What the referenced objects of a table's current snapshot looked like at backup time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Watermark {
    pub current_snapshot_id: Option<i64>,
    pub last_sequence_number: i64,
    /// Manifest list, manifests, data and delete files of the current snapshot.
    pub referenced_objects: usize,
}

/// One table of a [`CatalogBackup`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BackupTable {
    /// `namespace.name`.
    pub table: String,
    pub metadata_location: String,
    pub metadata_etag: String,
    pub metadata_size: u64,
    pub watermark: Watermark,
}

/// A catalog backup (`catalog-backups/<hex>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CatalogBackup {
    pub format_version: u32,
    /// `sha256:<hex>` of this document's canonical JSON with `id` empty.
    pub id: String,
    /// Catalog name.
    pub catalog: String,
    /// The warehouse as table locations spell it.
    pub warehouse: String,
    pub namespace: Option<String>,
    /// Sorted by table.
    pub tables: Vec<BackupTable>,
}

impl CatalogBackup {
    /// The content-derived id.
    pub fn content_id(&self) -> String {
        let mut body = self.clone();
        body.id = String::new();
        let json = serde_json::to_vec(&body).expect("a backup serializes");
        format!("sha256:{:x}", Sha256::digest(&json))
    }

    /// Key of the backup file in the backup store.
    pub fn key(id: &str) -> String {
        format!("{BACKUP_PREFIX}/{}.json", id.trim_start_matches("sha256:"))
    }
}

/// The result of [`backup`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BackupOutcome {
    pub id: String,
    /// Where the backup is (store URL and key).
    pub location: String,
    /// The same backup was already stored: nothing was written.
    pub already_stored: bool,
    pub tables: usize,
}

/// The pointers of a set of tables and their digest (`tidemark catalog state`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CatalogState {
    /// `sha256:<hex>` over the sorted `table → pointer` lines; `empty` when no table is there.
    pub id: String,
    pub tables: BTreeMap<String, Option<String>>,
}

/// What restore did or would do for one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestoreAction {
    /// Not in the catalog: registered.
    Register,
    /// At another pointer: swapped to the backup's.
    Replace,
    /// Already at the backup's pointer.
    Unchanged,
    /// Refused: see `problem`.
    Conflict,
}

/// One table of a [`RestoreReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RestoreTable {
    pub table: String,
    /// The pointer seen before the restore.
    pub current: Option<String>,
    /// The backup's pointer.
    pub restored: String,
    pub action: RestoreAction,
    /// Referenced objects that are missing (the first 20).
    pub missing: Vec<MissingFile>,
    pub problem: Option<String>,
}

/// The result of [`restore`] (`tidemark catalog restore --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RestoreReport {
    pub format_version: u32,
    pub backup_id: String,
    /// What the caller expected (`empty` or a state id).
    pub expected_state: String,
    /// The state found (over the backup's tables).
    pub current_state: String,
    pub allow_replace: bool,
    /// Whether the catalog was changed.
    pub applied: bool,
    /// Why nothing was changed, when nothing was.
    pub refused: Option<String>,
    pub refusal: Option<Refusal>,
    pub tables: Vec<RestoreTable>,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

/// The kind of a refused restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Tables moved since the expected state.
    Moved,
    /// Referenced objects are missing or changed.
    Objects,
}

/// Errors of backup and restore that are not a refusal report.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(transparent)]
    Dr(#[from] DrError),

    #[error("table {table}: {source}")]
    Table {
        table: String,
        #[source]
        source: Box<TableError>,
    },

    #[error("backup store {store}: {source}")]
    Store {
        store: String,
        #[source]
        source: StoreError,
    },

    #[error("backup {location} is not a tidemark catalog backup: {reason}")]
    Invalid { location: String, reason: String },

    #[error("table {table}: cannot back up: {reason}")]
    NotBackedUp { table: String, reason: String },

    /// A file the table references could not be checked (not missing: refused, say); its
    /// kind decides the exit code.
    #[error("table {table}: cannot back up: {source}")]
    Files {
        table: String,
        #[source]
        source: super::replica::FilesError,
    },

    #[error("table {table}: cannot back up: cannot read its metadata file {location}: {source}")]
    Unreadable {
        table: String,
        location: String,
        #[source]
        source: StoreError,
    },
}

fn table_err(table: &str) -> impl FnOnce(TableError) -> BackupError + '_ {
    move |source| BackupError::Table {
        table: table.to_string(),
        source: Box::new(source),
    }
}

/// The key of `location` in the warehouse `base`, if it is under it.
fn key_in<'a>(base: &str, location: &'a str) -> Option<&'a str> {
    location.strip_prefix(base)?.strip_prefix('/')
}

/// The current version of the metadata file `location` in the warehouse at `base`; the outer
/// error says the file is outside the warehouse.
async fn get_metadata(
    warehouse: &dyn ObjectStore,
    base: &str,
    location: &str,
) -> Result<Result<GetResult, StoreError>, String> {
    let key =
        key_in(base, location).ok_or_else(|| format!("metadata file {location} is outside the warehouse {base}"))?;
    Ok(warehouse.get(key, None).await)
}

/// What [`BackupTable`] records for `table` whose metadata file `location` was read as `got`:
/// the file's ETag and size, and the watermark (with the referenced objects that are missing).
async fn describe(
    handle: &CatalogHandle,
    table: &str,
    location: &str,
    got: &GetResult,
) -> Result<(BackupTable, Vec<MissingFile>), BackupError> {
    let not = |reason: String| BackupError::NotBackedUp {
        table: table.to_string(),
        reason,
    };
    let json: Value =
        serde_json::from_slice(&got.body).map_err(|e| not(format!("metadata file {location} is not JSON: {e}")))?;
    let io = file_io(handle.file_io_props());
    let (missing, snapshot_id, referenced) = missing_files(&io, None, location, &json, &mut HashMap::new())
        .await
        .map_err(|source| BackupError::Files {
            table: table.to_string(),
            source,
        })?;
    let entry = BackupTable {
        table: table.to_string(),
        metadata_location: location.to_string(),
        metadata_etag: got.meta.etag.clone(),
        metadata_size: got.meta.size,
        watermark: Watermark {
            current_snapshot_id: snapshot_id,
            last_sequence_number: json.get("last-sequence-number").and_then(Value::as_i64).unwrap_or(0),
            referenced_objects: referenced,
        },
    };
    Ok((entry, missing))
}

fn open_warehouse_err(handle: &CatalogHandle) -> impl FnOnce(StoreError) -> BackupError + '_ {
    move |source| {
        BackupError::Dr(DrError::Open {
            warehouse: handle.warehouse().to_string(),
            source,
        })
    }
}

/// Reads the catalog's tables (only those directly in `namespace`, when given) into a backup.
/// Refuses when a table's referenced objects are not all there: such a backup could not be
/// restored.
pub async fn snapshot_catalog(handle: &CatalogHandle, namespace: Option<&str>) -> Result<CatalogBackup, BackupError> {
    let location = handle
        .warehouse_location("back up the catalog")
        .map_err(table_err("(all tables)"))?;
    let base = warehouse_base(location)?;
    let warehouse = store::open(&base).await.map_err(open_warehouse_err(handle))?;
    let pointers = handle.pointers(namespace).await.map_err(table_err("(all tables)"))?;
    let mut tables = Vec::with_capacity(pointers.len());
    for (table, pointer) in pointers {
        let Some(location) = pointer else {
            continue; // a view or a half-created row: nothing to restore
        };
        let got = match get_metadata(warehouse.as_ref(), &base, &location).await {
            Ok(Ok(got)) => got,
            Ok(Err(e @ StoreError::NotFound { .. })) => {
                let reason = format!("cannot read its metadata file {location}: {e}");
                return Err(BackupError::NotBackedUp { table, reason });
            }
            // Not a missing file but a failed read (refused credentials, say): its kind decides.
            Ok(Err(source)) => {
                return Err(BackupError::Unreadable {
                    table,
                    location,
                    source,
                });
            }
            Err(reason) => return Err(BackupError::NotBackedUp { table, reason }),
        };
        let (entry, missing) = describe(handle, &table, &location, &got).await?;
        if let Some(m) = missing.first() {
            return Err(BackupError::NotBackedUp {
                table,
                reason: format!(
                    "its {} {} is missing ({} objects in all)",
                    m.what,
                    m.path,
                    missing.len()
                ),
            });
        }
        tables.push(entry);
    }
    let mut backup = CatalogBackup {
        format_version: FORMAT_VERSION,
        id: String::new(),
        catalog: handle.name().to_string(),
        warehouse: base,
        namespace: namespace.map(str::to_string),
        tables,
    };
    backup.id = backup.content_id();
    Ok(backup)
}

/// Backs up the catalog into `backups` (create-only; an identical backup is found, not written).
pub async fn backup(
    handle: &CatalogHandle,
    namespace: Option<&str>,
    backups: &dyn ObjectStore,
) -> Result<BackupOutcome, BackupError> {
    let b = snapshot_catalog(handle, namespace).await?;
    let key = CatalogBackup::key(&b.id);
    let body = serde_json::to_vec_pretty(&b).expect("a backup serializes");
    // Read back on a conflict or a lost reply (the store contract): the same bytes are this
    // backup, written by this call or an earlier one.
    let already_stored = match store::put_resolved(backups, &key, body.into(), PutMode::Create).await {
        Ok(r) => r.read_back,
        Err(e) if e.is_conflict() => {
            // Same key, so the same content digest: check it, then it is the same backup.
            let stored = load(backups, &b.id).await?;
            if stored != b {
                return Err(BackupError::Invalid {
                    location: format!("{}/{key}", backups.url()),
                    reason: "a file with this backup's id holds another backup".into(),
                });
            }
            true
        }
        Err(source) => {
            return Err(BackupError::Store {
                store: backups.url(),
                source,
            });
        }
    };
    Ok(BackupOutcome {
        id: b.id,
        location: format!("{}/{key}", backups.url().trim_end_matches('/')),
        already_stored,
        tables: b.tables.len(),
    })
}

/// Reads backup `id` (`sha256:<hex>` or `<hex>`) from `backups` and checks its id.
pub async fn load(backups: &dyn ObjectStore, id: &str) -> Result<CatalogBackup, BackupError> {
    let key = CatalogBackup::key(id);
    let location = format!("{}/{key}", backups.url().trim_end_matches('/'));
    let got = backups.get(&key, None).await.map_err(|source| BackupError::Store {
        store: backups.url(),
        source,
    })?;
    let b: CatalogBackup = serde_json::from_slice(&got.body).map_err(|e| BackupError::Invalid {
        location: location.clone(),
        reason: e.to_string(),
    })?;
    if b.format_version != FORMAT_VERSION {
        return Err(BackupError::Invalid {
            location,
            reason: format!(
                "format_version {} (this tidemark reads {FORMAT_VERSION})",
                b.format_version
            ),
        });
    }
    let want = format!("sha256:{}", id.trim_start_matches("sha256:"));
    if b.content_id() != want || b.id != want {
        return Err(BackupError::Invalid {
            location,
            reason: format!(
                "its content digest is {}, not {want}: the file was changed",
                b.content_id()
            ),
        });
    }
    Ok(b)
}

/// The state of `tables` in the catalog: their pointers and the digest of them.
pub async fn state(handle: &CatalogHandle, tables: &[String]) -> Result<CatalogState, BackupError> {
    let all: HashMap<String, Option<String>> = handle
        .pointers(None)
        .await
        .map_err(table_err("(all tables)"))?
        .into_iter()
        .collect();
    let tables: BTreeMap<String, Option<String>> = tables
        .iter()
        .map(|t| (t.clone(), all.get(t).cloned().flatten()))
        .collect();
    Ok(CatalogState {
        id: state_id(&tables),
        tables,
    })
}

/// `empty` when no table has a pointer, else the digest of the `table → pointer` lines.
fn state_id(tables: &BTreeMap<String, Option<String>>) -> String {
    if tables.values().all(Option::is_none) {
        return "empty".into();
    }
    let mut h = Sha256::new();
    for (t, p) in tables {
        h.update(format!("{t}\t{}\n", p.as_deref().unwrap_or("-")));
    }
    format!("sha256:{:x}", h.finalize())
}

/// What the caller expects the catalog to hold for the backup's tables before the restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// None of the backup's tables is in the catalog (a new or rebuilt-empty catalog).
    Empty,
    /// The pointers of a [`CatalogState`] taken earlier (`tidemark catalog state --out`).
    State(CatalogState),
}

impl Expected {
    fn pointer(&self, table: &str) -> Option<&str> {
        match self {
            Expected::Empty => None,
            Expected::State(s) => s.tables.get(table).and_then(|p| p.as_deref()),
        }
    }

    fn id(&self) -> String {
        match self {
            Expected::Empty => "empty".into(),
            Expected::State(s) => s.id.clone(),
        }
    }
}

/// Restores `backup` into the catalog of `handle` (see the module documentation). A table
/// already at the backup's pointer is left as is whatever was expected, so a restore that
/// stopped half-way is resumed by running it again. Errors are for what could not be read;
/// refusals are in the report.
pub async fn restore(
    handle: &CatalogHandle,
    backup: &CatalogBackup,
    expect: &Expected,
    allow_replace: bool,
) -> Result<RestoreReport, BackupError> {
    restore_through(handle, backup, expect, allow_replace, None).await
}

/// [`restore`], reading the warehouse through `warehouse` when given (a test's fault-injecting
/// store) instead of opening the catalog's warehouse.
pub async fn restore_through(
    handle: &CatalogHandle,
    backup: &CatalogBackup,
    expect: &Expected,
    allow_replace: bool,
    warehouse: Option<std::sync::Arc<dyn ObjectStore>>,
) -> Result<RestoreReport, BackupError> {
    let location = handle
        .warehouse_location("restore a catalog backup")
        .map_err(table_err("(all tables)"))?;
    let names: Vec<String> = backup.tables.iter().map(|t| t.table.clone()).collect();
    let current = state(handle, &names).await?;
    let mut report = RestoreReport {
        format_version: FORMAT_VERSION,
        backup_id: backup.id.clone(),
        expected_state: expect.id(),
        current_state: current.id.clone(),
        allow_replace,
        applied: false,
        refused: None,
        refusal: None,
        tables: Vec::with_capacity(backup.tables.len()),
        s3_requests: None,
    };
    let mut moved = 0;
    for t in &backup.tables {
        let now = current.tables.get(&t.table).cloned().flatten();
        let expected = expect.pointer(&t.table);
        let has_moved = now.as_deref() != expected && now.as_deref() != Some(t.metadata_location.as_str());
        moved += usize::from(has_moved);
        let action = match &now {
            Some(p) if *p == t.metadata_location => RestoreAction::Unchanged,
            _ if has_moved && !allow_replace => RestoreAction::Conflict,
            None => RestoreAction::Register,
            Some(_) => RestoreAction::Replace,
        };
        report.tables.push(RestoreTable {
            table: t.table.clone(),
            problem: has_moved.then(|| {
                format!(
                    "the catalog points at {}; expected {}; the backup has {}",
                    now.as_deref().unwrap_or("nothing"),
                    expected.unwrap_or("nothing"),
                    t.metadata_location
                )
            }),
            current: now,
            restored: t.metadata_location.clone(),
            action,
            missing: Vec::new(),
        });
    }
    if moved > 0 && !allow_replace {
        report.refused = Some(format!(
            "{moved} tables moved since the expected state {}: check them, then take a new state or pass \
             --allow-replace; nothing was changed",
            expect.id()
        ));
        report.refusal = Some(Refusal::Moved);
        return Ok(report);
    }

    // What the catalog must be able to do, before anything changes.
    let needs_register = report.tables.iter().any(|t| t.action == RestoreAction::Register);
    let needs_swap = report.tables.iter().any(|t| t.action == RestoreAction::Replace);
    handle
        .require(
            needs_register,
            needs_swap,
            "restore a catalog backup",
            INSTEAD_OF_REGISTER,
        )
        .map_err(table_err("(all tables)"))?;

    // Every referenced object, before anything changes.
    let base = warehouse_base(location)?;
    let warehouse = match warehouse {
        Some(w) => w,
        None => store::open(&base).await.map_err(open_warehouse_err(handle))?,
    };
    let mut problems = 0;
    for (t, out) in backup.tables.iter().zip(report.tables.iter_mut()) {
        if out.action == RestoreAction::Unchanged {
            continue;
        }
        match verify_table(handle, warehouse.as_ref(), &base, t).await {
            Ok((missing, problem)) => {
                if !missing.is_empty() || problem.is_some() {
                    problems += 1;
                    out.action = RestoreAction::Conflict;
                    out.problem = problem.or_else(|| Some(format!("{} referenced objects are missing", missing.len())));
                    out.missing = missing.into_iter().take(20).collect();
                }
            }
            // The warehouse could not be read (an error, not a finding about the backup):
            // nothing has changed yet, so the restore stops and a re-run checks again.
            Err(e) => return Err(e),
        }
    }
    if problems > 0 {
        report.refused = Some(format!(
            "{problems} tables of the backup are not restorable as recorded (missing or changed objects); \
             nothing was changed"
        ));
        report.refusal = Some(Refusal::Objects);
        return Ok(report);
    }

    report.applied = true;
    for out in &mut report.tables {
        let ident = parse_ident(&out.table).map_err(table_err(&out.table))?;
        match out.action {
            RestoreAction::Unchanged | RestoreAction::Conflict => {}
            RestoreAction::Register => {
                let ns: &NamespaceIdent = ident.namespace();
                crate::table::create_namespace(handle, ns)
                    .await
                    .map_err(table_err(&out.table))?;
                match handle.register_table(&ident, &out.restored).await {
                    Ok(_) => {}
                    Err(TableError::Iceberg { source, .. }) if source.kind() == ErrorKind::TableAlreadyExists => {
                        out.action = RestoreAction::Conflict;
                        out.problem = Some("registered by someone else during the restore; left alone".into());
                    }
                    Err(e) => return Err(table_err(&out.table)(e)),
                }
            }
            RestoreAction::Replace => {
                let from = out.current.clone().expect("a replaced table had a pointer");
                let won = handle
                    .swap_metadata_pointer(&ident, &from, &out.restored)
                    .await
                    .map_err(table_err(&out.table))?;
                if !won {
                    out.action = RestoreAction::Conflict;
                    out.problem = Some(format!("the table moved from {from} during the restore; left alone"));
                }
            }
        }
        tidemark_journal::failpoint::hit("restore:after-table");
    }
    Ok(report)
}

/// Missing referenced objects of a backed-up table, or what changed about it.
async fn verify_table(
    handle: &CatalogHandle,
    warehouse: &dyn ObjectStore,
    base: &str,
    t: &BackupTable,
) -> Result<(Vec<MissingFile>, Option<String>), BackupError> {
    let got = match get_metadata(warehouse, base, &t.metadata_location).await {
        Err(reason) => return Ok((Vec::new(), Some(reason))),
        Ok(Err(e)) if e.is_not_found() => {
            let m = MissingFile {
                path: t.metadata_location.clone(),
                what: "metadata file".into(),
            };
            return Ok((vec![m], None));
        }
        Ok(Err(source)) => {
            return Err(BackupError::Dr(DrError::Open {
                warehouse: base.to_string(),
                source,
            }));
        }
        Ok(Ok(got)) => got,
    };
    let m = &got.meta;
    if m.etag != t.metadata_etag || m.size != t.metadata_size {
        return Ok((
            Vec::new(),
            Some(format!(
                "metadata file {} changed since the backup (ETag {} size {}, recorded {} size {})",
                t.metadata_location, m.etag, m.size, t.metadata_etag, t.metadata_size
            )),
        ));
    }
    let (now, missing) = describe(handle, &t.table, &t.metadata_location, &got).await?;
    if !missing.is_empty() {
        return Ok((missing, None));
    }
    if now.watermark != t.watermark {
        return Ok((
            Vec::new(),
            Some(format!(
                "the referenced objects differ from the backup's watermark ({:?}, recorded {:?})",
                now.watermark, t.watermark
            )),
        ));
    }
    Ok((Vec::new(), None))
}

#[cfg(test)]
#[path = "backup_tests.rs"]
mod tests;
