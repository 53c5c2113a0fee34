//! What stops the applier ([`ApplyError`]), and the divergence it names when another writer's
//! commit changed what the journal says ([`DivergenceStop`]).

use crate::merge::MergeError;
use crate::table::TableError;

/// What [`ApplyError::Divergence`] names: the divergent snapshot and what to do.
#[derive(Debug, thiserror::Error)]
#[error(
    "table {table}: snapshot {snapshot_id} ({operation} by {writer}, committed {committed_at}) changed what the journal says: {removed} keys removed, {changed} changed, {added} added (e.g. {samples}); nothing was applied. Recover the table from its last trusted snapshot ({trusted}): `tidemark recover --journal {journal} --source-table {table} --into <new table>`; or, to keep that change, run apply again with `--on-divergence continue --reason TEXT`"
)]
pub struct DivergenceStop {
    pub table: String,
    pub journal: String,
    pub snapshot_id: i64,
    pub operation: String,
    pub writer: String,
    pub committed_at: String,
    pub removed: u64,
    pub changed: u64,
    pub added: u64,
    pub samples: String,
    pub trusted: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("journal {journal} does not verify: {kind} at {key}: {message}")]
    ChainBroken {
        journal: String,
        kind: String,
        key: String,
        message: String,
    },
    #[error("table {table} was written from journal {found}, not from journal {expected}")]
    OtherJournal {
        table: String,
        expected: String,
        found: String,
    },
    #[error(
        "checkpoint at position {checkpoint} is ahead of table {table}, which holds positions up to {applied}: the table was rolled back or replaced; recover it instead of applying"
    )]
    CheckpointAhead {
        table: String,
        checkpoint: u64,
        applied: u64,
    },
    #[error("table {table} keeps changing under the applier ({attempts} attempts): another writer is committing to it")]
    Contended { table: String, attempts: usize },
    #[error("failpoint {0} reached (a simulated crash for drills and tests)")]
    Failpoint(String),
    #[error("commit refused: {0}")]
    Fenced(String),
    #[error("merge spill {path}: {message}")]
    Spill { path: String, message: String },
    /// Another writer committed a change the journal does not explain since the applier's own
    /// last commit (found by the audit, `crate::audit`); nothing was committed.
    #[error(transparent)]
    Divergence(Box<DivergenceStop>),
    #[error(transparent)]
    Audit(Box<crate::audit::AuditError>),
    /// `error` stopped a unit after some of its files were written, and not all of them could
    /// be deleted: `left` names each (path: why). They are in no snapshot (orphans).
    #[error("{error}; {n} file(s) written for it are in no snapshot and could not be deleted: {list}", n = .left.len(), list = .left.join("; "))]
    Uncleaned { error: Box<ApplyError>, left: Vec<String> },
}

impl ApplyError {
    /// A conflicting payload (exit 4), also when files were left behind.
    pub fn is_conflict(&self) -> bool {
        match self {
            ApplyError::Merge(m) => m.is_conflict(),
            ApplyError::Uncleaned { error, .. } => error.is_conflict(),
            _ => false,
        }
    }
}
