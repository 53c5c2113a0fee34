//! Why a snapshot's journal position is believed: the snapshot records it itself.
//!
//! Every tidemark commit's summary records the journal it applied from and the range it applied
//! (`tidemark.journal-id`, `tidemark.last-position`, `tidemark.manifest-sequence`,
//! `tidemark.manifest-digest`); a snapshot that is not a tidemark commit (another writer's) holds
//! what the newest tidemark commit in its ancestry recorded. A checkpoint is a second, separate
//! record of the same fact, and a separate record can be wrong: rewritten, restored from another
//! version, or copied from another table. Recovery therefore takes the position from the
//! snapshot, and refuses (exit 4) when:
//! * the summary names another journal than the one given (its positions mean other events);
//! * a checkpoint naming the snapshot disagrees with it on the position, the manifest sequence
//!   or the manifest digest, or names a snapshot that records no position at all.
//!
//! Seeding from a snapshot and replaying from a position it does not hold would give a table that
//! misses or repeats events, and a validation that starts from the same wrong premise would agree
//! with it; so the premise is checked here, before anything is written.

use tidemark_journal::Journal;
use tidemark_schemas::Checkpoint;

use super::RecoverError;

pub use crate::provenance::{RecordedPosition, recorded_position};

/// Refuses a record from another journal, and a checkpoint that disagrees with the record.
pub fn check(
    journal: &Journal,
    snapshot_id: i64,
    recorded: Option<&RecordedPosition>,
    checkpoint: Option<&Checkpoint>,
) -> Result<(), RecoverError> {
    let journal_id = &journal.header.journal_id;
    if let Some(r) = recorded
        && let Some(found) = &r.journal_id
        && found != journal_id
    {
        return Err(RecoverError::OtherJournal {
            snapshot_id,
            recorded_by: r.recorded_by,
            found: found.clone(),
            expected: journal_id.clone(),
        });
    }
    let Some(cp) = checkpoint else {
        return Ok(());
    };
    let key = tidemark_journal::paths::checkpoint_key(&cp.table_uuid, cp.position);
    let mismatch = |field: &str, checkpoint: String, snapshot: String| RecoverError::CheckpointMismatch {
        checkpoint: key.clone(),
        snapshot_id,
        field: field.to_string(),
        checkpoint_value: checkpoint,
        snapshot_value: snapshot,
    };
    if &cp.journal_id != journal_id {
        return Err(mismatch("journal id", cp.journal_id.clone(), journal_id.clone()));
    }
    let Some(r) = recorded else {
        return Err(mismatch(
            "position",
            cp.position.to_string(),
            "none (no tidemark commit in its ancestry)".into(),
        ));
    };
    if cp.position != r.position {
        return Err(mismatch("position", cp.position.to_string(), r.position.to_string()));
    }
    if cp.manifest_sequence != r.manifest_sequence {
        return Err(mismatch(
            "manifest sequence",
            cp.manifest_sequence.to_string(),
            r.manifest_sequence.to_string(),
        ));
    }
    if cp.manifest_digest != r.manifest_digest {
        return Err(mismatch(
            "manifest digest",
            cp.manifest_digest.clone(),
            r.manifest_digest.clone(),
        ));
    }
    Ok(())
}
