//! The snapshot summary properties tidemark writes and reads: the documented applier protocol
//! (`schemas/json/applier-summary.schema.json`, docs/formats.md). Any engine whose commits carry
//! them is audited and recovered like tidemark's own applier.
//!
//! An applier commit records the journal it applied from and the positions it applied: every
//! position `first..=last`, continuing exactly where its parent's record ends (the audit checks
//! it), and the manifest that holds `last` (sequence and digest) for the chain verification. A
//! recovery's commits add their step and provenance; an applier that accepted another writer's
//! divergent commit names it.

use iceberg::spec::{SnapshotRef, TableMetadata};

/// The journal the commit applied from (its `journal_id`).
pub const PROP_JOURNAL_ID: &str = "tidemark.journal-id";
/// The first position the commit applied.
pub const PROP_FIRST_POSITION: &str = "tidemark.first-position";
/// The last position the commit applied: the table holds every position up to it.
pub const PROP_LAST_POSITION: &str = "tidemark.last-position";
/// The manifest that holds the last position: its sequence and the sha256 digest of its bytes.
pub const PROP_MANIFEST_SEQUENCE: &str = "tidemark.manifest-sequence";
pub const PROP_MANIFEST_DIGEST: &str = "tidemark.manifest-digest";
/// A recovery's id, step (`seed`, `replay`) and source.
pub const PROP_RECOVERY_ID: &str = "tidemark.recovery-id";
pub const PROP_STEP: &str = "tidemark.recovery-step";
pub const PROP_SOURCE_SNAPSHOT: &str = "tidemark.source-snapshot";
pub const PROP_SOURCE_METADATA: &str = "tidemark.source-metadata";
/// On a recovery's seed: the audit's verdict on the source snapshot (`trusted`, or
/// `divergence accepted: <reason>` with `--accept-divergence`).
pub const PROP_SOURCE_VERDICT: &str = "tidemark.source-verdict";
/// Set on a recovered table whose recovery was refused (a failed replay or validation): it was
/// never validated, so no route points at it, and a rerun of the same recovery replaces it.
pub const PROP_REFUSED: &str = "tidemark.recovery-refused";
/// On an applier commit: the other writers' divergent snapshots the operator accepted
/// (`apply --on-divergence continue`), comma-separated ids, and the operator's reason.
pub const PROP_ACCEPTED_DIVERGENCE: &str = "tidemark.accepted-divergence";
pub const PROP_ACCEPTED_REASON: &str = "tidemark.accepted-reason";
/// `tidemark fault delete`'s mark (a drill's bad write).
pub const PROP_FAULT: &str = "tidemark.fault";

/// What a snapshot's summary (or its newest ancestor's) records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedPosition {
    /// The snapshot whose summary carries the record (the snapshot itself or an ancestor).
    pub recorded_by: i64,
    pub journal_id: Option<String>,
    pub position: u64,
    pub manifest_sequence: u64,
    pub manifest_digest: String,
}

/// The record of `snapshot`: its own summary, or the newest ancestor's that has one.
pub fn recorded_position(meta: &TableMetadata, snapshot: &SnapshotRef) -> Option<RecordedPosition> {
    let mut s = Some(snapshot.clone());
    while let Some(snap) = s {
        let p = &snap.summary().additional_properties;
        if let Some(position) = p.get(PROP_LAST_POSITION).and_then(|v| v.parse::<u64>().ok()) {
            return Some(RecordedPosition {
                recorded_by: snap.snapshot_id(),
                journal_id: p.get(PROP_JOURNAL_ID).cloned(),
                position,
                manifest_sequence: p.get(PROP_MANIFEST_SEQUENCE).and_then(|v| v.parse().ok()).unwrap_or(0),
                manifest_digest: p.get(PROP_MANIFEST_DIGEST).cloned().unwrap_or_default(),
            });
        }
        s = snap
            .parent_snapshot_id()
            .and_then(|id| meta.snapshot_by_id(id).cloned());
    }
    None
}
