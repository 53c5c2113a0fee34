//! The recovery's error: every way a step refuses or fails, with what the operator does next.

use crate::apply::ApplyError;
use crate::merge::MergeError;
use crate::table::TableError;

#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("{what} is missing: {path}; the snapshot cannot be trusted (choose an older one, or repair the replica)")]
    MissingFile { path: String, what: String },
    #[error("no checkpoint of table {table_uuid}{}", at_or_before.map(|p| format!(" at or before position {p}")).unwrap_or_default())]
    NoCheckpoint {
        table_uuid: String,
        at_or_before: Option<u64>,
    },
    #[error("{what} does not exist")]
    UnknownSnapshot { what: String },
    #[error(
        "snapshot {snapshot_id} has no checkpoint and no tidemark summary: the journal position it holds is unknown"
    )]
    NoPosition { snapshot_id: i64 },
    #[error(
        "snapshot {snapshot_id} holds positions of journal {found} (recorded by snapshot {recorded_by}), not of journal {expected}: those positions are other events; recover with that snapshot's own journal"
    )]
    OtherJournal {
        snapshot_id: i64,
        recorded_by: i64,
        found: String,
        expected: String,
    },
    #[error(
        "checkpoint {checkpoint} names snapshot {snapshot_id} with {field} {checkpoint_value}, but the snapshot's own summary records {snapshot_value}: the checkpoint cannot be trusted (rewritten, restored or copied from elsewhere) and nothing was written; choose the snapshot by its own record with --snapshot-id, or another --at-or-before"
    )]
    CheckpointMismatch {
        checkpoint: String,
        snapshot_id: i64,
        field: String,
        checkpoint_value: String,
        snapshot_value: String,
    },
    #[error("H = {h} is beyond the verified range of the journal ({range})")]
    BeyondVerified { h: u64, range: String },
    #[error("the journal does not verify: {kind} at {key}: {message}")]
    ChainBroken { kind: String, key: String, message: String },
    #[error("table {table} exists and is not this recovery's ({})", owner.as_deref().map(|o| format!("it belongs to recovery {o}")).unwrap_or_else(|| "not made by a recovery".into()))]
    TargetExists { table: String, owner: Option<String> },
    #[error(
        "recovery {recovery_id} already seeded {table} with {field} {recorded}, but this run chooses {field} {asked}; nothing was written: run it again with the same choice, or start another recovery (a new --recovery-id and --into)"
    )]
    ResumeMismatch {
        recovery_id: String,
        table: String,
        field: String,
        recorded: String,
        asked: String,
    },
    #[error(transparent)]
    Audit(Box<crate::audit::AuditError>),
    #[error(
        "snapshot {snapshot_id} is not trusted: its history holds a write the journal does not explain, {divergence}; nothing was written. The newest trusted snapshot is {trusted} (recover with no snapshot option to take it); to start from snapshot {snapshot_id} anyway, give --accept-divergence REASON"
    )]
    Untrusted {
        snapshot_id: i64,
        divergence: String,
        trusted: String,
    },
    #[error(
        "table {table_uuid} has no trusted snapshot: its history diverges from the journal from the start ({divergence}); nothing was written. Recover from a snapshot of your choice with --snapshot-id ID --accept-divergence REASON, or with --reference journal to prove the result against the whole journal"
    )]
    NoTrustedSnapshot { table_uuid: String, divergence: String },
    #[error("validation failed: {message}")]
    Validation { message: String },
    #[error("not supported: {reason}")]
    Unsupported { reason: String },
    /// The replay's spill files (under `$TIDEMARK_SPILL_DIR`) could not be written or read.
    #[error("replay spill {path}: {message}")]
    Spill { path: String, message: String },
    /// `error` stopped the replay after some of its files were written, and not all could be
    /// deleted: `left` names each (path: why).
    #[error("{error}; {n} file(s) written for it are in no snapshot and could not be deleted: {list}", n = .left.len(), list = .left.join("; "))]
    Uncleaned {
        error: Box<RecoverError>,
        left: Vec<String>,
    },
    #[error("{context}: {message}")]
    Iceberg { context: String, message: String },
    /// A Ballista engine's failure (`--engine`, `engine`).
    #[cfg(feature = "ballista-engine")]
    #[error(transparent)]
    Engine(#[from] super::engine::EngineError),
}

impl From<crate::table::source::SourceError> for RecoverError {
    fn from(e: crate::table::source::SourceError) -> Self {
        use crate::table::source::SourceError as S;
        match e {
            S::MissingFile { path, what } => RecoverError::MissingFile { path, what },
            S::AccessDenied { context, detail } => RecoverError::Table(TableError::AccessDenied { context, detail }),
            S::Iceberg { context, message } => RecoverError::Iceberg { context, message },
        }
    }
}

impl RecoverError {
    pub fn from_apply(e: ApplyError) -> Self {
        match e {
            ApplyError::Journal(j) => RecoverError::Journal(j),
            ApplyError::Table(t) => RecoverError::Table(t),
            ApplyError::Merge(m) => RecoverError::Merge(m),
            ApplyError::Spill { path, message } => RecoverError::Spill { path, message },
            ApplyError::Uncleaned { error, left } => RecoverError::Uncleaned {
                error: Box::new(RecoverError::from_apply(*error)),
                left,
            },
            other => RecoverError::Validation {
                message: other.to_string(),
            },
        }
    }
}
