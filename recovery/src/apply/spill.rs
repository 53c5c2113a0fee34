//! The copy-on-write merge of a unit of events too large to hold in memory: the replay of a
//! recovery's range (`recover::replay`), whatever the range's size.
//!
//! The events are written once, as they are read from the journal, to an Arrow IPC spill file
//! ([`EventSpill`]), keeping a fixed-size sample of their keys. A merge then cuts the key space
//! into ranges that hold about `per_range` events each (cuts at the sample's quantiles, each moved
//! to a place between files within a quarter range when there is one) and about
//! `chunk_rows` table rows each (the cuts between files of [`chunk_by_key`]), partitions the spill
//! by those ranges into one file per range, and merges range by range, with the same DataFusion
//! plan ([`merge::merge`]) as every other merge: the range's events against the live rows, within
//! the range, of the files that can hold its keys. Every key belongs to exactly one range, so the
//! rules (newer version wins, identical retries are no-ops, same key and version with a different
//! payload stops the merge, tombstones are kept) decide each key as a single merge would.
//!
//! A range cut may fall inside a data file's key range. A file rewritten because of one range
//! also has its rows of the other ranges written again: those that no range rewrote (no key of
//! theirs changed there) are read once more and carried into new files, so that no row is lost.
//!
//! Memory holds one range's events and table rows at a time, the sample (at most
//! [`SAMPLE_KEYS`] keys) and one batch while the spill is written or partitioned; the spill files
//! are removed when the merge is dropped, also on error.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use iceberg::spec::DataFile;
use tidemark_journal::generate::Rng;
use tidemark_journal::spec::CompiledSpec;

use crate::apply::ApplyError;
use crate::apply::chunks::{discard_failed, in_order, limit, partitions_each};
use crate::apply::cow::{Merged, UnitFiles, write_files};
use crate::apply::input::UnitInput;
use crate::apply::rules::merge_sorted_by_key;
use crate::merge::{self, MergeError, MergeStats};
use crate::reference::{Cell, cell};
use crate::table::read::{chunk_by_key, chunk_of, files_for_keys, key_bounds, key_chunks, read_files, split_rows};

/// Keys the sample keeps at most (reservoir sampling; every key when there are fewer events).
pub const SAMPLE_KEYS: usize = 8192;

/// Where spill files go: `$TIDEMARK_SPILL_DIR`, or the system's temporary folder.
pub(crate) fn spill_root() -> PathBuf {
    std::env::var_os("TIDEMARK_SPILL_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

/// A new folder name for the spill files of a step (`validate`, `replay`, `compact`): under
/// [`spill_root`], unique per process and call.
pub(crate) fn spill_dir_for(step: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    spill_root().join(format!("tidemark-{step}-{}-{n}", std::process::id()))
}

/// Removes a spill folder when dropped.
pub(crate) struct SpillDir(pub(crate) PathBuf);

impl Drop for SpillDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spill_err(path: &Path, e: impl std::fmt::Display) -> ApplyError {
    ApplyError::Spill {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Events being written to a spill file (see the module documentation).
pub struct EventSpill {
    dir: SpillDir,
    file: PathBuf,
    writer: Option<FileWriter<BufWriter<File>>>,
    key_col: usize,
    key_t: tidemark_journal::spec::ColumnType,
    rows: u64,
    sample: Vec<Cell>,
    rng: Rng,
}

impl EventSpill {
    /// A new spill under `dir` (created; removed again when the spill is dropped).
    pub fn create(spec: &CompiledSpec, dir: &Path) -> Result<EventSpill, ApplyError> {
        std::fs::create_dir_all(dir).map_err(|e| spill_err(dir, e))?;
        Ok(EventSpill {
            dir: SpillDir(dir.to_path_buf()),
            file: dir.join("events.arrow"),
            writer: None,
            key_col: spec.event_column(spec.key_index),
            key_t: spec.types[spec.key_index],
            rows: 0,
            sample: Vec::new(),
            rng: Rng::new(0x5eed),
        })
    }

    /// Appends a batch of events (event schema).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), ApplyError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.writer.is_none() {
            let f = File::create(&self.file).map_err(|e| spill_err(&self.file, e))?;
            let w = FileWriter::try_new(BufWriter::new(f), &batch.schema()).map_err(|e| spill_err(&self.file, e))?;
            self.writer = Some(w);
        }
        let w = self.writer.as_mut().expect("just set");
        w.write(batch).map_err(|e| spill_err(&self.file, e))?;
        let col = batch.column(self.key_col);
        for r in 0..batch.num_rows() {
            // Algorithm R: after n keys, each is in the sample with probability SAMPLE_KEYS / n.
            let seen = self.rows + r as u64;
            if self.sample.len() < SAMPLE_KEYS {
                self.sample.push(cell(col.as_ref(), self.key_t, r));
            } else {
                let j = self.rng.below(seen + 1) as usize;
                if j < SAMPLE_KEYS {
                    self.sample[j] = cell(col.as_ref(), self.key_t, r);
                }
            }
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Events written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Closes the spill file.
    pub fn finish(mut self) -> Result<SpilledEvents, ApplyError> {
        if let Some(mut w) = self.writer.take() {
            w.finish().map_err(|e| spill_err(&self.file, e))?;
        }
        self.sample.sort();
        Ok(SpilledEvents {
            dir: self.dir,
            file: self.file,
            rows: self.rows,
            sample: self.sample,
            attempts: std::sync::atomic::AtomicUsize::new(0),
        })
    }
}

/// The spilled events of a unit, ready to be merged.
pub struct SpilledEvents {
    dir: SpillDir,
    file: PathBuf,
    rows: u64,
    /// Sorted.
    sample: Vec<Cell>,
    attempts: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for SpilledEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpilledEvents({} rows in {})", self.rows, self.file.display())
    }
}

impl SpilledEvents {
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The spill file's batches, one at a time.
    fn batches(&self) -> Result<impl Iterator<Item = Result<RecordBatch, ApplyError>> + '_, ApplyError> {
        let reader: Option<FileReader<BufReader<File>>> = if self.rows == 0 {
            None
        } else {
            let f = File::open(&self.file).map_err(|e| spill_err(&self.file, e))?;
            Some(FileReader::try_new(BufReader::new(f), None).map_err(|e| spill_err(&self.file, e))?)
        };
        Ok(reader
            .into_iter()
            .flatten()
            .map(|b| b.map_err(|e| spill_err(&self.file, e))))
    }

    /// The cuts between ranges: the file chunks' cuts and the sample's quantiles, so that a
    /// range holds about `per_range` events and about `chunk_rows` table rows. A quantile moves
    /// to a place between files near it ([`between_files`]) when there is one.
    pub fn cuts(&self, files: &[&DataFile], key_field_id: i32, chunk_rows: u64, per_range: u64) -> Vec<Cell> {
        let (_, mut cuts) = chunk_by_key(files, key_field_id, chunk_rows);
        let parts = self.rows.div_ceil(per_range.max(1)) as usize;
        if !self.sample.is_empty() {
            // Every place where a cut falls between files (no file's key range reaches over it).
            let (_, between) = chunk_by_key(files, key_field_id, 0);
            for i in 1..parts {
                cuts.push(between_files(&self.sample, i, parts, &between));
            }
        }
        cuts.sort();
        cuts.dedup();
        cuts
    }

    /// Writes the events again, one file per range of `cuts` (under a folder of this attempt).
    fn partition(&self, spec: &CompiledSpec, cuts: &[Cell]) -> Result<Ranges, ApplyError> {
        let n = self.attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.dir.0.join(format!("ranges-{n}"));
        std::fs::create_dir_all(&dir).map_err(|e| spill_err(&dir, e))?;
        let ranges = Ranges {
            dir: SpillDir(dir),
            count: cuts.len() + 1,
        };
        let mut writers: Vec<Option<FileWriter<BufWriter<File>>>> = (0..ranges.count).map(|_| None).collect();
        let (key_col, key_t) = (spec.event_column(spec.key_index), spec.types[spec.key_index]);
        for batch in self.batches()? {
            let batch = batch?;
            let of = key_chunks(cuts, batch.column(key_col).as_ref(), key_t);
            let parts = split_rows(&batch, ranges.count, |r| of[r]).map_err(|e| MergeError::Input(e.to_string()))?;
            for (r, part) in parts {
                let path = ranges.file(r);
                if writers[r].is_none() {
                    let f = File::create(&path).map_err(|e| spill_err(&path, e))?;
                    writers[r] =
                        Some(FileWriter::try_new(BufWriter::new(f), &part.schema()).map_err(|e| spill_err(&path, e))?);
                }
                let w = writers[r].as_mut().expect("just set");
                w.write(&part).map_err(|e| spill_err(&path, e))?;
            }
        }
        for (r, w) in writers.iter_mut().enumerate() {
            if let Some(w) = w {
                w.finish().map_err(|e| spill_err(&ranges.file(r), e))?;
            }
        }
        Ok(ranges)
    }
}

/// The cut at the `i`-th of `parts` quantiles of the sorted key `sample`: the place between files
/// (of the sorted `between`) nearest to it by the sample's ranks, within a quarter of a range
/// either side, so that a range still holds between half and one and a half times its share of
/// the events; the quantile itself when no such place is near. A cut between files keeps each
/// file in one range: the file is read once, not once per range it spans, and the files written
/// for a range start and end where the table's did, so the validation's split by key range can
/// cut there too (a quantile inside files chained the rewritten files of the newest keys, where
/// the events crowd, into one 1.85M-row run of overlapping files at 10M + 1M).
fn between_files(sample: &[Cell], i: usize, parts: usize, between: &[Cell]) -> Cell {
    let n = sample.len();
    let at = (i * n / parts).min(n - 1);
    let quarter = n / (4 * parts.max(1));
    let (lo, hi) = (&sample[at.saturating_sub(quarter)], &sample[(at + quarter).min(n - 1)]);
    let (from, to) = (
        between.partition_point(|b| b < lo),
        between.partition_point(|b| b <= hi),
    );
    between[from..to]
        .iter()
        .min_by_key(|b| sample.partition_point(|s| s < *b).abs_diff(at))
        .unwrap_or(&sample[at])
        .clone()
}

/// The events partitioned by range (removed when dropped).
struct Ranges {
    dir: SpillDir,
    count: usize,
}

impl Ranges {
    fn file(&self, r: usize) -> PathBuf {
        self.dir.0.join(format!("range-{r:06}.arrow"))
    }

    /// The events of range `r` (none when no event fell in it).
    fn read(&self, r: usize) -> Result<Vec<RecordBatch>, ApplyError> {
        let path = self.file(r);
        if !path.exists() {
            return Ok(Vec::new());
        }
        let f = File::open(&path).map_err(|e| spill_err(&path, e))?;
        let reader = FileReader::try_new(BufReader::new(f), None).map_err(|e| spill_err(&path, e))?;
        reader.map(|b| b.map_err(|e| spill_err(&path, e))).collect()
    }
}

/// The range of `cuts` every key of `file` lies in, when its key bounds put it in one range.
fn single_range(file: &DataFile, key_field_id: i32, cuts: &[Cell]) -> Option<usize> {
    let (lo, hi) = key_bounds(file, key_field_id)?;
    let r = chunk_of(cuts, &lo);
    (chunk_of(cuts, &hi) == r).then_some(r)
}

/// The rows of `batch` whose key (column `key_col`) lies in a range `keep` accepts.
fn rows_in(
    batch: &RecordBatch,
    key_col: usize,
    key_t: tidemark_journal::spec::ColumnType,
    cuts: &[Cell],
    keep: impl Fn(usize) -> bool,
) -> Result<RecordBatch, ApplyError> {
    let mask: BooleanArray = key_chunks(cuts, batch.column(key_col).as_ref(), key_t)
        .into_iter()
        .map(|c| Some(keep(c)))
        .collect();
    arrow::compute::filter_record_batch(batch, &mask).map_err(|e| MergeError::Input(e.to_string()).into())
}

/// The copy-on-write unit over spilled events (see the module documentation). `files` are the
/// table's live data files, `prune` whether their key bounds can be trusted to skip files.
pub(crate) async fn copy_on_write_spilled(
    input: UnitInput<'_>,
    spilled: &SpilledEvents,
    files: &[DataFile],
    chunk_rows: u64,
    per_range: u64,
    prune: bool,
) -> Result<UnitFiles, ApplyError> {
    let (table, spec, schema, cur_schema) = (input.table, input.spec, input.schema, input.cur_schema);
    let (key_field_id, deletes, ids) = (input.key_field_id, input.deletes, input.ids);
    let all: Vec<&DataFile> = files.iter().collect();
    let cuts = Arc::new(spilled.cuts(&all, key_field_id, chunk_rows, per_range));
    let ranges = Arc::new(spilled.partition(spec, &cuts)?);
    let key_t = spec.types[spec.key_index];
    let key_col = schema
        .index_of(&spec.spec.key_column)
        .map_err(|e| MergeError::Input(e.to_string()))?;
    let ev_key = spec.event_column(spec.key_index);
    let spec = Arc::new(spec.clone());
    let files = Arc::new(files.to_vec());
    let mut stats = MergeStats::default();
    // Rewritten file → the ranges that rewrote it.
    let mut rewritten: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    // Two ranges at a time ([`crate::apply::chunks`]); a range without events is skipped.
    let work: Vec<usize> = (0..ranges.count).filter(|&r| ranges.file(r).exists()).collect();
    let partitions = partitions_each(work.len());
    let added = in_order(
        work,
        limit(),
        |r| {
            let (table, spec, schema, cur_schema, deletes) = (
                table.clone(),
                spec.clone(),
                schema.clone(),
                cur_schema.clone(),
                deletes.clone(),
            );
            let (ranges, cuts, files) = (ranges.clone(), cuts.clone(), files.clone());
            async move {
                let events = ranges.read(r)?;
                if events.is_empty() {
                    return Ok((r, Merged::default()));
                }
                let candidates = if prune {
                    let mut keys = BTreeSet::new();
                    for b in &events {
                        let col = b.column(ev_key);
                        for row in 0..b.num_rows() {
                            keys.insert(cell(col.as_ref(), key_t, row));
                        }
                    }
                    files_for_keys(&files, key_field_id, &keys)
                } else {
                    files.iter().collect()
                };
                // The live rows of the range, one file at a time (a file that reaches into
                // other ranges is cut to this one as it is read).
                let mut current = Vec::new();
                for f in candidates {
                    let rows = read_files(&table, &[f], &schema, Some(&cur_schema), &deletes).await?;
                    if single_range(f, key_field_id, &cuts) == Some(r) {
                        current.extend(rows);
                    } else {
                        for b in rows {
                            current.push(rows_in(&b, key_col, key_t, &cuts, |x| x == r)?);
                        }
                    }
                }
                let out = merge::merge_in(&spec, current, cur_schema, events, schema.clone(), partitions).await?;
                Ok((r, Merged::of(&schema, &spec, out)?))
            }
        },
        |(r, m): (usize, Merged)| {
            stats.add(&m.stats);
            for f in m.files_to_rewrite {
                rewritten.entry(f).or_default().insert(r);
            }
            Ok(write_files(table, m.sorted, ids))
        },
    )
    .await;
    // A range that failed (a conflict in a later range): the earlier ranges' files go.
    let mut added = match added {
        Ok(added) => added,
        Err(failed) => return Err(discard_failed(table, failed, Vec::new()).await),
    };
    // A rewritten file's rows in the ranges that did not rewrite it: unchanged, carried over
    // (two files at a time, as the ranges).
    let carried: Vec<(DataFile, BTreeSet<usize>)> = rewritten
        .iter()
        .filter_map(|(path, by)| {
            let f = files.iter().find(|f| f.file_path() == path)?;
            let whole = single_range(f, key_field_id, &cuts).is_some_and(|r| by.contains(&r));
            (!whole).then(|| (f.clone(), by.clone()))
        })
        .collect();
    let carried = in_order(
        carried,
        limit(),
        |(f, by)| {
            let (table, schema, deletes, cuts, spec) = (
                table.clone(),
                schema.clone(),
                deletes.clone(),
                cuts.clone(),
                spec.clone(),
            );
            async move {
                let mut rows = Vec::new();
                for b in read_files(&table, &[&f], &schema, None, &deletes).await? {
                    rows.push(rows_in(&b, key_col, key_t, &cuts, |x| !by.contains(&x))?);
                }
                let kept: u64 = rows.iter().map(|b| b.num_rows() as u64).sum();
                Ok((kept, merge_sorted_by_key(&schema, &rows, &[], &spec.spec.key_column)?))
            }
        },
        |(kept, sorted): (u64, Vec<RecordBatch>)| {
            stats.rows_kept += kept;
            Ok(write_files(table, sorted, ids))
        },
    )
    .await;
    match carried {
        Ok(carried) => added.extend(carried),
        Err(failed) => return Err(discard_failed(table, failed, added.into_iter().flatten().collect()).await),
    }
    let removed: Vec<String> = rewritten.into_keys().collect();
    Ok(UnitFiles::copy_on_write(
        removed,
        added.into_iter().flatten().collect(),
        stats,
    ))
}

#[cfg(test)]
mod tests {
    use super::between_files;
    use crate::reference::Cell;

    #[test]
    fn a_quantile_cut_moves_to_the_nearest_place_between_files_within_a_quarter_range() {
        // 100 sampled keys 0, 10, …, 990; four ranges: quantiles at ranks 25, 50 and 75, a quarter
        // range is 6 ranks.
        let sample: Vec<Cell> = (0..100).map(|k| Cell::Long(k * 10)).collect();
        let between = [200, 231, 262, 700].map(Cell::Long);
        // Rank 25 (key 250): 200, 231 and 262 lie within ranks 19..=31; 231 (rank 24) is nearest.
        assert_eq!(between_files(&sample, 1, 4, &between), Cell::Long(231));
        // Rank 50: no place between files within keys 440..=560, so the quantile stays.
        assert_eq!(between_files(&sample, 2, 4, &between), Cell::Long(500));
        // Rank 75: 700 (rank 70) is within ranks 69..=81.
        assert_eq!(between_files(&sample, 3, 4, &between), Cell::Long(700));
        // No place between files (files without key bounds): the quantile.
        assert_eq!(between_files(&sample, 1, 4, &[]), Cell::Long(250));
    }
}
