//! The validation itself ([`validate`], [`validate_keys`]): small tables compared whole, larger
//! ones split by key range ([`super::by_range`]) or by key hash, spilled to disk
//! ([`super::spill`]) and compared partition by partition.

use futures::StreamExt;
use iceberg::table::Table;
use tidemark_journal::spec::CompiledSpec;

use super::by_range::{RangeCheck, range_plan, spilled_events};
use super::limits::{PARTITIONS_AT_ONCE, Split, max_part_events, partitions, rows_in_flight};
use super::report::{MIN_SAMPLE_PARTITIONS, SampleRequest, ValidationReport};
use super::spill::{Side, Spill, Spilled};
use crate::recover::RecoverError;
use crate::recover::columnar::{self, Extra};
use crate::recover::replay::EventStream;
use crate::recover::seed::snapshot_arrow_schema;
use crate::recover::snapshot::TrustedSnapshot;
use crate::reference::{RefRow, extra_columns, rows_of};
use crate::table::arrow_schema;
use crate::table::read::{live_files, read_files, read_paths, read_table};

/// Every live row of the table's current snapshot.
pub async fn table_rows(spec: &CompiledSpec, table: &Table) -> Result<Vec<RefRow>, RecoverError> {
    Ok(rows_of(spec, &read_table(table).await?))
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
/// documentation), in memory bounded by `partition_rows` (see [`super::PARTITION_ROWS`]) rather than by
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
        return columnar::check(spec, &extra, seed, all, found).map(|r| ValidationReport {
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
        read(Side::Snapshot)?,
        read(Side::Events)?,
        read(Side::Table)?,
    )
}
