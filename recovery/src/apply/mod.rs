//! The applier: merges verified journal batches into the Iceberg state table, commits the table,
//! then writes the checkpoint — in that order (see `tidemark_journal::checkpoint`).
//!
//! Every commit's snapshot summary records what it applied (`tidemark.journal-id`,
//! `tidemark.first-position`, `tidemark.last-position`, `tidemark.manifest-sequence`,
//! `tidemark.manifest-digest`). On start the applier reads the table's applied position from the
//! newest snapshot in its ancestry that carries them, so that:
//! * a crash after the commit and before the checkpoint is detected (the table is ahead of its
//!   newest checkpoint) and the missing checkpoint is written — nothing is applied twice;
//! * a crash before the commit leaves only unreferenced data files — nothing is skipped.
//!
//! A concurrent commit to the table is detected by the catalog's compare-and-swap; the applier
//! reloads the table and redoes the unit (or finds that another applier already applied it), so a
//! commit is never lost. A conflicting payload stops the applier before its unit is committed.
//! How one unit is merged and committed is in [`crate::apply::unit`].
//!
//! The children, each below the ones that use it:
//! * [`error`]: what stops the applier ([`ApplyError`], [`DivergenceStop`]);
//! * [`rules`]: the chunk and file sizes of a merge and its rows sorted by key;
//! * [`guard`]: the check before every commit ([`CommitGuard`], the route fence);
//! * [`state`]: the positions the table's newest tidemark commit recorded ([`applied_state`]);
//! * [`divergence`]: other writers' commits since the applier's own, audited ([`OnDivergence`]);
//! * [`group`]: which journal batches make one commit;
//! * [`chunks`]: key-range chunks merged two at a time, and the files of a failed unit deleted;
//! * [`input`]: what a unit's merge works on, whichever way it merges;
//! * [`cow`]: the copy-on-write merge of a unit's events; [`spill`]: the same for events spilled
//!   to disk; [`mor`]: merge-on-read (position deletes);
//! * [`unit`]: one unit merged and committed, retried on a concurrent commit;
//! * [`compact`]: `tidemark table compact`, also run by the applier at a threshold.

pub(crate) mod chunks;
#[cfg(test)]
mod chunks_tests;
pub mod compact;
pub(crate) mod cow;
pub mod divergence;
pub mod error;
pub mod group;
#[cfg(test)]
mod group_tests;
pub mod guard;
pub(crate) mod input;
pub mod mor;
#[cfg(test)]
mod mor_tests;
pub mod rules;
pub mod spill;
#[cfg(test)]
mod spill_tests;
pub mod state;
#[cfg(test)]
pub(crate) mod tests;
pub mod unit;

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::Journal;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::clock::Clock;
use tidemark_journal::journal::StoredManifest;
use tidemark_journal::verify::{ChainPoint, VerifyOptions, verify};
use tidemark_schemas::{Checkpoint, FORMAT_VERSION};

use crate::apply::compact::{CompactOptions, compact, deleted_fraction};
pub use crate::apply::divergence::OnDivergence;
use crate::apply::divergence::audit_foreign_commits;
pub use crate::apply::error::{ApplyError, DivergenceStop};
pub use crate::apply::group::Grouping;
use crate::apply::group::units;
pub use crate::apply::guard::{CommitGuard, Guard, RouteFence};
use crate::apply::mor::{MergeMode, PhaseTimes, WriteStats, micros};
pub use crate::apply::rules::{MERGE_CHUNK_ROWS, ROWS_PER_FILE};
pub use crate::apply::state::{AppliedState, applied_state};
pub use crate::apply::unit::{Committed, UnitEvents, UnitOptions, merge_and_commit, merge_and_commit_unit};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::MergeStats;
use crate::table::key_index::KeyIndex;
use crate::table::{self, TableError};

pub use crate::provenance::{
    PROP_FIRST_POSITION, PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_MANIFEST_DIGEST, PROP_MANIFEST_SEQUENCE,
};
/// Table property: the fraction of the table's rows position deletes may remove before the
/// applier compacts (merge-on-read; default [`DEFAULT_COMPACT_AT`]; `0` or less: never).
pub const PROP_COMPACT_AT: &str = "tidemark.apply.compact-deleted-fraction";
/// The default of [`PROP_COMPACT_AT`].
pub const DEFAULT_COMPACT_AT: f64 = 0.2;

#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Apply up to this position (default: everything verified).
    pub until: Option<u64>,
    /// What to do when another writer's commit diverges from the journal.
    pub on_divergence: OnDivergence,
    /// Journal batches (manifests) merged per table commit: by default every batch waiting, up
    /// to a bound ([`crate::apply::group`]); `--batches-per-commit N` is [`Grouping::Fixed`].
    pub grouping: Grouping,
    /// Attempts per unit when another writer commits concurrently.
    pub max_attempts: usize,
    /// `after-commit:N`: stop after the N-th commit, before its checkpoint (a simulated crash).
    pub failpoint: Option<String>,
    /// Checked before every commit (the route fence of `tidemark apply --route`).
    pub guard: Option<Guard>,
    /// Rows of the table one merge chunk reads at most (memory bound; see [`MERGE_CHUNK_ROWS`]).
    pub chunk_rows: u64,
    /// How changes are written; `None`: as the table's `write.merge.mode` says (default
    /// copy-on-write).
    pub merge_mode: Option<MergeMode>,
    /// Compact after a merge-on-read commit once position deletes remove this fraction of the
    /// rows; `None`: the table's [`PROP_COMPACT_AT`], else [`DEFAULT_COMPACT_AT`].
    pub compact_at: Option<f64>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            until: None,
            on_divergence: OnDivergence::Stop,
            grouping: Grouping::default(),
            max_attempts: 5,
            failpoint: None,
            guard: None,
            chunk_rows: MERGE_CHUNK_ROWS,
            merge_mode: None,
            compact_at: None,
        }
    }
}

/// `tidemark apply --json`.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct ApplyReport {
    pub format_version: u32,
    pub table: String,
    pub table_uuid: String,
    pub started_after_position: u64,
    pub applied_to_position: u64,
    pub commits: u64,
    pub retries: u64,
    pub checkpoints_written: u64,
    pub recovered_checkpoint: bool,
    pub snapshot_id: Option<i64>,
    pub merge: MergeStats,
    /// How the changes were written.
    pub merge_mode: MergeMode,
    /// What the unit commits wrote (bytes per event: write amplification).
    pub writes: WriteStats,
    /// Compactions the applier ran (merge-on-read, at the threshold) and their time.
    pub compactions: u64,
    pub compaction_writes: WriteStats,
    pub compaction_ms: u64,
    /// Other writers' divergent snapshots the operator accepted with `--on-divergence continue`
    /// (comma-separated ids), recorded in this run's first commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_divergence: Option<String>,
    /// Where the time went (verify, events, table reads, merge, writes, commits, checkpoints).
    pub phases: PhaseTimes,
    pub elapsed_ms: u64,
    /// S3 requests the command made through tidemark's S3 client (the journal and checkpoints),
    /// retried and failed; absent when it made none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

/// Progress after each unit.
#[derive(Debug, Clone, Copy)]
pub struct ApplyProgress {
    pub position: u64,
    pub target: u64,
    pub commits: u64,
    pub events: u64,
    /// Bytes of data and delete files the commits wrote so far.
    pub bytes_written: u64,
}

fn table_uuid(table: &Table) -> String {
    table.metadata().uuid().to_string()
}

/// Writes the checkpoint for the table's current snapshot at `state`.
async fn write_checkpoint(
    journal: &Journal,
    table: &Table,
    state: &AppliedState,
    clock: &dyn Clock,
) -> Result<Checkpoint, ApplyError> {
    let snapshot_id = table.metadata().current_snapshot_id().unwrap_or(-1);
    let cp = Checkpoint {
        format_version: FORMAT_VERSION,
        journal_id: journal.header.journal_id.clone(),
        table_uuid: table_uuid(table),
        table_name: table.identifier().to_string(),
        snapshot_id,
        metadata_location: table.metadata_location().map(str::to_string),
        position: state.position,
        manifest_sequence: state.manifest_sequence,
        manifest_digest: state.manifest_digest.clone(),
        written_at: clock.now_rfc3339(),
    };
    Ok(checkpoint::write(journal.store.as_ref(), &cp).await?)
}

// The events of a range are read in one place, the journal crate (any position, also inside a
// batch).
pub use tidemark_journal::events::{read_events, read_manifest_events};

/// [`apply`] of the whole verified journal to `table` with the default options, reporting no
/// progress: what the drills run as the production writer.
pub async fn apply_all(
    journal: &Journal,
    handle: &CatalogHandle,
    table: &str,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<ApplyReport, ApplyError> {
    apply(
        journal,
        handle,
        table,
        &ApplyOptions::default(),
        clock,
        ids,
        &mut |_| {},
    )
    .await
}

/// Applies the verified journal to `table_name` (created from the journal's spec if missing).
pub async fn apply(
    journal: &Journal,
    handle: &CatalogHandle,
    table_name: &str,
    opts: &ApplyOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&ApplyProgress),
) -> Result<ApplyReport, ApplyError> {
    let started = Instant::now();
    let spec = &journal.spec;
    let mut table = table::create_or_load_table(handle, table_name, spec).await?;
    // Before anything is written (a merged file, a checkpoint): a table tidemark cannot commit to.
    table::check_supported(table_name, table.metadata())?;
    let mode = match opts.merge_mode {
        Some(m) => m,
        None => MergeMode::of_table(&table)?,
    };
    let compact_at = match (opts.compact_at, table.metadata().properties().get(PROP_COMPACT_AT)) {
        (Some(f), _) => f,
        (None, Some(v)) => v.trim().parse().map_err(|_| TableError::Unsupported {
            table: table_name.into(),
            reason: format!("{PROP_COMPACT_AT} = {v:?} is not a number"),
        })?,
        (None, None) => DEFAULT_COMPACT_AT,
    };
    let mut state = applied_state(&table);
    if let Some(found) = &state.journal_id
        && found != &journal.header.journal_id
    {
        return Err(ApplyError::OtherJournal {
            table: table_name.into(),
            expected: journal.header.journal_id.clone(),
            found: found.clone(),
        });
    }
    let mut report = ApplyReport {
        format_version: FORMAT_VERSION,
        table: table_name.to_string(),
        table_uuid: table_uuid(&table),
        started_after_position: state.position,
        applied_to_position: state.position,
        merge_mode: mode,
        ..Default::default()
    };
    // Reconcile with the newest checkpoint: the table is committed first, so it may be ahead.
    let filter = CheckpointFilter {
        table_uuid: Some(report.table_uuid.clone()),
        table_name: None,
    };
    let newest = checkpoint::newest_at_or_before(journal.store.as_ref(), &filter, None).await?;
    let newest_position = newest.as_ref().map_or(0, |c| c.position);
    if newest_position > state.position {
        let same_snapshot = newest
            .as_ref()
            .is_some_and(|c| Some(c.snapshot_id) == table.metadata().current_snapshot_id());
        if !same_snapshot {
            return Err(ApplyError::CheckpointAhead {
                table: table_name.into(),
                checkpoint: newest_position,
                applied: state.position,
            });
        }
        // A checkpoint of the current snapshot that saw no change: it is as good as a commit.
        let c = newest.clone().expect("checked");
        state = AppliedState {
            position: c.position,
            manifest_sequence: c.manifest_sequence,
            manifest_digest: c.manifest_digest,
            journal_id: Some(c.journal_id),
        };
    } else if state.position > newest_position {
        write_checkpoint(journal, &table, &state, clock).await?;
        report.recovered_checkpoint = true;
        report.checkpoints_written += 1;
    }
    report.started_after_position = state.position;
    // Other writers' commits since the applier's own last one: a divergence stops it (or, when
    // the operator accepts it, is recorded in the next commit).
    let mut accepted = audit_foreign_commits(journal, &table, table_name, &opts.on_divergence).await?;
    report.accepted_divergence = accepted.clone();

    // Verify the chain from the applied position to the target: after the manifest that holds
    // it when it is that manifest's last, else after the one before (the rest of the holder's
    // batch is still to apply).
    let t = Instant::now();
    let after = ChainPoint::holding(journal, state.manifest_sequence, &state.manifest_digest, state.position).await?;
    let chain = verify(
        journal,
        &VerifyOptions {
            to: opts.until,
            concurrency: None,
            after,
        },
        &mut |_| {},
    )
    .await?;
    report.phases.verify_us = micros(t);
    if let Some(b) = &chain.report.first_break {
        return Err(ApplyError::ChainBroken {
            journal: journal.url(),
            kind: b.kind.clone(),
            key: b.key.clone(),
            message: b.message.clone(),
        });
    }
    let target = match (opts.until, chain.report.verified_last_position) {
        (Some(h), _) => h,
        (None, Some(last)) => last,
        (None, None) => state.position,
    };
    let pending: Vec<&StoredManifest> = chain.range(state.position, target).collect();
    let mut queue: VecDeque<Vec<&StoredManifest>> = units(&pending, state.position, target, opts.grouping).into();
    let mut commits = 0u64;
    let mut left_behind: Vec<String> = Vec::new();
    let key_index = std::sync::Mutex::new(KeyIndex::default());
    let deletes_cache = crate::table::deletes::PositionDeleteCache::default();
    while let Some(unit) = queue.pop_front() {
        let last_manifest = *unit.last().expect("non-empty unit");
        let to = last_manifest.manifest.last_position.min(target);
        let t = Instant::now();
        let events = read_events(journal, &unit, state.position, to).await?;
        report.phases.read_events_us += micros(t);
        let mut summary = HashMap::new();
        summary.insert(PROP_JOURNAL_ID.to_string(), journal.header.journal_id.clone());
        summary.insert(PROP_FIRST_POSITION.to_string(), (state.position + 1).to_string());
        summary.insert(PROP_LAST_POSITION.to_string(), to.to_string());
        summary.insert(
            PROP_MANIFEST_SEQUENCE.to_string(),
            last_manifest.manifest.sequence.to_string(),
        );
        summary.insert(PROP_MANIFEST_DIGEST.to_string(), last_manifest.digest.clone());
        if let (Some(ids), OnDivergence::Continue { reason }) = (accepted.take(), &opts.on_divergence) {
            summary.insert(crate::provenance::PROP_ACCEPTED_DIVERGENCE.to_string(), ids);
            summary.insert(crate::provenance::PROP_ACCEPTED_REASON.to_string(), reason.clone());
        }
        let unit_opts = UnitOptions {
            max_attempts: opts.max_attempts,
            skip_if_applied: Some(to),
            guard: opts.guard.as_ref().map(|g| g.0.as_ref()),
            chunk_rows: opts.chunk_rows,
            range_events: opts.chunk_rows,
            mode,
            renames: None,
            key_index: Some(&key_index),
            deletes_cache: Some(&deletes_cache),
        };
        let c = match merge_and_commit_unit(
            handle,
            table.clone(),
            spec,
            events.into(),
            summary,
            clock,
            ids,
            &unit_opts,
        )
        .await
        {
            Ok(c) => c,
            // A conflict in a unit the default grouping made: that unit again one batch a
            // commit, so that the applier stops where, and with the report, it would at one
            // batch a commit (the batches before the conflicting one are applied).
            // Files the grouped attempt could not delete stay named with the final error.
            Err(e) if crate::apply::group::regroup_on(&e, opts.grouping, unit.len()) => {
                if let ApplyError::Uncleaned { left, .. } = e {
                    left_behind.extend(left);
                }
                for m in unit.into_iter().rev() {
                    queue.push_front(vec![m]);
                }
                continue;
            }
            Err(e) => return Err(crate::apply::group::with_left(e, left_behind)),
        };
        let committed = c.committed;
        table = c.table;
        report.retries += c.retries;
        report.merge.add(&c.stats);
        report.writes.add(&c.writes);
        report.phases.add(&c.times);
        state = AppliedState {
            position: to,
            manifest_sequence: last_manifest.manifest.sequence,
            manifest_digest: last_manifest.digest.clone(),
            journal_id: Some(journal.header.journal_id.clone()),
        };
        if committed {
            commits += 1;
            report.commits += 1;
            if opts.failpoint.as_deref() == Some(&format!("after-commit:{commits}")) {
                return Err(ApplyError::Failpoint(format!("after-commit:{commits}")));
            }
            tidemark_journal::failpoint::hit("apply:after-commit");
        }
        let t = Instant::now();
        write_checkpoint(journal, &table, &state, clock).await?;
        report.phases.checkpoint_us += micros(t);
        tidemark_journal::failpoint::hit("apply:after-checkpoint");
        report.checkpoints_written += 1;
        report.applied_to_position = to;
        // After the checkpoint: a compaction changes no row, and a crash in it loses nothing.
        if mode == MergeMode::MergeOnRead && compact_at > 0.0 && deleted_fraction(&table) >= compact_at {
            if let Some(g) = &opts.guard {
                g.0.check().await.map_err(ApplyError::Fenced)?;
            }
            let t0 = Instant::now();
            let copts = CompactOptions {
                max_attempts: opts.max_attempts,
                ..Default::default()
            };
            let (r, t) = compact(handle, table, &copts, clock, ids).await?;
            table = t;
            report.compactions += 1;
            report.retries += r.retries;
            report.compaction_writes.add(&r.writes);
            report.compaction_ms += t0.elapsed().as_millis() as u64;
        }
        progress(&ApplyProgress {
            position: to,
            target,
            commits: report.commits,
            events: report.merge.events,
            bytes_written: report.writes.bytes_written(),
        });
    }
    report.snapshot_id = table.metadata().current_snapshot_id();
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}
