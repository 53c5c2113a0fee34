//! One unit of the applier (and the replay of a recovery): its events merged into the table,
//! copy-on-write (this file, or [`crate::apply::spill`] for events spilled to disk) or
//! merge-on-read ([`crate::apply::mor`]), then committed with the unit's summary, retried on a
//! concurrent commit. Nothing is committed when the merge stops (a conflict).

use std::collections::{BTreeSet, HashMap};

use arrow::array::RecordBatch;
use iceberg::table::Table;
use tidemark_journal::clock::Clock;

use crate::apply::chunks::{after_failed_commit, discard, written_paths};
use crate::apply::cow::{UnitFiles, copy_on_write};
use crate::apply::error::ApplyError;
use crate::apply::guard::CommitGuard;
use crate::apply::input::UnitInput;
use crate::apply::mor::{MergeMode, PhaseTimes, WriteStats, merge_on_read, micros};
use crate::apply::spill::{SpilledEvents, copy_on_write_spilled};
use crate::apply::state::applied_state;
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::{self, MergeError, MergeStats};
use crate::reference::cell;
use crate::table::deletes::PositionDeleteCache;
use crate::table::key_index::KeyIndex;
use crate::table::read::{files_for_keys, live_files_cached, prunable};
use crate::table::{self, CommitStamp, arrow_schema, commit_row_delta};

/// The events of one unit: in memory, or spilled to disk (a recovery's replay range, see
/// [`crate::apply::spill`]).
#[derive(Debug)]
pub enum UnitEvents {
    Batches(Vec<RecordBatch>),
    Spilled(SpilledEvents),
}

impl From<Vec<RecordBatch>> for UnitEvents {
    fn from(b: Vec<RecordBatch>) -> Self {
        UnitEvents::Batches(b)
    }
}

/// Merges `events` into the table copy-on-write and commits, retrying on a concurrent commit.
/// Spilled events are merged in key ranges of about `range_events` events (see
/// [`crate::apply::spill`]). Returns the table after the commit (or unchanged when the events
/// changed nothing).
#[allow(clippy::too_many_arguments)]
pub async fn merge_and_commit(
    handle: &CatalogHandle,
    table: Table,
    spec: &tidemark_journal::spec::CompiledSpec,
    events: UnitEvents,
    summary: HashMap<String, String>,
    clock: &dyn Clock,
    ids: &dyn Ids,
    max_attempts: usize,
    skip_if_applied: Option<u64>,
    guard: Option<&dyn CommitGuard>,
    chunk_rows: u64,
    range_events: u64,
    renames: Option<&table::Renames>,
) -> Result<(Table, MergeStats, u64, bool), ApplyError> {
    let unit = UnitOptions {
        max_attempts,
        skip_if_applied,
        guard,
        chunk_rows,
        range_events,
        mode: MergeMode::CopyOnWrite,
        key_index: None,
        deletes_cache: None,
        renames,
    };
    let c = merge_and_commit_unit(handle, table, spec, events, summary, clock, ids, &unit).await?;
    Ok((c.table, c.stats, c.retries, c.committed))
}

/// How one unit is merged and committed.
pub struct UnitOptions<'a> {
    pub max_attempts: usize,
    /// Stop retrying once the table holds this position (another applier committed the unit).
    pub skip_if_applied: Option<u64>,
    pub guard: Option<&'a dyn CommitGuard>,
    pub chunk_rows: u64,
    /// Events one key range of a spilled unit holds (about; see [`crate::apply::spill`]).
    pub range_events: u64,
    pub mode: MergeMode,
    /// Merge-on-read: the keys of the data files seen by earlier units (see [`KeyIndex`]).
    pub key_index: Option<&'a std::sync::Mutex<KeyIndex>>,
    /// The position delete files earlier units read (see [`PositionDeleteCache`]).
    pub deletes_cache: Option<&'a PositionDeleteCache>,
    /// The spec's columns another writer renamed, as resolved elsewhere (a recovery resolves
    /// them in its source snapshot's schema history, which the recovered table does not have);
    /// `None`: resolved in the table's own history ([`table::spec_arrow_schema`]).
    pub renames: Option<&'a table::Renames>,
}

/// What [`merge_and_commit_unit`] did.
pub struct Committed {
    pub table: Table,
    pub stats: MergeStats,
    pub writes: WriteStats,
    /// Where the unit's time went (its last attempt's merge; every attempt's table reads and
    /// commits).
    pub times: PhaseTimes,
    pub retries: u64,
    pub committed: bool,
}

/// Merges `events` into the table in `unit.mode` and commits, retrying on a concurrent commit.
/// Spilled events are merged copy-on-write only.
#[allow(clippy::too_many_arguments)]
pub async fn merge_and_commit_unit(
    handle: &CatalogHandle,
    mut table: Table,
    spec: &tidemark_journal::spec::CompiledSpec,
    events: UnitEvents,
    summary: HashMap<String, String>,
    clock: &dyn Clock,
    ids: &dyn Ids,
    unit: &UnitOptions<'_>,
) -> Result<Committed, ApplyError> {
    let name = table.identifier().to_string();
    // The table's columns under the journal's names (a column another writer renamed is read
    // and written by its field id).
    let schema = match unit.renames {
        Some(renames) => renames.spec_view(&arrow_schema(&table)?),
        None => table::spec_arrow_schema(&table, spec)?,
    };
    let cur_schema = merge::current_schema(&schema);
    let key_t = spec.types[spec.key_index];
    // The keys of in-memory events, for pruning; spilled events are pruned range by range.
    let mut keys = BTreeSet::new();
    if let UnitEvents::Batches(events) = &events {
        for b in events {
            let col = b.column(spec.event_column(spec.key_index));
            for r in 0..b.num_rows() {
                keys.insert(cell(col.as_ref(), key_t, r));
            }
        }
    }
    let key_field_id = schema
        .field_with_name(&spec.spec.key_column)
        .ok()
        .and_then(table::files::field_id)
        .unwrap_or(-1);
    let max_attempts = unit.max_attempts.max(1);
    let mut retries = 0;
    let mut times = PhaseTimes::default();
    for attempt in 1..=max_attempts {
        let t = std::time::Instant::now();
        let (files, deletes) = live_files_cached(&table, unit.deletes_cache).await?;
        times.table_files_us += micros(t);
        let t = std::time::Instant::now();
        let candidates = if prunable(key_t) {
            files_for_keys(&files, key_field_id, &keys)
        } else {
            files.iter().collect()
        };
        let input = UnitInput {
            table: &table,
            spec,
            schema: &schema,
            cur_schema: &cur_schema,
            key_field_id,
            deletes: &deletes,
            ids,
        };
        let f = match (&events, unit.mode) {
            (UnitEvents::Spilled(spilled), MergeMode::CopyOnWrite) => {
                copy_on_write_spilled(
                    input,
                    spilled,
                    &files,
                    unit.chunk_rows,
                    unit.range_events,
                    prunable(key_t),
                )
                .await?
            }
            (UnitEvents::Spilled(_), MergeMode::MergeOnRead) => {
                return Err(MergeError::Input("spilled events are merged copy-on-write only".into()).into());
            }
            (UnitEvents::Batches(events), MergeMode::CopyOnWrite) => {
                copy_on_write(input, events, &candidates, unit.chunk_rows).await?
            }
            (UnitEvents::Batches(events), MergeMode::MergeOnRead) => {
                // The index is taken out for the unit (a failed unit drops it: it is a cache).
                let mut index = unit
                    .key_index
                    .map(|m| std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner())))
                    .unwrap_or_default();
                index.retain(&files.iter().map(|f| f.file_path()).collect());
                let m = merge_on_read(input, events, &candidates, &mut index).await?;
                if let Some(k) = unit.key_index {
                    *k.lock().unwrap_or_else(|p| p.into_inner()) = index;
                }
                UnitFiles {
                    removed: Vec::new(),
                    added: m.added,
                    deletes: m.deletes,
                    stats: m.stats,
                    writes: m.writes,
                    times: m.times,
                }
            }
        };
        if unit.mode == MergeMode::CopyOnWrite {
            times.merge_us = micros(t);
        } else {
            (times.locate_us, times.merge_us, times.write_us) = (f.times.locate_us, f.times.merge_us, f.times.write_us);
        }
        if f.added.is_empty() && f.removed.is_empty() && f.deletes.is_empty() {
            return Ok(Committed {
                table,
                stats: f.stats,
                writes: f.writes,
                times,
                retries,
                committed: false,
            });
        }
        let stamp = CommitStamp {
            id: ids.uuid(),
            at: clock.now(),
        };
        if let Some(g) = unit.guard
            && let Err(e) = g.check().await
        {
            // Refused before the commit: the unit's files are in no snapshot.
            let written = f.added.into_iter().chain(f.deletes).collect();
            return Err(discard(&table, ApplyError::Fenced(e), written).await);
        }
        tidemark_journal::failpoint::pause("apply:before-commit");
        let written = written_paths(f.added.iter().chain(&f.deletes));
        let t0 = std::time::Instant::now();
        let committed = commit_row_delta(handle, &table, &f.removed, f.added, f.deletes, summary.clone(), stamp).await;
        times.commit_us += micros(t0);
        match committed {
            Ok(t) => {
                let mut stats = f.stats;
                stats.files_rewritten = f.removed.len() as u64;
                return Ok(Committed {
                    table: t,
                    stats,
                    writes: f.writes,
                    times,
                    retries,
                    committed: true,
                });
            }
            Err(e) => {
                let retry = e.is_retryable_commit() && attempt < max_attempts;
                after_failed_commit(&table, e, written, retry).await?;
                retries += 1;
                table = table::load_table(handle, &name).await?;
                if let Some(to) = unit.skip_if_applied
                    && applied_state(&table).position >= to
                {
                    return Ok(Committed {
                        table,
                        stats: f.stats,
                        writes: WriteStats::default(),
                        times,
                        retries,
                        committed: false,
                    });
                }
            }
        }
    }
    Err(ApplyError::Contended {
        table: name,
        attempts: max_attempts,
    })
}
