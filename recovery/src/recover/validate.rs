//! Step 5: validate the recovered table against an independent reference: the merge rules
//! implemented a second time, columnar ([`super::columnar`]; it shares no code with the
//! DataFusion plan that produced the table), over the trusted snapshot's rows (read from the
//! snapshot's own files, not from the seeded table) and the verified events up to H. Every key is compared: missing, extra,
//! different values, different version, different delete flag, duplicate keys. Equal counts prove
//! nothing, so counts are only reported beside the per-key verdict. A distributed recovery asks
//! for a sample of the key partitions instead ([`validate_keys`], [`SampleRequest`]): it checks
//! every key on the cluster itself (`recover::distributed_check`).

use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::spec::CompiledSpec;
use tidemark_schemas::FORMAT_VERSION;

use super::RecoverError;
use super::seed::snapshot_arrow_schema;
use super::snapshot::TrustedSnapshot;
use futures::StreamExt;

use super::columnar::{self, Extra};
use super::replay::EventStream;
use super::validate_ranges::{Bounded, Parts};
use super::validate_spill::{Side, Spill, Spilled};
use crate::reference::{RefRow, extra_columns, rows_of};
use crate::table::arrow_schema;
use crate::table::read::{live_files, read_files, read_paths, read_table};

/// How many mismatches the report lists.
pub const FIRST_MISMATCHES: usize = 20;

#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Mismatch {
    pub key: String,
    /// `missing`, `extra`, `version`, `delete_flag`, `value`, `duplicate`.
    pub kind: String,
    pub column: Option<String>,
    pub expected: Option<String>,
    pub found: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct ValidationReport {
    pub format_version: u32,
    pub ok: bool,
    pub keys_expected: u64,
    pub rows_found: u64,
    pub tombstones_expected: u64,
    pub missing: u64,
    pub extra: u64,
    pub version_mismatches: u64,
    pub delete_flag_mismatches: u64,
    pub value_mismatches: u64,
    pub duplicate_keys: u64,
    pub first_mismatches: Vec<Mismatch>,
    /// Partitions the check was split into (1: compared whole): key ranges of whole files, or
    /// key-hash partitions of about [`PARTITION_ROWS`] of the snapshot's or table's rows and the
    /// range's events each (see `split`).
    pub partitions: u64,
    /// How the keys were split: `whole` (one partition), `key_range` (by the files' key bounds,
    /// rows read straight from the files) or `key_hash` (every row spilled to disk by a hash
    /// of its key). Empty in a partition's own verdict.
    pub split: String,
    /// Set when only a sample of the key partitions was compared with the reference (a
    /// distributed recovery; docs/scale-out.md): the counts above are the sample's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<Sample>,
    /// The distributed recovery's own check of every key, run on the cluster (docs/scale-out.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedCheck>,
}

/// The key partitions (by the hash of the key, as the partitioned validation splits them) that
/// a sampled validation compared: `partitions` of `0..of`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Sample {
    pub partitions: Vec<usize>,
    pub of: usize,
}

/// Asks for a sampled validation: about one key partition in `one_in`, chosen from `seed`.
#[derive(Debug, Clone)]
pub struct SampleRequest {
    pub seed: String,
    pub one_in: usize,
}

/// A sampled validation splits the keys into at least this many partitions.
pub const MIN_SAMPLE_PARTITIONS: usize = 16;

impl SampleRequest {
    /// The sample of `parts` partitions: `max(1, parts / one_in)` of them, evenly spaced from
    /// a start drawn from the seed (the same seed gives the same sample).
    pub fn pick(&self, parts: usize) -> Sample {
        use std::hash::{Hash, Hasher};
        let k = (parts / self.one_in.max(1)).clamp(1, parts);
        let mut h = std::hash::DefaultHasher::new();
        self.seed.hash(&mut h);
        let start = (h.finish() % parts as u64) as usize;
        let mut partitions: Vec<usize> = (0..k).map(|i| (start + i * parts / k) % parts).collect();
        partitions.sort_unstable();
        Sample { partitions, of: parts }
    }
}

/// The verdict of the distributed validation (every key, computed on the cluster by a
/// formulation other than the merge's; see `recover::distributed_check`).
#[derive(Debug, Clone, Serialize, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct DistributedCheck {
    pub ok: bool,
    /// Rows the check expects (one per key) and the distinct keys among them.
    pub keys_expected: u64,
    pub rows_found: u64,
    /// Keys the table holds more than once.
    pub duplicate_keys: u64,
    /// Expected rows the table lacks or holds with other values, and the table's rows no
    /// expected row equals.
    pub missing_or_different: u64,
    pub extra_or_different: u64,
    /// Keys of the first differing rows (at most [`FIRST_MISMATCHES`]).
    pub first_keys: Vec<String>,
}

impl ValidationReport {
    /// The empty verdict of a check split `split` into `parts` partitions, which [`Self::add`]
    /// sums their verdicts into.
    fn split_into(parts: usize, split: &str) -> ValidationReport {
        ValidationReport {
            format_version: FORMAT_VERSION,
            ok: true,
            partitions: parts as u64,
            split: split.into(),
            ..Default::default()
        }
    }

    /// Adds another partition's verdict (counts summed, mismatches listed up to the limit).
    fn add(&mut self, r: ValidationReport) {
        self.keys_expected += r.keys_expected;
        self.rows_found += r.rows_found;
        self.tombstones_expected += r.tombstones_expected;
        self.missing += r.missing;
        self.extra += r.extra;
        self.version_mismatches += r.version_mismatches;
        self.delete_flag_mismatches += r.delete_flag_mismatches;
        self.value_mismatches += r.value_mismatches;
        self.duplicate_keys += r.duplicate_keys;
        self.ok &= r.ok;
        let room = FIRST_MISMATCHES.saturating_sub(self.first_mismatches.len());
        self.first_mismatches.extend(r.first_mismatches.into_iter().take(room));
    }
}

/// Every live row of the table's current snapshot.
pub async fn table_rows(spec: &CompiledSpec, table: &Table) -> Result<Vec<RefRow>, RecoverError> {
    Ok(rows_of(spec, &read_table(table).await?))
}

/// Rows that one validation partition holds at most (on average): the larger of the snapshot's
/// and the table's rows plus the range's events. Above this many, validation partitions by key
/// hash and spills to disk.
pub const PARTITION_ROWS: u64 = 250_000;

/// The validation's partitions for `rows` rows of the snapshot or table (the larger) and
/// `range_events` events: each side of a partition holds about its share of `partition_rows`,
/// whatever the range's size.
fn partitions(rows: u64, range_events: u64, partition_rows: u64) -> usize {
    (rows + range_events).div_ceil(partition_rows.max(1)).max(1) as usize
}

/// Partitions folded and compared at the same time.
const PARTITIONS_AT_ONCE: usize = 2;

/// The split by key range ([`super::validate_ranges`]): a part's size aimed at, and the largest
/// run of overlapping files (or a part's events) it takes, in multiples of the partition rows;
/// a larger run makes the validation split by key hash. A part counts both sides' rows (a
/// key-hash partition about the partition rows of each side), so a part of the target size holds
/// about two key-hash partitions' rows; the parts in flight hold at most `RANGE_MAX` partitions'
/// rows ([`rows_in_flight`]).
const RANGE_TARGET: u64 = 4;
const RANGE_MAX: u64 = 12;

#[cfg(test)]
tokio::task_local! {
    /// Tests: the events a key-range part may hold (instead of `RANGE_MAX` partitions' rows),
    /// for validations within its scope.
    pub(crate) static MAX_PART_EVENTS: u64;
}

#[cfg(test)]
tokio::task_local! {
    /// Tests: the rows the key-range parts checked at the same time may hold (instead of
    /// `RANGE_MAX` partitions' rows), for validations within its scope.
    pub(crate) static ROWS_IN_FLIGHT: u64;
}

/// The rows of the largest key-range part allowed: `RANGE_MAX` partitions' rows.
fn largest_part(partition_rows: u64) -> u64 {
    partition_rows.max(1) * RANGE_MAX
}

/// The events a key-range part may hold before the validation splits by key hash instead.
fn max_part_events(partition_rows: u64) -> u64 {
    #[cfg(test)]
    if let Ok(n) = MAX_PART_EVENTS.try_with(|n| *n) {
        return n;
    }
    largest_part(partition_rows)
}

/// The rows (both sides' and the events) of the key-range parts held at the same time: the
/// largest part allowed. Parts of the target size run [`PARTITIONS_AT_ONCE`] at a time; a part
/// larger than half the budget waits until it can run alone, so a plan of large parts (files
/// that overlap much, up to `RANGE_MAX` partitions' rows a run) holds no more than one of them.
fn rows_in_flight(partition_rows: u64) -> u64 {
    #[cfg(test)]
    if let Ok(n) = ROWS_IN_FLIGHT.try_with(|n| *n) {
        return n;
    }
    largest_part(partition_rows)
}

/// How the validation splits the keys when they do not fit one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    /// By key range when the manifests' key bounds allow it, else by key hash.
    #[default]
    Auto,
    /// By key hash, every row spilled (what `auto` falls back to).
    KeyHash,
}

/// The events of `range` (the validation's own reader) as a stream, one manifest's at a time
/// (two read at once).
pub fn events_by_position(
    journal: &tidemark_journal::Journal,
    range: tidemark_journal::events::ByPosition,
) -> EventStream<'_> {
    let range = std::sync::Arc::new(range);
    let stream = futures::stream::iter(0..range.manifests.len())
        .map(move |i| {
            let range = range.clone();
            async move { range.read(journal, i).await.map_err(RecoverError::Journal) }
        })
        .buffered(2);
    Box::pin(stream)
}

/// Validates `table` against the reference of the snapshot plus `events` (see the module
/// documentation), in memory bounded by `partition_rows` (see [`PARTITION_ROWS`]) rather than by
/// the table's size.
///
/// Small tables are compared whole. Larger ones are split by a hash of the key into partitions:
/// each side (the snapshot's files, then the table's files) is read one file at a time and its
/// rows are written, per partition, to an Arrow IPC spill file under `spill_dir`, and so are the
/// events, read from the journal one manifest at a time (none of the three is held whole). Every key lands in exactly one partition on both sides, so the reference fold,
/// the duplicate check and the key-by-key comparison are each complete within a partition. The
/// partitions are then folded and compared [`PARTITIONS_AT_ONCE`] at a time and their reports
/// summed. The spill folder is removed afterwards, also on error.
pub async fn validate(
    spec: &CompiledSpec,
    snap: &TrustedSnapshot,
    table: &Table,
    events: EventStream<'_>,
    range_events: u64,
    spill_dir: &std::path::Path,
    partition_rows: u64,
) -> Result<ValidationReport, RecoverError> {
    validate_keys(
        spec,
        snap,
        table,
        events,
        range_events,
        spill_dir,
        partition_rows,
        None,
        Split::Auto,
    )
    .await
}

/// [`validate`] on every key, or with `sample` on a sample of the key partitions only: the keys
/// are split into at least [`MIN_SAMPLE_PARTITIONS`] partitions and only the rows of the sampled
/// ones are spilled, folded and compared (every file is still read once, to find them). A table
/// that fits one partition is compared whole even when a sample is asked.
#[allow(clippy::too_many_arguments)]
pub async fn validate_keys(
    spec: &CompiledSpec,
    snap: &TrustedSnapshot,
    table: &Table,
    mut events: EventStream<'_>,
    range_events: u64,
    spill_dir: &std::path::Path,
    partition_rows: u64,
    sample: Option<&SampleRequest>,
    split: Split,
) -> Result<ValidationReport, RecoverError> {
    // Both sides under the journal's column names: a spec column another writer renamed is
    // read by its field id, found in the snapshot's schema history (the recovered table has the
    // snapshot's schema, not its history).
    let renames = crate::table::check_schema_in(spec, &snap.schema, snap.metadata.schemas_iter())?;
    let schema = renames.spec_view(&arrow_schema(table)?);
    let snap_schema = renames.spec_view(&snapshot_arrow_schema(snap)?);
    // Every column is compared: those outside the journal's spec too. The recovered table has
    // the snapshot's columns; a column one side lacks is a mismatch, not a skip.
    let extra = extra_columns(spec, &schema);
    let snap_extra = extra_columns(spec, &snap_schema);
    if extra != snap_extra {
        return Err(RecoverError::Validation {
            message: format!(
                "the recovered table's columns outside the journal spec are {extra:?}, the snapshot's are {snap_extra:?}"
            ),
        });
    }
    let (files, deletes) = live_files(table).await?;
    let rows: u64 = files
        .iter()
        .map(|f| f.record_count())
        .sum::<u64>()
        .max(snap.record_count);
    let parts = partitions(rows, range_events, partition_rows);
    let extra = Extra::of(spec, &snap_schema)?;
    let (parts, sample) = match sample {
        Some(req) if parts > 1 => {
            let parts = parts.max(MIN_SAMPLE_PARTITIONS);
            (parts, Some(req.pick(parts)))
        }
        _ => (parts, None),
    };
    if parts == 1 {
        let paths: Vec<&str> = snap.data_files.iter().map(String::as_str).collect();
        let seed = read_paths(
            &snap.file_io,
            &snap.metadata_location,
            &paths,
            &snap_schema,
            None,
            &snap.deletes,
        )
        .await?;
        let found = read_files(table, &files.iter().collect::<Vec<_>>(), &schema, None, &deletes).await?;
        let mut all = Vec::new();
        while let Some(batches) = events.next().await {
            all.extend(batches?);
        }
        return columnar::check(spec, &extra, &seed, &all, &found).map(|r| ValidationReport {
            partitions: 1,
            split: "whole".into(),
            ..r
        });
    }
    let ranges = match (&sample, split) {
        (None, Split::Auto) => range_plan(snap, &snap_schema, &files, &schema, spec, partition_rows),
        _ => None,
    };
    if let Some(ranges) = ranges {
        let by_range = RangeCheck {
            spec,
            extra: &extra,
            snap,
            snap_schema: &snap_schema,
            table,
            files: &files,
            schema: &schema,
            deletes: &deletes,
        };
        match by_range
            .run(
                ranges,
                events,
                spill_dir,
                max_part_events(partition_rows),
                rows_in_flight(partition_rows),
            )
            .await?
        {
            Ok(report) => return Ok(report),
            // A part's events too many to hold: split by key hash, the events read back.
            Err(spilled) => events = spilled_events(spilled),
        }
    }
    let todo: Vec<usize> = match &sample {
        Some(s) => s.partitions.clone(),
        None => (0..parts).collect(),
    };
    let mut keep = vec![sample.is_none(); parts];
    for &p in &todo {
        keep[p] = true;
    }
    let spill = Spill::create(spill_dir, parts, keep).map_err(|e| RecoverError::Validation {
        message: format!("cannot create the validation spill folder {}: {e}", spill_dir.display()),
    })?;
    let io_err = |e: std::io::Error| RecoverError::Validation {
        message: format!("validation spill under {}: {e}", spill_dir.display()),
    };
    // The snapshot's rows, then the table's, one file at a time (two read and grouped by
    // partition at once, so that decoding and hashing keep both cores busy while the spill is
    // written).
    let grouper = spill.grouper(spec);
    // (Each read is a task of its own: futures polled in one task would share one core.)
    let died = |e: tokio::task::JoinError| RecoverError::Validation {
        message: format!("a validation read task failed: {e}"),
    };
    let mut snap_files = futures::stream::iter(snap.data_files.clone())
        .map(|path| {
            let (io, name, schema, deletes) = (
                snap.file_io.clone(),
                snap.metadata_location.clone(),
                snap_schema.clone(),
                snap.deletes.clone(),
            );
            let g = grouper.clone();
            tokio::spawn(async move {
                let batches = read_paths(&io, &name, &[path.as_str()], &schema, None, &deletes).await?;
                Ok::<_, RecoverError>(g.group_all(&batches))
            })
        })
        .buffered(2);
    while let Some(grouped) = snap_files.next().await {
        spill
            .push(Side::Snapshot, grouped.map_err(died)??.map_err(io_err)?)
            .map_err(io_err)?;
    }
    let mut table_files = futures::stream::iter(files.clone())
        .map(|file| {
            let (table, schema, deletes, g) = (table.clone(), schema.clone(), deletes.clone(), grouper.clone());
            tokio::spawn(async move {
                let batches = read_files(&table, &[&file], &schema, None, &deletes).await?;
                Ok::<_, RecoverError>(g.group_all(&batches))
            })
        })
        .buffered(2);
    while let Some(grouped) = table_files.next().await {
        spill
            .push(Side::Table, grouped.map_err(died)??.map_err(io_err)?)
            .map_err(io_err)?;
    }
    while let Some(batches) = events.next().await {
        spill.write(spec, Side::Events, &batches?).map_err(io_err)?;
    }
    let spill = std::sync::Arc::new(spill.finish().map_err(io_err)?);
    // A fixed pool of workers takes the partitions in turn: the same threads (and so the same
    // allocator arenas) are reused, which keeps the resident memory at a partition's worth per
    // worker instead of growing with the number of partitions.
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let todo = std::sync::Arc::new(todo);
    let workers: Vec<_> = (0..PARTITIONS_AT_ONCE.min(todo.len()))
        .map(|_| {
            let (spec, spill, next, todo) = (spec.clone(), spill.clone(), next.clone(), todo.clone());
            let extra = extra.clone();
            tokio::task::spawn_blocking(move || {
                let mut reports = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&p) = todo.get(i) else {
                        return Ok(reports);
                    };
                    reports.push((p, validate_partition(&spec, &extra, &spill, p)?));
                }
            })
        })
        .collect();
    let mut reports: Vec<(usize, ValidationReport)> = Vec::with_capacity(parts);
    for w in workers {
        let r: Result<Vec<(usize, ValidationReport)>, RecoverError> =
            w.await.map_err(|e| RecoverError::Validation {
                message: format!("a validation worker panicked: {e}"),
            })?;
        reports.extend(r?);
    }
    reports.sort_by_key(|(p, _)| *p);
    let mut total = ValidationReport::split_into(parts, "key_hash");
    for (_, r) in reports {
        total.add(r);
    }
    total.sample = sample;
    Ok(total)
}

/// The split by key range of `snap`'s files and the table's `files`, when their manifests allow
/// it and it has more than one part (see [`super::validate_ranges`]).
fn range_plan(
    snap: &TrustedSnapshot,
    snap_schema: &arrow_schema::SchemaRef,
    files: &[iceberg::spec::DataFile],
    schema: &arrow_schema::SchemaRef,
    spec: &CompiledSpec,
    partition_rows: u64,
) -> Option<Parts> {
    let key_id = |s: &arrow_schema::SchemaRef| {
        s.field_with_name(&spec.spec.key_column)
            .ok()
            .and_then(crate::table::files::field_id)
    };
    let bounded = |f: &iceberg::spec::DataFile, id: i32| {
        crate::table::read::key_bounds(f, id).map(|(lo, hi)| Bounded {
            lo,
            hi,
            rows: f.record_count(),
        })
    };
    let (snap_id, table_id) = (key_id(snap_schema)?, key_id(schema)?);
    let snap_files: Vec<Option<Bounded>> = snap.data_entries.iter().map(|f| bounded(f, snap_id)).collect();
    let table_files: Vec<Option<Bounded>> = files.iter().map(|f| bounded(f, table_id)).collect();
    let target = partition_rows.max(1) * RANGE_TARGET;
    super::validate_ranges::plan(&snap_files, &table_files, target, largest_part(partition_rows))
        .filter(|p| p.len() > 1)
}

/// What the split by key range reads: both sides' files and schemas.
struct RangeCheck<'a> {
    spec: &'a CompiledSpec,
    extra: &'a Extra,
    snap: &'a TrustedSnapshot,
    snap_schema: &'a arrow_schema::SchemaRef,
    table: &'a Table,
    files: &'a [iceberg::spec::DataFile],
    schema: &'a arrow_schema::SchemaRef,
    deletes: &'a crate::table::files::Deletes,
}

impl RangeCheck<'_> {
    /// Spills the events by part, then reads, folds and compares up to [`PARTITIONS_AT_ONCE`]
    /// parts at a time, each part's rows straight from its files, while the parts in flight hold
    /// at most `max_rows_in_flight` rows (a larger part runs alone). `Err(spilled)` when a part
    /// has more than `max_events` events: the caller splits by key hash instead, with the
    /// spilled events.
    async fn run(
        &self,
        ranges: Parts,
        mut events: EventStream<'_>,
        spill_dir: &std::path::Path,
        max_events: u64,
        max_rows_in_flight: u64,
    ) -> Result<Result<ValidationReport, std::sync::Arc<Spilled>>, RecoverError> {
        let dir = spill_dir.join("events-by-key-range");
        let io_err = |e: std::io::Error| RecoverError::Validation {
            message: format!("validation spill under {}: {e}", dir.display()),
        };
        let spill = Spill::create_ranged(&dir, ranges.lower_keys()).map_err(io_err)?;
        while let Some(batches) = events.next().await {
            spill.write(self.spec, Side::Events, &batches?).map_err(io_err)?;
        }
        let spilled = std::sync::Arc::new(spill.finish().map_err(io_err)?);
        if (0..ranges.len()).any(|p| spilled.rows(Side::Events, p) > max_events) {
            return Ok(Err(spilled));
        }
        let ranges = std::sync::Arc::new(ranges);
        // Rows in flight, as permits: a part takes its rows' worth (at most the whole budget).
        let budget = max_rows_in_flight.clamp(1, u64::from(u32::MAX));
        let in_flight = std::sync::Arc::new(tokio::sync::Semaphore::new(budget as usize));
        let died = |e: tokio::task::JoinError| RecoverError::Validation {
            message: format!("a validation task failed: {e}"),
        };
        let mut checks = futures::stream::iter(0..ranges.len())
            .map(|p| {
                let part = &ranges.0[p];
                let snap_paths: Vec<String> = part.snapshot.iter().map(|&i| self.snap.data_files[i].clone()).collect();
                let table_files: Vec<iceberg::spec::DataFile> =
                    part.table.iter().map(|&i| self.files[i].clone()).collect();
                let (io, name, snap_schema, snap_deletes) = (
                    self.snap.file_io.clone(),
                    self.snap.metadata_location.clone(),
                    self.snap_schema.clone(),
                    self.snap.deletes.clone(),
                );
                let (table, schema, deletes) = (self.table.clone(), self.schema.clone(), self.deletes.clone());
                let (spec, extra, ranges, spilled) =
                    (self.spec.clone(), self.extra.clone(), ranges.clone(), spilled.clone());
                let weight = (part.rows + spilled.rows(Side::Events, p)).clamp(1, budget) as u32;
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    let _held = in_flight
                        .acquire_many_owned(weight)
                        .await
                        .map_err(|e| RecoverError::Validation {
                            message: format!("validation, key range {p}: {e}"),
                        })?;
                    let key = &spec.spec.key_column;
                    let mut seed = Vec::new();
                    for path in &snap_paths {
                        let batches =
                            read_paths(&io, &name, &[path.as_str()], &snap_schema, None, &snap_deletes).await?;
                        for b in &batches {
                            ranges.check_batch(p, b, key, path)?;
                        }
                        seed.extend(batches);
                    }
                    let mut found = Vec::new();
                    for file in &table_files {
                        let batches = read_files(&table, &[file], &schema, None, &deletes).await?;
                        for b in &batches {
                            ranges.check_batch(p, b, key, file.file_path())?;
                        }
                        found.extend(batches);
                    }
                    let evs = ranged_events(&spilled, p)?;
                    tokio::task::spawn_blocking(move || columnar::check(&spec, &extra, &seed, &evs, &found))
                        .await
                        .map_err(|e| RecoverError::Validation {
                            message: format!("a validation worker panicked: {e}"),
                        })?
                })
            })
            .buffered(PARTITIONS_AT_ONCE);
        let mut total = ValidationReport::split_into(ranges.len(), "key_range");
        while let Some(r) = checks.next().await {
            total.add(r.map_err(died)??);
        }
        Ok(Ok(total))
    }
}

/// The events of key range `p` in a ranged spill.
fn ranged_events(spilled: &Spilled, p: usize) -> Result<Vec<arrow::array::RecordBatch>, RecoverError> {
    spilled.read(Side::Events, p).map_err(|e| RecoverError::Validation {
        message: format!("validation spill, key range {p}: {e}"),
    })
}

/// The events a ranged spill holds, range after range, as an event stream.
fn spilled_events(spilled: std::sync::Arc<Spilled>) -> EventStream<'static> {
    let parts = spilled.parts();
    futures::stream::iter(0..parts)
        .map(move |p| ranged_events(&spilled, p))
        .boxed()
}

fn validate_partition(
    spec: &CompiledSpec,
    extra: &Extra,
    spill: &Spilled,
    p: usize,
) -> Result<ValidationReport, RecoverError> {
    let read = |side: Side| {
        spill.read(side, p).map_err(|e| RecoverError::Validation {
            message: format!("validation spill partition {p}: {e}"),
        })
    };
    columnar::check(
        spec,
        extra,
        &read(Side::Snapshot)?,
        &read(Side::Events)?,
        &read(Side::Table)?,
    )
}

#[cfg(test)]
mod tests {
    use super::SampleRequest;

    #[test]
    fn a_sample_is_a_few_distinct_partitions_fixed_by_its_seed() {
        let req = |seed: &str| SampleRequest {
            seed: seed.into(),
            one_in: 8,
        };
        let s = req("rec-1").pick(40);
        assert_eq!((s.of, s.partitions.len()), (40, 5));
        assert!(s.partitions.windows(2).all(|w| w[0] < w[1]) && s.partitions.iter().all(|&p| p < 40));
        assert_eq!(req("rec-1").pick(40), s, "the same seed, the same sample");
        assert_eq!(req("rec-1").pick(3).partitions.len(), 1, "at least one partition");
        let starts: std::collections::BTreeSet<_> =
            (0..20).map(|i| req(&format!("r{i}")).pick(16).partitions).collect();
        assert!(starts.len() > 1, "seeds choose different samples");
    }
}
