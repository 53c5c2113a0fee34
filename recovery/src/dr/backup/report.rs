//! What a backup holds ([`CatalogBackup`], a [`Watermark`] per table) and what backup, state and
//! restore report, or refuse ([`BackupError`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tidemark_journal::store::StoreError;

use crate::dr::rebuild::DrError;
use crate::dr::replica::MissingFile;
use crate::table::TableError;

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

/// The result of a backup (`tidemark catalog backup --json`).
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

/// The result of a restore (`tidemark catalog restore --json`).
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
        source: crate::dr::replica::FilesError,
    },

    #[error("table {table}: cannot back up: cannot read its metadata file {location}: {source}")]
    Unreadable {
        table: String,
        location: String,
        #[source]
        source: StoreError,
    },
}
