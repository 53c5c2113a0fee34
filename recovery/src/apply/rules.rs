//! How merged rows are laid out: chunks of at most [`MERGE_CHUNK_ROWS`] table rows, files of at
//! most [`ROWS_PER_FILE`] rows, each sorted by key ([`sort_by_key`]).

use arrow::array::{RecordBatch, make_comparator};
use arrow::compute::{SortColumn, concat_batches, interleave_record_batch, lexsort_to_indices, take_record_batch};
use arrow_schema::SortOptions;

use crate::apply::error::ApplyError;
use crate::merge::MergeError;

/// Rows of the table one merge chunk reads at most (about; a chunk never splits a file, nor two
/// files whose key ranges overlap).
pub const MERGE_CHUNK_ROWS: u64 = 1_000_000;

/// Rows per data file written by a merge.
pub const ROWS_PER_FILE: usize = 100_000;

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

/// The kept rows of a rewrite and the merge's upserts as one batch sorted by the column `key`:
/// the same rows as [`sort_by_key`] of both, without sorting what is already in order. The
/// kept rows come out of the merge in the order of their files (each written sorted by key, in
/// key order within a chunk), so when they are in order only the upserts (about a tenth of the
/// rows) are sorted and the two runs merged, with one copy of the rows (`interleave`) instead of
/// a concatenation, a sort of every key and a `take`. Kept rows out of order (files another
/// engine wrote unsorted) take the full sort.
pub(crate) fn merge_sorted_by_key(
    schema: &arrow_schema::SchemaRef,
    kept: &[RecordBatch],
    upserts: &[RecordBatch],
    key: &str,
) -> Result<Vec<RecordBatch>, ApplyError> {
    let err = |e: arrow::error::ArrowError| ApplyError::from(MergeError::Input(e.to_string()));
    let kept: Vec<&RecordBatch> = kept.iter().filter(|b| b.num_rows() > 0).collect();
    let k = schema.index_of(key).map_err(err)?;
    let cmp = |a: &RecordBatch, b: &RecordBatch| {
        make_comparator(a.column(k).as_ref(), b.column(k).as_ref(), SortOptions::default()).map_err(err)
    };
    let mut in_order = true;
    for (i, b) in kept.iter().enumerate() {
        let within = cmp(b, b)?;
        in_order &= (1..b.num_rows()).all(|r| within(r - 1, r).is_le());
        if let Some(next) = kept.get(i + 1) {
            in_order &= cmp(b, next)?(b.num_rows() - 1, 0).is_le();
        }
        if !in_order {
            break;
        }
    }
    if !in_order {
        let all: Vec<RecordBatch> = kept.into_iter().cloned().chain(upserts.iter().cloned()).collect();
        return sort_by_key(schema, &all, key);
    }
    let up = sort_by_key(schema, upserts, key)?;
    let Some(up) = up.first() else {
        return match kept.len() {
            0 => Ok(Vec::new()),
            _ => Ok(vec![concat_batches(schema, kept.iter().copied()).map_err(err)?]),
        };
    };
    // (batch, row) of every row in key order: the kept batches are 0.., the upserts last.
    let u = kept.len();
    let against: Vec<_> = kept.iter().map(|b| cmp(b, up)).collect::<Result<_, _>>()?;
    let total = kept.iter().map(|b| b.num_rows()).sum::<usize>() + up.num_rows();
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(total);
    let mut j = 0;
    for (b, batch) in kept.iter().enumerate() {
        for r in 0..batch.num_rows() {
            while j < up.num_rows() && against[b](r, j).is_gt() {
                order.push((u, j));
                j += 1;
            }
            order.push((b, r));
        }
    }
    order.extend((j..up.num_rows()).map(|j| (u, j)));
    let mut batches = kept;
    batches.push(up);
    Ok(vec![interleave_record_batch(&batches, &order).map_err(err)?])
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema, SchemaRef};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("v", DataType::Int64, false),
        ]))
    }

    fn batch(keys: &[u32]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(StringArray::from_iter_values(keys.iter().map(|k| format!("o-{k:06}")))),
                Arc::new(Int64Array::from_iter_values(keys.iter().map(|k| i64::from(*k) * 7))),
            ],
        )
        .unwrap()
    }

    /// Distinct keys in a scrambled order (a multiplicative step modulo a prime).
    fn scrambled(n: u32, seed: u32) -> Vec<u32> {
        (0..n).map(|i| (i * 7919 + seed) % 10007).collect()
    }

    /// The merge of sorted kept rows with unsorted upserts, and the fallback for kept rows out
    /// of order (within a batch or across two), give exactly the full sort's rows and order.
    #[test]
    fn merging_the_kept_run_with_the_upserts_is_the_full_sort() {
        let s = schema();
        let keys = scrambled(3000, 11);
        let (mut kept, upserts) = (keys[..2600].to_vec(), &keys[2600..]);
        kept.sort_unstable();
        let up = vec![batch(&upserts[..150]), batch(&[]), batch(&upserts[150..])];
        let sorted_runs = vec![batch(&kept[..1000]), batch(&[]), batch(&kept[1000..])];
        let mut swapped = kept.clone();
        swapped.swap(10, 11);
        let across = vec![batch(&kept[1000..]), batch(&kept[..1000])];
        for (what, kept) in [
            ("in order", sorted_runs),
            ("out of order within a batch", vec![batch(&swapped)]),
            ("out of order across batches", across),
            ("no kept rows", vec![]),
        ] {
            let all: Vec<RecordBatch> = kept.iter().chain(&up).cloned().collect();
            let want = sort_by_key(&s, &all, "k").unwrap();
            let got = merge_sorted_by_key(&s, &kept, &up, "k").unwrap();
            assert_eq!(got, want, "{what}");
            let k = got[0].column(0).as_any().downcast_ref::<StringArray>().unwrap();
            assert!((1..k.len()).all(|i| k.value(i - 1) < k.value(i)), "{what}");
        }
        let only_kept = merge_sorted_by_key(&s, &[batch(&kept[..5]), batch(&kept[5..9])], &[], "k").unwrap();
        assert_eq!(only_kept, vec![batch(&kept[..9])]);
    }
}
