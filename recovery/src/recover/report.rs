//! What a recovery reports, on both engines: [`RecoveryReport`], with one [`StepTiming`] per step.

use serde::Serialize;

use super::audited;
use super::validate::ValidationReport;
use crate::merge::MergeStats;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StepTiming {
    pub step: String,
    pub ms: u64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RecoveryReport {
    pub format_version: u32,
    pub recovery_id: String,
    pub into: String,
    pub table_uuid: String,
    pub metadata_location: String,
    pub source_snapshot_id: i64,
    pub source_table_uuid: String,
    pub snapshot_position: u64,
    pub h: u64,
    pub seed_rows: u64,
    pub seed_resumed: bool,
    pub replay_resumed: bool,
    pub replay: MergeStats,
    /// The source's history held against the journal (step 0).
    pub audit: audited::SourceAudit,
    pub validation: ValidationReport,
    /// With `--reference journal`: the recovered table against the fold of the whole journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_reference: Option<ValidationReport>,
    pub steps: Vec<StepTiming>,
    pub total_ms: u64,
}

impl RecoveryReport {
    /// Both validations passed (the journal reference only when asked): the route may flip.
    pub fn ok(&self) -> bool {
        self.validation.ok && self.journal_reference.as_ref().is_none_or(|r| r.ok)
    }
}
