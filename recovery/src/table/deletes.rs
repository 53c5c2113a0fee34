//! Other writers' deletes (position and equality deletes, merge-on-read): read from their files
//! ([`Deletes::load`]) and applied to every row read from a data file ([`read_paths`], the one
//! Parquet read of the crate's table files: columns matched by field id, see [`Projection`]).
//!
//! Iceberg's rules (format v2), which every read in tidemark follows:
//! - a position delete (file path, row position) applies to the data file of that path when the
//!   delete's data sequence number is >= the data file's;
//! - an equality delete (values of its `equality_ids` columns) applies to a data file whose data
//!   sequence number is strictly lower than the delete's and, for a delete of a partitioned spec,
//!   that has the same spec and partition values (a delete of an unpartitioned spec applies to
//!   every file).
//!
//! A rewrite carries the live rows (deletes applied) into new files under a newer sequence number,
//! where the old deletes no longer apply; [`still_applies`] says which delete files the remaining
//! data files still need, so that a commit can drop the others.
//!
//! Deletes and the Parquet read are one module because each uses the other: a delete file is
//! itself read with [`read_paths`] (with no deletes), and [`read_paths`] applies the deletes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::row::{RowConverter, SortField};
use arrow_schema::{Field, Schema as ArrowSchema, SchemaRef};
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, PrimitiveLiteral, Struct};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::error::{TableError, iceberg_err};
use super::files::{LiveFile, POS_DELETE_PATH_ID, POS_DELETE_POS_ID, SnapshotFiles, field_id};

/// The rows a data file loses to deletes: positions per data file, equality keys per delete file.
/// Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Deletes(Arc<DeletesInner>);

#[derive(Debug, Default)]
struct DeletesInner {
    /// Data sequence number, partition spec and partition values per readable data file path.
    data_files: HashMap<String, (i64, i32, Struct)>,
    /// Readable data file path → (delete sequence number, deleted row positions).
    positions: HashMap<String, Vec<(i64, HashSet<u64>)>>,
    equality: Vec<EqualityDelete>,
}

struct EqualityDelete {
    sequence: i64,
    /// The partition it applies to: `None` for a delete of an unpartitioned spec (every file).
    partition: Option<(i32, Struct)>,
    field_ids: Vec<i32>,
    converter: RowConverter,
    keys: HashSet<Box<[u8]>>,
}

impl std::fmt::Debug for EqualityDelete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EqualityDelete")
            .field("sequence", &self.sequence)
            .field("field_ids", &self.field_ids)
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl Deletes {
    /// No deletes at all (every row of every file is live).
    pub fn none() -> Self {
        Deletes::default()
    }

    pub fn is_empty(&self) -> bool {
        self.0.positions.is_empty() && self.0.equality.is_empty()
    }

    /// The field ids equality deletes compare (a read that applies them must include them).
    pub fn equality_field_ids(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .0
            .equality
            .iter()
            .flat_map(|e| e.field_ids.iter().copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Row positions removed by position deletes, over every data file.
    pub fn position_count(&self) -> u64 {
        self.0
            .positions
            .values()
            .flat_map(|lists| lists.iter().map(|(_, p)| p.len() as u64))
            .sum()
    }

    /// Whether a position delete removes row `pos` of the data file at `path`.
    pub fn is_position_deleted(&self, path: &str, pos: u64) -> bool {
        let Some((sequence, _, _)) = self.0.data_files.get(path) else {
            return false;
        };
        self.0
            .positions
            .get(path)
            .is_some_and(|lists| lists.iter().any(|(s, p)| s >= sequence && p.contains(&pos)))
    }

    /// Positions of the data file at `path` that position deletes remove.
    pub fn deleted_positions(&self, path: &str) -> u64 {
        self.deleted_set(path).len() as u64
    }

    /// The positions of the data file at `path` that position deletes remove.
    pub fn deleted_set(&self, path: &str) -> HashSet<u64> {
        let Some((sequence, _, _)) = self.0.data_files.get(path) else {
            return HashSet::new();
        };
        let mut all: HashSet<u64> = HashSet::new();
        for (_, p) in self
            .0
            .positions
            .get(path)
            .into_iter()
            .flatten()
            .filter(|(s, _)| s >= sequence)
        {
            all.extend(p);
        }
        all
    }

    /// Reads every delete file of `files` (`schema` is the table's Arrow schema with field ids,
    /// which gives the types of equality columns; `map` turns a path recorded in a position
    /// delete file into the readable one).
    pub async fn load(
        io: &FileIO,
        name: &str,
        files: &SnapshotFiles,
        schema: &SchemaRef,
        map: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<Self, TableError> {
        Self::load_cached(io, name, files, schema, map, None).await
    }

    /// [`Deletes::load`], taking the rows of position delete files read before from `cache`
    /// (and leaving there those of `files` only).
    pub async fn load_cached(
        io: &FileIO,
        name: &str,
        files: &SnapshotFiles,
        schema: &SchemaRef,
        map: &(dyn Fn(&str) -> String + Sync),
        cache: Option<&PositionDeleteCache>,
    ) -> Result<Self, TableError> {
        if let Some(c) = cache {
            let live: HashSet<&str> = files.deletes.iter().map(|d| d.path.as_str()).collect();
            c.lock().retain(|path, _| live.contains(path.as_str()));
        }
        let mut inner = DeletesInner {
            data_files: files
                .data
                .iter()
                .map(|f| (f.path.clone(), (f.sequence, f.spec_id, f.file.partition().clone())))
                .collect(),
            ..Default::default()
        };
        let bad = |path: &str, detail: String| TableError::BatchSchema {
            table: name.to_string(),
            detail: format!("delete file {path}: {detail}"),
        };
        for del in &files.deletes {
            match del.file.content_type() {
                DataContentType::PositionDeletes => {
                    let cached = cache.and_then(|c| c.lock().get(&del.path).cloned());
                    let runs = match cached {
                        Some(runs) => runs,
                        None => {
                            let runs = Arc::new(read_position_runs(io, name, &del.path, map).await?);
                            if let Some(c) = cache {
                                c.lock().insert(del.path.clone(), runs.clone());
                            }
                            runs
                        }
                    };
                    for (readable, positions) in runs.iter() {
                        let list = inner.positions.entry(readable.clone()).or_default();
                        if list.last().is_none_or(|(s, _)| *s != del.sequence) {
                            list.push((del.sequence, HashSet::new()));
                        }
                        list.last_mut().expect("pushed").1.extend(positions.iter().copied());
                    }
                }
                DataContentType::EqualityDeletes => {
                    let ids = del.file.equality_ids().unwrap_or_default();
                    if ids.is_empty() {
                        return Err(bad(&del.path, "an equality delete file without equality ids".into()));
                    }
                    let mut fields = Vec::with_capacity(ids.len());
                    for id in &ids {
                        let f = schema
                            .fields()
                            .iter()
                            .find(|f| field_id(f) == Some(*id))
                            .ok_or_else(|| {
                                bad(&del.path, format!("equality field id {id} is not in the table schema"))
                            })?;
                        fields.push(f.as_ref().clone().with_nullable(true));
                    }
                    let target = Arc::new(ArrowSchema::new(fields.clone()));
                    let converter =
                        RowConverter::new(fields.iter().map(|f| SortField::new(f.data_type().clone())).collect())
                            .map_err(|e| bad(&del.path, e.to_string()))?;
                    let mut keys = HashSet::new();
                    for b in read_paths(io, name, &[del.path.as_str()], &target, None, &Deletes::none()).await? {
                        let rows = converter
                            .convert_columns(b.columns())
                            .map_err(|e| bad(&del.path, e.to_string()))?;
                        keys.extend(rows.iter().map(|r| Box::<[u8]>::from(r.as_ref())));
                    }
                    let partition = del.file.partition();
                    inner.equality.push(EqualityDelete {
                        sequence: del.sequence,
                        partition: (!partition.fields().is_empty()).then(|| (del.spec_id, partition.clone())),
                        field_ids: ids,
                        converter,
                        keys,
                    });
                }
                DataContentType::Data => {}
            }
        }
        Ok(Deletes(Arc::new(inner)))
    }

    /// The rows of `batch` (rows `offset..` of the data file at `path`, in the table's Arrow
    /// schema) that no delete removes.
    pub fn filter(&self, path: &str, offset: u64, batch: RecordBatch) -> Result<RecordBatch, String> {
        if self.is_empty() {
            return Ok(batch);
        }
        let Some((sequence, spec_id, partition)) = self.0.data_files.get(path) else {
            // A file outside the snapshot the deletes were loaded for (a file just written).
            return Ok(batch);
        };
        let mut keep = vec![true; batch.num_rows()];
        if let Some(lists) = self.0.positions.get(path) {
            for (_, positions) in lists.iter().filter(|(s, _)| s >= sequence) {
                for (r, k) in keep.iter_mut().enumerate() {
                    if positions.contains(&(offset + r as u64)) {
                        *k = false;
                    }
                }
            }
        }
        let applies = |e: &&EqualityDelete| {
            e.sequence > *sequence && e.partition.as_ref().is_none_or(|(s, p)| s == spec_id && p == partition)
        };
        for eq in self.0.equality.iter().filter(applies) {
            let schema = batch.schema();
            let cols = eq
                .field_ids
                .iter()
                .map(|id| {
                    let i = schema
                        .fields()
                        .iter()
                        .position(|f| field_id(f) == Some(*id))
                        .ok_or_else(|| format!("the rows read lack the equality field id {id}"))?;
                    Ok(batch.column(i).clone())
                })
                .collect::<Result<Vec<_>, String>>()?;
            let rows = eq.converter.convert_columns(&cols).map_err(|e| e.to_string())?;
            for (r, k) in keep.iter_mut().enumerate() {
                if *k && eq.keys.contains(rows.row(r).as_ref()) {
                    *k = false;
                }
            }
        }
        if keep.iter().all(|k| *k) {
            return Ok(batch);
        }
        arrow::compute::filter_record_batch(&batch, &BooleanArray::from(keep)).map_err(|e| e.to_string())
    }
}

/// The rows of position delete files, by the delete file's path: (readable data file path, its
/// positions) for each run of rows naming one data file. A delete file never changes once
/// written, so a long-running reader (the applier, unit after unit) reads each one once.
#[derive(Debug, Default)]
pub struct PositionDeleteCache(std::sync::Mutex<HashMap<String, Arc<PositionRuns>>>);

type PositionRuns = Vec<(String, Vec<u64>)>;

impl PositionDeleteCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<PositionRuns>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delete files held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The rows of the position delete file at `path`, in runs of one data file each (`map` turns
/// a recorded data file path into the readable one).
async fn read_position_runs(
    io: &FileIO,
    name: &str,
    path: &str,
    map: &(dyn Fn(&str) -> String + Sync),
) -> Result<PositionRuns, TableError> {
    let target = Arc::new(ArrowSchema::new(vec![
        with_id(
            Field::new("file_path", arrow_schema::DataType::Utf8, false),
            POS_DELETE_PATH_ID,
        ),
        with_id(
            Field::new("pos", arrow_schema::DataType::Int64, false),
            POS_DELETE_POS_ID,
        ),
    ]));
    let mut runs: PositionRuns = Vec::new();
    // Consecutive rows name the same file (the spec sorts by path): map once per run.
    let mut last_recorded: Option<String> = None;
    for b in read_paths(io, name, &[path], &target, None, &Deletes::none()).await? {
        let paths = b.column(0).as_string::<i32>();
        let pos = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
        for r in 0..b.num_rows() {
            let recorded = paths.value(r);
            if last_recorded.as_deref() != Some(recorded) {
                runs.push((map(recorded), Vec::new()));
                last_recorded = Some(recorded.to_string());
            }
            runs.last_mut().expect("pushed").1.push(pos.value(r) as u64);
        }
    }
    Ok(runs)
}

fn with_id(field: Field, id: i32) -> Field {
    field.with_metadata(HashMap::from([(
        parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
        id.to_string(),
    )]))
}

/// Whether the delete file `del` may still remove a row of one of `data` (the data files live
/// after a commit, with their data sequence numbers). Conservative: `true` unless it provably
/// cannot (an equality delete older than or as old as every data file; a position delete whose
/// referenced paths — from `referenced_data_file`, else `read` (the paths its `file_path` column
/// holds, [`position_paths_to_read`]), else its `file_path` bounds — name no data file at or
/// below its sequence number).
pub fn still_applies(del: &LiveFile, data: &[(&str, i64)], read: Option<&HashSet<String>>) -> bool {
    match del.file.content_type() {
        DataContentType::EqualityDeletes => data.iter().any(|(_, seq)| *seq < del.sequence),
        DataContentType::PositionDeletes => {
            let mut older = data.iter().filter(|(_, seq)| *seq <= del.sequence);
            if let Some(referenced) = del.file.referenced_data_file() {
                return older.any(|(p, _)| *p == referenced);
            }
            if let Some(paths) = read {
                return older.any(|(p, _)| paths.contains(*p));
            }
            match path_bounds(del) {
                // Bounds of strings may be truncated prefixes: a lower bound <= every path in
                // the file; an upper bound is rounded up. Paths in [lo, hi] may be referenced.
                Some((lo, hi)) => older.any(|(p, _)| *p >= lo.as_str() && *p <= hi.as_str()),
                None => true,
            }
        }
        DataContentType::Data => false,
    }
}

/// The `file_path` bounds of a position delete file, when its metadata has both.
fn path_bounds(del: &LiveFile) -> Option<(String, String)> {
    let bound = |m: &HashMap<i32, iceberg::spec::Datum>| match m.get(&POS_DELETE_PATH_ID).map(|d| d.literal()) {
        Some(PrimitiveLiteral::String(s)) => Some(s.clone()),
        _ => None,
    };
    Some((bound(del.file.lower_bounds())?, bound(del.file.upper_bounds())?))
}

/// For each position delete file of `deletes` that [`still_applies`] cannot settle from its
/// metadata, the data file paths its `file_path` column holds (the file is read), so that a
/// spent one is told and dropped. Such a file names no data file, and either has no
/// `file_path` bounds, or its bounds span both a data file of `data` (the files live after the
/// commit, with their data sequence numbers) and one of `removed` (those the commit removes) at
/// or below its sequence number: a commit that removes nothing in its bounds cannot have spent
/// it, and is not slowed by reading it.
pub async fn position_paths_to_read(
    io: &FileIO,
    name: &str,
    deletes: &[LiveFile],
    data: &[(&str, i64)],
    removed: &[(&str, i64)],
) -> Result<HashMap<String, HashSet<String>>, TableError> {
    let target = Arc::new(ArrowSchema::new(vec![with_id(
        Field::new("file_path", arrow_schema::DataType::Utf8, false),
        POS_DELETE_PATH_ID,
    )]));
    let mut out = HashMap::new();
    let unsettled = |d: &LiveFile| {
        d.file.content_type() == DataContentType::PositionDeletes
            && d.file.referenced_data_file().is_none()
            && (path_bounds(d).is_none() || (still_applies(d, data, None) && still_applies(d, removed, None)))
    };
    for del in deletes.iter().filter(|d| unsettled(d)) {
        let mut paths = HashSet::new();
        for b in read_paths(io, name, &[del.path.as_str()], &target, None, &Deletes::none()).await? {
            let column = b.column(0).as_string::<i32>();
            paths.extend(column.iter().flatten().map(str::to_string));
        }
        out.insert(del.file.file_path().to_string(), paths);
    }
    Ok(out)
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
                    cols.push(file_column(path, live.num_rows()));
                    s.clone()
                }
                None => target,
            };
            out.push(RecordBatch::try_new(target, cols).map_err(|e| bad(path, &e))?);
        }
    }
    Ok(out)
}

/// The type of the column naming each row's data file (`with_file` of [`read_paths`]): a
/// dictionary, so that the path is held once per batch rather than once per row (a 1M-row
/// chunk's paths as plain strings were about 130 MB, written, zeroed and compared: a fifth of a
/// 1M-row recovery's CPU, docs/runs/issue-33.md, "Fresh memory").
pub fn file_column_type() -> arrow_schema::DataType {
    arrow_schema::DataType::Dictionary(
        Box::new(arrow_schema::DataType::Int32),
        Box::new(arrow_schema::DataType::Utf8),
    )
}

/// The file column ([`file_column_type`]) of `rows` rows of the file at `path`.
pub fn file_column(path: &str, rows: usize) -> ArrayRef {
    let keys = arrow::array::Int32Array::from(vec![0; rows]);
    let values: ArrayRef = Arc::new(StringArray::from(vec![path]));
    Arc::new(
        arrow::array::DictionaryArray::<arrow::datatypes::Int32Type>::try_new(keys, values)
            .expect("every key names the one value"),
    )
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
