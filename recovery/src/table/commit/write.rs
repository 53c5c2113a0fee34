//! Writing a table's data files: Parquet with the table's codec settings, named and placed as
//! the table's location rules say; a file copied byte for byte (a recovery's seed).

use std::collections::HashMap;

use arrow_array::RecordBatch;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{DataContentType, DataFile, DataFileFormat, PartitionKey, Struct};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator, FileNameGenerator, LocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::file::properties::WriterProperties;
use uuid::Uuid;

use super::super::{TableError, arrow_schema, iceberg_err};

/// Writes `batches` as Parquet data files in the table's data folder, named `<file_id>-NNNNN.parquet`
/// (the rolling writer starts a new file at the table's target file size). Batches must have
/// the table's columns in table order; they are relabelled with the table's Arrow schema, which
/// carries the field ids the writer needs. The files are not part of the table until committed.
pub async fn write_data_file(
    table: &Table,
    batches: &[RecordBatch],
    file_id: Uuid,
) -> Result<Vec<DataFile>, TableError> {
    let name = table.identifier().to_string();
    let schema = arrow_schema(table)?;
    let mut conformed = Vec::with_capacity(batches.len());
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        conformed.push(conform(&name, &schema, batch)?);
    }
    if conformed.is_empty() {
        return Ok(Vec::new());
    }
    let meta = table.metadata();
    let props = meta
        .table_properties()
        .map_err(iceberg_err(format!("read the properties of {name}")))?;
    let parquet = ParquetWriterBuilder::new(
        writer_properties(&name, meta.properties(), &props, meta.current_schema())?,
        meta.current_schema().clone(),
    );
    let locations = DefaultLocationGenerator::new(meta).map_err(iceberg_err(format!("data location of {name}")))?;
    let names = DefaultFileNameGenerator::new(file_id.to_string(), None, DataFileFormat::Parquet);
    // The writer overwrites without asking: a reused file id would silently replace a live data
    // file. Its first file is always `<file_id>-00000.parquet`, so one look refuses reuse.
    // (A clone of `names` would share its counter; a fresh generator does not.)
    let first_name =
        DefaultFileNameGenerator::new(file_id.to_string(), None, DataFileFormat::Parquet).generate_file_name();
    // (For a partitioned table the first file lands in some partition's folder: the name is
    // looked for in the folder of the first row's partition below.)
    let first = locations.generate_location(first_partition(table, &conformed)?.as_ref(), &first_name);
    let exists = table
        .file_io()
        .exists(&first)
        .await
        .map_err(iceberg_err(format!("look for {first}")))?;
    if exists {
        return Err(TableError::DataFileExists {
            table: name,
            path: first,
        });
    }
    let context = format!("write data files of {name}");
    // One writer per partition of the table's default spec (one for an unpartitioned table); the
    // writers share the name generator, so every file name is `<file_id>-NNNNN` and unique.
    let mut groups: Vec<(Option<PartitionKey>, Vec<RecordBatch>)> = Vec::new();
    let spec = meta.default_partition_spec();
    if spec.is_unpartitioned() {
        groups.push((None, conformed));
    } else {
        let splitter =
            RecordBatchPartitionSplitter::try_new_with_computed_values(meta.current_schema().clone(), spec.clone())
                .map_err(iceberg_err(format!("partition the rows of {name}")))?;
        let mut index: HashMap<Struct, usize> = HashMap::new();
        for batch in &conformed {
            for (key, part) in splitter
                .split(batch)
                .map_err(iceberg_err(format!("partition the rows of {name}")))?
            {
                let n = *index.entry(key.data().clone()).or_insert_with(|| {
                    groups.push((Some(key.clone()), Vec::new()));
                    groups.len() - 1
                });
                groups[n].1.push(part);
            }
        }
    }
    let keys: Vec<Option<PartitionKey>> = groups.iter().map(|(k, _)| k.clone()).collect();
    let written = async {
        let mut out = Vec::new();
        for (key, batches) in groups {
            let rolling = RollingFileWriterBuilder::new(
                parquet.clone(),
                props.write_target_file_size_bytes,
                table.file_io().clone(),
                locations.clone(),
                names.clone(),
            );
            let mut writer = DataFileWriterBuilder::new(rolling).build(key).await?;
            for batch in batches {
                writer.write(batch).await?;
            }
            out.extend(writer.close().await?);
        }
        Ok::<_, iceberg::Error>(out)
    }
    .await;
    match written {
        Ok(out) => Ok(out),
        // A failed write (a full disk, a refused upload) leaves nothing behind: the files this
        // call started are removed, or named as orphans when they cannot be.
        Err(e) => {
            let note = match remove_started(table, &locations, file_id, &keys).await {
                Ok(0) => String::new(),
                Ok(n) => format!(" ({n} file(s) it had started were removed)"),
                Err(left) => format!(
                    " (left behind, referenced by nothing; delete them: {})",
                    left.join(", ")
                ),
            };
            Err(iceberg_err(format!("{context}{note}"))(e))
        }
    }
}

/// Removes the data files a failed [`write_data_file`] of `file_id` started: the names its
/// generator hands out in order (`<file_id>-00000.parquet`, `-00001`, …), each in one of the
/// partitions' folders, until a number no folder holds. `Err`: the files that could not be
/// removed.
async fn remove_started(
    table: &Table,
    locations: &DefaultLocationGenerator,
    file_id: Uuid,
    keys: &[Option<PartitionKey>],
) -> Result<usize, Vec<String>> {
    let io = table.file_io();
    let names = DefaultFileNameGenerator::new(file_id.to_string(), None, DataFileFormat::Parquet);
    let (mut removed, mut left) = (0, Vec::new());
    loop {
        let name = names.generate_file_name();
        let mut found = false;
        for key in keys {
            let path = locations.generate_location(key.as_ref(), &name);
            match io.exists(&path).await {
                Ok(false) => continue,
                Ok(true) => found = true,
                Err(_) => {
                    // Cannot even look: name what may be there and stop.
                    left.push(path);
                    return Err(left);
                }
            }
            match io.delete(&path).await {
                Ok(()) => removed += 1,
                Err(_) => left.push(path),
            }
        }
        if !found {
            break;
        }
    }
    if left.is_empty() { Ok(removed) } else { Err(left) }
}

/// Copies the data file `source` (read at `read_path` through `source_io`) byte for byte into
/// the table's data folder as `<file_id>-00000.parquet`, with the source's column metrics (key
/// bounds included, which the merges' chunking reads). The caller has checked that the copy
/// holds the same rows under this table: its schema has the source's field ids, it is
/// unpartitioned, and no delete file applies to the source. Returns `None`, having written
/// nothing, when the file itself does not fit a verbatim copy (not Parquet, encrypted, or a
/// column without a field id, which only a name mapping could read): the caller rewrites it.
/// The file is not part of the table until committed.
pub async fn copy_data_file(
    table: &Table,
    source_io: &iceberg::io::FileIO,
    read_path: &str,
    source: &DataFile,
    file_id: Uuid,
) -> Result<Option<DataFile>, TableError> {
    let name = table.identifier().to_string();
    if source.file_format() != DataFileFormat::Parquet || source.key_metadata().is_some() {
        return Ok(None);
    }
    let bytes = source_io
        .new_input(read_path)
        .map_err(iceberg_err(format!("open data file {read_path}")))?
        .read()
        .await
        .map_err(iceberg_err(format!("read data file {read_path}")))?;
    let footer = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes)
        .map_err(|e| TableError::BatchSchema {
            table: name.clone(),
            detail: format!("data file {read_path}: {e}"),
        })?;
    let fields = footer
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .to_vec();
    if fields.iter().any(|f| !f.get_basic_info().has_id()) {
        return Ok(None);
    }
    let meta = table.metadata();
    let locations = DefaultLocationGenerator::new(meta).map_err(iceberg_err(format!("data location of {name}")))?;
    let file_name =
        DefaultFileNameGenerator::new(file_id.to_string(), None, DataFileFormat::Parquet).generate_file_name();
    let path = locations.generate_location(None, &file_name);
    let io = table.file_io();
    if io
        .exists(&path)
        .await
        .map_err(iceberg_err(format!("look for {path}")))?
    {
        return Err(TableError::DataFileExists { table: name, path });
    }
    let size = bytes.len() as u64;
    io.new_output(&path)
        .map_err(iceberg_err(format!("create {path}")))?
        .write(bytes)
        .await
        .map_err(iceberg_err(format!("write {path}")))?;
    let mut copy = iceberg::spec::DataFileBuilder::default();
    copy.content(DataContentType::Data)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .record_count(source.record_count())
        .file_size_in_bytes(size)
        .column_sizes(source.column_sizes().clone())
        .value_counts(source.value_counts().clone())
        .null_value_counts(source.null_value_counts().clone())
        .nan_value_counts(source.nan_value_counts().clone())
        .lower_bounds(source.lower_bounds().clone())
        .upper_bounds(source.upper_bounds().clone())
        .split_offsets(source.split_offsets().map(<[i64]>::to_vec))
        .partition_spec_id(meta.default_partition_spec_id());
    let copy = copy.build().map_err(|e| TableError::BatchSchema {
        table: table.identifier().to_string(),
        detail: format!("describe the copy of {read_path}: {e}"),
    })?;
    Ok(Some(copy))
}

/// The partition key of the first row of `batches` under the table's default spec (`None` when
/// the table is unpartitioned).
fn first_partition(table: &Table, batches: &[RecordBatch]) -> Result<Option<PartitionKey>, TableError> {
    let meta = table.metadata();
    let spec = meta.default_partition_spec();
    if spec.is_unpartitioned() || batches.is_empty() {
        return Ok(None);
    }
    let name = table.identifier().to_string();
    let splitter =
        RecordBatchPartitionSplitter::try_new_with_computed_values(meta.current_schema().clone(), spec.clone())
            .map_err(iceberg_err(format!("partition the rows of {name}")))?;
    Ok(splitter
        .split(&batches[0].slice(0, 1))
        .map_err(iceberg_err(format!("partition the rows of {name}")))?
        .into_iter()
        .next()
        .map(|(k, _)| k))
}

/// Property naming the Parquet codec of data files, as Java and PyIceberg read it.
pub const PROP_PARQUET_CODEC: &str = "write.parquet.compression-codec";
/// Property naming the codec's level.
pub const PROP_PARQUET_LEVEL: &str = "write.parquet.compression-level";

/// The zstd level when the table sets none: 1, what PyIceberg writes (pyarrow's default) and
/// what the journal's event objects use. Java writes 3; a table that wants it says so in
/// `write.parquet.compression-level`. At 10M rows + 1M events level 3 was about 10% of a
/// recovery's CPU (docs/runs/issue-33.md, "Writer settings").
pub const DEFAULT_ZSTD_LEVEL: i32 = 1;

/// The Parquet writer settings of the table: `write.parquet.compression-codec` (default zstd, as
/// Java and PyIceberg default; `zstd`, `snappy` or `uncompressed`/`none` — this build has no
/// gzip, brotli or lz4, and a table asking for one is refused before anything is written),
/// `write.parquet.compression-level` for zstd (default [`DEFAULT_ZSTD_LEVEL`]), and the
/// content-defined chunking keys iceberg-rust translates. The column of a single identifier field
/// (`unique_column`) is written without a dictionary.
pub fn writer_properties(
    table: &str,
    properties: &HashMap<String, String>,
    props: &iceberg::spec::TableProperties,
    schema: &iceberg::spec::Schema,
) -> Result<WriterProperties, TableError> {
    use parquet::basic::{Compression, ZstdLevel};
    let unsupported = |reason: String| TableError::Unsupported {
        table: table.to_string(),
        reason,
    };
    let codec = properties
        .get(PROP_PARQUET_CODEC)
        .map_or("zstd".to_string(), |c| c.trim().to_ascii_lowercase());
    let level = properties.get(PROP_PARQUET_LEVEL).map(|l| l.trim());
    let compression = match codec.as_str() {
        "zstd" => {
            let level = match level {
                Some(l) => l
                    .parse::<i32>()
                    .map_err(|_| unsupported(format!("{PROP_PARQUET_LEVEL} = {l:?} is not a number")))?,
                None => DEFAULT_ZSTD_LEVEL,
            };
            Compression::ZSTD(
                ZstdLevel::try_new(level).map_err(|e| unsupported(format!("{PROP_PARQUET_LEVEL} = {level}: {e}")))?,
            )
        }
        "snappy" => Compression::SNAPPY,
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(unsupported(format!(
                "{PROP_PARQUET_CODEC} = {other:?}: this build writes zstd, snappy or uncompressed Parquet"
            )));
        }
    };
    let cdc = props.cdc_enabled.then_some(parquet::file::properties::CdcOptions {
        min_chunk_size: props.cdc_min_chunk_size,
        max_chunk_size: props.cdc_max_chunk_size,
        norm_level: props.cdc_norm_level,
    });
    let mut builder = WriterProperties::builder()
        .set_compression(compression)
        .set_content_defined_chunking(cdc);
    if let Some(key) = unique_column(schema) {
        builder = builder.set_column_dictionary_enabled(parquet::schema::types::ColumnPath::from(key), false);
    }
    Ok(builder.build())
}

/// The top-level column of `schema`'s identifier when it is one field (the journal's key, which
/// tidemark's tables declare): its values are distinct in every file, so a dictionary never pays.
/// The encoder would intern each value until the dictionary page is full (1 MiB: about two thirds
/// of a 100,000-row file's keys of 11 characters) and then write the rest plain. Several
/// identifier fields are unique only together, so each keeps its dictionary.
fn unique_column(schema: &iceberg::spec::Schema) -> Option<&str> {
    let ids: Vec<i32> = schema.identifier_field_ids().collect();
    let [id] = ids[..] else { return None };
    schema
        .as_struct()
        .fields()
        .iter()
        .find(|f| f.id == id)
        .map(|f| f.name.as_str())
}

/// Gives `batch` the table's Arrow schema (field ids in the metadata), checking names and types.
/// A batch whose columns carry the table's field ids in order (the table's schema under the
/// journal's names, [`super::spec_arrow_schema`]) matches by id instead of by name.
fn conform(table: &str, schema: &arrow_schema::SchemaRef, batch: &RecordBatch) -> Result<RecordBatch, TableError> {
    let fail = |detail: String| TableError::BatchSchema {
        table: table.to_string(),
        detail,
    };
    let found: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
    let wanted: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    let ids = |s: &arrow_schema::Schema| -> Vec<Option<i32>> {
        s.fields().iter().map(|f| super::super::files::field_id(f)).collect()
    };
    let by_id = ids(schema).iter().all(Option::is_some) && ids(schema) == ids(batch.schema_ref());
    if found != wanted && !by_id {
        return Err(fail(format!("columns {found:?}, the table has {wanted:?}")));
    }
    RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| fail(e.to_string()))
}
