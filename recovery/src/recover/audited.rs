//! Step 0: the source's history audited against the journal ([`crate::audit`]) before a
//! snapshot is chosen, so that a recovery never starts from a damaged snapshot.
//!
//! With no snapshot option ([`SnapshotChoice::Trusted`]) the recovery takes the newest trusted
//! snapshot: through the checkpoint that names it when there is one, by its own record
//! otherwise. A snapshot chosen by `--at-or-before`, `--snapshot-id` or `--tag` must be trusted
//! (its own ancestry audited: a snapshot off main's history too); an untrusted one is refused
//! before anything is written, naming the first divergence in its ancestry and the newest
//! trusted snapshot, unless the operator accepts it (`--accept-divergence REASON`, recorded on
//! the seed commit as [`crate::provenance::PROP_SOURCE_VERDICT`]).

use std::sync::Arc;

use serde::Serialize;
use tidemark_journal::Journal;
use tidemark_journal::store::ObjectStore;

pub use super::options::{AuditRecords, TrustOptions};
use super::snapshot::SnapshotChoice;
use super::{RecoverError, RecoverOptions};
use crate::audit::{self, AuditOptions, AuditReport, Divergence, TrustedPoint};

/// The audit step's result in the recovery report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SourceAudit {
    /// Snapshots audited by this recovery (the rest were audited before: their records).
    pub audited: u64,
    pub resumed_from: Option<i64>,
    pub first_divergence: Option<Divergence>,
    /// The newest trusted snapshot of the source's history.
    pub trusted: Option<TrustedPoint>,
    /// The chosen snapshot's verdict, as recorded on the seed: `trusted`, or `divergence
    /// accepted: <reason>`.
    pub source_verdict: String,
    /// The snapshots this recovery audited, oldest first.
    pub timeline: Vec<crate::audit::SnapshotAudit>,
}

impl SourceAudit {
    /// The report's audit: what `audit` found, and the chosen snapshot's `source_verdict`.
    pub(crate) fn of(audit: &AuditReport, source_verdict: String) -> Self {
        SourceAudit {
            audited: audit.audited,
            resumed_from: audit.resumed_from,
            first_divergence: audit.first_divergence.clone(),
            trusted: audit.trusted.clone(),
            source_verdict,
            timeline: audit.timeline.clone(),
        }
    }
}

fn records(journal: &Journal, r: &AuditRecords) -> Option<Arc<dyn ObjectStore>> {
    match r {
        AuditRecords::Journal => Some(journal.store.clone()),
        AuditRecords::At(s) => Some(s.clone()),
        AuditRecords::None => None,
    }
}

/// Audits the source's history (main's ancestry) and turns [`SnapshotChoice::Trusted`] into the
/// choice of the newest trusted snapshot.
pub(crate) async fn resolve(
    journal: &Journal,
    opts: &RecoverOptions,
) -> Result<(SnapshotChoice, AuditReport), RecoverError> {
    let aopts = AuditOptions {
        records: records(journal, &opts.trust.records),
        ..Default::default()
    };
    let report = audit::audit(journal, &opts.source, &aopts, &mut |_| {})
        .await
        .map_err(|e| RecoverError::Audit(Box::new(e)))?;
    let choice = match &opts.choice {
        SnapshotChoice::Trusted => {
            let t = report.trusted.clone().ok_or_else(|| RecoverError::NoTrustedSnapshot {
                table_uuid: report.table_uuid.clone(),
                divergence: describe(report.first_divergence.as_ref()),
            })?;
            match t
                .checkpoint
                .as_deref()
                .and_then(tidemark_journal::paths::parse_checkpoint_key)
            {
                Some((_, position)) => SnapshotChoice::Checkpoint {
                    at_or_before: Some(position),
                },
                None => SnapshotChoice::SnapshotId(t.snapshot_id),
            }
        }
        other => other.clone(),
    };
    Ok((choice, report))
}

/// The verdict on the chosen `snapshot_id` (`trusted`, or accepted), or the refusal.
pub(crate) async fn check(
    journal: &Journal,
    opts: &RecoverOptions,
    snapshot_id: i64,
    main: &AuditReport,
) -> Result<String, RecoverError> {
    let own = if main.trusted.as_ref().is_some_and(|t| t.snapshot_id == snapshot_id) {
        None
    } else {
        // Its own ancestry (records make this cheap: the state after a snapshot depends on its
        // ancestry alone).
        let aopts = AuditOptions {
            records: records(journal, &opts.trust.records),
            head: Some(snapshot_id),
            ..Default::default()
        };
        Some(
            audit::audit(journal, &opts.source, &aopts, &mut |_| {})
                .await
                .map_err(|e| RecoverError::Audit(Box::new(e)))?,
        )
    };
    match own {
        None => Ok("trusted".into()),
        Some(r) if r.ok => Ok("trusted".into()),
        Some(r) => match &opts.trust.accept_divergence {
            Some(reason) => Ok(format!("divergence accepted: {reason}")),
            None => Err(RecoverError::Untrusted {
                snapshot_id,
                divergence: describe(r.first_divergence.as_ref()),
                trusted: main.trusted.as_ref().map_or("none".into(), |t| {
                    format!(
                        "snapshot {} at position {}",
                        t.snapshot_id,
                        t.position.map_or("?".into(), |p| p.to_string())
                    )
                }),
            }),
        },
    }
}

/// One line for a divergence: its snapshot, writer, time, counts and a few keys.
pub fn describe(d: Option<&Divergence>) -> String {
    match d {
        None => "none".into(),
        Some(d) => format!(
            "snapshot {} ({} by {}, committed {}, at journal position {}): {} keys removed, {} changed, {} added{}",
            d.snapshot_id,
            d.operation,
            d.writer,
            d.committed_at,
            d.position.map_or("?".into(), |p| p.to_string()),
            d.counts.removed,
            d.counts.changed,
            d.counts.added,
            if d.sample_keys.is_empty() {
                format!(" ({})", d.detail)
            } else {
                format!(
                    " (e.g. {})",
                    d.sample_keys.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
                )
            }
        ),
    }
}

/// The audit step's line in the recovery's progress and report.
pub(crate) fn detail(r: &AuditReport) -> String {
    let from = r
        .resumed_from
        .map(|s| format!(" (after snapshot {s}, audited before)"))
        .unwrap_or_default();
    let found = match &r.first_divergence {
        None => "no divergence".to_string(),
        Some(d) => format!("first divergence: {}", describe(Some(d))),
    };
    let trusted = r.trusted.as_ref().map_or("no trusted snapshot".into(), |t| {
        format!(
            "newest trusted snapshot {} at position {}",
            t.snapshot_id,
            t.position.map_or("?".into(), |p| p.to_string())
        )
    });
    format!("{} snapshots audited{from}: {found}; {trusted}", r.audited)
}
