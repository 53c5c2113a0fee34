//! `tidemark audit`: a table's history (the ancestry of its current snapshot, oldest first)
//! held against the journal, snapshot by snapshot, so that the bad write is found and recovery
//! never starts from a damaged snapshot.
//!
//! Each snapshot gets a verdict ([`Verdict`]):
//! * an **applier commit** (its summary records a journal id and the positions it applied, see
//!   [`crate::provenance`]: tidemark's applier or any engine that follows the protocol) must
//!   continue its parent's position with no gap and no overlap, from this journal; with `deep`,
//!   its rows must also be the merge rules applied to its parent's rows and its events
//!   ([`deep`]);
//! * a recovery's **seed** starts a recovered table's history from the source snapshot it was
//!   seeded from (its summary records that snapshot's verdict);
//! * any **other commit** is diffed on the journal's columns, key by key, from the data files it
//!   removed and added and the data files whose deletes changed ([`diff`]; never from summary
//!   counters): one that leaves every journal column of every key as it was is **neutral** (a
//!   compaction, a same-rows rewrite, a schema change, values only in columns outside the spec);
//!   one that removes a key, changes a journal column, or adds a key or version is a
//!   **divergence**, with counts and sample keys.
//!
//! A snapshot is **trusted** when no divergence in its ancestry since the audit's start is open;
//! an applier commit that records an operator's acceptance of earlier divergent snapshots
//! ([`crate::provenance::PROP_ACCEPTED_DIVERGENCE`]) closes them. A history whose oldest retained
//! snapshot has an expired parent is started by certifying that snapshot once against the fold of
//! the journal up to its position ([`deep::certify`]).
//!
//! Incremental: with a records store ([`AuditOptions::records`]; `tidemark audit` uses the
//! journal's `audits/` prefix) each audited snapshot gets a create-only record with the state of
//! the audit after it ([`records`]), and the next audit starts after the newest recorded snapshot
//! of the ancestry, reading only the files later commits touched.

//!
//! The children, each below the ones that use it: [`error`] ([`AuditError`]); [`report`] (what an
//! audit reports, and the state carried from one snapshot to the next); [`read`] (the metadata,
//! the ancestry, and the context every step reads through); [`records`] (the create-only audit
//! records); [`diff`] (a commit diffed on the journal's columns); [`deep`] (an applier commit's
//! rows checked, and a history's oldest snapshot certified); [`classify`] (one snapshot's verdict).

mod classify;
pub mod deep;
pub mod diff;
pub mod error;
pub mod read;
pub mod records;
pub mod report;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use iceberg::spec::SnapshotRef;
use tidemark_journal::Journal;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::store::ObjectStore;
use tidemark_schemas::FORMAT_VERSION;

use crate::audit::classify::classify;
use crate::audit::diff::Loaded;
pub use crate::audit::error::AuditError;
use crate::audit::read::{Ctx, ancestry, load};
use crate::audit::records::AuditRecord;
pub use crate::audit::report::{AuditReport, AuditState, Counts, Divergence, SnapshotAudit, TrustedPoint, Verdict};
use crate::audit::report::{divergence_of, entry_of};
use crate::provenance::{PROP_ACCEPTED_DIVERGENCE, PROP_FIRST_POSITION, PROP_LAST_POSITION, PROP_STEP};
use crate::table::source::SnapshotSource;

#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// Also check each applier commit's rows against its parent's rows and its events.
    pub deep: bool,
    /// Where audit records are read and written (create-only); `None`: none. An audit with
    /// `trust_from` reads them but writes none.
    pub records: Option<Arc<dyn ObjectStore>>,
    /// Audit the ancestry of this snapshot (default: main's current one).
    pub head: Option<i64>,
    /// Take this snapshot as trusted and audit only after it (the applier's own last commit).
    pub trust_from: Option<i64>,
}

/// Audits the history of the table at `source` against `journal`. `progress` sees each snapshot
/// as it is audited.
pub async fn audit(
    journal: &Journal,
    source: &SnapshotSource,
    opts: &AuditOptions,
    progress: &mut dyn FnMut(&SnapshotAudit),
) -> Result<AuditReport, AuditError> {
    let started = Instant::now();
    let (meta, io, digest) = load(source).await?;
    let uuid = meta.uuid().to_string();
    let mut report = AuditReport {
        format_version: FORMAT_VERSION,
        journal: journal.url(),
        table_uuid: uuid.clone(),
        metadata_location: source.metadata_location.clone(),
        head_snapshot_id: opts.head.or(meta.current_snapshot_id()),
        start: "the table's first snapshot".into(),
        resumed_from: None,
        audited: 0,
        files_read: 0,
        records_written: 0,
        timeline: Vec::new(),
        first_divergence: None,
        open_divergences: Vec::new(),
        trusted: None,
        ok: true,
        elapsed_ms: 0,
    };
    let Some(head) = report.head_snapshot_id else {
        report.start = "the table has no snapshot".into();
        return Ok(report);
    };
    let ctx = Ctx {
        journal,
        meta: &meta,
        io: &io,
        map: source.prefix_map.clone(),
        name: source.metadata_location.clone(),
    };
    let (chain, expired) = ancestry(&meta, head, &ctx.name)?;
    let mut state = AuditState::default();
    let mut from = 0usize;
    // Where to start: after the snapshot taken as trusted, or after the newest recorded one,
    // whichever is later in the ancestry.
    if let Some(t) = opts.trust_from
        && let Some(i) = chain.iter().position(|s| s.snapshot_id() == t)
    {
        let position = crate::provenance::recorded_position(&meta, &chain[i]).map(|r| r.position);
        state.position = position;
        state.newest_trusted = Some(TrustedPoint {
            snapshot_id: t,
            position,
            checkpoint: None,
        });
        from = i + 1;
        report.start = format!("after snapshot {t}, taken as trusted");
    }
    if let Some(store) = &opts.records {
        let recorded = records::list(store.as_ref(), &uuid).await?;
        if let Some(i) = chain.iter().rposition(|s| recorded.contains(&s.snapshot_id()))
            && i + 1 > from
        {
            let id = chain[i].snapshot_id();
            let rec = records::read(store.as_ref(), &uuid, id).await?;
            state = rec.state;
            from = i + 1;
            report.resumed_from = Some(id);
            report.start = format!("after snapshot {id}, audited before (its record)");
        }
    }
    let mut parent: Option<Loaded> = None;
    // The oldest retained snapshot's parent expired: named but gone, or not even named (an
    // expiry may drop the reference) while the snapshot applied positions after the first.
    let expired = expired.map(|e| e.to_string()).or_else(|| {
        let p = &chain[0].summary().additional_properties;
        let first = p.get(PROP_FIRST_POSITION).and_then(|v| v.parse::<u64>().ok());
        (chain[0].parent_snapshot_id().is_none() && first.is_some_and(|f| f > 1) && p.get(PROP_STEP).is_none())
            .then(|| "(no longer named)".to_string())
    });
    if from == 0
        && let Some(expired) = expired
    {
        // The oldest retained snapshot: certified once against the journal's fold.
        let first = &chain[0];
        let (mut entry, loaded) = deep::certify(&ctx, first, &expired).await?;
        report.files_read += loaded.files_read;
        report.start = format!(
            "snapshot {} certified against the journal's fold (its parent {expired} expired)",
            first.snapshot_id()
        );
        state.position = entry.position;
        if entry.verdict == Verdict::Divergence {
            state.open.push(divergence_of(&entry, entry.position));
        }
        entry.trusted = state.open.is_empty();
        finish(&mut state, &mut entry);
        write_record(opts, &ctx, &uuid, &digest, &entry, &state, &mut report).await?;
        progress(&entry);
        report.timeline.push(entry);
        parent = Some(loaded.loaded);
        from = 1;
    }
    // Consecutive commits of other writers that together leave every journal column as it was
    // (PyIceberg's overwrite is a delete and an append, two snapshots of one commit) are neutral
    // together: each is then neutral.
    let mut neutral_run_until: Option<usize> = None;
    // A run that diverges: its end, first snapshot, counts and keys (reported on its first).
    let mut divergent_run: Option<(usize, i64, Counts, Vec<String>)> = None;
    for i in from..chain.len() {
        let snap = &chain[i];
        let previous = if i == 0 { None } else { Some(&chain[i - 1]) };
        let mut entry = entry_of(snap);
        let props = snap.summary().additional_properties.clone();
        let position_then = state.position;
        if neutral_run_until.is_none_or(|end| i > end)
            && divergent_run.as_ref().is_none_or(|r| i > r.0)
            && let Some(end) = other_run_end(&chain, i)
            && end > i
        {
            let before = diff::loaded_or(&ctx, parent.take(), previous).await?;
            let after = diff::load(&ctx, &chain[end]).await?;
            let d = diff::diff(&ctx, before.as_ref(), &after).await?;
            report.files_read += d.files_read;
            if d.counts.is_zero() && d.schema_problem.is_none() {
                neutral_run_until = Some(end);
            } else {
                divergent_run = Some((end, snap.snapshot_id(), d.counts, d.samples));
            }
            parent = Some(after);
        }
        if let Some((end, first, counts, samples)) = divergent_run.as_ref().filter(|r| i <= r.0) {
            entry.kind = "other".into();
            entry.verdict = Verdict::Divergence;
            if *first == snap.snapshot_id() {
                entry.counts = *counts;
                entry.sample_keys = samples.clone();
                entry.detail = format!(
                    "{} keys removed, {} changed, {} added on the journal's columns, with the next {} commits of other writers (diffed together, up to snapshot {})",
                    counts.removed,
                    counts.changed,
                    counts.added,
                    end - i,
                    chain[*end].snapshot_id()
                );
            } else {
                entry.detail = format!("diffed together with snapshot {first} (the first of these commits)");
            }
        } else if neutral_run_until.is_some_and(|end| i <= end) {
            entry.kind = "other".into();
            entry.verdict = Verdict::Neutral;
            entry.detail = "one of consecutive commits of other writers that together leave every journal column of every key as it was".into();
        } else {
            classify(
                &ctx,
                snap,
                previous,
                &mut parent,
                &state,
                opts.deep,
                &props,
                &mut entry,
                &mut report,
            )
            .await?;
        }
        // An applier commit that records the operator's acceptance closes the divergences it names.
        if let Some(ids) = props.get(PROP_ACCEPTED_DIVERGENCE) {
            let accepted: Vec<i64> = ids.split(',').filter_map(|s| s.trim().parse().ok()).collect();
            state.open.retain(|d| !accepted.contains(&d.snapshot_id));
            for e in report.timeline.iter_mut().filter(|e| accepted.contains(&e.snapshot_id)) {
                e.verdict = Verdict::Accepted;
            }
        }
        if entry.verdict == Verdict::Divergence {
            state.open.push(divergence_of(&entry, position_then));
        }
        entry.trusted = state.open.is_empty();
        finish(&mut state, &mut entry);
        write_record(opts, &ctx, &uuid, &digest, &entry, &state, &mut report).await?;
        progress(&entry);
        report.timeline.push(entry);
    }
    report.audited = report.timeline.len() as u64;
    report.first_divergence = state.open.first().cloned();
    report.open_divergences = state.open.clone();
    report.ok = state.open.is_empty();
    report.trusted = match state.newest_trusted.clone() {
        Some(mut t) => {
            let filter = CheckpointFilter {
                table_uuid: Some(uuid.clone()),
                table_name: None,
            };
            t.checkpoint = checkpoint::list(journal.store.as_ref(), &filter)
                .await?
                .iter()
                .rev()
                .find(|c| c.snapshot_id == t.snapshot_id)
                .map(|c| tidemark_journal::paths::checkpoint_key(&c.table_uuid, c.position));
            Some(t)
        }
        None => None,
    };
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Whether `snap` is another writer's commit: no applier record, not a recovery's first commit.
fn is_other(snap: &SnapshotRef, first: bool) -> bool {
    let p = &snap.summary().additional_properties;
    let step = p.get(PROP_STEP).map(String::as_str);
    !p.contains_key(PROP_LAST_POSITION) && step != Some("seed") && !(first && step == Some("replay"))
}

/// The last index of the run of other writers' commits that starts at `i`, if `chain[i]` is one.
fn other_run_end(chain: &[SnapshotRef], i: usize) -> Option<usize> {
    if !is_other(&chain[i], i == 0) {
        return None;
    }
    let mut end = i;
    while end + 1 < chain.len() && is_other(&chain[end + 1], false) {
        end += 1;
    }
    Some(end)
}

/// The state after `entry`: its position, and the newest trusted snapshot.
fn finish(state: &mut AuditState, entry: &mut SnapshotAudit) {
    if entry.position.is_none() {
        entry.position = state.position;
    }
    state.position = entry.position;
    if entry.trusted {
        state.newest_trusted = Some(TrustedPoint {
            snapshot_id: entry.snapshot_id,
            position: entry.position,
            checkpoint: None,
        });
    }
}

async fn write_record(
    opts: &AuditOptions,
    ctx: &Ctx<'_>,
    uuid: &str,
    digest: &str,
    entry: &SnapshotAudit,
    state: &AuditState,
    report: &mut AuditReport,
) -> Result<(), AuditError> {
    // An audit that took a snapshot as trusted without auditing its ancestry writes no record:
    // a record's state must be the whole ancestry's (it reads the ones a full audit wrote).
    let (Some(store), None) = (&opts.records, opts.trust_from) else {
        return Ok(());
    };
    let rec = AuditRecord {
        format_version: records::FORMAT_VERSION,
        table_uuid: uuid.to_string(),
        journal_id: ctx.journal.header.journal_id.clone(),
        metadata_location: ctx.name.clone(),
        metadata_digest: digest.to_string(),
        entry: entry.clone(),
        state: state.clone(),
    };
    if records::write(store.as_ref(), &rec).await? {
        report.records_written += 1;
    }
    Ok(())
}
