//! What the table drill reports ([`TableDrillReport`], its checks by name: `CHECK_*`), its
//! options ([`TableDrillOptions`]) and the report as an operator reads it ([`text`]).

use std::sync::Arc;

use serde::Serialize;
use tidemark_journal::store::ObjectStore;

use super::scratch::Leftover;
use crate::exit;
use crate::recover::snapshot::SnapshotSource;
use crate::rehearse::history::DrillRecord;

/// Check names (the record's `checks[].check`), also what the exit code is chosen by.
pub const CHECK_AUDIT: &str = "the table's history holds no write the journal does not explain";
pub const CHECK_JOURNAL: &str = "the journal holds every event after the trusted snapshot";
pub const CHECK_ROUTE: &str = "the route points at a table whose audit is clean";
pub const CHECK_VALIDATION: &str = "the recovered table matches the independent reference";
pub const CHECK_RTO: &str = "the recovery fits the RTO budget";
pub const CHECK_TRUSTED: &str = "the audit names a trusted snapshot to recover from";

/// The steps counted in the RTO (what a real recovery would take, the flip aside).
pub const RECOVERY_STEPS: &[&str] = &["audit", "choose snapshot", "boundary", "seed", "replay", "validate"];

#[derive(Debug, Clone)]
pub struct TableDrillOptions {
    /// `drill-<uuid>`: the recovery id of the scratch table, and the record's id.
    pub drill_id: String,
    /// The production table's (or the replica's) current metadata, read only.
    pub source: SnapshotSource,
    /// How the report names the source (`namespace.name` or the metadata file).
    pub source_label: String,
    /// The namespace the scratch table is made in (it must hold nothing but drill tables).
    pub scratch: String,
    /// The route readers resolve, read only.
    pub route: Option<String>,
    /// The drill history location's store (records and the audit's records); `None`: no record.
    pub history: Option<Arc<dyn ObjectStore>>,
    pub rto_budget_ms: Option<u64>,
    pub validation_split: crate::recover::validate::Split,
    /// Where the replay runs (as `recover --engine`).
    #[cfg(feature = "ballista-engine")]
    pub engine: crate::recover::engine::Engine,
}

/// The route as the drill read it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RouteSeen {
    pub table_name: String,
    pub table_uuid: String,
    pub generation: u64,
    pub applied_position: u64,
}

/// A step that failed: the drill stopped there (after its cleanup).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StepFailure {
    pub step: String,
    /// The exit code the failure maps to (docs/errors.md).
    pub code: u8,
    pub message: String,
}

/// `tidemark drill --source-table … --json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TableDrillReport {
    pub record: DrillRecord,
    /// The scratch table the recovery made (dropped by the cleanup).
    pub scratch_table: String,
    /// Where its files were (deleted by the cleanup); `None` when it was never made.
    pub scratch_location: Option<String>,
    pub leftovers_removed: Vec<Leftover>,
    pub route: Option<RouteSeen>,
    /// The journal's head position when the drill started.
    pub journal_head: Option<u64>,
    /// The oldest journal position still held without a gap up to the head.
    pub journal_oldest_held: Option<u64>,
    pub failure: Option<StepFailure>,
    /// Where the record was stored under the history location; `None`: no `--history`.
    pub history_key: Option<String>,
}

impl TableDrillReport {
    /// The exit code: the failed step's, else the first failed check's (a divergence 12, the
    /// RTO budget 13, any other 4), else 0.
    pub fn exit_code(&self) -> u8 {
        if let Some(f) = &self.failure {
            return f.code;
        }
        let failed: Vec<&str> = self
            .record
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.check.as_str())
            .collect();
        if failed.is_empty() {
            exit::OK
        } else if failed.contains(&CHECK_AUDIT) || failed.contains(&CHECK_ROUTE) {
            exit::DIVERGENCE
        } else if failed == [CHECK_RTO] {
            exit::RTO_OVER_BUDGET
        } else {
            exit::VERIFY_FAILED
        }
    }
}

/// The report as an operator reads it.
pub fn text(r: &TableDrillReport) -> String {
    let rec = &r.record;
    let mut s = format!(
        "drill {} of {} (journal {}): {}\n",
        rec.drill_id,
        rec.source,
        rec.journal,
        if rec.ok { "PASS" } else { "FAIL" }
    );
    for l in &r.leftovers_removed {
        s += &format!("  leftover {}: {}\n", l.table, l.detail);
    }
    for st in &rec.steps {
        s += &format!(
            "  {:<16} {:>8} ms  {}{}\n",
            st.step,
            st.ms,
            if st.ok { "" } else { "FAILED: " },
            st.detail
        );
    }
    s += &format!(
        "  RTO {} ms{}; RPO {} positions{}\n",
        rec.rto_ms,
        rec.rto_budget_ms
            .map(|b| format!(" (budget {b} ms)"))
            .unwrap_or_default(),
        rec.rpo_positions.map_or("?".into(), |p| p.to_string()),
        rec.rpo_seconds
            .map(|s| format!(" ({s:.0} s since the trusted snapshot)"))
            .unwrap_or_default()
    );
    if let Some(route) = &r.route {
        s += &format!(
            "  route (read, not flipped): generation {} → {} (table {})\n",
            route.generation, route.table_name, route.table_uuid
        );
    }
    s += "checks:\n";
    for c in &rec.checks {
        s += &format!("  [{}] {}: {}\n", if c.ok { "ok" } else { "FAIL" }, c.check, c.detail);
    }
    if let Some(f) = &r.failure {
        s += &format!("step {} failed (exit {}): {}\n", f.step, f.code, f.message);
    }
    s += &match &r.history_key {
        Some(k) => format!("record: {k} (under --history)\n"),
        None => "no --history: no record was written\n".into(),
    };
    s
}
