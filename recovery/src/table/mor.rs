//! Merge-on-read writes (format v2): instead of rewriting every data file that holds a replaced
//! key, a commit adds the new row versions as data files and a position delete file naming the
//! rows they replace (`file_path`, `pos`, the reserved field ids, sorted as the spec asks).
//!
//! Finding the replaced rows' positions without reading whole files: the manifests' key bounds
//! prune the data files ([`super::read::files_for_keys`]); of each remaining file only the key
//! column (and the columns of other writers' equality deletes) is decoded, the deletes already
//! in the table applied, to find the live rows holding one of the keys; then only those rows are
//! read in full (a Parquet row selection), for the merge's version and conflict checks.
//!
//! With [`Versions`] (for a table without columns outside the events' own), the version column is
//! decoded with the key, and a row older than every event of its key is not read in full: the
//! merge needs only its key and version to replace it (it compares payloads at an equal version
//! only, and every output column comes from the winning event), so it gets that row with the
//! other columns null. Rows an event may equal (an identical retry, a conflict) are read in full.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::compute::cast;
use arrow::row::{RowConverter, SortField};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum};
use iceberg::table::Table;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY, ProjectionMask};
use uuid::Uuid;

use super::commit::writer_properties;
use super::deletes::{Deletes, Projection, file_column};
use super::error::{TableError, iceberg_err};
use super::files::{POS_DELETE_PATH_ID, POS_DELETE_POS_ID, field_id};
use super::key_index::KeyIndex;

/// The Iceberg table property that chooses how row-level changes are written (Spark's and
/// Flink's name for MERGE): `copy-on-write` (Iceberg's default) or `merge-on-read`.
pub const PROP_MERGE_MODE: &str = "write.merge.mode";

/// How the applier writes a unit's changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MergeMode {
    /// Every data file holding a replaced key is rewritten (no delete files).
    #[default]
    CopyOnWrite,
    /// New row versions in new data files plus position deletes for the rows they replace.
    MergeOnRead,
}

impl MergeMode {
    pub fn parse(value: &str) -> Option<MergeMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "copy-on-write" => Some(MergeMode::CopyOnWrite),
            "merge-on-read" => Some(MergeMode::MergeOnRead),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MergeMode::CopyOnWrite => "copy-on-write",
            MergeMode::MergeOnRead => "merge-on-read",
        }
    }

    /// The mode `table` asks for in [`PROP_MERGE_MODE`] (absent: copy-on-write); an unknown value
    /// is refused, naming the property.
    pub fn of_table(table: &Table) -> Result<MergeMode, TableError> {
        match table.metadata().properties().get(PROP_MERGE_MODE) {
            None => Ok(MergeMode::CopyOnWrite),
            Some(v) => MergeMode::parse(v).ok_or_else(|| TableError::Unsupported {
                table: table.identifier().to_string(),
                reason: format!("{PROP_MERGE_MODE} = {v:?}: expected copy-on-write or merge-on-read"),
            }),
        }
    }
}

/// The live rows of some data files that hold wanted keys, and where each one is.
#[derive(Debug, Default)]
pub struct Located {
    /// Full rows in the table's Arrow schema plus the file column (`with_file`).
    pub rows: Vec<RecordBatch>,
    /// (data file path, row position) of each row of `rows`, in the same order.
    pub positions: Vec<(String, u64)>,
    /// Rows of the key column decoded to find them (the lookup's cost).
    pub keys_scanned: u64,
    /// Rows read in full, and rows given as key and version only (see [`Versions`]).
    pub rows_read: u64,
    pub stubs: u64,
}

/// The events' versions, beside their keys, for rows that need not be read in full.
pub struct Versions<'a> {
    /// The version field of the table.
    pub field_id: i32,
    /// The version of each event (aligned with the keys), any integer type.
    pub versions: &'a ArrayRef,
}

/// The live rows of `files` whose key (the field `key_field_id` of `schema`) is one of `keys`,
/// with their positions; `with_file` is `schema` plus a last column naming the file. With
/// `versions`, a row older than every event of its key comes with only its key, version and
/// file, the other columns null (`with_file` must then allow nulls). `index` holds the keys of
/// files scanned before (see [`KeyIndex`]); files scanned now are added to it.
#[allow(clippy::too_many_arguments)]
pub async fn locate_rows(
    table: &Table,
    files: &[&DataFile],
    schema: &SchemaRef,
    with_file: &SchemaRef,
    key_field_id: i32,
    keys: &ArrayRef,
    versions: Option<Versions<'_>>,
    deletes: &Deletes,
    index: &mut KeyIndex,
) -> Result<Located, TableError> {
    let name = table.identifier().to_string();
    let bad = |path: &str, e: &dyn std::fmt::Display| TableError::BatchSchema {
        table: name.clone(),
        detail: format!("data file {path}: {e}"),
    };
    let field_of = |id: i32| schema.fields().iter().position(|f| field_id(f) == Some(id));
    let key_at = field_of(key_field_id).ok_or_else(|| bad("(schema)", &format!("no key field id {key_field_id}")))?;
    let key_field = schema.field(key_at).clone();
    let converter =
        RowConverter::new(vec![SortField::new(key_field.data_type().clone())]).map_err(|e| bad("(keys)", &e))?;
    let wanted_keys = cast(keys, key_field.data_type()).map_err(|e| bad("(keys)", &e))?;
    let wanted_rows = converter
        .convert_columns(std::slice::from_ref(&wanted_keys))
        .map_err(|e| bad("(keys)", &e))?;
    let version_at = match &versions {
        Some(v) => Some(field_of(v.field_id).ok_or_else(|| bad("(schema)", &"no version field"))?),
        None => None,
    };
    let event_versions = match &versions {
        Some(v) => Some(cast(v.versions, &DataType::Int64).map_err(|e| bad("(versions)", &e))?),
        None => None,
    };
    // The wanted keys sorted and unique, each with its first event and its lowest event version
    // (i64::MIN without `versions`: every row found is read in full).
    let mut order: Vec<usize> = (0..wanted_rows.num_rows()).collect();
    order.sort_by(|a, b| wanted_rows.row(*a).cmp(&wanted_rows.row(*b)));
    let mut wanted: Vec<(arrow::row::Row<'_>, usize, i64)> = Vec::with_capacity(order.len());
    for i in order {
        let v = event_versions
            .as_ref()
            .map_or(i64::MIN, |a| a.as_primitive::<arrow::datatypes::Int64Type>().value(i));
        match wanted.last_mut() {
            Some(last) if last.0 == wanted_rows.row(i) => last.2 = last.2.min(v),
            _ => wanted.push((wanted_rows.row(i), i, v)),
        }
    }
    let wanted_sorted: Vec<arrow::row::Row<'_>> = wanted.iter().map(|w| w.0).collect();
    // Equality deletes compare other columns: liveness then comes from a scan of each file with
    // those columns, and the index is not kept for such a snapshot.
    let equality = !deletes.equality_field_ids().is_empty();
    let mut scratch = KeyIndex::default();
    let index = if equality { &mut scratch } else { index };
    // Decoded per scanned file: the key, the version (with `versions`), the columns equality
    // deletes need; then the row position.
    let mut ids = vec![key_field_id];
    if let Some(v) = &versions {
        ids.push(v.field_id);
    }
    for id in deletes.equality_field_ids() {
        if !ids.contains(&id) && field_of(id).is_some() {
            ids.push(id);
        }
    }
    let mut fields: Vec<Field> = ids
        .iter()
        .filter_map(|id| field_of(*id))
        .map(|i| schema.field(i).clone())
        .collect();
    let target = Arc::new(ArrowSchema::new(fields.clone()));
    fields.push(Field::new("_tidemark_pos", DataType::UInt64, false));
    let with_pos = Arc::new(ArrowSchema::new(fields));
    let mut out = Located::default();
    for file in files {
        let path = file.file_path();
        let mut bytes = None;
        // Live positions from a scan, when equality deletes apply.
        let mut live: Option<std::collections::HashSet<u64>> = None;
        if equality || !index.contains(path) {
            let data = read_bytes(table, path, &name).await?;
            let builder = ParquetRecordBatchReaderBuilder::try_new(data.clone()).map_err(|e| bad(path, &e))?;
            let mut columns: Vec<usize> = Projection::of(builder.schema(), &target)
                .map_err(|e| bad(path, &e))?
                .0
                .into_iter()
                .flatten()
                .collect();
            columns.sort_unstable();
            columns.dedup();
            let projected = Arc::new(builder.schema().project(&columns).map_err(|e| bad(path, &e))?);
            let projection = Projection::of(&projected, &target).map_err(|e| bad(path, &e))?;
            let mask = ProjectionMask::roots(builder.parquet_schema(), columns);
            let reader = builder
                .with_projection(mask)
                .with_batch_size(64 * 1024)
                .build()
                .map_err(|e| bad(path, &e))?;
            let (mut key_parts, mut version_parts): (Vec<ArrayRef>, Vec<i64>) = (Vec::new(), Vec::new());
            let mut offset = 0u64;
            for batch in reader {
                let batch = batch.map_err(|e| bad(path, &e))?;
                let n = batch.num_rows() as u64;
                out.keys_scanned += n;
                let cols = projection
                    .apply(&batch, &target)
                    .map_err(|e| bad(path, &e))?
                    .columns()
                    .to_vec();
                key_parts.push(cols[0].clone());
                if version_at.is_some() {
                    let v = cast(&cols[1], &DataType::Int64).map_err(|e| bad(path, &e))?;
                    let v = v.as_primitive::<arrow::datatypes::Int64Type>();
                    // A null version (never written by tidemark) is older than any event.
                    version_parts.extend((0..v.len()).map(|r| if v.is_valid(r) { v.value(r) } else { i64::MIN }));
                }
                if equality {
                    let mut cols = cols;
                    cols.push(Arc::new(UInt64Array::from_iter_values(offset..offset + n)));
                    let b = RecordBatch::try_new(with_pos.clone(), cols).map_err(|e| bad(path, &e))?;
                    let kept = deletes.filter(path, offset, b).map_err(|e| bad(path, &e))?;
                    let pos = kept
                        .column(kept.num_columns() - 1)
                        .as_primitive::<arrow::datatypes::UInt64Type>();
                    live.get_or_insert_with(Default::default)
                        .extend(pos.values().iter().copied());
                }
                offset += n;
            }
            let refs: Vec<&dyn Array> = key_parts.iter().map(|a| a.as_ref()).collect();
            let all = if refs.is_empty() {
                arrow::array::new_empty_array(key_field.data_type())
            } else {
                arrow::compute::concat(&refs).map_err(|e| bad(path, &e))?
            };
            let rows = converter.convert_columns(&[all]).map_err(|e| bad(path, &e))?;
            index.insert(path, rows, version_at.map(|_| version_parts));
            bytes = Some(data);
        }
        let hits = index.lookup(path, &wanted_sorted).unwrap_or_default();
        // Rows to read in full; stubs as (index in `wanted`, table version, position).
        let mut full: Vec<u64> = Vec::new();
        let mut stubs: Vec<(usize, i64, u64)> = Vec::new();
        for (pos, table_version, w) in hits {
            let is_live = match &live {
                Some(set) => set.contains(&pos),
                None => !equality && !deletes.is_position_deleted(path, pos),
            };
            if !is_live {
                continue;
            }
            match table_version {
                Some(v) if version_at.is_some() && v < wanted[w].2 => stubs.push((w, v, pos)),
                _ => full.push(pos),
            }
        }
        full.sort_unstable();
        // Stubs: key, version and file; every other column null.
        if !stubs.is_empty() {
            let n = stubs.len();
            let mut cols: Vec<ArrayRef> = schema
                .fields()
                .iter()
                .map(|f| arrow::array::new_null_array(f.data_type(), n))
                .collect();
            let take = arrow::array::UInt32Array::from_iter_values(stubs.iter().map(|s| wanted[s.0].1 as u32));
            cols[key_at] = arrow::compute::take(wanted_keys.as_ref(), &take, None).map_err(|e| bad(path, &e))?;
            if let Some(v) = version_at {
                let versions: ArrayRef = Arc::new(Int64Array::from_iter_values(stubs.iter().map(|s| s.1)));
                cols[v] = cast(&versions, schema.field(v).data_type()).map_err(|e| bad(path, &e))?;
            }
            cols.push(file_column(path, n));
            out.rows
                .push(RecordBatch::try_new(with_file.clone(), cols).map_err(|e| bad(path, &e))?);
            out.stubs += n as u64;
            out.positions.extend(stubs.iter().map(|s| (path.to_string(), s.2)));
        }
        if full.is_empty() {
            continue;
        }
        // Only the rows found, in full (positions ascending, as the reader returns them).
        let data = match bytes {
            Some(b) => b,
            None => read_bytes(table, path, &name).await?,
        };
        let builder = ParquetRecordBatchReaderBuilder::try_new(data).map_err(|e| bad(path, &e))?;
        let total_rows = builder.metadata().file_metadata().num_rows() as usize;
        let projection = Projection::of(builder.schema(), schema).map_err(|e| bad(path, &e))?;
        let selection =
            RowSelection::from_consecutive_ranges(full.iter().map(|p| *p as usize..*p as usize + 1), total_rows);
        let reader = builder
            .with_row_selection(selection)
            .with_batch_size(64 * 1024)
            .build()
            .map_err(|e| bad(path, &e))?;
        let mut read = 0usize;
        for batch in reader {
            let batch = batch.map_err(|e| bad(path, &e))?;
            let rows = batch.num_rows();
            let mut cols = projection
                .apply(&batch, schema)
                .map_err(|e| bad(path, &e))?
                .columns()
                .to_vec();
            cols.push(file_column(path, rows));
            out.rows
                .push(RecordBatch::try_new(with_file.clone(), cols).map_err(|e| bad(path, &e))?);
            read += rows;
        }
        if read != full.len() {
            return Err(bad(path, &format!("{} rows selected, {read} read", full.len())));
        }
        out.rows_read += read as u64;
        out.positions.extend(full.into_iter().map(|p| (path.to_string(), p)));
    }
    Ok(out)
}

async fn read_bytes(table: &Table, path: &str, name: &str) -> Result<bytes::Bytes, TableError> {
    table
        .file_io()
        .new_input(path)
        .map_err(iceberg_err(format!("open data file {path}")))?
        .read()
        .await
        .map_err(iceberg_err(format!("read data file {path} of {name}")))
}

/// Writes a position delete file removing `rows` (data file path, row position) in the table's
/// data folder as `<file_id>-deletes.parquet`, with the table's Parquet codec and the `file_path`
/// bounds (and `referenced_data_file` when it names one file), as Java and PyIceberg write them.
/// `None` when `rows` is empty. Not part of the table until committed.
pub async fn write_position_deletes(
    table: &Table,
    mut rows: Vec<(String, u64)>,
    file_id: Uuid,
) -> Result<Option<DataFile>, TableError> {
    if rows.is_empty() {
        return Ok(None);
    }
    let name = table.identifier().to_string();
    let meta = table.metadata();
    if !meta.default_partition_spec().is_unpartitioned() {
        return Err(TableError::Unsupported {
            table: name,
            reason: format!(
                "merge-on-read writes position deletes for unpartitioned tables only; set {PROP_MERGE_MODE}=copy-on-write"
            ),
        });
    }
    rows.sort();
    rows.dedup();
    let field = |n: &str, t: DataType, id: i32| {
        Field::new(n, t, false).with_metadata(HashMap::from([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]))
    };
    let schema = Arc::new(ArrowSchema::new(vec![
        field("file_path", DataType::Utf8, POS_DELETE_PATH_ID),
        field("pos", DataType::Int64, POS_DELETE_POS_ID),
    ]));
    let fail = |e: &dyn std::fmt::Display| TableError::BatchSchema {
        table: name.clone(),
        detail: format!("position delete file: {e}"),
    };
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1 as i64))),
        ],
    )
    .map_err(|e| fail(&e))?;
    let props = meta
        .table_properties()
        .map_err(iceberg_err(format!("read the properties of {name}")))?;
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(
        &mut bytes,
        schema,
        Some(writer_properties(
            &name,
            meta.properties(),
            &props,
            meta.current_schema(),
        )?),
    )
    .map_err(|e| fail(&e))?;
    writer.write(&batch).map_err(|e| fail(&e))?;
    writer.close().map_err(|e| fail(&e))?;
    let path = format!("{}/data/{file_id}-deletes.parquet", meta.location());
    let output = table
        .file_io()
        .new_output(&path)
        .map_err(iceberg_err(format!("open {path}")))?;
    if table
        .file_io()
        .exists(&path)
        .await
        .map_err(iceberg_err(format!("look for {path}")))?
    {
        return Err(TableError::DataFileExists { table: name, path });
    }
    let size = bytes.len() as u64;
    output
        .write(bytes.into())
        .await
        .map_err(iceberg_err(format!("write {path}")))?;
    let (first, last) = (&rows[0].0, &rows[rows.len() - 1].0);
    let mut file = DataFileBuilder::default();
    file.content(DataContentType::PositionDeletes)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .partition_spec_id(meta.default_partition_spec_id())
        .record_count(rows.len() as u64)
        .file_size_in_bytes(size)
        .lower_bounds(HashMap::from([(POS_DELETE_PATH_ID, Datum::string(first))]))
        .upper_bounds(HashMap::from([(POS_DELETE_PATH_ID, Datum::string(last))]));
    if first == last {
        file.referenced_data_file(Some(first.clone()));
    }
    file.build().map(Some).map_err(|e| fail(&e))
}

/// The key column of `batches` (column `index`) as one array.
pub fn concat_column(batches: &[RecordBatch], index: usize, data_type: &DataType) -> Result<ArrayRef, String> {
    let cols: Vec<&dyn Array> = batches.iter().map(|b| b.column(index).as_ref()).collect();
    if cols.is_empty() {
        return Ok(arrow::array::new_empty_array(data_type));
    }
    arrow::compute::concat(&cols).map_err(|e| e.to_string())
}
