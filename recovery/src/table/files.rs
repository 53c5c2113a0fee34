//! The live files of a snapshot — data files and the delete files other writers added (position
//! and equality deletes, merge-on-read) — with their data sequence numbers, and the deletes
//! applied to the rows read from a data file ([`Deletes`]).
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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray, RecordBatch};
use arrow::row::{RowConverter, SortField};
use arrow_schema::{Field, Schema as ArrowSchema, SchemaRef};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestList, PrimitiveLiteral, Struct,
};

use super::{TableError, iceberg_err};

/// Field id of `file_path` in a position delete file (reserved by the Iceberg spec).
pub const POS_DELETE_PATH_ID: i32 = 2_147_483_546;
/// Field id of `pos` in a position delete file.
pub const POS_DELETE_POS_ID: i32 = 2_147_483_545;

/// One live file of a snapshot, with what its manifest entry says about it.
#[derive(Debug, Clone)]
pub struct LiveFile {
    pub file: DataFile,
    /// The data sequence number (inherited from the manifest list where the entry leaves it out).
    pub sequence: i64,
    /// The file sequence number (the data sequence number when a v1 upgrade left it out).
    pub file_sequence: i64,
    pub snapshot_id: i64,
    /// Where the file is read from (its path, or the path under a prefix map).
    pub path: String,
    /// The manifest that lists it (its recorded path).
    pub manifest: String,
    /// The partition spec of that manifest (the file's partition values follow it).
    pub spec_id: i32,
}

/// The live files of one snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotFiles {
    pub data: Vec<LiveFile>,
    /// Position and equality delete files.
    pub deletes: Vec<LiveFile>,
    /// The delete manifests as the manifest list names them.
    pub delete_manifests: Vec<ManifestFile>,
    pub data_manifests: Vec<ManifestFile>,
}

impl SnapshotFiles {
    pub fn record_count(&self) -> u64 {
        self.data.iter().map(|f| f.file.record_count()).sum()
    }
}

/// Reads the manifest list at `list_path` and every manifest it names (through `map`, which turns
/// a recorded path into a readable one), and returns the live entries with inherited sequence
/// numbers. `what` names the table or metadata file in messages.
pub async fn snapshot_files(
    io: &FileIO,
    what: &str,
    list_path: &str,
    map: &(dyn Fn(&str) -> String + Sync),
) -> Result<SnapshotFiles, TableError> {
    let list_at = map(list_path);
    let bytes = io
        .new_input(&list_at)
        .map_err(iceberg_err(format!("open the manifest list {list_at} of {what}")))?
        .read()
        .await
        .map_err(iceberg_err(format!("read the manifest list {list_at} of {what}")))?;
    let list = ManifestList::parse_with_version(&bytes, FormatVersion::V2)
        .map_err(iceberg_err(format!("parse the manifest list {list_at} of {what}")))?;
    let mut out = SnapshotFiles::default();
    for manifest in list.consume_entries() {
        match manifest.content {
            ManifestContentType::Data => out.data_manifests.push(manifest),
            ManifestContentType::Deletes => out.delete_manifests.push(manifest),
        }
    }
    let manifests: Vec<&ManifestFile> = out.data_manifests.iter().chain(&out.delete_manifests).collect();
    // `load_manifest` fills in what an entry inherits from its manifest-list row; it reads
    // `manifest_path`, so give it the readable one.
    let loaded = futures::future::try_join_all(manifests.iter().map(|m| async move {
        let mut readable = (*m).clone();
        readable.manifest_path = map(&m.manifest_path);
        readable.load_manifest(io).await.map_err(iceberg_err(format!(
            "read the manifest {} of {what}",
            readable.manifest_path
        )))
    }))
    .await?;
    for (manifest, listed) in loaded.into_iter().zip(&manifests) {
        let (entries, _) = manifest.into_parts();
        for entry in entries.into_iter().filter(|e| e.is_alive()) {
            let (Some(sequence), Some(snapshot_id)) = (entry.sequence_number(), entry.snapshot_id()) else {
                return Err(TableError::Unsupported {
                    table: what.to_string(),
                    reason: format!(
                        "manifest entry of {} has no sequence number or snapshot id",
                        entry.file_path()
                    ),
                });
            };
            let live = LiveFile {
                file: entry.data_file().clone(),
                sequence,
                file_sequence: entry.file_sequence_number.unwrap_or(sequence),
                snapshot_id,
                path: map(entry.file_path()),
                manifest: listed.manifest_path.clone(),
                spec_id: listed.partition_spec_id,
            };
            match live.file.content_type() {
                DataContentType::Data => out.data.push(live),
                _ => out.deletes.push(live),
            }
        }
    }
    Ok(out)
}

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

/// The Iceberg field id an Arrow field carries (`PARQUET:field_id`).
pub fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
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
                    for b in
                        super::read::read_paths(io, name, &[del.path.as_str()], &target, None, &Deletes::none()).await?
                    {
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
    for b in super::read::read_paths(io, name, &[path], &target, None, &Deletes::none()).await? {
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
/// referenced paths — from `referenced_data_file`, its `file_path` bounds, or else `read` (the
/// paths its `file_path` column holds, [`unbounded_position_paths`]) — name no data file at or
/// below its sequence number).
pub fn still_applies(del: &LiveFile, data: &[(&str, i64)], read: Option<&HashSet<String>>) -> bool {
    match del.file.content_type() {
        DataContentType::EqualityDeletes => data.iter().any(|(_, seq)| *seq < del.sequence),
        DataContentType::PositionDeletes => {
            let older = data.iter().filter(|(_, seq)| *seq <= del.sequence);
            if let Some(referenced) = del.file.referenced_data_file() {
                return older.into_iter().any(|(p, _)| *p == referenced);
            }
            match path_bounds(del) {
                // Bounds of strings may be truncated prefixes: a lower bound <= every path in
                // the file; an upper bound is rounded up. Paths in [lo, hi] may be referenced.
                Some((lo, hi)) => older.into_iter().any(|(p, _)| *p >= lo.as_str() && *p <= hi.as_str()),
                None => match read {
                    Some(paths) => older.into_iter().any(|(p, _)| paths.contains(*p)),
                    None => true,
                },
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

/// For each position delete file of `deletes` whose metadata names neither its data file nor
/// `file_path` bounds, the data file paths its `file_path` column holds (the file is read), so
/// that [`still_applies`] can tell a spent one.
pub async fn unbounded_position_paths(
    io: &FileIO,
    name: &str,
    deletes: &[LiveFile],
) -> Result<HashMap<String, HashSet<String>>, TableError> {
    let target = Arc::new(ArrowSchema::new(vec![with_id(
        Field::new("file_path", arrow_schema::DataType::Utf8, false),
        POS_DELETE_PATH_ID,
    )]));
    let mut out = HashMap::new();
    for del in deletes.iter().filter(|d| {
        d.file.content_type() == DataContentType::PositionDeletes
            && d.file.referenced_data_file().is_none()
            && path_bounds(d).is_none()
    }) {
        let mut paths = HashSet::new();
        for b in super::read::read_paths(io, name, &[del.path.as_str()], &target, None, &Deletes::none()).await? {
            let column = b.column(0).as_string::<i32>();
            paths.extend(column.iter().flatten().map(str::to_string));
        }
        out.insert(del.file.file_path().to_string(), paths);
    }
    Ok(out)
}
