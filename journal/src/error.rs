//! The journal's errors. Each carries the facts an operator needs (key, version, position) and
//! its message says what to do.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no journal at {journal} (missing {key}); create one with `tidemark journal init --journal {journal}`")]
    NotInitialized { journal: String, key: String },
    #[error("a journal already exists at {journal} (journal id {journal_id})")]
    AlreadyInitialized { journal: String, journal_id: String },
    #[error("{source_name}:{line}: {message}")]
    Input {
        source_name: String,
        line: u64,
        message: String,
    },
    #[error("{source_name}:{line}: position {received} does not continue the journal: expected position {expected}")]
    PositionMismatch {
        source_name: String,
        line: u64,
        expected: u64,
        received: u64,
    },
    #[error(
        "{source_name}:{second_line}: the event at position {second_position} has key {key} version {version} like {}, with a different payload: a conflict (the merge could never apply both); nothing was written: give the changed event a higher version, or drop one of the two",
        first_event(*.first_line, *.first_position)
    )]
    ConflictingEvent {
        source_name: String,
        key: String,
        version: i64,
        /// `None`: the first event is already in the journal.
        first_line: Option<u64>,
        first_position: u64,
        second_line: u64,
        second_position: u64,
    },
    #[error("resolution {key} already keeps position {kept}, not {asked}; a resolution is never replaced")]
    ResolutionExists { key: String, kept: u64, asked: u64 },
    #[error(
        "{source_name}: position {position} is already in the journal with another event (field `{field}`: the journal holds {stored}, the input has {received}); nothing was appended"
    )]
    ResentEventDiffers {
        source_name: String,
        position: u64,
        field: String,
        stored: String,
        received: String,
    },
    #[error("invalid table spec: {0}")]
    Spec(String),
    #[error(
        "store {store} lacks a capability the journal requires: {capability} ({detail}); see `tidemark store check {store}`"
    )]
    Capability {
        store: String,
        capability: String,
        detail: String,
    },
    #[error(
        "another writer appended sequence {sequence} ({key}) first; this batch (positions {first}..={last}) was not accepted: re-run append with input after the journal's new head"
    )]
    ConcurrentWriter {
        key: String,
        sequence: u64,
        first: u64,
        last: u64,
    },
    #[error("object {key} (version {version_id}) is corrupt: {message}")]
    Corrupt {
        key: String,
        version_id: String,
        message: String,
    },
    #[error("journal chain broken at {key}: {message}")]
    ChainBroken { key: String, message: String },
    #[error(
        "checkpoint {key} already exists with different content (existing snapshot {existing_snapshot}, new snapshot {new_snapshot})"
    )]
    CheckpointConflict {
        key: String,
        existing_snapshot: i64,
        new_snapshot: i64,
    },
    #[error("{context}: {message}")]
    Format { context: String, message: String },
}

fn first_event(line: Option<u64>, position: u64) -> String {
    match line {
        Some(l) => format!("line {l} (position {position})"),
        None => format!("position {position}, already in the journal"),
    }
}

pub type Result<T, E = JournalError> = std::result::Result<T, E>;
