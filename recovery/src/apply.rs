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

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, concat_batches, lexsort_to_indices, take_record_batch};
use iceberg::spec::DataFile;
use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::Journal;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::clock::Clock;
use tidemark_journal::codec;
use tidemark_journal::journal::StoredManifest;
use tidemark_journal::verify::{ChainPoint, VerifyOptions, verify};
use tidemark_schemas::{Checkpoint, FORMAT_VERSION};

use crate::apply_mor::{MergeMode, WriteStats, merge_on_read};
use crate::apply_spill::{SpilledEvents, copy_on_write_spilled};
use crate::catalog::CatalogHandle;
use crate::compact::{CompactOptions, compact, deleted_fraction};
use crate::ids::Ids;
use crate::merge::{self, MergeError, MergeStats};
use crate::reference::cell;
use crate::table::key_index::KeyIndex;
use crate::table::read::{chunk_by_key, chunk_of, files_for_keys, live_files, prunable, read_files, split_rows};
use crate::table::{self, CommitStamp, TableError, arrow_schema, commit_row_delta, write_data_file};

/// Rows of the table one merge chunk reads at most (about; a chunk never splits a file, nor two
/// files whose key ranges overlap).
pub const MERGE_CHUNK_ROWS: u64 = 1_000_000;

/// Rows per data file written by a merge.
pub const ROWS_PER_FILE: usize = 100_000;

pub const PROP_JOURNAL_ID: &str = "tidemark.journal-id";
pub const PROP_FIRST_POSITION: &str = "tidemark.first-position";
pub const PROP_LAST_POSITION: &str = "tidemark.last-position";
pub const PROP_MANIFEST_SEQUENCE: &str = "tidemark.manifest-sequence";
pub const PROP_MANIFEST_DIGEST: &str = "tidemark.manifest-digest";
/// Table property: the fraction of the table's rows position deletes may remove before the
/// applier compacts (merge-on-read; default [`DEFAULT_COMPACT_AT`]; `0` or less: never).
pub const PROP_COMPACT_AT: &str = "tidemark.apply.compact-deleted-fraction";
/// The default of [`PROP_COMPACT_AT`].
pub const DEFAULT_COMPACT_AT: f64 = 0.2;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("journal {journal} does not verify: {kind} at {key}: {message}")]
    ChainBroken {
        journal: String,
        kind: String,
        key: String,
        message: String,
    },
    #[error("table {table} was written from journal {found}, not from journal {expected}")]
    OtherJournal {
        table: String,
        expected: String,
        found: String,
    },
    #[error(
        "checkpoint at position {checkpoint} is ahead of table {table}, which holds positions up to {applied}: the table was rolled back or replaced; recover it instead of applying"
    )]
    CheckpointAhead {
        table: String,
        checkpoint: u64,
        applied: u64,
    },
    #[error("table {table} keeps changing under the applier ({attempts} attempts): another writer is committing to it")]
    Contended { table: String, attempts: usize },
    #[error("failpoint {0} reached (a simulated crash for drills and tests)")]
    Failpoint(String),
    #[error("commit refused: {0}")]
    Fenced(String),
    #[error("merge spill {path}: {message}")]
    Spill { path: String, message: String },
}

/// Checked right before every table commit: a fenced writer (the route moved past the
/// generation it started under) must never commit to a table that readers have left.
#[async_trait::async_trait]
pub trait CommitGuard: Send + Sync {
    async fn check(&self) -> Result<(), String>;
}

#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Apply up to this position (default: everything verified).
    pub until: Option<u64>,
    /// Manifests merged per table commit.
    pub batches_per_commit: usize,
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

/// The route fence as a commit guard: refuses once the route moved past the generation the
/// writer started under.
pub struct RouteFence {
    pub routes: tidemark_router::RouteStore,
    pub fence: tidemark_router::Fence,
}

#[async_trait::async_trait]
impl CommitGuard for RouteFence {
    async fn check(&self) -> Result<(), String> {
        self.fence.check(&self.routes).await.map_err(|e| e.to_string())
    }
}

/// A shared [`CommitGuard`].
#[derive(Clone)]
pub struct Guard(pub std::sync::Arc<dyn CommitGuard>);

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            until: None,
            batches_per_commit: 1,
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
    pub elapsed_ms: u64,
}

/// Progress after each unit.
#[derive(Debug, Clone, Copy)]
pub struct ApplyProgress {
    pub position: u64,
    pub target: u64,
    pub commits: u64,
    pub events: u64,
}

/// What the table says it holds: the newest tidemark commit in the current snapshot's ancestry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedState {
    pub position: u64,
    pub manifest_sequence: u64,
    pub manifest_digest: String,
    pub journal_id: Option<String>,
}

pub fn applied_state(table: &Table) -> AppliedState {
    let meta = table.metadata();
    let mut snapshot = meta.current_snapshot().cloned();
    while let Some(s) = snapshot {
        let props = &s.summary().additional_properties;
        if let Some(p) = props.get(PROP_LAST_POSITION).and_then(|v| v.parse().ok()) {
            return AppliedState {
                position: p,
                manifest_sequence: props
                    .get(PROP_MANIFEST_SEQUENCE)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                manifest_digest: props.get(PROP_MANIFEST_DIGEST).cloned().unwrap_or_default(),
                journal_id: props.get(PROP_JOURNAL_ID).cloned(),
            };
        }
        snapshot = s.parent_snapshot_id().and_then(|id| meta.snapshot_by_id(id).cloned());
    }
    AppliedState::default()
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

/// Reads the events of `manifests` with positions in `(after, to]`, without the events a
/// recorded resolution voids (`tidemark_journal::resolution`).
pub async fn read_events(
    journal: &Journal,
    manifests: &[&StoredManifest],
    after: u64,
    to: u64,
) -> Result<Vec<RecordBatch>, ApplyError> {
    let resolutions = tidemark_journal::resolution::Resolutions::load(journal).await?;
    let mut out = Vec::new();
    for m in manifests {
        out.extend(read_manifest_events(journal, &resolutions, m, after, to).await?);
    }
    Ok(out)
}

/// [`read_events`] of one manifest, with the resolutions already loaded (for a reader that
/// streams the range one manifest at a time).
pub async fn read_manifest_events(
    journal: &Journal,
    resolutions: &tidemark_journal::resolution::Resolutions,
    m: &StoredManifest,
    after: u64,
    to: u64,
) -> Result<Vec<RecordBatch>, ApplyError> {
    let mut out = Vec::new();
    let got = journal
        .store
        .get(&m.manifest.object_key, Some(&m.manifest.object_version_id))
        .await
        .map_err(tidemark_journal::JournalError::from)?;
    for b in codec::decode_parquet(&journal.spec, &m.manifest.object_key, got.body)? {
        let first = m.manifest.first_position;
        let lo = after.saturating_sub(first - 1).min(b.num_rows() as u64) as usize;
        let hi = (to + 1).saturating_sub(first).min(b.num_rows() as u64) as usize;
        // Batches are position-contiguous from `first` (verified), so offsets are positions.
        if hi > lo {
            out.push(resolutions.filter(journal, b.slice(lo, hi - lo))?);
        }
    }
    Ok(out)
}

/// The events of one unit: in memory, or spilled to disk (a recovery's replay range, see
/// [`crate::apply_spill`]).
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
/// [`crate::apply_spill`]). Returns the table after the commit (or unchanged when the events
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
) -> Result<(Table, MergeStats, u64, bool), ApplyError> {
    let unit = UnitOptions {
        max_attempts,
        skip_if_applied,
        guard,
        chunk_rows,
        range_events,
        mode: MergeMode::CopyOnWrite,
        key_index: None,
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
    /// Events one key range of a spilled unit holds (about; see [`crate::apply_spill`]).
    pub range_events: u64,
    pub mode: MergeMode,
    /// Merge-on-read: the keys of the data files seen by earlier units (see [`KeyIndex`]).
    pub key_index: Option<&'a std::sync::Mutex<KeyIndex>>,
}

/// What [`merge_and_commit_unit`] did.
pub struct Committed {
    pub table: Table,
    pub stats: MergeStats,
    pub writes: WriteStats,
    pub retries: u64,
    pub committed: bool,
}

/// A unit's changes, written but not committed.
pub(crate) struct UnitFiles {
    pub(crate) removed: Vec<String>,
    pub(crate) added: Vec<DataFile>,
    pub(crate) deletes: Vec<DataFile>,
    pub(crate) stats: MergeStats,
    pub(crate) writes: WriteStats,
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
    let schema = arrow_schema(&table)?;
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
    let key_field_id = table
        .metadata()
        .current_schema()
        .field_by_name(&spec.spec.key_column)
        .map(|f| f.id)
        .unwrap_or(-1);
    let max_attempts = unit.max_attempts.max(1);
    let mut retries = 0;
    for attempt in 1..=max_attempts {
        let (files, deletes) = live_files(&table).await?;
        let candidates = if prunable(key_t) {
            files_for_keys(&files, key_field_id, &keys)
        } else {
            files.iter().collect()
        };
        let f = match (&events, unit.mode) {
            (UnitEvents::Spilled(spilled), MergeMode::CopyOnWrite) => {
                copy_on_write_spilled(
                    &table,
                    spec,
                    spilled,
                    &schema,
                    &cur_schema,
                    key_field_id,
                    &files,
                    &deletes,
                    ids,
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
                copy_on_write(
                    &table,
                    spec,
                    events,
                    &schema,
                    &cur_schema,
                    key_field_id,
                    &candidates,
                    &deletes,
                    ids,
                    unit.chunk_rows,
                )
                .await?
            }
            (UnitEvents::Batches(events), MergeMode::MergeOnRead) => {
                // The index is taken out for the unit (a failed unit drops it: it is a cache).
                let mut index = unit
                    .key_index
                    .map(|m| std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner())))
                    .unwrap_or_default();
                index.retain(&files.iter().map(|f| f.file_path()).collect());
                let m = merge_on_read(
                    &table,
                    spec,
                    events,
                    &schema,
                    &cur_schema,
                    key_field_id,
                    &candidates,
                    &deletes,
                    ids,
                    &mut index,
                )
                .await?;
                if let Some(k) = unit.key_index {
                    *k.lock().unwrap_or_else(|p| p.into_inner()) = index;
                }
                UnitFiles {
                    removed: Vec::new(),
                    added: m.added,
                    deletes: m.deletes,
                    stats: m.stats,
                    writes: m.writes,
                }
            }
        };
        if f.added.is_empty() && f.removed.is_empty() && f.deletes.is_empty() {
            return Ok(Committed {
                table,
                stats: f.stats,
                writes: f.writes,
                retries,
                committed: false,
            });
        }
        let stamp = CommitStamp {
            id: ids.uuid(),
            at: clock.now(),
        };
        if let Some(g) = unit.guard {
            g.check().await.map_err(ApplyError::Fenced)?;
        }
        match commit_row_delta(handle, &table, &f.removed, f.added, f.deletes, summary.clone(), stamp).await {
            Ok(t) => {
                let mut stats = f.stats;
                stats.files_rewritten = f.removed.len() as u64;
                return Ok(Committed {
                    table: t,
                    stats,
                    writes: f.writes,
                    retries,
                    committed: true,
                });
            }
            Err(e) if e.is_retryable_commit() && attempt < max_attempts => {
                retries += 1;
                table = table::load_table(handle, &name).await?;
                if let Some(to) = unit.skip_if_applied
                    && applied_state(&table).position >= to
                {
                    return Ok(Committed {
                        table,
                        stats: f.stats,
                        writes: WriteStats::default(),
                        retries,
                        committed: false,
                    });
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApplyError::Contended {
        table: name,
        attempts: max_attempts,
    })
}

/// The copy-on-write unit: every candidate file holding a replaced key is rewritten.
#[allow(clippy::too_many_arguments)]
async fn copy_on_write(
    table: &Table,
    spec: &tidemark_journal::spec::CompiledSpec,
    events: &[RecordBatch],
    schema: &arrow_schema::SchemaRef,
    cur_schema: &arrow_schema::SchemaRef,
    key_field_id: i32,
    candidates: &[&DataFile],
    deletes: &crate::table::files::Deletes,
    ids: &dyn Ids,
    chunk_rows: u64,
) -> Result<UnitFiles, ApplyError> {
    // Key-range chunks of the candidate files, each merged on its own with the events of its
    // range, so that memory follows the chunk size rather than the table (or unit) size.
    let (chunks, cuts) = chunk_by_key(candidates, key_field_id, chunk_rows);
    let chunk_events = split_by_chunk(spec, events, &cuts, chunks.len())?;
    let mut stats = MergeStats::default();
    let mut removed = Vec::new();
    let mut added = Vec::new();
    for (chunk, chunk_events) in chunks.iter().zip(chunk_events) {
        if chunk_events.is_empty() {
            continue;
        }
        // Live rows only: the deletes of other writers are applied, so that a rewrite carries
        // exactly the rows readers see into its new files.
        let current = read_files(table, chunk, schema, Some(cur_schema), deletes).await?;
        let out = merge::merge(spec, current, cur_schema.clone(), chunk_events, schema.clone()).await?;
        stats.add(&out.stats);
        removed.extend(out.files_to_rewrite);
        let mut rows = out.kept_rows;
        rows.extend(out.upserts);
        added.extend(write_sorted(table, schema, &rows, &spec.spec.key_column, ids).await?);
    }
    let mut writes = WriteStats {
        data_files_removed: removed.len() as u64,
        ..Default::default()
    };
    writes.count_data(&added);
    Ok(UnitFiles {
        removed,
        added,
        deletes: Vec::new(),
        stats,
        writes,
    })
}

/// `rows` written sorted by the column `key`, in files of at most [`ROWS_PER_FILE`] rows: each
/// covers a narrow key range, so the next batch's key bounds prune most of them and a rewrite
/// touches only what it must.
pub(crate) async fn write_sorted(
    table: &Table,
    schema: &arrow_schema::SchemaRef,
    rows: &[RecordBatch],
    key: &str,
    ids: &dyn Ids,
) -> Result<Vec<DataFile>, ApplyError> {
    let mut added = Vec::new();
    for batch in &sort_by_key(schema, rows, key)? {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = ROWS_PER_FILE.min(batch.num_rows() - offset);
            added.extend(write_data_file(table, &[batch.slice(offset, len)], ids.uuid()).await?);
            offset += len;
        }
    }
    Ok(added)
}

/// The rows of `events` per key-range chunk (see [`chunk_by_key`]).
fn split_by_chunk(
    spec: &tidemark_journal::spec::CompiledSpec,
    events: &[RecordBatch],
    cuts: &[crate::reference::Cell],
    chunks: usize,
) -> Result<Vec<Vec<RecordBatch>>, ApplyError> {
    let mut out: Vec<Vec<RecordBatch>> = vec![Vec::new(); chunks];
    if chunks == 1 {
        out[0] = events.to_vec();
        return Ok(out);
    }
    let key_t = spec.types[spec.key_index];
    for b in events {
        let col = b.column(spec.event_column(spec.key_index));
        let parts = split_rows(b, chunks, |r| chunk_of(cuts, &cell(col.as_ref(), key_t, r)))
            .map_err(|e| MergeError::Input(e.to_string()))?;
        for (c, part) in parts {
            out[c].push(part);
        }
    }
    Ok(out)
}

/// `rows` as one batch sorted by the column `key` (none for no rows).
pub(crate) fn sort_by_key(
    schema: &arrow_schema::SchemaRef,
    rows: &[RecordBatch],
    key: &str,
) -> Result<Vec<RecordBatch>, ApplyError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let all = concat_batches(schema, rows).map_err(|e| MergeError::Input(e.to_string()))?;
    let col = all
        .column(schema.index_of(key).map_err(|e| MergeError::Input(e.to_string()))?)
        .clone();
    let idx = lexsort_to_indices(
        &[SortColumn {
            values: col,
            options: None,
        }],
        None,
    )
    .map_err(|e| MergeError::Input(e.to_string()))?;
    Ok(vec![
        take_record_batch(&all, &idx).map_err(|e| MergeError::Input(e.to_string()))?,
    ])
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

    // Verify the chain from the applied point (the checkpoint's manifest) to the target.
    let after = ChainPoint::recorded(journal, state.manifest_sequence, &state.manifest_digest).await?;
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
    let mut commits = 0u64;
    let key_index = std::sync::Mutex::new(KeyIndex::default());
    for unit in pending.chunks(opts.batches_per_commit.max(1)) {
        let last_manifest = unit.last().expect("non-empty chunk");
        let to = last_manifest.manifest.last_position.min(target);
        let events = read_events(journal, unit, state.position, to).await?;
        let mut summary = HashMap::new();
        summary.insert(PROP_JOURNAL_ID.to_string(), journal.header.journal_id.clone());
        summary.insert(PROP_FIRST_POSITION.to_string(), (state.position + 1).to_string());
        summary.insert(PROP_LAST_POSITION.to_string(), to.to_string());
        summary.insert(
            PROP_MANIFEST_SEQUENCE.to_string(),
            last_manifest.manifest.sequence.to_string(),
        );
        summary.insert(PROP_MANIFEST_DIGEST.to_string(), last_manifest.digest.clone());
        let unit = UnitOptions {
            max_attempts: opts.max_attempts,
            skip_if_applied: Some(to),
            guard: opts.guard.as_ref().map(|g| g.0.as_ref()),
            chunk_rows: opts.chunk_rows,
            range_events: opts.chunk_rows,
            mode,
            key_index: Some(&key_index),
        };
        let c = merge_and_commit_unit(handle, table, spec, events.into(), summary, clock, ids, &unit).await?;
        let committed = c.committed;
        table = c.table;
        report.retries += c.retries;
        report.merge.add(&c.stats);
        report.writes.add(&c.writes);
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
        write_checkpoint(journal, &table, &state, clock).await?;
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
        });
    }
    report.snapshot_id = table.metadata().current_snapshot_id();
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}
