//! What an audit reports: each snapshot's verdict ([`SnapshotAudit`], [`Verdict`]), the open
//! divergences, the newest trusted snapshot, and the state carried from one snapshot to the next
//! ([`AuditState`]); an entry made from a snapshot's summary ([`entry_of`]).

use std::collections::HashMap;

use iceberg::spec::SnapshotRef;
use serde::{Deserialize, Serialize};

use crate::provenance::{PROP_FAULT, PROP_LAST_POSITION, PROP_RECOVERY_ID};

/// A snapshot's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// An applier commit continuing its parent's position.
    Applied,
    /// A recovery's seed (the first snapshot of a recovered table).
    Seed,
    /// Another writer's commit that left every journal column of every key as it was.
    Neutral,
    /// A change the journal does not explain, or positions that do not follow.
    Divergence,
    /// A divergence an operator accepted (named by a later applier commit, or a seed made with
    /// `--accept-divergence`).
    Accepted,
    /// The oldest retained snapshot, whose parent expired, checked against the journal's fold.
    Certified,
}

/// Keys a commit removed, changed (a journal column) or added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    pub removed: u64,
    pub changed: u64,
    pub added: u64,
}

impl Counts {
    pub fn is_zero(&self) -> bool {
        self.removed == 0 && self.changed == 0 && self.added == 0
    }
}

/// One snapshot of the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotAudit {
    pub snapshot_id: i64,
    pub parent_id: Option<i64>,
    /// The commit time (RFC 3339, from the snapshot's timestamp).
    pub committed_at: String,
    /// The summary's operation (`append`, `overwrite`, `delete`, `replace`).
    pub operation: String,
    /// Who wrote it, from the summary (tidemark's marks, or the engine/app fields other engines
    /// write); `unknown` when it names none.
    pub writer: String,
    /// The journal position the snapshot holds (its own record or its newest ancestor's).
    pub position: Option<u64>,
    /// `applier`, `recovery seed`, `recovery replay`, `other` or `start`.
    pub kind: String,
    pub verdict: Verdict,
    pub counts: Counts,
    /// A few keys of what it removed, changed or added (`removed K`, …).
    pub sample_keys: Vec<String>,
    pub detail: String,
    /// No open divergence in its ancestry since the audit's start.
    pub trusted: bool,
}

/// The first open divergence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Divergence {
    pub snapshot_id: i64,
    pub committed_at: String,
    pub operation: String,
    pub writer: String,
    pub counts: Counts,
    pub sample_keys: Vec<String>,
    /// The journal position the table held when it was committed.
    pub position: Option<u64>,
    pub detail: String,
}

/// The newest trusted snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrustedPoint {
    pub snapshot_id: i64,
    pub position: Option<u64>,
    /// The checkpoint that names it, if any (its key under the journal).
    pub checkpoint: Option<String>,
}

/// `tidemark audit --json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AuditReport {
    pub format_version: u32,
    pub journal: String,
    pub table_uuid: String,
    pub metadata_location: String,
    /// The snapshot whose ancestry was audited (main's current one by default).
    pub head_snapshot_id: Option<i64>,
    /// Where this audit started: the table's first snapshot, a record of an earlier audit, the
    /// applier's own last commit, or a certified snapshot whose parent expired.
    pub start: String,
    /// The newest recorded snapshot this audit resumed after, if any.
    pub resumed_from: Option<i64>,
    /// Snapshots audited by this run (the timeline's length).
    pub audited: u64,
    /// Data and delete files read (an applier commit reads none unless `deep`).
    pub files_read: u64,
    pub records_written: u64,
    /// The snapshots audited by this run, oldest first.
    pub timeline: Vec<SnapshotAudit>,
    pub first_divergence: Option<Divergence>,
    /// Every divergence of the history no operator accepted, oldest first.
    pub open_divergences: Vec<Divergence>,
    pub trusted: Option<TrustedPoint>,
    /// No open divergence in the history.
    pub ok: bool,
    pub elapsed_ms: u64,
}

/// What the audit carries from one snapshot to the next (and keeps in each record).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditState {
    /// The journal position the snapshot holds.
    pub position: Option<u64>,
    /// The divergences in its ancestry no operator accepted, oldest first.
    pub open: Vec<Divergence>,
    /// The newest trusted snapshot of its ancestry (itself when trusted).
    pub newest_trusted: Option<TrustedPoint>,
}

fn writer_of(props: &HashMap<String, String>) -> String {
    if props.contains_key(PROP_FAULT) {
        return "tidemark fault delete".into();
    }
    if let Some(id) = props.get(PROP_RECOVERY_ID) {
        return format!("tidemark recover ({id})");
    }
    let named: Vec<String> = [
        "engine-name",
        "engine-version",
        "app-id",
        "spark.app.id",
        "flink.job-id",
        "changed-by",
        "tidemark.writer",
    ]
    .iter()
    .filter_map(|k| props.get(*k).map(|v| format!("{k}={v}")))
    .collect();
    match (named.is_empty(), props.contains_key(PROP_LAST_POSITION)) {
        (false, _) => named.join(" "),
        (true, true) => "an applier (tidemark.* positions)".into(),
        (true, false) => "unknown".into(),
    }
}

pub(crate) fn entry_of(snap: &SnapshotRef) -> SnapshotAudit {
    let props = &snap.summary().additional_properties;
    SnapshotAudit {
        snapshot_id: snap.snapshot_id(),
        parent_id: snap.parent_snapshot_id(),
        committed_at: chrono::DateTime::from_timestamp_millis(snap.timestamp_ms())
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default(),
        operation: format!("{:?}", snap.summary().operation).to_lowercase(),
        writer: writer_of(props),
        position: None,
        kind: String::new(),
        verdict: Verdict::Neutral,
        counts: Counts::default(),
        sample_keys: Vec::new(),
        detail: String::new(),
        trusted: false,
    }
}

pub(crate) fn divergence_of(e: &SnapshotAudit, position_then: Option<u64>) -> Divergence {
    Divergence {
        snapshot_id: e.snapshot_id,
        committed_at: e.committed_at.clone(),
        operation: e.operation.clone(),
        writer: e.writer.clone(),
        counts: e.counts,
        sample_keys: e.sample_keys.clone(),
        position: position_then,
        detail: e.detail.clone(),
    }
}
