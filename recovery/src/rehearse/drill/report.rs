//! What a drill reports ([`DrillReport`], its [`DrillStep`]s and [`DrillCheck`]s, in JSON and
//! Markdown), how a step fails ([`DrillError`]) and how steps are timed ([`Timer`]); shared with
//! the table drill and the game days.

use std::time::Instant;

use serde::Serialize;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DrillStep {
    pub step: String,
    pub ms: u64,
    pub detail: String,
    /// Part of the recovery (counted in RTO).
    pub recovery: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DrillCheck {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DrillReport {
    pub format_version: u32,
    pub ok: bool,
    pub location: String,
    pub orders: u64,
    pub events: u64,
    pub steps: Vec<DrillStep>,
    pub rto_ms: u64,
    /// Commits the source made after the replica was copied.
    pub rpo_commits: u64,
    /// Journal positions the source held beyond the replica's newest snapshot.
    pub rpo_positions: u64,
    pub h: u64,
    /// The audit of the replica's history: the timeline, the bad write it found and the trusted
    /// snapshot the recovery started from.
    pub audit: crate::recover::audited::SourceAudit,
    pub checks: Vec<DrillCheck>,
    pub total_ms: u64,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

impl DrillReport {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "# tidemark drill\n\nLocation: `{}` — {} orders, {} events — result: **{}**\n\n",
            self.location,
            self.orders,
            self.events,
            if self.ok { "PASS" } else { "FAIL" }
        );
        s += &format!(
            "RTO (recovery steps end to end): **{} ms**. RPO of the replica: {} commits, {} journal positions behind (replayed from the journal up to H = {}).\n\n",
            self.rto_ms, self.rpo_commits, self.rpo_positions, self.h
        );
        s += "| step | ms | recovery | detail |\n|---|---:|---|---|\n";
        for st in &self.steps {
            s += &format!(
                "| {} | {} | {} | {} |\n",
                st.step,
                st.ms,
                if st.recovery { "yes" } else { "" },
                st.detail
            );
        }
        s += &audit_markdown(&self.audit);
        s + &checks_markdown(&self.checks)
    }
}

/// The audit's timeline and what it found, as Markdown (after a blank line).
pub(crate) fn audit_markdown(a: &crate::recover::audited::SourceAudit) -> String {
    let mut s = format!(
        "\nAudit of the source's history: {}; trusted snapshot {}.\n\n| snapshot | committed | operation | writer | position | verdict | removed | changed | added |\n|---|---|---|---|---:|---|---:|---:|---:|\n",
        match &a.first_divergence {
            Some(d) => format!("**bad write found**: {}", crate::recover::audited::describe(Some(d))),
            None => "no divergence".into(),
        },
        a.trusted.as_ref().map_or("none".into(), |t| format!(
            "{} at position {}",
            t.snapshot_id,
            t.position.map_or("?".into(), |p| p.to_string())
        ))
    );
    for e in &a.timeline {
        s += &format!(
            "| {} | {} | {} | {} | {} | {:?} | {} | {} | {} |\n",
            e.snapshot_id,
            e.committed_at,
            e.operation,
            e.writer,
            e.position.map_or("".into(), |p| p.to_string()),
            e.verdict,
            e.counts.removed,
            e.counts.changed,
            e.counts.added
        );
    }
    s
}

/// The checks as a Markdown table (after a blank line).
pub(crate) fn checks_markdown(checks: &[DrillCheck]) -> String {
    let mut s = "\n| check | result | detail |\n|---|---|---|\n".to_string();
    for c in checks {
        s += &format!(
            "| {} | {} | {} |\n",
            c.check,
            if c.ok { "ok" } else { "FAIL" },
            c.detail
        );
    }
    s
}

/// A step that failed, with its cause kept (not its text): the cause's kind decides the exit
/// code (`exit::code_of`: refused credentials are 8 here as in every command).
#[derive(Debug, thiserror::Error)]
#[error("drill step {step} failed")]
pub struct DrillError {
    pub step: String,
    #[source]
    pub source: Cause,
}

pub(super) type Cause = Box<dyn std::error::Error + Send + Sync>;

pub(super) fn fail<E: Into<Cause>>(step: &str) -> impl Fn(E) -> DrillError + '_ {
    move |e| DrillError {
        step: step.to_string(),
        source: e.into(),
    }
}

pub(crate) struct Timer<'a> {
    pub(crate) steps: Vec<DrillStep>,
    pub(crate) progress: &'a mut dyn FnMut(&DrillStep),
}

impl Timer<'_> {
    pub(crate) fn done(&mut self, step: &str, t: Instant, detail: String, recovery: bool) {
        let s = DrillStep {
            step: step.into(),
            ms: t.elapsed().as_millis() as u64,
            detail,
            recovery,
        };
        (self.progress)(&s);
        self.steps.push(s);
    }
}
