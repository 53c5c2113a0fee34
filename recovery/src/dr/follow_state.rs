//! The warm follower's state object (`state.json` under the state location): per table what the
//! DR catalog holds, what the replica has seen, and what it waits on. Written after every cycle,
//! create-only the first time and `If-Match` on the ETag of the previous write after that, and
//! only while the follower still holds its lease ([`super::lease`]); read by `replica status` and
//! `replica failover`.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidemark_journal::store::{ObjectStore, PutMode, StoreError, put_resolved};

use super::lease::{Lease, LeaseError};

/// Version of the state object.
pub const FORMAT_VERSION: u32 = 1;

/// The state's key under the state location.
pub const STATE_KEY: &str = "state.json";

/// Which version the follower registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FollowMode {
    /// Only a version whose every referenced file is present.
    Strict,
    /// The newest version seen, its missing files listed.
    Eventual,
}

/// One table's standing after the last scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TableStatus {
    /// The DR catalog holds the newest version seen, every file present.
    Ok,
    /// The DR catalog holds an older version than the newest seen (see `versions_behind`).
    Behind,
    /// The newest version seen references files the replica lacks (see `missing`).
    MissingFiles,
    /// No head could be chosen without guessing, or the newest chain does not descend from the
    /// version the DR catalog holds: nothing was moved (see `reason`).
    Held,
    /// The DR pointer was changed by someone else: the table is not touched (see `reason`).
    Conflict,
    /// Reading the replica or the catalog failed (see `reason`).
    Failed,
    /// The replica's store or the DR catalog refused the credentials (see `reason`): nothing
    /// moved; `replica follow --once` and `replica status` exit 8 for it.
    Refused,
}

/// A file the newest version references that the replica lacks, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WaitingFile {
    /// As read (prefix map applied).
    pub path: String,
    /// `manifest list`, `manifest`, `data file` or `delete file`.
    pub what: String,
    /// The scan that first found it missing (RFC 3339).
    pub missing_since: String,
}

/// One table of [`FollowerState`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableState {
    /// `namespace.name`.
    pub table: String,
    pub status: TableStatus,
    /// Why, in words.
    pub reason: String,
    /// The replica's metadata file (key under the warehouse) the DR catalog holds.
    pub verified_metadata: Option<String>,
    pub verified_snapshot_id: Option<i64>,
    /// `last-updated-ms` of the verified metadata.
    pub verified_ms: Option<i64>,
    /// The journal position its snapshots record (`tidemark.last-position`), when written by
    /// tidemark.
    pub verified_position: Option<u64>,
    /// What the DR catalog points at (the rewritten file under `--prefix-map`).
    pub registered_metadata: Option<String>,
    /// The newest metadata file seen on the replica (the head of its chain).
    pub latest_metadata: Option<String>,
    pub latest_ms: Option<i64>,
    pub latest_position: Option<u64>,
    /// Commits on the chain after the verified metadata (RPO in commits).
    pub versions_behind: Option<usize>,
    /// `latest_ms - verified_ms` (RPO in time).
    pub behind_ms: Option<i64>,
    /// Files of the newest version the replica lacks (at most [`super::replica::MAX_MISSING_LISTED`]).
    pub missing: Vec<WaitingFile>,
    pub missing_count: usize,
    /// Metadata files on no chosen chain (failed commits), keys under the warehouse.
    pub strays: Vec<String>,
    /// Why the head is the head (by the metadata-log chain), forks (two files at one version)
    /// named.
    #[serde(default)]
    pub head_choice: String,
    /// When this scan moved the DR pointer (RFC 3339), else the last time one did.
    pub last_advanced_at: Option<String>,
    pub last_scan_at: String,
}

/// The state object (`state.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FollowerState {
    pub format_version: u32,
    /// The DR catalog (no secrets).
    pub catalog: String,
    /// The replica warehouse as table locations spell it.
    pub warehouse: String,
    pub namespace: Option<String>,
    pub mode: FollowMode,
    /// `FROM=TO`, when the replica is read through a prefix map.
    pub prefix_map: Option<String>,
    /// The follower that wrote it.
    pub holder: String,
    /// Cycles written by this holder since it acquired the lease.
    pub cycle: u64,
    /// Milliseconds between cycles (`None`: `--once`).
    pub interval_ms: Option<u64>,
    pub last_scan_at: String,
    pub scan_ms: u64,
    pub tables: Vec<TableState>,
}

impl FollowerState {
    pub fn table(&self, name: &str) -> Option<&TableState> {
        self.tables.iter().find(|t| t.table == name)
    }
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("the follower state {url} is not a valid state object: {reason}")]
    Format { url: String, reason: String },
    #[error("the follower state {url} was written by someone else since this follower read it; stopping")]
    Changed { url: String },
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The state object of one state location, as this process last read or wrote it.
#[derive(Debug, Clone)]
pub struct StateStore {
    store: Arc<dyn ObjectStore>,
    etag: Option<String>,
}

impl StateStore {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        StateStore { store, etag: None }
    }

    pub fn url(&self) -> String {
        format!("{}/{STATE_KEY}", self.store.url().trim_end_matches('/'))
    }

    /// The stored state (`None`: never written), remembering its ETag for the next save.
    pub async fn load(&mut self) -> Result<Option<FollowerState>, StateError> {
        let got = match self.store.get(STATE_KEY, None).await {
            Ok(got) => got,
            Err(e) if e.is_not_found() => {
                self.etag = None;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let state = serde_json::from_slice(&got.body).map_err(|e| StateError::Format {
            url: self.url(),
            reason: e.to_string(),
        })?;
        self.etag = Some(got.meta.etag);
        Ok(Some(state))
    }

    /// Writes `state` after checking that `lease` is still held: create-only when none was read,
    /// else `If-Match` on the ETag read or last written.
    pub async fn save(&mut self, state: &FollowerState, lease: &Lease) -> Result<(), StateError> {
        lease.check().await?;
        let body = Bytes::from(serde_json::to_vec_pretty(state).expect("the state serializes"));
        let mode = match &self.etag {
            None => PutMode::Create,
            Some(etag) => PutMode::Update { etag: etag.clone() },
        };
        match put_resolved(self.store.as_ref(), STATE_KEY, body, mode).await {
            Ok(put) => {
                self.etag = Some(put.put.etag);
                Ok(())
            }
            Err(e) if e.is_conflict() || e.is_not_found() => Err(StateError::Changed { url: self.url() }),
            Err(e) => Err(e.into()),
        }
    }
}
