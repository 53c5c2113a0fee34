//! What the game day reports ([`GamedayReport`], one [`GamedayRun`] per copy, one
//! [`GamedayTable`] per table) and how a step fails ([`GamedayError`]).

use serde::Serialize;

use super::place::NAMESPACE;

use crate::rehearse::drill::{DrillCheck, DrillStep};

/// One table of a [`GamedayRun`].
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GamedayTable {
    pub table: String,
    /// The head chosen by the chain (file name).
    pub head: Option<String>,
    /// Stray metadata files found beside it.
    pub strays: usize,
    pub validated: bool,
    /// What validation found (or why the table was not registered).
    pub detail: String,
    /// Steps 3–6 spent on this table.
    pub rto_ms: u64,
}

/// One pass of steps 2–7 over one replica.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GamedayRun {
    /// `consistent copy` or `data-first copy under a live writer`.
    pub copy: String,
    pub tables: Vec<GamedayTable>,
    /// Steps 3–6 end to end.
    pub rto_ms: u64,
    /// Tables that failed step 6.
    pub failed_validation: Vec<String>,
    /// Per table, the commits `replica check` found the replica's consistent head behind its
    /// newest metadata (the RPO of the unsafe copy), for tables behind at all.
    pub replica_behind: Vec<(String, usize)>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GamedayReport {
    pub format_version: u32,
    pub ok: bool,
    pub location: String,
    pub tables: usize,
    pub steps: Vec<DrillStep>,
    pub runs: Vec<GamedayRun>,
    pub checks: Vec<DrillCheck>,
    pub total_ms: u64,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

impl GamedayReport {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "# tidemark game day\n\nLocation: `{}` — {} tables in namespace `{NAMESPACE}` — result: **{}**\n\n",
            self.location,
            self.tables,
            if self.ok { "PASS" } else { "FAIL" }
        );
        s += "| step | ms | detail |\n|---|---:|---|\n";
        for st in &self.steps {
            s += &format!("| {} | {} | {} |\n", st.step, st.ms, st.detail);
        }
        for run in &self.runs {
            s += &format!(
                "\n## {}\n\nRTO (steps 3–6): **{} ms**. Failed validation: {}.\n\n",
                run.copy,
                run.rto_ms,
                if run.failed_validation.is_empty() {
                    "none".to_string()
                } else {
                    run.failed_validation.join(", ")
                }
            );
            s += "| table | head | strays | validated | RTO ms | detail |\n|---|---|---:|---|---:|---|\n";
            for t in &run.tables {
                s += &format!(
                    "| {} | {} | {} | {} | {} | {} |\n",
                    t.table,
                    t.head.as_deref().unwrap_or("-"),
                    t.strays,
                    if t.validated { "yes" } else { "**NO**" },
                    t.rto_ms,
                    t.detail
                );
            }
        }
        s + &crate::rehearse::drill::checks_markdown(&self.checks)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("game day step {step} failed: {message}")]
pub struct GamedayError {
    pub step: String,
    pub message: String,
}

pub(super) fn fail(step: &str) -> impl Fn(String) -> GamedayError + '_ {
    move |message| GamedayError {
        step: step.to_string(),
        message,
    }
}
