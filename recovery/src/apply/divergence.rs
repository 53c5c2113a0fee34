//! Other writers' commits since the applier's own last one: audited before anything is applied
//! ([`crate::audit`]); a divergence stops the applier, or is accepted and recorded
//! ([`OnDivergence`]).

use iceberg::table::Table;
use tidemark_journal::Journal;

use crate::apply::error::{ApplyError, DivergenceStop};

/// What the applier does when another writer's commit since its own last one diverges from the
/// journal (`--on-divergence`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum OnDivergence {
    /// Commit nothing and stop ([`ApplyError::Divergence`], exit 12).
    #[default]
    Stop,
    /// Accept the change and go on; the divergent snapshots and the reason are recorded in the
    /// next commit's summary ([`crate::provenance::PROP_ACCEPTED_DIVERGENCE`]).
    Continue { reason: String },
}

/// Audits the snapshots other writers committed to `table` since the applier's own last commit
/// (none when the current snapshot is that commit, or the table has none: nothing is read then).
/// A divergence stops the applier unless `on` continues; then the divergent snapshot ids
/// (comma-separated) are returned for the next commit's summary.
pub(super) async fn audit_foreign_commits(
    journal: &Journal,
    table: &Table,
    table_name: &str,
    on: &OnDivergence,
) -> Result<Option<String>, ApplyError> {
    let meta = table.metadata();
    let Some(current) = meta.current_snapshot() else {
        return Ok(None);
    };
    let own = crate::provenance::recorded_position(meta, current);
    match (&own, on) {
        (Some(own), _) if own.recorded_by == current.snapshot_id() => return Ok(None),
        // A table no applier committed to yet (another engine made it and wrote its first rows):
        // the first apply does not judge it, unless the operator accepts what it holds, which
        // is then recorded for later audits.
        (None, OnDivergence::Stop) => return Ok(None),
        _ => {}
    }
    let source = crate::table::source::SnapshotSource {
        metadata_location: table.metadata_location().unwrap_or_default().to_string(),
        // The table's own FileIO settings: what its catalog vends for it (a REST catalog's S3
        // endpoint) included.
        file_io_props: table.file_io().config().props().clone(),
        prefix_map: None,
    };
    let opts = crate::audit::AuditOptions {
        trust_from: own.map(|o| o.recorded_by),
        records: Some(journal.store.clone()),
        ..Default::default()
    };
    let report = crate::audit::audit(journal, &source, &opts, &mut |_| {})
        .await
        .map_err(|e| ApplyError::Audit(Box::new(e)))?;
    let Some(d) = report.first_divergence else {
        return Ok(None);
    };
    match on {
        OnDivergence::Continue { .. } => {
            let ids: Vec<String> = report
                .open_divergences
                .iter()
                .map(|d| d.snapshot_id.to_string())
                .collect();
            Ok(Some(ids.join(",")))
        }
        OnDivergence::Stop => Err(ApplyError::Divergence(Box::new(DivergenceStop {
            table: table_name.to_string(),
            journal: journal.url(),
            snapshot_id: d.snapshot_id,
            operation: d.operation,
            writer: d.writer,
            committed_at: d.committed_at,
            removed: d.counts.removed,
            changed: d.counts.changed,
            added: d.counts.added,
            samples: if d.sample_keys.is_empty() {
                d.detail.clone()
            } else {
                d.sample_keys.join(", ")
            },
            trusted: report.trusted.map_or("none".into(), |t| {
                format!(
                    "snapshot {} at position {}",
                    t.snapshot_id,
                    t.position.map_or("?".into(), |p| p.to_string())
                )
            }),
        }))),
    }
}
