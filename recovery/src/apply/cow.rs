//! Copy-on-write: the files holding a replaced key rewritten with the merge's rows, in key-range
//! chunks ([`copy_on_write`] for events in memory; [`crate::apply::spill`] for spilled events
//! uses the same pieces: [`Merged`], [`write_files`], [`UnitFiles`]).

use std::sync::Arc;

use arrow::array::RecordBatch;
use iceberg::spec::DataFile;
use iceberg::table::Table;

use crate::apply::chunks::{chunk_rows_for, discard, discard_failed, in_order, limit, partitions_each};
use crate::apply::error::ApplyError;
use crate::apply::input::UnitInput;
use crate::apply::mor::{PhaseTimes, WriteStats};
use crate::apply::rules::{ROWS_PER_FILE, merge_sorted_by_key};
use crate::ids::Ids;
use crate::merge::{self, MergeError, MergeStats};
use crate::table::read::{chunk_by_key, key_chunks, read_files, split_rows};
use crate::table::write_data_file;

/// A unit's changes, written but not committed.
pub(crate) struct UnitFiles {
    pub(crate) removed: Vec<String>,
    pub(crate) added: Vec<DataFile>,
    pub(crate) deletes: Vec<DataFile>,
    pub(crate) stats: MergeStats,
    pub(crate) writes: WriteStats,
    pub(crate) times: PhaseTimes,
}

impl UnitFiles {
    /// A copy-on-write unit's files: `removed` rewritten into `added`, no delete files.
    pub(crate) fn copy_on_write(removed: Vec<String>, added: Vec<DataFile>, stats: MergeStats) -> Self {
        let mut writes = WriteStats {
            data_files_removed: removed.len() as u64,
            ..Default::default()
        };
        writes.count_data(&added);
        UnitFiles {
            removed,
            added,
            deletes: Vec::new(),
            stats,
            writes,
            times: PhaseTimes::default(),
        }
    }
}

/// The copy-on-write unit: every candidate file holding a replaced key is rewritten.
pub(crate) async fn copy_on_write(
    input: UnitInput<'_>,
    events: &[RecordBatch],
    candidates: &[&DataFile],
    chunk_rows: u64,
) -> Result<UnitFiles, ApplyError> {
    let (table, spec, schema, cur_schema) = (input.table, input.spec, input.schema, input.cur_schema);
    let (key_field_id, deletes, ids) = (input.key_field_id, input.deletes, input.ids);
    // Key-range chunks of the candidate files, each merged on its own with the events of its
    // range, so that memory follows the chunk size rather than the table (or unit) size; two
    // chunks at a time ([`crate::apply::chunks`]).
    let (chunks, cuts) = chunk_by_key(candidates, key_field_id, chunk_rows_for(candidates, chunk_rows));
    let chunk_events = split_by_chunk(spec, events, &cuts, chunks.len())?;
    let work: Vec<(Vec<DataFile>, Vec<RecordBatch>)> = chunks
        .iter()
        .zip(chunk_events)
        .filter(|(_, events)| !events.is_empty())
        .map(|(chunk, events)| (chunk.iter().map(|f| (*f).clone()).collect(), events))
        .collect();
    let spec = Arc::new(spec.clone());
    let mut stats = MergeStats::default();
    let mut removed = Vec::new();
    let partitions = partitions_each(work.len());
    let added = in_order(
        work,
        limit(),
        |(chunk, events)| {
            let (table, spec, schema, cur_schema, deletes) = (
                table.clone(),
                spec.clone(),
                schema.clone(),
                cur_schema.clone(),
                deletes.clone(),
            );
            async move {
                // Live rows only: the deletes of other writers are applied, so that a rewrite
                // carries exactly the rows readers see into its new files.
                let chunk: Vec<&DataFile> = chunk.iter().collect();
                let current = read_files(&table, &chunk, &schema, Some(&cur_schema), &deletes).await?;
                let out = merge::merge_in(&spec, current, cur_schema, events, schema.clone(), partitions).await?;
                Merged::of(&schema, &spec, out)
            }
        },
        |m: Merged| {
            stats.add(&m.stats);
            removed.extend(m.files_to_rewrite);
            Ok(write_files(table, m.sorted, ids))
        },
    )
    .await;
    // A chunk that failed (a conflict in a later chunk): the earlier chunks' files go.
    let added = match added {
        Ok(added) => added,
        Err(failed) => return Err(discard_failed(table, failed, Vec::new()).await),
    };
    Ok(UnitFiles::copy_on_write(
        removed,
        added.into_iter().flatten().collect(),
        stats,
    ))
}

/// What the merge of one chunk decided, its rows sorted by key and not yet written.
#[derive(Default)]
pub(crate) struct Merged {
    pub(crate) stats: MergeStats,
    pub(crate) files_to_rewrite: Vec<String>,
    pub(crate) sorted: Vec<RecordBatch>,
}

impl Merged {
    /// The merge's kept rows and upserts, sorted by key.
    pub(crate) fn of(
        schema: &arrow_schema::SchemaRef,
        spec: &tidemark_journal::spec::CompiledSpec,
        out: merge::MergeOutput,
    ) -> Result<Merged, ApplyError> {
        Ok(Merged {
            stats: out.stats,
            files_to_rewrite: out.files_to_rewrite,
            sorted: merge_sorted_by_key(schema, &out.kept_rows, &out.upserts, &spec.spec.key_column)?,
        })
    }
}

/// The write of `sorted` (rows sorted by key) in files of at most [`ROWS_PER_FILE`] rows: each
/// covers a narrow key range, so the next batch's key bounds prune most of them and a rewrite
/// touches only what it must. The files' ids are drawn
/// now, in order (before the returned write runs), so that the write can run on a task of its
/// own and deterministic ids still name the files as a sequential write would.
pub(crate) fn write_files(
    table: &Table,
    sorted: Vec<RecordBatch>,
    ids: &dyn Ids,
) -> impl std::future::Future<Output = Result<Vec<DataFile>, ApplyError>> + Send + 'static {
    let mut files = Vec::new();
    for batch in &sorted {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = ROWS_PER_FILE.min(batch.num_rows() - offset);
            files.push((batch.slice(offset, len), ids.uuid()));
            offset += len;
        }
    }
    let table = table.clone();
    async move {
        let mut added = Vec::new();
        for (batch, id) in files {
            match write_data_file(&table, &[batch], id).await {
                Ok(f) => added.extend(f),
                // The files written before the failed one are in no snapshot either.
                Err(e) => return Err(discard(&table, e.into(), added).await),
            }
        }
        Ok(added)
    }
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
        let of = key_chunks(cuts, b.column(spec.event_column(spec.key_index)).as_ref(), key_t);
        let parts = split_rows(b, chunks, |r| of[r]).map_err(|e| MergeError::Input(e.to_string()))?;
        for (c, part) in parts {
            out[c].push(part);
        }
    }
    Ok(out)
}
