//! The partitioned validation's spill ([`super`]): the snapshot's rows, the table's rows
//! and the range's events, split by a fixed hash of the key into partitions, each partition of
//! each side one Arrow IPC file under the spill folder (removed when dropped, also on error).
//! The split by key range ([`super::ranges`]) spills only the events, routed by the
//! parts' lower keys ([`Spill::create_ranged`]).
//!
//! Coalesced: every input batch is grouped by partition with one `take` (rows ordered by
//! partition: `table::read::group_rows`) and cut into zero-copy slices; the slices wait until
//! [`BUFFER_BYTES`] of input are pending, then each partition's are concatenated and written as
//! one IPC batch. The grouping (hashing every key, the `take`) is done by the tasks that read the
//! files, two at once ([`Grouper`]); the spill's lock only orders the slices and the writes. Writing each
//! input batch's share of each partition as an IPC batch of its own (as before) made the work
//! grow with batches × partitions — both grow with the size, so the validation's time grew with
//! its square (100M rows + 10M events: 21.8× the 10M + 1M time for 10× the data; see
//! docs/runs/history.md, "100M rows + 10M events, first runs").

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use arrow::array::{Array, RecordBatch, StringArray};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use tidemark_journal::spec::CompiledSpec;

/// Input held (as slices of grouped batches) before the pending rows are written, per spill.
pub(super) const BUFFER_BYTES: usize = 128 << 20;

#[derive(Clone, Copy)]
pub(super) enum Side {
    Snapshot,
    Table,
    Events,
}

/// Open spill files: one IPC writer per side and partition, created on first use.
pub(super) struct Spill {
    dir: SpillDir,
    parts: usize,
    /// The partitions whose rows are kept (all but a sample's are dropped).
    keep: Vec<bool>,
    route: Route,
    buffer_bytes: usize,
    state: Mutex<State>,
}

struct State {
    writers: Vec<Option<FileWriter<BufWriter<File>>>>,
    /// Per side and partition: slices not yet written.
    pending: Vec<Vec<RecordBatch>>,
    /// Memory of the grouped input batches the pending slices point into.
    pending_bytes: usize,
    /// Per side and partition: rows spilled.
    rows: Vec<u64>,
}

/// The written spill files.
pub(super) struct Spilled {
    dir: SpillDir,
    parts: usize,
    rows: Vec<u64>,
}

/// How a key is given its partition.
#[derive(Clone)]
pub(super) enum Route {
    /// A fixed hash of the key, modulo the partitions.
    Hash,
    /// Each partition's lower key, in key order ([`super::ranges::Parts::part_of`]).
    Ranges(std::sync::Arc<Vec<crate::reference::Cell>>),
}

/// Groups input batches by partition for a [`Spill`] (cheap to clone into a task).
#[derive(Clone)]
pub(super) struct Grouper {
    spec: std::sync::Arc<CompiledSpec>,
    parts: usize,
    keep: std::sync::Arc<Vec<bool>>,
    route: Route,
}

/// An input batch's kept rows ordered by partition, and each partition's range in it.
pub(super) struct Grouped {
    batch: RecordBatch,
    ranges: Vec<Range>,
}

impl Grouper {
    pub(super) fn group_all(&self, batches: &[RecordBatch]) -> std::io::Result<Vec<Grouped>> {
        batches
            .iter()
            .map(|b| {
                let (batch, ranges) = group(&self.spec, b, self.parts, &self.keep, &self.route)?;
                Ok(Grouped { batch, ranges })
            })
            .collect()
    }
}

/// Removes the spill folder when dropped.
struct SpillDir(PathBuf);

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl SpillDir {
    fn file(&self, side: Side, p: usize) -> PathBuf {
        let s = match side {
            Side::Snapshot => "snapshot",
            Side::Table => "table",
            Side::Events => "events",
        };
        self.0.join(format!("{s}-{p:05}.arrow"))
    }
}

impl Spill {
    /// A spill of `parts` partitions under `dir` (created; the caller names it in errors).
    pub(super) fn create(dir: &Path, parts: usize, keep: Vec<bool>) -> std::io::Result<Spill> {
        Self::with_buffer(dir, parts, keep, BUFFER_BYTES, Route::Hash)
    }

    /// A spill whose partitions are key ranges: partition `i` from `lower_keys[i]` (the first
    /// from every key below) up to the next one.
    pub(super) fn create_ranged(dir: &Path, lower_keys: Vec<crate::reference::Cell>) -> std::io::Result<Spill> {
        let parts = lower_keys.len().max(1);
        let route = Route::Ranges(std::sync::Arc::new(lower_keys));
        Self::with_buffer(dir, parts, vec![true; parts], BUFFER_BYTES, route)
    }

    fn with_buffer(
        dir: &Path,
        parts: usize,
        keep: Vec<bool>,
        buffer_bytes: usize,
        route: Route,
    ) -> std::io::Result<Spill> {
        std::fs::create_dir_all(dir)?;
        Ok(Spill {
            dir: SpillDir(dir.to_path_buf()),
            parts,
            keep,
            route,
            buffer_bytes,
            state: Mutex::new(State {
                writers: (0..3 * parts).map(|_| None).collect(),
                pending: vec![Vec::new(); 3 * parts],
                pending_bytes: 0,
                rows: vec![0; 3 * parts],
            }),
        })
    }

    /// Groups `batches` by partition (as [`Grouper::group_all`]) and adds them.
    pub(super) fn write(&self, spec: &CompiledSpec, side: Side, batches: &[RecordBatch]) -> std::io::Result<()> {
        let grouped = self.grouper(spec).group_all(batches)?;
        self.push(side, grouped)
    }

    /// What groups input batches for this spill, for tasks that read and group side by side
    /// before they [`Spill::push`] (the grouping is the spill's CPU work; the lock only orders
    /// the slices and the writes).
    pub(super) fn grouper(&self, spec: &CompiledSpec) -> Grouper {
        Grouper {
            spec: std::sync::Arc::new(spec.clone()),
            parts: self.parts,
            keep: std::sync::Arc::new(self.keep.clone()),
            route: self.route.clone(),
        }
    }

    /// Adds grouped batches of `side`; writes every pending partition once
    /// [`BUFFER_BYTES`] of input are pending.
    pub(super) fn push(&self, side: Side, grouped: Vec<Grouped>) -> std::io::Result<()> {
        let mut st = self.state.lock().expect("spill lock");
        for Grouped { batch, ranges } in grouped {
            st.pending_bytes += batch.get_array_memory_size();
            for (p, start, len) in ranges {
                st.pending[side as usize * self.parts + p].push(batch.slice(start, len));
                st.rows[side as usize * self.parts + p] += len as u64;
            }
            if st.pending_bytes >= self.buffer_bytes {
                flush(&self.dir, self.parts, &mut st)?;
            }
        }
        Ok(())
    }

    pub(super) fn finish(self) -> std::io::Result<Spilled> {
        let mut st = self.state.into_inner().expect("spill lock");
        flush(&self.dir, self.parts, &mut st)?;
        for w in st.writers.iter_mut().flatten() {
            w.finish().map_err(std::io::Error::other)?;
        }
        Ok(Spilled {
            dir: self.dir,
            parts: self.parts,
            rows: st.rows,
        })
    }
}

/// Writes every partition's pending slices as one IPC batch.
fn flush(dir: &SpillDir, parts: usize, st: &mut State) -> std::io::Result<()> {
    let State { writers, pending, .. } = st;
    for (slot, slices) in pending.iter_mut().enumerate().filter(|(_, s)| !s.is_empty()) {
        let batch =
            arrow::compute::concat_batches(&slices[0].schema(), slices.iter()).map_err(std::io::Error::other)?;
        slices.clear();
        if writers[slot].is_none() {
            let side = [Side::Snapshot, Side::Table, Side::Events][slot / parts];
            let f = BufWriter::new(File::create(dir.file(side, slot % parts))?);
            writers[slot] = Some(FileWriter::try_new(f, &batch.schema()).map_err(std::io::Error::other)?);
        }
        writers[slot]
            .as_mut()
            .expect("just set")
            .write(&batch)
            .map_err(std::io::Error::other)?;
    }
    st.pending_bytes = 0;
    Ok(())
}

impl Spilled {
    pub(super) fn parts(&self) -> usize {
        self.parts
    }

    /// Rows spilled to partition `p` of `side`.
    pub(super) fn rows(&self, side: Side, p: usize) -> u64 {
        self.rows[side as usize * self.parts + p]
    }

    pub(super) fn read(&self, side: Side, p: usize) -> std::io::Result<Vec<RecordBatch>> {
        debug_assert!(p < self.parts);
        let path = self.dir.file(side, p);
        if !path.exists() {
            return Ok(Vec::new()); // no row of this side hashed here
        }
        let reader = FileReader::try_new(BufReader::new(File::open(&path)?), None).map_err(std::io::Error::other)?;
        reader.map(|b| b.map_err(std::io::Error::other)).collect()
    }
}

/// A partition's rows in a grouped batch: `(partition, first row, rows)`.
type Range = crate::table::read::GroupRange;

/// The kept rows of `batch` ordered by the partition of their key (by `route`: a fixed hash,
/// the same in every run, or key ranges), and each partition's `(partition, first row, rows)` in
/// that batch.
fn group(
    spec: &CompiledSpec,
    batch: &RecordBatch,
    parts: usize,
    keep: &[bool],
    route: &Route,
) -> std::io::Result<(RecordBatch, Vec<Range>)> {
    use std::hash::{Hash, Hasher};
    let schema = batch.schema();
    let key = batch.column(
        schema
            .index_of(&spec.spec.key_column)
            .map_err(|e| std::io::Error::other(e.to_string()))?,
    );
    let strings = key.as_any().downcast_ref::<StringArray>();
    if let Route::Ranges(lower_keys) = route {
        let key_type = spec.types[spec.key_index];
        let part_of = |r: usize| {
            let k = crate::reference::cell(key.as_ref(), key_type, r);
            Some(super::ranges::Parts::part_of(lower_keys, &k))
        };
        return crate::table::read::group_rows(batch, parts, part_of).map_err(std::io::Error::other);
    }
    let part_of = |r: usize| {
        let mut h = std::hash::DefaultHasher::new();
        match strings {
            Some(s) if !s.is_null(r) => s.value(r).hash(&mut h),
            _ => crate::reference::cell(key.as_ref(), spec.types[spec.key_index], r).hash(&mut h),
        }
        let p = (h.finish() % parts as u64) as usize;
        keep[p].then_some(p)
    };
    crate::table::read::group_rows(batch, parts, part_of).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use std::sync::Arc;

    fn batch(spec: &CompiledSpec, from: i64, n: i64) -> RecordBatch {
        let keys: Vec<String> = (from..from + n).map(|i| format!("order-{i}")).collect();
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new(&spec.spec.key_column, arrow::datatypes::DataType::Utf8, false),
            arrow::datatypes::Field::new("n", arrow::datatypes::DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(keys)),
                Arc::new(Int64Array::from((from..from + n).collect::<Vec<_>>())),
            ],
        )
        .unwrap()
    }

    fn numbers(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                let n = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
                n.values().to_vec()
            })
            .collect()
    }

    /// Each partition file holds one IPC batch per flush, not one per input batch; every row
    /// lands in exactly one partition, the same one as its key's hash says, on each side.
    #[test]
    fn input_batches_are_coalesced_per_partition_and_every_row_kept_once() {
        let spec = CompiledSpec::orders();
        let dir = tempfile::tempdir().unwrap();
        let parts = 8;
        let spill = Spill::with_buffer(&dir.path().join("s"), parts, vec![true; parts], 1 << 30, Route::Hash).unwrap();
        let inputs: Vec<RecordBatch> = (0..40).map(|i| batch(&spec, i * 100, 100)).collect();
        spill.write(&spec, Side::Snapshot, &inputs).unwrap();
        spill.write(&spec, Side::Events, &inputs[..3]).unwrap();
        let spilled = spill.finish().unwrap();
        let mut all = Vec::new();
        for p in 0..parts {
            let got = spilled.read(Side::Snapshot, p).unwrap();
            assert!(got.len() <= 1, "partition {p}: {} IPC batches for one flush", got.len());
            for n in numbers(&got) {
                let (_, ranges) = group(&spec, &batch(&spec, n, 1), parts, &vec![true; parts], &Route::Hash).unwrap();
                assert_eq!(ranges[0].0, p, "row {n} spilled to partition {p}");
            }
            all.extend(numbers(&got));
            let ev = numbers(&spilled.read(Side::Events, p).unwrap());
            assert!(ev.iter().all(|&n| n < 300));
            assert!(spilled.read(Side::Table, p).unwrap().is_empty());
        }
        all.sort_unstable();
        assert_eq!(all, (0..4000).collect::<Vec<_>>());
    }

    /// A ranged spill puts each key in the range that holds it (compared as strings here:
    /// "order-10" sorts before "order-3") and counts the rows of each range.
    #[test]
    fn a_ranged_spill_routes_each_key_to_its_range_and_counts_its_rows() {
        use crate::reference::Cell;
        let spec = CompiledSpec::orders();
        let dir = tempfile::tempdir().unwrap();
        let lows = ["order-1", "order-3", "order-6"].map(|k| Cell::Str(k.into())).to_vec();
        let spill = Spill::create_ranged(&dir.path().join("r"), lows).unwrap();
        spill
            .write(&spec, Side::Events, &[batch(&spec, 0, 60), batch(&spec, 60, 40)])
            .unwrap();
        let spilled = spill.finish().unwrap();
        let mut total = 0;
        for p in 0..3 {
            let got = numbers(&spilled.read(Side::Events, p).unwrap());
            assert_eq!(got.len() as u64, spilled.rows(Side::Events, p), "range {p}");
            for n in &got {
                let k = format!("order-{n}");
                let want = if k.as_str() < "order-3" {
                    0
                } else if k.as_str() < "order-6" {
                    1
                } else {
                    2
                };
                assert_eq!(p, want, "{k}");
            }
            total += got.len();
        }
        assert_eq!(total, 100);
        assert!(spilled.rows(Side::Events, 0) > 0 && spilled.rows(Side::Table, 0) == 0);
    }

    /// A small buffer flushes as it goes (memory bounded), a sample keeps only its partitions,
    /// and the rows are the same.
    #[test]
    fn a_small_buffer_flushes_as_it_goes_and_a_sample_keeps_only_its_partitions() {
        let spec = CompiledSpec::orders();
        let dir = tempfile::tempdir().unwrap();
        let parts = 4;
        let keep = vec![true, false, true, false];
        let spill = Spill::with_buffer(&dir.path().join("s"), parts, keep.clone(), 1, Route::Hash).unwrap();
        let inputs: Vec<RecordBatch> = (0..10).map(|i| batch(&spec, i * 50, 50)).collect();
        spill.write(&spec, Side::Table, &inputs).unwrap();
        let spilled = spill.finish().unwrap();
        let mut all = Vec::new();
        for (p, kept) in keep.iter().enumerate() {
            let got = spilled.read(Side::Table, p).unwrap();
            assert_eq!(!got.is_empty(), *kept, "partition {p}");
            all.extend(numbers(&got));
        }
        let (_, ranges) = group(&spec, &batch(&spec, 0, 500), parts, &keep, &Route::Hash).unwrap();
        assert_eq!(all.len(), ranges.iter().map(|r| r.2).sum::<usize>());
        assert!(ranges.iter().all(|r| keep[r.0]));
    }
}
