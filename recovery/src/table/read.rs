//! Reading a table's rows straight from its data files, each row tagged with the file it lives
//! in (what copy-on-write needs to know), and pruning files by the key column's bounds in the
//! manifests so that a batch of events reads only the files that can hold its keys.
//!
//! Columns are matched by Iceberg field id (`PARQUET:field_id`), as Iceberg readers must: a column
//! renamed by another writer keeps its id, and a column added after a file was written reads as
//! null in that file. The position and equality deletes of other writers are applied to every
//! row read ([`super::deletes::Deletes`]).

use std::collections::BTreeSet;

use arrow::array::RecordBatch;
use arrow_schema::SchemaRef;
use iceberg::spec::{DataFile, PrimitiveLiteral};
use iceberg::table::Table;
use tidemark_journal::spec::ColumnType;

use super::deletes::{Deletes, PositionDeleteCache};
pub use super::deletes::{file_column, file_column_type, read_paths};
use super::error::TableError;
use super::files::snapshot_files;
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
    cache: Option<&PositionDeleteCache>,
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

/// A group's rows in a batch made by [`group_rows`]: `(group, first row, rows)`.
pub type GroupRange = (usize, usize, usize);

/// The rows of `batch` ordered by group, with one `take` (a counting sort of the row numbers),
/// and each non-empty group's [`GroupRange`] in that batch, in group order. `group_of(row)` names
/// each row's group (below `groups`), `None` leaves the row out. A batch whose rows all fall in one
/// group is returned as it is.
pub fn group_rows(
    batch: &RecordBatch,
    groups: usize,
    mut group_of: impl FnMut(usize) -> Option<usize>,
) -> Result<(RecordBatch, Vec<GroupRange>), arrow::error::ArrowError> {
    let of: Vec<Option<usize>> = (0..batch.num_rows()).map(&mut group_of).collect();
    let mut starts = vec![0usize; groups + 1];
    for g in of.iter().flatten() {
        starts[g + 1] += 1;
    }
    for g in 0..groups {
        starts[g + 1] += starts[g];
    }
    let ranges: Vec<GroupRange> = (0..groups)
        .filter(|&g| starts[g + 1] > starts[g])
        .map(|g| (g, starts[g], starts[g + 1] - starts[g]))
        .collect();
    if let [(g, 0, n)] = ranges[..]
        && n == batch.num_rows()
    {
        return Ok((batch.clone(), vec![(g, 0, n)]));
    }
    let mut next = starts;
    let mut order = vec![0u32; next[groups]];
    for (r, g) in of.iter().enumerate() {
        if let Some(g) = *g {
            order[next[g]] = r as u32;
            next[g] += 1;
        }
    }
    let grouped = arrow::compute::take_record_batch(batch, &arrow::array::UInt32Array::from(order))?;
    Ok((grouped, ranges))
}

/// The rows of `batch` by group: `group_of(row)` (below `groups`) names each row's group; the
/// result has one batch per non-empty group, in group order: zero-copy slices of one
/// [`group_rows`] batch (they keep it alive until the last of them is dropped).
pub fn split_rows(
    batch: &RecordBatch,
    groups: usize,
    mut group_of: impl FnMut(usize) -> usize,
) -> Result<Vec<(usize, RecordBatch)>, arrow::error::ArrowError> {
    let (grouped, ranges) = group_rows(batch, groups, |r| Some(group_of(r)))?;
    Ok(ranges
        .into_iter()
        .map(|(g, first, n)| (g, grouped.slice(first, n)))
        .collect())
}

/// The chunk of [`chunk_by_key`] that `key` belongs to.
pub fn chunk_of(cuts: &[Cell], key: &Cell) -> usize {
    cuts.partition_point(|c| c <= key)
}

/// [`chunk_of`] for every row of the key column `col` (of type `t`). String and integer keys are
/// compared in place against the cuts, without a [`Cell`] per row (a string's allocation and the
/// cell's comparison were the most of the spilled replay's single-threaded partition of its
/// events); other types, or cuts of another kind, go through [`cell`](crate::reference::cell).
pub fn key_chunks(cuts: &[Cell], col: &dyn arrow::array::Array, t: ColumnType) -> Vec<usize> {
    use arrow::array::{Array, ArrayAccessor, AsArray};
    fn by<T: PartialOrd + ?Sized>(cuts: &[&T], key: Option<&T>, null: usize) -> usize {
        key.map_or(null, |k| cuts.partition_point(|c| *c <= k))
    }
    fn by_str<'a>(cuts: &[&str], a: impl ArrayAccessor<Item = &'a str>, null: usize) -> Vec<usize> {
        (0..a.len())
            .map(|r| by(cuts, a.is_valid(r).then(|| a.value(r)), null))
            .collect()
    }
    let null = chunk_of(cuts, &Cell::Null);
    let strs: Option<Vec<&str>> = cuts
        .iter()
        .map(|c| match c {
            Cell::Str(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    let rows = 0..col.len();
    match (t, strs) {
        (ColumnType::String, Some(cuts)) => {
            if let Some(a) = col.as_string_opt::<i32>() {
                return by_str(&cuts, a, null);
            }
            if let Some(a) = col.as_string_opt::<i64>() {
                return by_str(&cuts, a, null);
            }
            if let Some(a) = col.as_string_view_opt() {
                return by_str(&cuts, a, null);
            }
        }
        (ColumnType::Long, _) => {
            let longs: Option<Vec<&i64>> = cuts
                .iter()
                .map(|c| match c {
                    Cell::Long(v) => Some(v),
                    _ => None,
                })
                .collect();
            if let (Some(cuts), Some(a)) = (longs, col.as_primitive_opt::<arrow::datatypes::Int64Type>()) {
                return rows
                    .map(|r| by(&cuts, a.is_valid(r).then(|| &a.values()[r]), null))
                    .collect();
            }
        }
        _ => {}
    }
    rows.map(|r| chunk_of(cuts, &crate::reference::cell(col, t, r)))
        .collect()
}

/// The key column's type must allow bound pruning; other key types read every file.
pub fn prunable(t: ColumnType) -> bool {
    matches!(t, ColumnType::String | ColumnType::Long | ColumnType::Int)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn numbers(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..n))]).unwrap()
    }

    fn values(b: &RecordBatch) -> Vec<i64> {
        b.column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn split_rows_keeps_every_row_once_in_its_group_and_row_order() {
        let b = numbers(100);
        let parts = split_rows(&b, 7, |r| (r * r) % 7).unwrap();
        let mut seen = Vec::new();
        for (g, part) in &parts {
            let v = values(part);
            assert!(v.iter().all(|&x| (x * x) as usize % 7 == *g), "group {g}: {v:?}");
            assert!(v.windows(2).all(|w| w[0] < w[1]), "row order kept in group {g}");
            seen.extend(v);
        }
        // Squares mod 7 are 0, 1, 2, 4 only: no empty group is returned.
        assert_eq!(parts.iter().map(|(g, _)| *g).collect::<Vec<_>>(), [0, 1, 2, 4]);
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn group_rows_leaves_out_unnamed_rows_and_takes_a_single_group_batch_as_it_is() {
        let b = numbers(10);
        let (grouped, ranges) = group_rows(&b, 3, |r| (r % 2 == 0).then_some(r % 3)).unwrap();
        assert_eq!(values(&grouped), [0, 6, 4, 2, 8]);
        assert_eq!(ranges, [(0, 0, 2), (1, 2, 1), (2, 3, 2)]);
        let (same, ranges) = group_rows(&b, 3, |_| Some(2)).unwrap();
        assert_eq!(ranges, [(2, 0, 10)]);
        assert_eq!(
            same.column(0).to_data().buffers()[0].as_ptr(),
            b.column(0).to_data().buffers()[0].as_ptr()
        );
        let (none, ranges) = group_rows(&b, 3, |_| None).unwrap();
        assert_eq!((none.num_rows(), ranges.len()), (0, 0));
    }

    #[test]
    fn key_chunks_agree_with_a_cell_per_row_for_every_string_array_and_long_keys() {
        use arrow::array::{ArrayRef, Int32Array, LargeStringArray, StringArray, StringViewArray};

        use crate::reference::cell;
        let keys = [
            Some("a"),
            Some("k"),
            None,
            Some("k0"),
            Some("z"),
            Some("m"),
            Some(""),
            Some("q"),
        ];
        let cuts = |v: &[&str]| v.iter().map(|s| Cell::Str(s.to_string())).collect::<Vec<_>>();
        let per_row = |cuts: &[Cell], col: &dyn Array, t| {
            (0..col.len())
                .map(|r| chunk_of(cuts, &cell(col, t, r)))
                .collect::<Vec<_>>()
        };
        let columns: [ArrayRef; 3] = [
            Arc::new(StringArray::from(keys.to_vec())),
            Arc::new(LargeStringArray::from(keys.to_vec())),
            Arc::new(StringViewArray::from(keys.to_vec())),
        ];
        // A key equal to a cut belongs to the chunk after it; a null key sorts first.
        for cuts in [
            cuts(&["k", "q"]),
            cuts(&[]),
            cuts(&["", "k0", "zz"]),
            vec![Cell::Null, Cell::Str("m".into())],
        ] {
            for col in &columns {
                let got = key_chunks(&cuts, col.as_ref(), ColumnType::String);
                assert_eq!(
                    got,
                    per_row(&cuts, col.as_ref(), ColumnType::String),
                    "{:?} {cuts:?}",
                    col.data_type()
                );
            }
        }
        assert_eq!(
            key_chunks(&cuts(&["k", "q"]), columns[0].as_ref(), ColumnType::String),
            [0, 1, 0, 1, 2, 1, 0, 2]
        );
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![Some(5), None, Some(-3), Some(10), Some(11)]));
        let long_cuts = vec![Cell::Long(0), Cell::Long(10)];
        assert_eq!(
            key_chunks(&long_cuts, longs.as_ref(), ColumnType::Long),
            [1, 0, 0, 2, 2]
        );
        assert_eq!(
            key_chunks(&long_cuts, longs.as_ref(), ColumnType::Long),
            per_row(&long_cuts, longs.as_ref(), ColumnType::Long)
        );
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 7, 3]));
        let int_cuts = vec![Cell::Int(3)];
        assert_eq!(key_chunks(&int_cuts, ints.as_ref(), ColumnType::Int), [0, 1, 1]);
    }
}
