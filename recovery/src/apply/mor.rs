//! The applier's merge-on-read unit ([`MergeMode::MergeOnRead`]): the same versioned merge as
//! copy-on-write ([`crate::merge`]), fed with only the live table rows that hold a key of the
//! unit ([`locate_rows`]), whose output is written as new data files (the winning versions,
//! inserts, updates and tombstones alike) plus one position delete file for the table rows they
//! replace. No existing data file is rewritten; `tidemark table compact` ([`crate::apply::compact`])
//! folds the deletes back into the data files.

use std::collections::HashSet;

use arrow::array::{AsArray, RecordBatch};
use arrow::row::{RowConverter, SortField};
use arrow_schema::SchemaRef;
use iceberg::spec::DataFile;

use crate::apply::chunks::discard;
use crate::apply::error::ApplyError;
use crate::apply::input::UnitInput;
use crate::apply::rules::{ROWS_PER_FILE, sort_by_key};
use crate::merge::{self, MergeError, MergeStats};
use crate::table::key_index::KeyIndex;
use crate::table::mor::{Versions, concat_column, locate_rows, write_position_deletes};
use crate::table::write_data_file;

pub use crate::table::mor::MergeMode;

/// What the applier's commits wrote and read to find rows: write amplification is
/// `(data_bytes_written + delete_bytes_written) / events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct WriteStats {
    pub data_files_written: u64,
    pub data_bytes_written: u64,
    pub rows_written: u64,
    /// Data files a commit removed (copy-on-write rewrites, compaction).
    pub data_files_removed: u64,
    pub delete_files_written: u64,
    pub delete_bytes_written: u64,
    pub position_deletes_written: u64,
    /// Key-column rows decoded to find the rows a merge-on-read unit replaces.
    pub keys_scanned: u64,
    /// Of the rows found, those read in full, and those older than every event of their key,
    /// which need only their key and version (`table::mor`).
    pub rows_read_in_full: u64,
    pub rows_known_by_version: u64,
}

impl WriteStats {
    pub fn add(&mut self, o: &WriteStats) {
        self.data_files_written += o.data_files_written;
        self.data_bytes_written += o.data_bytes_written;
        self.rows_written += o.rows_written;
        self.data_files_removed += o.data_files_removed;
        self.delete_files_written += o.delete_files_written;
        self.delete_bytes_written += o.delete_bytes_written;
        self.position_deletes_written += o.position_deletes_written;
        self.keys_scanned += o.keys_scanned;
        self.rows_read_in_full += o.rows_read_in_full;
        self.rows_known_by_version += o.rows_known_by_version;
    }

    pub fn count_data(&mut self, files: &[DataFile]) {
        for f in files {
            self.data_files_written += 1;
            self.data_bytes_written += f.file_size_in_bytes();
            self.rows_written += f.record_count();
        }
    }

    pub fn bytes_written(&self) -> u64 {
        self.data_bytes_written + self.delete_bytes_written
    }
}

/// Where the applier's time went, summed over its units, in microseconds (`apply --json`,
/// the suite's applier runs): what a commit's fixed cost is made of.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PhaseTimes {
    /// Verifying the journal chain from the applied point (once per run).
    pub verify_us: u64,
    /// Reading and decoding the units' events.
    pub read_events_us: u64,
    /// Reading the snapshot's manifests and position deletes (each unit).
    pub table_files_us: u64,
    /// Merge-on-read: finding the rows the events replace (the first unit also builds the key
    /// index).
    pub locate_us: u64,
    /// The merge (copy-on-write: reading, merging and writing the key-range chunks).
    pub merge_us: u64,
    /// Merge-on-read: writing the data files and the position delete file.
    pub write_us: u64,
    /// The catalog commit (manifests, manifest list, metadata, the swap).
    pub commit_us: u64,
    /// Writing the checkpoints.
    pub checkpoint_us: u64,
}

impl PhaseTimes {
    pub fn add(&mut self, o: &PhaseTimes) {
        self.verify_us += o.verify_us;
        self.read_events_us += o.read_events_us;
        self.table_files_us += o.table_files_us;
        self.locate_us += o.locate_us;
        self.merge_us += o.merge_us;
        self.write_us += o.write_us;
        self.commit_us += o.commit_us;
        self.checkpoint_us += o.checkpoint_us;
    }
}

/// Microseconds since `t`.
pub(crate) fn micros(t: std::time::Instant) -> u64 {
    t.elapsed().as_micros() as u64
}

/// A merge-on-read unit's files, not yet committed.
pub struct MorUnit {
    pub added: Vec<DataFile>,
    pub deletes: Vec<DataFile>,
    pub stats: MergeStats,
    pub writes: WriteStats,
    /// Its locate, merge and write times.
    pub times: PhaseTimes,
}

/// Merges `events` into the rows of `candidates` (the live data files that may hold their keys,
/// `deletes` the table's deletes) and writes the result merge-on-read.
pub(crate) async fn merge_on_read(
    input: UnitInput<'_>,
    events: &[RecordBatch],
    candidates: &[&DataFile],
    index: &mut KeyIndex,
) -> Result<MorUnit, ApplyError> {
    let (table, spec, schema, cur_schema) = (input.table, input.spec, input.schema, input.cur_schema);
    let (key_field_id, deletes, ids) = (input.key_field_id, input.deletes, input.ids);
    let key_index = schema
        .index_of(&spec.spec.key_column)
        .map_err(|e| MergeError::Input(e.to_string()))?;
    let key_type = schema.field(key_index).data_type().clone();
    let event_keys = concat_column(events, spec.event_column(spec.key_index), &key_type).map_err(MergeError::Input)?;
    // A table without columns of its own (every column is an event's): rows older than every
    // event of their key need no full read (see `table::mor`). Those rows have nulls, so the
    // merge's view of the table rows allows them.
    let own_columns = schema
        .fields()
        .iter()
        .any(|f| spec.event_schema.index_of(f.name()).is_err());
    let version_field_id = schema
        .field_with_name(&spec.spec.version_column)
        .ok()
        .and_then(crate::table::files::field_id);
    let event_versions = concat_column(
        events,
        spec.event_column(spec.version_index),
        &arrow_schema::DataType::Int64,
    )
    .map_err(MergeError::Input)?;
    let mut times = PhaseTimes::default();
    let t = std::time::Instant::now();
    let (versions, cur_schema) = match version_field_id {
        Some(field_id) if !own_columns => (
            Some(Versions {
                field_id,
                versions: &event_versions,
            }),
            nullable(cur_schema),
        ),
        _ => (None, cur_schema.clone()),
    };
    let located = locate_rows(
        table,
        candidates,
        schema,
        &cur_schema,
        key_field_id,
        &event_keys,
        versions,
        deletes,
        index,
    )
    .await?;
    times.locate_us = micros(t);
    let t = std::time::Instant::now();
    let cur_schema = &cur_schema;
    // The key column of each located batch (shared, not copied), to match the upserts against.
    let located_keys: Vec<arrow::array::ArrayRef> = located.rows.iter().map(|b| b.column(key_index).clone()).collect();
    let out = merge::merge(spec, located.rows, cur_schema.clone(), events.to_vec(), schema.clone()).await?;
    let mut stats = out.stats;
    stats.files_rewritten = 0;
    stats.rows_kept = 0;
    let mut writes = WriteStats {
        keys_scanned: located.keys_scanned,
        rows_read_in_full: located.rows_read,
        rows_known_by_version: located.stubs,
        ..Default::default()
    };
    // The table rows the upserts replace: those of `located` whose key has an upsert.
    let converter =
        RowConverter::new(vec![SortField::new(key_type.clone())]).map_err(|e| MergeError::Input(e.to_string()))?;
    let upsert_keys = concat_column(&out.upserts, key_index, &key_type).map_err(MergeError::Input)?;
    let upsert_rows = converter
        .convert_columns(&[upsert_keys])
        .map_err(|e| MergeError::Input(e.to_string()))?;
    let replaced: HashSet<&[u8]> = upsert_rows.iter().map(|r| r.data()).collect();
    let mut dead = Vec::new();
    let mut at = 0usize;
    for keys in &located_keys {
        let rows = converter
            .convert_columns(std::slice::from_ref(keys))
            .map_err(|e| MergeError::Input(e.to_string()))?;
        for (r, row) in rows.iter().enumerate() {
            if replaced.contains(row.data()) {
                dead.push(located.positions[at + r].clone());
            }
        }
        at += keys.len();
    }
    times.merge_us = micros(t);
    let t = std::time::Instant::now();
    let version_index = (!own_columns)
        .then(|| schema.index_of(&spec.spec.version_column).ok())
        .flatten();
    let mut added = Vec::new();
    for batch in &sort_by_key(schema, &out.upserts, &spec.spec.key_column)? {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = ROWS_PER_FILE.min(batch.num_rows() - offset);
            let slice = batch.slice(offset, len);
            let files = match write_data_file(table, std::slice::from_ref(&slice), ids.uuid()).await {
                Ok(files) => files,
                Err(e) => return Err(discard(table, e.into(), added).await),
            };
            // The file's keys and versions are known: the next unit need not scan it.
            if let [file] = files.as_slice()
                && file.record_count() == len as u64
            {
                let keys = converter
                    .convert_columns(&[slice.column(key_index).clone()])
                    .map_err(|e| MergeError::Input(e.to_string()))?;
                let versions = match version_index {
                    Some(v) => Some(
                        arrow::compute::cast(slice.column(v), &arrow_schema::DataType::Int64)
                            .map_err(|e| MergeError::Input(e.to_string()))?
                            .as_primitive::<arrow::datatypes::Int64Type>()
                            .values()
                            .to_vec(),
                    ),
                    None => None,
                };
                index.insert(file.file_path(), keys, versions);
            }
            added.extend(files);
            offset += len;
        }
    }
    writes.count_data(&added);
    writes.position_deletes_written = dead.len() as u64;
    let deletes: Vec<DataFile> = match write_position_deletes(table, dead, ids.uuid()).await {
        Ok(d) => d.into_iter().collect(),
        Err(e) => return Err(discard(table, e.into(), added).await),
    };
    for d in &deletes {
        writes.delete_files_written += 1;
        writes.delete_bytes_written += d.file_size_in_bytes();
    }
    times.write_us = micros(t);
    Ok(MorUnit {
        added,
        deletes,
        stats,
        writes,
        times,
    })
}

/// `schema` with every field nullable.
fn nullable(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<arrow_schema::Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    std::sync::Arc::new(arrow_schema::Schema::new(fields))
}
