//! The validation split by key range: the plan of whole files by the manifests' key bounds
//! ([`super::ranges`]), and its run, each part's rows read straight from its files.

use futures::StreamExt;
use iceberg::table::Table;
use tidemark_journal::spec::CompiledSpec;

use super::limits::{PARTITIONS_AT_ONCE, RANGE_TARGET, largest_part};
use super::ranges::{Bounded, Parts};
use super::report::ValidationReport;
use super::spill::{Side, Spill, Spilled};
use crate::recover::RecoverError;
use crate::recover::columnar::{self, Extra};
use crate::recover::replay::EventStream;
use crate::recover::snapshot::TrustedSnapshot;
use crate::table::read::{read_files, read_paths};

/// The split by key range of `snap`'s files and the table's `files`, when their manifests allow
/// it and it has more than one part (see [`super::ranges`]).
pub(super) fn range_plan(
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
    super::ranges::plan(&snap_files, &table_files, target, largest_part(partition_rows)).filter(|p| p.len() > 1)
}

/// What the split by key range reads: both sides' files and schemas.
pub(super) struct RangeCheck<'a> {
    pub(super) spec: &'a CompiledSpec,
    pub(super) extra: &'a Extra,
    pub(super) snap: &'a TrustedSnapshot,
    pub(super) snap_schema: &'a arrow_schema::SchemaRef,
    pub(super) table: &'a Table,
    pub(super) files: &'a [iceberg::spec::DataFile],
    pub(super) schema: &'a arrow_schema::SchemaRef,
    pub(super) deletes: &'a crate::table::files::Deletes,
}

impl RangeCheck<'_> {
    /// Spills the events by part, then reads, folds and compares up to [`PARTITIONS_AT_ONCE`]
    /// parts at a time, each part's rows straight from its files, while the parts in flight hold
    /// at most `max_rows_in_flight` rows (a larger part runs alone). `Err(spilled)` when a part
    /// has more than `max_events` events: the caller splits by key hash instead, with the
    /// spilled events.
    pub(super) async fn run(
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
                    tokio::task::spawn_blocking(move || columnar::check(&spec, &extra, seed, evs, found))
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
pub(super) fn spilled_events(spilled: std::sync::Arc<Spilled>) -> EventStream<'static> {
    let parts = spilled.parts();
    futures::stream::iter(0..parts)
        .map(move |p| ranged_events(&spilled, p))
        .boxed()
}
