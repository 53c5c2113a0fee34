//! What a resync reports ([`ResyncReport`], one [`ResyncTable`] a table) and its errors.

use serde::Serialize;

use crate::table::TableError;

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
    /// A REST table an earlier resync renamed aside (the walked-over version, see the REST
    /// resync): kept with every file, never resynced, restored or deleted.
    KeptAside,
    Failed,
}

/// The walked-over REST table, renamed aside and kept (the REST resync).
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

/// The result of a resync (`tidemark replica resync --json`).
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
