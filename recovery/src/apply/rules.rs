//! How merged rows are laid out: chunks of at most [`MERGE_CHUNK_ROWS`] table rows, files of at
//! most [`ROWS_PER_FILE`] rows, each sorted by key ([`sort_by_key`]).

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, concat_batches, lexsort_to_indices, take_record_batch};

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
