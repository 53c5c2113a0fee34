//! Iceberg data-file entries for Parquet files another engine wrote (the distributed replay's
//! output): record count, file size, and per column the size, value count, null count and
//! lower/upper bounds, all read from the Parquet footer, never from the job's own report.
//!
//! Columns are matched to the table's fields by name (the writer does not carry Iceberg field
//! ids). [`check_field_names`] refuses a snapshot whose files' field ids name other columns than
//! its schema does (the listings that read them match by name). A bound is recorded only when the footer's statistic is exact and its type maps to the
//! field's Iceberg type; a missing bound only costs pruning, never correctness.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, PrimitiveType, Schema, Struct, Type,
};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::statistics::Statistics;

use super::engine::EngineError;

fn store_err(location: &str) -> impl Fn(object_store::Error) -> EngineError + '_ {
    move |e| EngineError::Store {
        location: location.to_string(),
        message: e.to_string(),
    }
}

/// The footer of the Parquet object `path` of `size` bytes (two ranged reads).
pub async fn read_footer(store: &dyn ObjectStore, path: &Path, size: u64) -> Result<ParquetMetaData, EngineError> {
    let name = path.to_string();
    let bad = |m: String| EngineError::Store {
        location: name.clone(),
        message: format!("not a Parquet file: {m}"),
    };
    if size < 12 {
        return Err(bad(format!("{size} bytes")));
    }
    let tail = store.get_range(path, size - 8..size).await.map_err(store_err(&name))?;
    let len = FooterTail::try_from(tail.as_ref())
        .map_err(|e| bad(e.to_string()))?
        .metadata_length() as u64;
    if len + 8 > size {
        return Err(bad(format!("footer of {len} bytes in a file of {size}")));
    }
    let meta = store
        .get_range(path, size - 8 - len..size - 8)
        .await
        .map_err(store_err(&name))?;
    ParquetMetaDataReader::decode_metadata(&meta).map_err(|e| bad(e.to_string()))
}

/// The bound `stat` gives for a field of type `t` (`max`: the upper one), if exact.
fn bound(t: &PrimitiveType, stat: &Statistics, max: bool) -> Option<Datum> {
    let exact = if max { stat.max_is_exact() } else { stat.min_is_exact() };
    if !exact {
        return None;
    }
    macro_rules! pick {
        ($s:expr) => {
            if max { $s.max_opt() } else { $s.min_opt() }
        };
    }
    match (t, stat) {
        (PrimitiveType::Int, Statistics::Int32(s)) => pick!(s).map(|v| Datum::int(*v)),
        (PrimitiveType::Date, Statistics::Int32(s)) => pick!(s).map(|v| Datum::date(*v)),
        (PrimitiveType::Long, Statistics::Int64(s)) => pick!(s).map(|v| Datum::long(*v)),
        (PrimitiveType::Timestamptz, Statistics::Int64(s)) => pick!(s).map(|v| Datum::timestamptz_micros(*v)),
        (PrimitiveType::Double, Statistics::Double(s)) => pick!(s).filter(|v| !v.is_nan()).map(|v| Datum::double(*v)),
        (PrimitiveType::Boolean, Statistics::Boolean(s)) => pick!(s).map(|v| Datum::bool(*v)),
        (PrimitiveType::String, Statistics::ByteArray(s)) => pick!(s)
            .and_then(|v| std::str::from_utf8(v.data()).ok())
            .map(Datum::string),
        _ => None,
    }
}

/// The data-file entry of the Parquet file at `file_path` (as the table names it) from its
/// footer, in `partition` of spec `partition_spec_id`.
pub fn data_file(
    file_path: &str,
    size: u64,
    meta: &ParquetMetaData,
    schema: &Schema,
    partition_spec_id: i32,
    partition: Struct,
) -> Result<DataFile, EngineError> {
    let mut sizes: HashMap<i32, u64> = HashMap::new();
    let mut values: HashMap<i32, u64> = HashMap::new();
    let mut nulls: HashMap<i32, u64> = HashMap::new();
    let mut lower: HashMap<i32, Datum> = HashMap::new();
    let mut upper: HashMap<i32, Datum> = HashMap::new();
    let mut no_bound: std::collections::HashSet<i32> = Default::default();
    for rg in meta.row_groups() {
        for col in rg.columns() {
            let name = col.column_descr().path().parts().join(".");
            let Some(field) = schema.field_by_name(&name) else {
                return Err(EngineError::Store {
                    location: file_path.to_string(),
                    message: format!("column {name} is not a field of the table"),
                });
            };
            let id = field.id;
            *sizes.entry(id).or_default() += col.compressed_size().max(0) as u64;
            *values.entry(id).or_default() += col.num_values().max(0) as u64;
            let Type::Primitive(t) = field.field_type.as_ref() else {
                continue;
            };
            let stat = col.statistics();
            match stat.and_then(Statistics::null_count_opt) {
                Some(n) => *nulls.entry(id).or_default() += n,
                // Unknown in one row group: unknown for the file.
                None => {
                    nulls.insert(id, u64::MAX);
                }
            }
            // A row group without a bound leaves the file without one.
            let lo = stat.and_then(|s| bound(t, s, false));
            let hi = stat.and_then(|s| bound(t, s, true));
            match (lo, hi) {
                (Some(lo), Some(hi)) if !no_bound.contains(&id) => {
                    let l = lower.entry(id).or_insert_with(|| lo.clone());
                    if lo < *l {
                        *l = lo;
                    }
                    let u = upper.entry(id).or_insert_with(|| hi.clone());
                    if hi > *u {
                        *u = hi;
                    }
                }
                (lo, hi) => {
                    // All-null row groups have no bounds and do not widen them.
                    let all_null = lo.is_none()
                        && hi.is_none()
                        && stat.and_then(Statistics::null_count_opt) == Some(col.num_values().max(0) as u64);
                    if !all_null {
                        no_bound.insert(id);
                        lower.remove(&id);
                        upper.remove(&id);
                    }
                }
            }
        }
    }
    nulls.retain(|_, n| *n != u64::MAX);
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(file_path.to_string())
        .file_format(DataFileFormat::Parquet)
        .record_count(meta.file_metadata().num_rows().max(0) as u64)
        .file_size_in_bytes(size)
        .column_sizes(sizes)
        .value_counts(values)
        .null_value_counts(nulls)
        .lower_bounds(lower)
        .upper_bounds(upper)
        .partition_spec_id(partition_spec_id)
        .partition(partition)
        .build()
        .map_err(|e| EngineError::Store {
            location: file_path.to_string(),
            message: format!("data file entry: {e}"),
        })
}

/// The partition of a written file: from its path under the listed prefix (`a=1/b=2/f.parquet`)
/// and its entry (statistics, to check it against); [`unpartitioned`] for an unpartitioned spec.
pub type PartitionOf<'a> = &'a (dyn Fn(&str, &DataFile) -> Result<Struct, EngineError> + Sync);

/// The partition of every file of an unpartitioned spec.
#[cfg(test)]
pub fn unpartitioned(_: &str, _: &DataFile) -> Result<Struct, EngineError> {
    Ok(Struct::empty())
}

/// The data-file entries of every `.parquet` object under `prefix` of `store` (in subfolders
/// too); `location` is the prefix as the table names it (`file:///…/data/x`,
/// `s3://bucket/…/data/x`), and `partition` gives each file its partition.
pub async fn data_files_under(
    store: &Arc<dyn ObjectStore>,
    prefix: &Path,
    location: &str,
    schema: &Schema,
    partition_spec_id: i32,
    partition: PartitionOf<'_>,
) -> Result<Vec<DataFile>, EngineError> {
    use futures::TryStreamExt;
    let listed: Vec<_> = store
        .list(Some(prefix))
        .try_collect()
        .await
        .map_err(store_err(location))?;
    let mut out = Vec::new();
    let mut listed: Vec<_> = listed
        .into_iter()
        .filter(|o| o.location.as_ref().ends_with(".parquet"))
        .collect();
    listed.sort_by(|a, b| a.location.cmp(&b.location));
    let base: Vec<_> = prefix.parts().collect();
    for o in listed {
        let relative = o
            .location
            .parts()
            .skip(base.len())
            .map(|p| p.as_ref().to_string())
            .collect::<Vec<_>>()
            .join("/");
        let meta = read_footer(store.as_ref(), &o.location, o.size).await?;
        if meta.file_metadata().num_rows() == 0 {
            continue;
        }
        let path = format!("{}/{relative}", location.trim_end_matches('/'));
        let entry = data_file(&path, o.size, &meta, schema, partition_spec_id, Struct::empty())?;
        let values = partition(&relative, &entry)?;
        if values.fields().is_empty() {
            out.push(entry);
        } else {
            out.push(data_file(&path, o.size, &meta, schema, partition_spec_id, values)?);
        }
    }
    Ok(out)
}

/// How the top-level columns of a Parquet file disagree with `schema` by field id, if they do:
/// a field id the file names otherwise than the schema (a column renamed after the file was
/// written), or a name the schema gives another field id (a dropped column's name reused).
/// Columns without a field id are matched by name by every reader, so they never disagree.
pub fn name_clash(meta: &ParquetMetaData, schema: &Schema) -> Option<String> {
    for f in meta.file_metadata().schema_descr().root_schema().get_fields() {
        let info = f.get_basic_info();
        if !info.has_id() {
            continue;
        }
        let (id, name) = (info.id(), info.name());
        if let Some(s) = schema.field_by_id(id)
            && s.name != name
        {
            return Some(format!(
                "field id {id} is `{name}` in the file but `{}` in the snapshot's schema (renamed after the file was written)",
                s.name
            ));
        }
        if let Some(s) = schema.field_by_name(name)
            && s.id != id
        {
            return Some(format!(
                "column `{name}` has field id {id} in the file but {} in the snapshot's schema (another column of that name)",
                s.id
            ));
        }
    }
    None
}

/// Refuses (exit 3) a snapshot whose data files a listing would misread: the distributed plan
/// reads them as Parquet listings, which match columns by name, so a column another writer
/// renamed would read as nulls from the files written before. Every data file's footer is read
/// (eight at a time) from the stores of `runtime`.
pub async fn check_field_names(
    runtime: &datafusion::execution::runtime_env::RuntimeEnv,
    snap: &super::snapshot::TrustedSnapshot,
) -> Result<(), super::RecoverError> {
    use futures::{StreamExt, TryStreamExt};
    let footers = futures::stream::iter(snap.data_files.iter())
        .map(|path| async move {
            let bad = |message: String| EngineError::Store {
                location: path.clone(),
                message,
            };
            let url = url::Url::parse(&super::engine::listing_url(path)).map_err(|e| bad(e.to_string()))?;
            let store_url =
                datafusion::execution::object_store::ObjectStoreUrl::parse(&url[..url::Position::BeforePath])
                    .map_err(|e| bad(e.to_string()))?;
            let store = runtime.object_store(&store_url).map_err(|e| bad(e.to_string()))?;
            let p = Path::from_url_path(url.path()).map_err(|e| bad(e.to_string()))?;
            let size = store.head(&p).await.map_err(store_err(path))?.size;
            Ok::<_, EngineError>((path, read_footer(store.as_ref(), &p, size).await?))
        })
        .buffered(8);
    let mut footers = std::pin::pin!(footers);
    while let Some((path, meta)) = footers.try_next().await? {
        if let Some(clash) = name_clash(&meta, &snap.schema) {
            return Err(super::RecoverError::Unsupported {
                reason: format!(
                    "data file {path} of snapshot {}: {clash}; the distributed engine reads the snapshot's files as Parquet listings, which match columns by name and would read that column as nulls: recover with --engine local (it matches columns by field id), or rewrite the table's files first",
                    snap.snapshot_id
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
    use iceberg::spec::{NestedField, Type};
    use object_store::PutPayload;
    use object_store::memory::InMemory;

    use super::*;

    fn parquet(batches: &[RecordBatch]) -> Vec<u8> {
        let mut buf = Vec::new();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(2))
            .build();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batches[0].schema(), Some(props)).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
        buf
    }

    fn with_id(name: &str, t: DataType, id: i32) -> Field {
        Field::new(name, t, true).with_metadata(HashMap::from([(
            parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    }

    async fn footer_of(fields: Vec<Field>) -> ParquetMetaData {
        let schema = Arc::new(ArrowSchema::new(fields));
        let cols: Vec<arrow::array::ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| arrow::array::new_null_array(f.data_type(), 1))
            .collect();
        let bytes = parquet(&[RecordBatch::try_new(schema, cols).unwrap()]);
        let store = InMemory::new();
        let p = Path::from("f.parquet");
        store.put(&p, PutPayload::from(bytes.clone())).await.unwrap();
        read_footer(&store, &p, bytes.len() as u64).await.unwrap()
    }

    #[tokio::test]
    async fn field_ids_that_name_other_columns_are_found() {
        let ice = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "k", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(2, "amount", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let same = footer_of(vec![
            with_id("k", DataType::Utf8, 1),
            with_id("amount", DataType::Int64, 2),
        ])
        .await;
        assert_eq!(name_clash(&same, &ice), None);
        // No field ids (e.g. the distributed job's own output): matched by name, no clash.
        let plain = footer_of(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("amount", DataType::Int64, true),
        ])
        .await;
        assert_eq!(name_clash(&plain, &ice), None);
        // Field 2 was `amt` when this file was written, and renamed since.
        let renamed = footer_of(vec![
            with_id("k", DataType::Utf8, 1),
            with_id("amt", DataType::Int64, 2),
        ])
        .await;
        let why = name_clash(&renamed, &ice).unwrap();
        assert!(why.contains("field id 2 is `amt`") && why.contains("`amount`"), "{why}");
        // `amount` in the file is field 7, a column the schema no longer has (dropped, and the
        // name reused by field 2).
        let reused = footer_of(vec![
            with_id("k", DataType::Utf8, 1),
            with_id("amount", DataType::Int64, 7),
        ])
        .await;
        let why = name_clash(&reused, &ice).unwrap();
        assert!(
            why.contains("field id 7") && why.contains("2 in the snapshot's schema"),
            "{why}"
        );
    }

    #[tokio::test]
    async fn entries_come_from_the_footers_counts_nulls_and_bounds() {
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("v", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["b", "a", "d", "c", "e"])),
                Arc::new(Int64Array::from(vec![Some(5), None, Some(-3), None, Some(9)])),
            ],
        )
        .unwrap();
        let bytes = parquet(&[batch]);
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        store
            .put(&Path::from("t/data/x/part-0.parquet"), PutPayload::from(bytes.clone()))
            .await
            .unwrap();
        store
            .put(&Path::from("t/data/x/_SUCCESS"), PutPayload::from(vec![1u8]))
            .await
            .unwrap();
        let ice = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "k", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(2, "v", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let files = data_files_under(
            &store,
            &Path::from("t/data/x"),
            "s3://b/t/data/x/",
            &ice,
            0,
            &unpartitioned,
        )
        .await
        .unwrap();
        assert_eq!(files.len(), 1, "only the Parquet object");
        let f = &files[0];
        assert_eq!(f.file_path(), "s3://b/t/data/x/part-0.parquet");
        assert_eq!((f.record_count(), f.file_size_in_bytes()), (5, bytes.len() as u64));
        assert_eq!(f.null_value_counts().get(&2), Some(&2));
        assert_eq!(f.value_counts().get(&1), Some(&5));
        assert_eq!(f.lower_bounds().get(&1), Some(&Datum::string("a")));
        assert_eq!(f.upper_bounds().get(&1), Some(&Datum::string("e")));
        assert_eq!(f.lower_bounds().get(&2), Some(&Datum::long(-3)));
        assert_eq!(f.upper_bounds().get(&2), Some(&Datum::long(9)));
        // A column the table does not have is refused, not dropped from the statistics.
        let other = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "k", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let err = data_files_under(
            &store,
            &Path::from("t/data/x"),
            "s3://b/t/data/x",
            &other,
            0,
            &unpartitioned,
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains("column v"), "{err}");
        // A truncated object is named.
        store
            .put(
                &Path::from("t/bad/y.parquet"),
                PutPayload::from(bytes[..bytes.len() / 2].to_vec()),
            )
            .await
            .unwrap();
        let err = data_files_under(&store, &Path::from("t/bad"), "s3://b/t/bad", &ice, 0, &unpartitioned)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("t/bad/y.parquet"), "{err}");
    }
}
