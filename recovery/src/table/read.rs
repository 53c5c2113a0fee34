//! Reading a table's rows straight from its data files, each row tagged with the file it lives
//! in (what copy-on-write needs to know), and pruning files by the key column's bounds in the
//! manifests so that a batch of events reads only the files that can hold its keys.
//!
//! Columns are matched by Iceberg field id (`PARQUET:field_id`), as Iceberg readers must: a column
//! renamed by another writer keeps its id, and a column added after a file was written reads as
//! null in that file. The position and equality deletes of other writers are applied to every
//! row read ([`super::files::Deletes`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow_schema::SchemaRef;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, PrimitiveLiteral};
use iceberg::table::Table;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tidemark_journal::spec::ColumnType;

use super::files::{Deletes, field_id, snapshot_files};
use super::{TableError, iceberg_err};
use crate::reference::Cell;

/// The key bounds of a data file as cells, when the manifest records them.
pub fn key_bounds(file: &DataFile, key_field_id: i32) -> Option<(Cell, Cell)> {
    let lit = |d: &iceberg::spec::Datum| match d.literal() {
        PrimitiveLiteral::String(s) => Some(Cell::Str(s.clone())),
        PrimitiveLiteral::Long(v) => Some(Cell::Long(*v)),
        PrimitiveLiteral::Int(v) => Some(Cell::Int(*v)),
        _ => None,
    };
    let lower = lit(file.lower_bounds().get(&key_field_id)?)?;
    let upper = lit(file.upper_bounds().get(&key_field_id)?)?;
    Some((lower, upper))
}

/// The files that may hold any of `keys` (all files whose bounds are unknown). String bounds may
/// be truncated prefixes (PyIceberg writes 16 characters); a truncated lower bound is still <=
/// every key in the file, and writers round a truncated upper bound up, so the test stays safe.
pub fn files_for_keys<'a>(files: &'a [DataFile], key_field_id: i32, keys: &BTreeSet<Cell>) -> Vec<&'a DataFile> {
    files
        .iter()
        .filter(|f| match key_bounds(f, key_field_id) {
            Some((lo, hi)) => keys.range(lo..).next().is_some_and(|k| *k <= hi),
            None => true,
        })
        .collect()
}

/// Every live row of `files` (`deletes` applied) in `schema` (the table's Arrow schema, columns
/// matched by field id), plus a last column naming the file when `with_file` is given.
pub async fn read_files(
    table: &Table,
    files: &[&DataFile],
    schema: &SchemaRef,
    with_file: Option<&SchemaRef>,
    deletes: &Deletes,
) -> Result<Vec<RecordBatch>, TableError> {
    let paths: Vec<&str> = files.iter().map(|f| f.file_path()).collect();
    read_paths(
        table.file_io(),
        &table.identifier().to_string(),
        &paths,
        schema,
        with_file,
        deletes,
    )
    .await
}

/// The live data files of the table's current snapshot and their deletes, loaded.
pub async fn live_files(table: &Table) -> Result<(Vec<DataFile>, Deletes), TableError> {
    live_files_cached(table, None).await
}

/// [`live_files`] with the position delete files read before taken from `cache`.
pub async fn live_files_cached(
    table: &Table,
    cache: Option<&super::files::PositionDeleteCache>,
) -> Result<(Vec<DataFile>, Deletes), TableError> {
    let name = table.identifier().to_string();
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok((Vec::new(), Deletes::none()));
    };
    let files = snapshot_files(table.file_io(), &name, snapshot.manifest_list(), &|p| p.to_string()).await?;
    let deletes = Deletes::load_cached(
        table.file_io(),
        &name,
        &files,
        &super::arrow_schema(table)?,
        &|p| p.to_string(),
        cache,
    )
    .await?;
    Ok((files.data.into_iter().map(|f| f.file).collect(), deletes))
}

/// The live rows of `files` (`deletes` applied), read one file at a time.
pub async fn count_live_rows(table: &Table, files: &[DataFile], deletes: &Deletes) -> Result<u64, TableError> {
    let schema = super::arrow_schema(table)?;
    let mut rows = 0;
    for f in files {
        let batches = read_files(table, &[f], &schema, None, deletes).await?;
        rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
    }
    Ok(rows)
}

/// Every live row of the table's current snapshot, in the table's Arrow schema.
pub async fn read_table(table: &Table) -> Result<Vec<RecordBatch>, TableError> {
    let (files, deletes) = live_files(table).await?;
    let schema = super::arrow_schema(table)?;
    read_files(table, &files.iter().collect::<Vec<_>>(), &schema, None, &deletes).await
}

/// Groups `files` into chunks of about `chunk_rows` rows that cover disjoint key ranges: a cut is
/// made only where no file's key range spans it (by the manifests' key bounds). Returns the
/// chunks and the cuts between them (`cuts[i]` is the lowest key of chunk `i + 1`), so that
/// every key belongs to exactly one chunk ([`chunk_of`]). Without bounds on every file, one chunk.
pub fn chunk_by_key<'a>(
    files: &[&'a DataFile],
    key_field_id: i32,
    chunk_rows: u64,
) -> (Vec<Vec<&'a DataFile>>, Vec<Cell>) {
    let bounded: Option<Vec<(Cell, Cell, &DataFile)>> = files
        .iter()
        .map(|f| key_bounds(f, key_field_id).map(|(lo, hi)| (lo, hi, *f)))
        .collect();
    let Some(mut bounded) = bounded else {
        return (vec![files.to_vec()], Vec::new());
    };
    bounded.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut chunks, mut cuts) = (vec![Vec::new()], Vec::new());
    let (mut rows, mut max_hi): (u64, Option<Cell>) = (0, None);
    for (lo, hi, f) in bounded {
        let can_cut = max_hi.as_ref().is_some_and(|m| *m < lo);
        if rows >= chunk_rows && can_cut {
            chunks.push(Vec::new());
            cuts.push(lo.clone());
            rows = 0;
        }
        rows += f.record_count();
        chunks.last_mut().expect("one chunk at least").push(f);
        if max_hi.as_ref().is_none_or(|m| *m < hi) {
            max_hi = Some(hi);
        }
    }
    (chunks, cuts)
}

/// The rows of `batch` by group: `group_of(row)` (below `groups`) names each row's group; the
/// result has one batch per non-empty group, in group order.
pub fn split_rows(
    batch: &RecordBatch,
    groups: usize,
    mut group_of: impl FnMut(usize) -> usize,
) -> Result<Vec<(usize, RecordBatch)>, arrow::error::ArrowError> {
    let mut idx: Vec<Vec<u32>> = vec![Vec::new(); groups];
    for r in 0..batch.num_rows() {
        idx[group_of(r)].push(r as u32);
    }
    idx.into_iter()
        .enumerate()
        .filter(|(_, rows)| !rows.is_empty())
        .map(|(g, rows)| {
            Ok((
                g,
                arrow::compute::take_record_batch(batch, &arrow::array::UInt32Array::from(rows))?,
            ))
        })
        .collect()
}

/// The chunk of [`chunk_by_key`] that `key` belongs to.
pub fn chunk_of(cuts: &[Cell], key: &Cell) -> usize {
    cuts.partition_point(|c| c <= key)
}

/// [`read_files`] for Parquet files given by path (`name` is the table, for messages).
pub async fn read_paths(
    io: &FileIO,
    name: &str,
    paths: &[&str],
    schema: &SchemaRef,
    with_file: Option<&SchemaRef>,
    deletes: &Deletes,
) -> Result<Vec<RecordBatch>, TableError> {
    let mut out = Vec::new();
    let bad = |path: &str, e: &dyn std::fmt::Display| TableError::BatchSchema {
        table: name.to_string(),
        detail: format!("data file {path}: {e}"),
    };
    for path in paths {
        let input = io
            .new_input(path)
            .map_err(iceberg_err(format!("open data file {path}")))?;
        let bytes = input
            .read()
            .await
            .map_err(iceberg_err(format!("read data file {path} of {name}")))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| bad(path, &e))?;
        let projection = Projection::of(builder.schema(), schema).map_err(|e| bad(path, &e))?;
        let reader = builder.with_batch_size(64 * 1024).build().map_err(|e| bad(path, &e))?;
        let mut offset = 0u64;
        for batch in reader {
            let batch = batch.map_err(|e| bad(path, &e))?;
            let rows = batch.num_rows() as u64;
            let projected = projection.apply(&batch, schema).map_err(|e| bad(path, &e))?;
            let live = deletes.filter(path, offset, projected).map_err(|e| bad(path, &e))?;
            offset += rows;
            let (target, mut cols) = (schema.clone(), live.columns().to_vec());
            let target = match with_file {
                Some(s) => {
                    cols.push(Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                        *path,
                        live.num_rows(),
                    ))));
                    s.clone()
                }
                None => target,
            };
            out.push(RecordBatch::try_new(target, cols).map_err(|e| bad(path, &e))?);
        }
    }
    Ok(out)
}

/// Where each column of the target schema comes from in a file: the file column with the same
/// field id; for a file written without field ids, the column of the same name (a file
/// imported without ids); or nothing (a column added after the file was written: null).
pub(super) struct Projection(pub(super) Vec<Option<usize>>);

impl Projection {
    pub(super) fn of(file: &SchemaRef, target: &SchemaRef) -> Result<Projection, String> {
        let file_ids: Vec<Option<i32>> = file.fields().iter().map(|f| field_id(f)).collect();
        let by_id = file_ids.iter().any(Option::is_some);
        let mut sources = Vec::with_capacity(target.fields().len());
        for field in target.fields() {
            let source = match (by_id, field_id(field)) {
                (true, Some(id)) => file_ids.iter().position(|f| *f == Some(id)),
                _ => file.index_of(field.name()).ok(),
            };
            if source.is_none() && !field.is_nullable() {
                return Err(format!(
                    "no column for required field {}{}",
                    field.name(),
                    field_id(field)
                        .map(|id| format!(" (field id {id})"))
                        .unwrap_or_default()
                ));
            }
            sources.push(source);
        }
        Ok(Projection(sources))
    }

    pub(super) fn apply(&self, batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, String> {
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
        for (field, source) in target.fields().iter().zip(&self.0) {
            let col = match source {
                Some(i) => {
                    let col = batch.column(*i);
                    if col.data_type() == field.data_type() {
                        col.clone()
                    } else {
                        cast(col, field.data_type()).map_err(|e| format!("column {}: {e}", field.name()))?
                    }
                }
                None => arrow::array::new_null_array(field.data_type(), batch.num_rows()),
            };
            cols.push(col);
        }
        RecordBatch::try_new_with_options(
            target.clone(),
            cols,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| e.to_string())
    }
}

/// The key column's type must allow bound pruning; other key types read every file.
pub fn prunable(t: ColumnType) -> bool {
    matches!(t, ColumnType::String | ColumnType::Long | ColumnType::Int)
}
