//! Copy-on-write commits: write Parquet data files, then publish a snapshot that adds them and
//! removes the files they replace. iceberg-rust 0.10.1 can only `fast_append`, so the snapshot is
//! built here from its public building blocks and published with the catalog's pointer swap.
//! [`commit_row_delta`] adds position delete files as well (merge-on-read, `super::mor`), in a
//! delete manifest of their own; otherwise it is the same commit.
//!
//! Contract of [`commit_overwrite`]:
//! - The new snapshot is based on exactly the metadata `table` was loaded with. It has one data
//!   manifest: the added files as ADDED, every other live file as EXISTING (original snapshot id
//!   and sequence numbers kept), and the removed files as DELETED, so the snapshot says exactly
//!   what it changed. Delete manifests of other writers are carried forward unchanged.
//! - Publishing is a commit through the catalog contract ([`crate::catalog::contract`]):
//!   `assert-table-uuid` + `assert-ref-snapshot-id(main, <parent>)`, then `add-snapshot` +
//!   `set-snapshot-ref(main)`. It either wins (the commit is visible to every reader at once) or
//!   fails with [`TableError::CommitConflict`] (another writer won) or
//!   [`TableError::CommitNotApplied`] (the reply was lost and a reload shows it was not applied),
//!   and changes nothing in the table: the caller reloads the table and redoes its batch against
//!   the new state ([`TableError::is_retryable_commit`]). [`TableError::CommitUnknown`] (not even
//!   a reload answered) stops the command; the next run finds the commit by its snapshot.
//! - Files written before a lost swap (data files, manifest, manifest list, metadata file) stay
//!   in storage unreferenced. Cleaning orphans is out of scope here; they never become visible.

use std::collections::{HashMap, HashSet};

use arrow_array::RecordBatch;
use chrono::{DateTime, Utc};
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, MAIN_BRANCH, ManifestListWriter, ManifestWriterBuilder,
    Operation, PartitionKey, Snapshot, SnapshotReference, Struct, Summary, TableMetadata, TableMetadataBuilder,
};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator, FileNameGenerator, LocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{TableRequirement, TableUpdate};
use parquet::file::properties::WriterProperties;
use uuid::Uuid;

use super::avro_codec::AvroCodec;
use super::files::{LiveFile, SnapshotFiles, snapshot_files, still_applies, unbounded_position_paths};
use super::{TableError, arrow_schema, iceberg_err};
use crate::catalog::{CatalogHandle, CommitRequest};

/// The identity of one write or commit, minted by the caller (library code takes ids and time
/// injected, so drills replay exactly). `id` names the files; `at` is the snapshot time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStamp {
    pub id: Uuid,
    pub at: DateTime<Utc>,
}

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
        writer_properties(&name, meta.properties(), &props)?,
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
    let mut out = Vec::new();
    for (key, batches) in groups {
        let rolling = RollingFileWriterBuilder::new(
            parquet.clone(),
            props.write_target_file_size_bytes,
            table.file_io().clone(),
            locations.clone(),
            names.clone(),
        );
        let mut writer = DataFileWriterBuilder::new(rolling)
            .build(key)
            .await
            .map_err(iceberg_err(&context))?;
        for batch in batches {
            writer.write(batch).await.map_err(iceberg_err(&context))?;
        }
        out.extend(writer.close().await.map_err(iceberg_err(&context))?);
    }
    Ok(out)
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

/// The Parquet writer settings of the table: `write.parquet.compression-codec` (default zstd, as
/// Java and PyIceberg default; `zstd`, `snappy` or `uncompressed`/`none` — this build has no
/// gzip, brotli or lz4, and a table asking for one is refused before anything is written),
/// `write.parquet.compression-level` for zstd (default 3, Java's), and the content-defined
/// chunking keys iceberg-rust translates.
pub fn writer_properties(
    table: &str,
    properties: &HashMap<String, String>,
    props: &iceberg::spec::TableProperties,
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
                None => 3,
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
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_content_defined_chunking(cdc)
        .build())
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
        s.fields().iter().map(|f| super::files::field_id(f)).collect()
    };
    let by_id = ids(schema).iter().all(Option::is_some) && ids(schema) == ids(batch.schema_ref());
    if found != wanted && !by_id {
        return Err(fail(format!("columns {found:?}, the table has {wanted:?}")));
    }
    RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| fail(e.to_string()))
}

/// The live files of the current snapshot (none for a table without a snapshot).
pub(crate) async fn current_files(table: &Table) -> Result<SnapshotFiles, TableError> {
    let Some(snapshot) = table.metadata().current_snapshot() else {
        return Ok(SnapshotFiles::default());
    };
    let name = table.identifier().to_string();
    snapshot_files(table.file_io(), &name, snapshot.manifest_list(), &|p| p.to_string()).await
}

/// All data files of the table's current snapshot (none for a table without a snapshot).
pub async fn live_data_files(table: &Table) -> Result<Vec<DataFile>, TableError> {
    Ok(current_files(table).await?.data.into_iter().map(|f| f.file).collect())
}

/// Counts for the snapshot summary.
#[derive(Default)]
struct Counts {
    added_files: u64,
    added_records: u64,
    added_size: u64,
    deleted_files: u64,
    deleted_records: u64,
    removed_size: u64,
    total_files: u64,
    total_records: u64,
    total_size: u64,
    /// Delete files: kept (total) and dropped because no remaining data file needs them.
    total_delete_files: u64,
    total_position_deletes: u64,
    total_equality_deletes: u64,
    total_delete_size: u64,
    removed_delete_files: u64,
    removed_position_deletes: u64,
    removed_equality_deletes: u64,
    removed_delete_size: u64,
    /// Position delete files this commit adds (merge-on-read).
    added_delete_files: u64,
    added_position_deletes: u64,
    added_delete_size: u64,
}

/// Commits a snapshot of `table` that removes the data files `removed` (paths of live files) and
/// adds `added`: an OVERWRITE, or an APPEND when nothing is removed. `summary` goes into the
/// snapshot summary next to the standard counts (which win on a name clash). Returns the table
/// as committed. See the module documentation for the contract.
pub async fn commit_overwrite(
    handle: &CatalogHandle,
    table: &Table,
    removed: &[String],
    added: Vec<DataFile>,
    summary: HashMap<String, String>,
    stamp: CommitStamp,
) -> Result<Table, TableError> {
    commit_row_delta(handle, table, removed, added, Vec::new(), summary, stamp).await
}

/// [`commit_overwrite`] that also adds position delete files (`added_deletes`, merge-on-read: the
/// rows they name, in data files live before this commit, are replaced by rows of `added`). They
/// go into a delete manifest of their own at this commit's sequence number, so they apply to
/// every data file that was live before it and to none of the files it adds.
pub async fn commit_row_delta(
    handle: &CatalogHandle,
    table: &Table,
    removed: &[String],
    added: Vec<DataFile>,
    added_deletes: Vec<DataFile>,
    summary: HashMap<String, String>,
    stamp: CommitStamp,
) -> Result<Table, TableError> {
    let ident = table.identifier();
    let name = ident.to_string();
    let meta = table.metadata();
    check_supported(&name, meta)?;
    use_avro_codec(&name, meta)?;
    if removed.is_empty() && added.is_empty() && added_deletes.is_empty() {
        return Err(TableError::EmptyCommit { table: name });
    }
    if let Some(f) = added_deletes
        .iter()
        .find(|f| f.content_type() != DataContentType::PositionDeletes)
    {
        return Err(TableError::Unsupported {
            table: name,
            reason: format!("{} is not a position delete file", f.file_path()),
        });
    }
    let expected = table
        .metadata_location_result()
        .map_err(iceberg_err(format!("metadata location of {name}")))?
        .to_string();

    let current = current_files(table).await?;
    let live: HashSet<&str> = current.data.iter().map(|e| e.file.file_path()).collect();
    let removed: HashSet<&str> = removed.iter().map(String::as_str).collect();
    if let Some(path) = removed.iter().find(|p| !live.contains(**p)) {
        return Err(TableError::FileNotLive {
            table: name,
            path: path.to_string(),
        });
    }
    let mut added_paths = HashSet::new();
    let partition_fields = meta.default_partition_spec().fields().len();
    for file in &added {
        if file.content_type() != DataContentType::Data || file.partition().fields().len() != partition_fields {
            return Err(TableError::Unsupported {
                table: name,
                reason: format!(
                    "{} is not a data file of the table's partition spec ({partition_fields} partition fields)",
                    file.file_path()
                ),
            });
        }
        if live.contains(file.file_path()) || !added_paths.insert(file.file_path()) {
            return Err(TableError::FileAlreadyLive {
                table: name,
                path: file.file_path().to_string(),
            });
        }
    }

    let snapshot_id = new_snapshot_id(stamp.id, meta);
    // Format version 2: the next sequence number is last_sequence_number + 1.
    let sequence_number = meta.next_sequence_number();
    let metadata_dir = format!("{}/metadata", meta.location());
    let io_err = |what: &str| iceberg_err(format!("{what} for {name}"));

    // The snapshot id is unique in this table, so a reused stamp can never overwrite a manifest
    // that an earlier snapshot references.
    // One data manifest per partition spec (a manifest's entries all follow its spec): the
    // default spec's holds the added files; files of an older spec keep theirs.
    let default_spec = meta.default_partition_spec_id();
    let mut writers: Vec<(i32, iceberg::spec::ManifestWriter)> = Vec::new();
    let writer_for =
        |writers: &mut Vec<(i32, iceberg::spec::ManifestWriter)>, spec_id: i32| -> Result<usize, TableError> {
            if let Some(n) = writers.iter().position(|(s, _)| *s == spec_id) {
                return Ok(n);
            }
            let spec = meta
                .partition_spec_by_id(spec_id)
                .ok_or_else(|| TableError::Unsupported {
                    table: name.clone(),
                    reason: format!("a data manifest names partition spec {spec_id}, which the table does not have"),
                })?;
            let path = format!("{metadata_dir}/{}-{snapshot_id}-m{}.avro", stamp.id, writers.len());
            let output = table.file_io().new_output(&path).map_err(io_err("open the manifest"))?;
            let writer = ManifestWriterBuilder::new(
                output,
                Some(snapshot_id),
                meta.current_schema().clone(),
                spec.as_ref().clone(),
            )
            .build_v2_data();
            writers.push((spec_id, writer));
            Ok(writers.len() - 1)
        };
    let mut counts = Counts::default();
    // The data files live after this commit, with their data sequence numbers.
    let mut remaining: Vec<(String, i64)> = Vec::with_capacity(current.data.len() + added.len());
    for file in &added {
        remaining.push((file.file_path().to_string(), sequence_number));
    }
    for file in added {
        counts.added_files += 1;
        counts.added_records += file.record_count();
        counts.added_size += file.file_size_in_bytes();
        let n = writer_for(&mut writers, default_spec)?;
        writers[n]
            .1
            .add_file(file, sequence_number)
            .map_err(io_err("add a data file to the manifest"))?;
    }
    for entry in &current.data {
        let file = &entry.file;
        let (seq, file_seq) = (entry.sequence, Some(entry.file_sequence));
        let n = writer_for(&mut writers, entry.spec_id)?;
        let writer = &mut writers[n].1;
        if removed.contains(file.file_path()) {
            counts.deleted_files += 1;
            counts.deleted_records += file.record_count();
            counts.removed_size += file.file_size_in_bytes();
            writer
                .add_delete_file(file.clone(), seq, file_seq)
                .map_err(io_err("mark a file deleted"))?;
        } else {
            remaining.push((file.file_path().to_string(), seq));
            counts.total_files += 1;
            counts.total_records += file.record_count();
            counts.total_size += file.file_size_in_bytes();
            writer
                .add_existing_file(file.clone(), entry.snapshot_id, seq, file_seq)
                .map_err(io_err("keep a file in the manifest"))?;
        }
    }
    counts.total_files += counts.added_files;
    counts.total_records += counts.added_records;
    counts.total_size += counts.added_size;
    let mut data_manifests = Vec::with_capacity(writers.len());
    for (_, writer) in writers {
        data_manifests.push(
            writer
                .write_manifest_file()
                .await
                .map_err(io_err("write the manifest"))?,
        );
    }
    let remaining: Vec<(&str, i64)> = remaining.iter().map(|(p, s)| (p.as_str(), *s)).collect();

    // Delete files of other writers: those that can still remove a row of a remaining data file
    // stay; the others (their rows were carried into new files, or their files are gone) are
    // dropped. A delete manifest without a dropped file is carried as it is; one with a dropped
    // file is written again, the dropped files marked DELETED.
    let unbounded = unbounded_position_paths(table.file_io(), &name, &current.deletes).await?;
    let dropped: HashSet<&str> = current
        .deletes
        .iter()
        .filter(|d| !still_applies(d, &remaining, unbounded.get(d.file.file_path())))
        .map(|d| d.file.file_path())
        .collect();
    for del in &current.deletes {
        let f = &del.file;
        let (files, records, size) = if dropped.contains(f.file_path()) {
            (
                &mut counts.removed_delete_files,
                if f.content_type() == DataContentType::PositionDeletes {
                    &mut counts.removed_position_deletes
                } else {
                    &mut counts.removed_equality_deletes
                },
                &mut counts.removed_delete_size,
            )
        } else {
            (
                &mut counts.total_delete_files,
                if f.content_type() == DataContentType::PositionDeletes {
                    &mut counts.total_position_deletes
                } else {
                    &mut counts.total_equality_deletes
                },
                &mut counts.total_delete_size,
            )
        };
        *files += 1;
        *records += f.record_count();
        *size += f.file_size_in_bytes();
    }
    let mut delete_manifests = Vec::with_capacity(current.delete_manifests.len() + 1);
    if !added_deletes.is_empty() {
        let spec = meta.default_partition_spec();
        let path = format!("{metadata_dir}/{}-{snapshot_id}-d-added.avro", stamp.id);
        let mut writer = delete_manifest_writer(table, &path, snapshot_id, spec)?;
        for f in added_deletes {
            counts.added_delete_files += 1;
            counts.added_position_deletes += f.record_count();
            counts.added_delete_size += f.file_size_in_bytes();
            counts.total_delete_files += 1;
            counts.total_position_deletes += f.record_count();
            counts.total_delete_size += f.file_size_in_bytes();
            writer
                .add_file(f, sequence_number)
                .map_err(io_err("add a position delete file"))?;
        }
        delete_manifests.push(
            writer
                .write_manifest_file()
                .await
                .map_err(io_err("write a delete manifest"))?,
        );
    }
    for (n, manifest) in current.delete_manifests.iter().enumerate() {
        let entries: Vec<&LiveFile> = current
            .deletes
            .iter()
            .filter(|d| d.manifest == manifest.manifest_path)
            .collect();
        if !entries.iter().any(|d| dropped.contains(d.file.file_path())) {
            delete_manifests.push(manifest.clone());
            continue;
        }
        let spec = meta
            .partition_spec_by_id(manifest.partition_spec_id)
            .ok_or_else(|| TableError::Unsupported {
                table: name.clone(),
                reason: format!(
                    "delete manifest {} names partition spec {}, which the table does not have",
                    manifest.manifest_path, manifest.partition_spec_id
                ),
            })?;
        let path = format!("{metadata_dir}/{}-{snapshot_id}-d{n}.avro", stamp.id);
        let mut writer = delete_manifest_writer(table, &path, snapshot_id, spec)?;
        for del in entries {
            if dropped.contains(del.file.file_path()) {
                writer
                    .add_delete_file(del.file.clone(), del.sequence, Some(del.file_sequence))
                    .map_err(io_err("mark a delete file deleted"))?;
            } else {
                writer
                    .add_existing_file(del.file.clone(), del.snapshot_id, del.sequence, Some(del.file_sequence))
                    .map_err(io_err("keep a delete file"))?;
            }
        }
        delete_manifests.push(
            writer
                .write_manifest_file()
                .await
                .map_err(io_err("write a delete manifest"))?,
        );
    }

    // Java's name for a manifest list: snap-<snapshot id>-<attempt>-<commit uuid>.avro.
    let list_path = format!("{metadata_dir}/snap-{snapshot_id}-1-{}.avro", stamp.id);
    let list_out = table
        .file_io()
        .new_output(&list_path)
        .map_err(io_err("open the manifest list"))?
        .writer()
        .await
        .map_err(io_err("open the manifest list"))?;
    let mut list = ManifestListWriter::v2(list_out, snapshot_id, meta.current_snapshot_id(), sequence_number);
    list.add_manifests(data_manifests.into_iter().chain(delete_manifests))
        .map_err(io_err("list the manifests"))?;
    list.close().await.map_err(io_err("write the manifest list"))?;

    let operation = if removed.is_empty() && counts.added_delete_files == 0 {
        Operation::Append
    } else {
        Operation::Overwrite
    };
    let mut properties = summary;
    properties.extend(summary_counts(&counts));
    let snapshot = NewSnapshot {
        id: snapshot_id,
        sequence_number,
        manifest_list: list_path,
        operation,
        properties,
    };
    publish_snapshot(handle, table, &expected, snapshot, &stamp).await
}

/// A v2 delete manifest of `snapshot_id` at `path`, for files of partition spec `spec`.
fn delete_manifest_writer(
    table: &Table,
    path: &str,
    snapshot_id: i64,
    spec: &iceberg::spec::PartitionSpecRef,
) -> Result<iceberg::spec::ManifestWriter, TableError> {
    let output = table
        .file_io()
        .new_output(path)
        .map_err(iceberg_err(format!("open the delete manifest {path}")))?;
    Ok(ManifestWriterBuilder::new(
        output,
        Some(snapshot_id),
        table.metadata().current_schema().clone(),
        spec.as_ref().clone(),
    )
    .build_v2_deletes())
}

/// A snapshot to publish on `main` ([`publish_snapshot`]).
struct NewSnapshot {
    id: i64,
    sequence_number: i64,
    manifest_list: String,
    operation: Operation,
    properties: HashMap<String, String>,
}

/// Builds the metadata that adds `new` on top of `table` (loaded from `expected`) as `main`'s
/// snapshot, and publishes it through the catalog contract.
async fn publish_snapshot(
    handle: &CatalogHandle,
    table: &Table,
    expected: &str,
    new: NewSnapshot,
    stamp: &CommitStamp,
) -> Result<Table, TableError> {
    let meta = table.metadata();
    // The metadata builder refuses a snapshot more than a minute older than the table's last
    // update, and time travel by timestamp needs snapshot times that increase: a clock behind
    // the table's history is raised to just after it.
    let timestamp_ms = stamp.at.timestamp_millis().max(meta.last_updated_ms() + 1);
    let snapshot = Snapshot::builder()
        .with_snapshot_id(new.id)
        .with_parent_snapshot_id(meta.current_snapshot_id())
        .with_sequence_number(new.sequence_number)
        .with_timestamp_ms(timestamp_ms)
        .with_manifest_list(new.manifest_list)
        .with_summary(Summary {
            operation: new.operation,
            additional_properties: new.properties,
        })
        .with_schema_id(meta.current_schema_id())
        .build();
    let new_metadata = TableMetadataBuilder::new_from_metadata(meta.clone(), Some(expected.to_string()))
        .set_branch_snapshot(snapshot, MAIN_BRANCH)
        .and_then(|b| b.build())
        .map_err(iceberg_err(format!(
            "build the new table metadata for {}",
            table.identifier()
        )))?
        .metadata;
    publish(handle, table, expected, new_metadata).await
}

/// Adds or moves references (tags and branches other than `main`) of `table` to existing
/// snapshots, in a metadata-only commit published like [`commit_overwrite`]'s: required, the
/// table's uuid and each reference where it was when `table` was loaded; updates, one
/// `set-snapshot-ref` per reference. `at` is the caller's time of the decision; the catalog stamps
/// the metadata itself. Returns the table as committed.
pub async fn commit_refs(
    handle: &CatalogHandle,
    table: &Table,
    refs: Vec<(String, SnapshotReference)>,
    _at: DateTime<Utc>,
) -> Result<Table, TableError> {
    let name = table.identifier().to_string();
    let meta = table.metadata();
    let invalid = |reason: String| TableError::Unsupported {
        table: name.clone(),
        reason,
    };
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: meta.uuid() }];
    let mut updates = Vec::with_capacity(refs.len());
    for (ref_name, reference) in refs {
        if ref_name == MAIN_BRANCH {
            return Err(invalid(
                "commit_refs does not move main; commit a snapshot instead".into(),
            ));
        }
        if meta.snapshot_by_id(reference.snapshot_id).is_none() {
            return Err(invalid(format!(
                "reference {ref_name} names snapshot {}, which the table does not have",
                reference.snapshot_id
            )));
        }
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: ref_name.clone(),
            snapshot_id: meta.snapshot_for_ref(&ref_name).map(|s| s.snapshot_id()),
        });
        updates.push(TableUpdate::SetSnapshotRef { ref_name, reference });
    }
    Ok(handle.commit(table, CommitRequest { requirements, updates }).await?)
}

/// Test support: commits a snapshot that adds `deletes` (position or equality delete files) in a
/// delete manifest of their own, every existing manifest carried, as another engine's
/// merge-on-read delete does (iceberg-rust 0.10.1 has no row-delta action).
#[cfg(test)]
pub(crate) async fn commit_delete_files(
    handle: &CatalogHandle,
    table: &Table,
    deletes: Vec<DataFile>,
    stamp: CommitStamp,
) -> Result<Table, TableError> {
    let name = table.identifier().to_string();
    let meta = table.metadata();
    let io_err = |what: &str| iceberg_err(format!("{what} for {name}"));
    let expected = table
        .metadata_location_result()
        .map_err(io_err("metadata location"))?
        .to_string();
    use_avro_codec(&name, meta)?;
    let snapshot = meta.current_snapshot().expect("a table with data");
    let existing = table
        .manifest_list_reader(snapshot)
        .load()
        .await
        .map_err(io_err("read the manifest list"))?
        .consume_entries();
    let snapshot_id = new_snapshot_id(stamp.id, meta);
    let sequence_number = meta.next_sequence_number();
    let metadata_dir = format!("{}/metadata", meta.location());
    let path = format!("{metadata_dir}/{}-{snapshot_id}-deletes.avro", stamp.id);
    let mut writer = delete_manifest_writer(table, &path, snapshot_id, meta.default_partition_spec())?;
    let (mut pos, mut eq) = (0u64, 0u64);
    let (n, size): (u64, u64) = (
        deletes.len() as u64,
        deletes.iter().map(|f| f.file_size_in_bytes()).sum(),
    );
    for f in deletes {
        match f.content_type() {
            DataContentType::PositionDeletes => pos += f.record_count(),
            _ => eq += f.record_count(),
        }
        writer.add_file(f, sequence_number).map_err(io_err("add"))?;
    }
    let manifest = writer.write_manifest_file().await.map_err(io_err("write"))?;
    let list_path = format!("{metadata_dir}/snap-{snapshot_id}-1-{}.avro", stamp.id);
    let out = table
        .file_io()
        .new_output(&list_path)
        .map_err(io_err("open"))?
        .writer()
        .await
        .map_err(io_err("open"))?;
    let mut list = ManifestListWriter::v2(out, snapshot_id, meta.current_snapshot_id(), sequence_number);
    list.add_manifests(existing.into_iter().chain(std::iter::once(manifest)))
        .map_err(io_err("list"))?;
    list.close().await.map_err(io_err("close"))?;
    let summary = HashMap::from([
        ("added-delete-files".to_string(), n.to_string()),
        ("added-position-deletes".to_string(), pos.to_string()),
        ("added-equality-deletes".to_string(), eq.to_string()),
        ("added-files-size".to_string(), size.to_string()),
    ]);
    let snapshot = NewSnapshot {
        id: snapshot_id,
        sequence_number,
        manifest_list: list_path,
        operation: Operation::Delete,
        properties: summary,
    };
    publish_snapshot(handle, table, &expected, snapshot, &stamp).await
}

/// Sets table properties of `table` in a metadata-only commit (no new snapshot), through the
/// catalog contract like every commit. Returns the table as committed.
pub async fn commit_properties(
    handle: &CatalogHandle,
    table: &Table,
    properties: HashMap<String, String>,
) -> Result<Table, TableError> {
    let request = CommitRequest {
        requirements: vec![TableRequirement::UuidMatch {
            uuid: table.metadata().uuid(),
        }],
        updates: vec![TableUpdate::SetProperties { updates: properties }],
    };
    Ok(handle.commit(table, request).await?)
}

/// Publishes `new_metadata` (built from `table`'s metadata) through the catalog as a commit:
/// the snapshots it adds and the references it adds or moves, required to apply to the table as
/// it was loaded (its uuid, each moved reference where it was). A moved table is a
/// [`TableError::CommitConflict`]; a lost reply is resolved by reloading (see
/// [`crate::catalog::contract`]).
async fn publish(
    handle: &CatalogHandle,
    table: &Table,
    _expected: &str,
    new_metadata: TableMetadata,
) -> Result<Table, TableError> {
    let request = commit_request(table, &new_metadata)?;
    Ok(handle.commit(table, request).await?)
}

/// The commit that turns `table`'s metadata into `new`, as requirements and updates.
fn commit_request(table: &Table, new: &TableMetadata) -> Result<CommitRequest, TableError> {
    let base = table.metadata();
    let name = table.identifier().to_string();
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: base.uuid() }];
    let mut updates = Vec::new();
    let mut added: Vec<_> = new
        .snapshots()
        .filter(|s| base.snapshot_by_id(s.snapshot_id()).is_none())
        .collect();
    added.sort_by_key(|s| s.sequence_number());
    for snapshot in added {
        updates.push(TableUpdate::AddSnapshot {
            snapshot: snapshot.as_ref().clone(),
        });
    }
    // The refs map has no accessor in iceberg-rust 0.10.1; it is read from the serialized form.
    let refs = |m: &TableMetadata| -> Result<serde_json::Map<String, serde_json::Value>, TableError> {
        let json = serde_json::to_value(m).map_err(|e| TableError::Unsupported {
            table: name.clone(),
            reason: format!("cannot serialize the metadata: {e}"),
        })?;
        Ok(json
            .get("refs")
            .and_then(|r| r.as_object())
            .cloned()
            .unwrap_or_default())
    };
    let (before, after) = (refs(base)?, refs(new)?);
    // `main` first, as fast_append orders them.
    let mut names: Vec<&String> = after.keys().collect();
    names.sort_by_key(|n| (n.as_str() != MAIN_BRANCH, n.as_str()));
    for ref_name in names {
        let value = &after[ref_name];
        if before.get(ref_name) == Some(value) {
            continue;
        }
        let reference: SnapshotReference =
            serde_json::from_value(value.clone()).map_err(|e| TableError::Unsupported {
                table: name.clone(),
                reason: format!("reference {ref_name} does not parse: {e}"),
            })?;
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: ref_name.clone(),
            snapshot_id: base.snapshot_for_ref(ref_name).map(|s| s.snapshot_id()),
        });
        updates.push(TableUpdate::SetSnapshotRef {
            ref_name: ref_name.clone(),
            reference,
        });
    }
    if let Some(gone) = before.keys().find(|n| !after.contains_key(*n)) {
        return Err(TableError::Unsupported {
            table: name,
            reason: format!("the commit would remove reference {gone}, which tidemark never does"),
        });
    }
    Ok(CommitRequest { requirements, updates })
}

/// The hand-made snapshot supports format v2 tables (partitioned or not: files are written per
/// partition of the default spec) whose codecs this build writes ([`check_codecs`]). Writers
/// call it before they write anything, so that a refused table gets no unreferenced file.
pub fn check_supported(name: &str, meta: &TableMetadata) -> Result<(), TableError> {
    let unsupported = |reason: String| {
        Err(TableError::Unsupported {
            table: name.to_string(),
            reason,
        })
    };
    if meta.format_version() != FormatVersion::V2 {
        return unsupported(format!("format {} (only v2 is supported)", meta.format_version()));
    }
    check_codecs(name, meta)
}

/// Refuses a table whose properties ask for a Parquet or an Avro (manifest) codec this build
/// does not write (see [`writer_properties`], [`AvroCodec::from_properties`]).
pub fn check_codecs(name: &str, meta: &TableMetadata) -> Result<(), TableError> {
    let props = meta
        .table_properties()
        .map_err(iceberg_err(format!("read the properties of {name}")))?;
    writer_properties(name, meta.properties(), &props)?;
    AvroCodec::from_properties(meta.properties()).map_err(|reason| TableError::Unsupported {
        table: name.to_string(),
        reason,
    })?;
    Ok(())
}

/// Makes the manifests and manifest list that a commit to `meta`'s table writes next use the
/// codec of its `write.avro.compression-codec` (see [`crate::catalog::avro_io`]).
fn use_avro_codec(name: &str, meta: &TableMetadata) -> Result<(), TableError> {
    let codec = AvroCodec::from_properties(meta.properties()).map_err(|reason| TableError::Unsupported {
        table: name.to_string(),
        reason,
    })?;
    crate::catalog::avro_io::set_table_codec(meta.location(), codec);
    Ok(())
}

/// A snapshot id from the commit id, positive as the spec asks and unused in this table.
fn new_snapshot_id(id: Uuid, meta: &TableMetadata) -> i64 {
    let (hi, lo) = id.as_u64_pair();
    let mut snapshot_id = ((hi ^ lo) & i64::MAX as u64) as i64;
    while snapshot_id == 0 || meta.snapshot_by_id(snapshot_id).is_some() {
        snapshot_id = snapshot_id.wrapping_add(1) & i64::MAX;
    }
    snapshot_id
}

/// The standard summary counts. Totals are counted from the files themselves rather than
/// carried from the parent's summary, which another writer may have left out. Sizes count data
/// and delete files, as Java and PyIceberg do.
fn summary_counts(counts: &Counts) -> HashMap<String, String> {
    let mut out: Vec<(&str, u64)> = vec![
        ("added-data-files", counts.added_files),
        ("deleted-data-files", counts.deleted_files),
        ("added-records", counts.added_records),
        ("deleted-records", counts.deleted_records),
        ("added-files-size", counts.added_size + counts.added_delete_size),
        ("removed-files-size", counts.removed_size + counts.removed_delete_size),
        ("total-data-files", counts.total_files),
        ("total-records", counts.total_records),
        ("total-files-size", counts.total_size + counts.total_delete_size),
        ("total-delete-files", counts.total_delete_files),
        ("total-position-deletes", counts.total_position_deletes),
        ("total-equality-deletes", counts.total_equality_deletes),
    ];
    if counts.added_delete_files > 0 {
        out.extend([
            ("added-delete-files", counts.added_delete_files),
            ("added-position-delete-files", counts.added_delete_files),
            ("added-position-deletes", counts.added_position_deletes),
        ]);
    }
    if counts.removed_delete_files > 0 {
        out.extend([
            ("removed-delete-files", counts.removed_delete_files),
            ("removed-position-deletes", counts.removed_position_deletes),
            ("removed-equality-deletes", counts.removed_equality_deletes),
        ]);
    }
    out.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        Array, ArrayRef, BooleanArray, Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };
    use arrow_schema::{DataType, Field, Schema};
    use chrono::TimeZone;
    use datafusion::prelude::SessionContext;
    use futures::TryStreamExt;
    use iceberg::spec::ManifestStatus;
    use iceberg::transaction::{ApplyTransactionAction, Transaction};
    use iceberg_datafusion::IcebergCatalogProvider;
    use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN, UTC};

    use super::*;
    use crate::table::test_support::catalog_in;
    use crate::table::{create_or_load_table, load_table};

    const TABLE: &str = "shop.orders";

    /// Stamps with fixed ids and a clock in 2023, behind the table's creation time on purpose:
    /// the commit raises it to the table's last update.
    fn stamp(n: u128) -> CommitStamp {
        CommitStamp {
            id: Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0000 + n),
            at: Utc.timestamp_opt(1_700_000_000 + n as i64, 0).unwrap(),
        }
    }

    /// Orders rows `(order_id, order_version)` as a batch without field ids (the writer adds them).
    fn orders(rows: &[(&str, i64)]) -> RecordBatch {
        let spec = CompiledSpec::orders();
        let n = rows.len();
        let versions: Vec<i64> = rows.iter().map(|r| r.1).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
            Arc::new(Int64Array::from(versions.clone())),
            Arc::new(StringArray::from(vec!["cust-1"; n])),
            Arc::new(StringArray::from(vec!["open"; n])),
            Arc::new(
                Decimal128Array::from(vec![1999_i128; n])
                    .with_precision_and_scale(18, 2)
                    .unwrap(),
            ),
            Arc::new(StringArray::from(vec!["EUR"; n])),
            Arc::new(BooleanArray::from(vec![false; n])),
            Arc::new(TimestampMicrosecondArray::from(vec![1_700_000_000_000_000_i64; n]).with_timezone(UTC)),
            Arc::new(Int64Array::from(versions.iter().map(|v| v * 100).collect::<Vec<_>>())),
        ];
        let mut fields: Vec<Field> = spec
            .spec
            .columns
            .iter()
            .zip(&spec.types)
            .map(|(c, t)| Field::new(&c.name, t.arrow_type(), c.nullable))
            .collect();
        fields.push(Field::new(POSITION_COLUMN, DataType::Int64, false));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn want(rows: &[(&str, i64)]) -> Vec<(String, i64)> {
        let mut v: Vec<_> = rows.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        v.sort();
        v
    }

    /// `(order_id, order_version)` of every row a scan returns, sorted.
    async fn rows(table: &Table, snapshot_id: Option<i64>) -> Vec<(String, i64)> {
        let mut scan = table.scan();
        if let Some(id) = snapshot_id {
            scan = scan.snapshot_id(id);
        }
        let batches: Vec<RecordBatch> = scan
            .build()
            .unwrap()
            .to_arrow()
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let mut out = Vec::new();
        for b in &batches {
            let ids = b
                .column_by_name("order_id")
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let versions = b
                .column_by_name("order_version")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            for i in 0..b.num_rows() {
                out.push((ids.value(i).to_string(), versions.value(i)));
            }
        }
        out.sort();
        out
    }

    fn paths(files: &[DataFile]) -> Vec<String> {
        let mut v: Vec<String> = files.iter().map(|f| f.file_path().to_string()).collect();
        v.sort();
        v
    }

    #[tokio::test]
    async fn overwrite_replaces_a_file_and_keeps_history() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let table = create_or_load_table(&handle, TABLE, &CompiledSpec::orders())
            .await
            .unwrap();
        let f1 = write_data_file(&table, &[orders(&[("a", 1), ("b", 1)])], stamp(1).id)
            .await
            .unwrap();
        let f2 = write_data_file(&table, &[orders(&[("c", 1), ("d", 1)])], stamp(2).id)
            .await
            .unwrap();
        assert_eq!((f1.len(), f2.len()), (1, 1));
        assert!(
            f1[0]
                .file_path()
                .starts_with(&format!("{}/data/{}", table.metadata().location(), stamp(1).id))
        );

        // The first commit goes through iceberg-rust's fast_append, whose ADDED entries leave
        // their sequence numbers to inheritance: the overwrite must carry them correctly.
        let tx = Transaction::new(&table);
        let tx = tx
            .fast_append()
            .add_data_files(f1.iter().chain(&f2).cloned())
            .apply(tx)
            .unwrap();
        let t1 = tx.commit(handle.catalog().as_ref()).await.unwrap();
        let first = t1.metadata().current_snapshot().unwrap().clone();
        assert_eq!(rows(&t1, None).await, want(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)]));

        let f3 = write_data_file(&t1, &[orders(&[("a", 2), ("b", 1)])], stamp(3).id)
            .await
            .unwrap();
        let summary = HashMap::from([("tidemark.batch".to_string(), "7".to_string())]);
        let removed = [f1[0].file_path().to_string()];
        let t2 = commit_overwrite(&handle, &t1, &removed, f3.clone(), summary, stamp(3))
            .await
            .unwrap();

        let snap = t2.metadata().current_snapshot().unwrap().clone();
        assert_eq!(snap.summary().operation, Operation::Overwrite);
        let props = &snap.summary().additional_properties;
        for (k, v) in [
            ("added-data-files", "1"),
            ("deleted-data-files", "1"),
            ("added-records", "2"),
            ("deleted-records", "2"),
            ("total-records", "4"),
            ("total-data-files", "2"),
            ("total-delete-files", "0"),
            ("tidemark.batch", "7"),
        ] {
            assert_eq!(props.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(snap.sequence_number(), first.sequence_number() + 1);
        assert_eq!(snap.parent_snapshot_id(), Some(first.snapshot_id()));
        assert!(snap.timestamp_ms() > first.timestamp_ms());
        assert_eq!(rows(&t2, None).await, want(&[("a", 2), ("b", 1), ("c", 1), ("d", 1)]));
        // Time travel: the previous snapshot still reads its rows.
        assert_eq!(
            rows(&t2, Some(first.snapshot_id())).await,
            want(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)])
        );

        // The catalog points at the new metadata file (version 2: create, fast_append, ours).
        let reloaded = load_table(&handle, TABLE).await.unwrap();
        assert_eq!(reloaded.metadata_location(), t2.metadata_location());
        assert!(
            reloaded.metadata_location().unwrap().contains("/metadata/00002-"),
            "{:?}",
            reloaded.metadata_location()
        );
        assert_eq!(reloaded.metadata().metadata_log().len(), 2);
        assert_eq!(
            paths(&live_data_files(&reloaded).await.unwrap()),
            paths(&[f2[0].clone(), f3[0].clone()])
        );

        // One manifest says exactly what changed; the kept file keeps its snapshot and sequence.
        let list = reloaded.manifest_list_reader(&snap).load().await.unwrap();
        assert_eq!(list.entries().len(), 1);
        let manifest = list.entries()[0].load_manifest(reloaded.file_io()).await.unwrap();
        let entry = |path: &str| {
            manifest
                .entries()
                .iter()
                .find(|e| e.file_path() == path)
                .unwrap()
                .clone()
        };
        let gone = entry(f1[0].file_path());
        assert_eq!(gone.status(), ManifestStatus::Deleted);
        assert_eq!(gone.snapshot_id(), Some(snap.snapshot_id()));
        assert_eq!(gone.sequence_number(), Some(first.sequence_number()));
        let kept = entry(f2[0].file_path());
        assert_eq!(kept.status(), ManifestStatus::Existing);
        assert_eq!(kept.snapshot_id(), Some(first.snapshot_id()));
        assert_eq!(kept.sequence_number(), Some(first.sequence_number()));
        assert_eq!(kept.file_sequence_number, Some(first.sequence_number()));
        let new = entry(f3[0].file_path());
        assert_eq!(new.status(), ManifestStatus::Added);
        assert_eq!(new.sequence_number(), Some(snap.sequence_number()));

        // DataFusion, reading through the catalog, sees the new state.
        let ctx = SessionContext::new();
        let provider = IcebergCatalogProvider::try_new(handle.catalog().clone()).await.unwrap();
        ctx.register_catalog("tm", Arc::new(provider));
        let out = ctx
            .sql("SELECT count(*) AS n, sum(order_version) AS v FROM tm.shop.orders")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let n = out[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap().value(0);
        let v = out[0].column(1).as_any().downcast_ref::<Int64Array>().unwrap().value(0);
        assert_eq!((n, v), (4, 5));
    }

    #[tokio::test]
    async fn the_second_of_two_commits_from_one_base_conflicts_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let table = create_or_load_table(&handle, TABLE, &CompiledSpec::orders())
            .await
            .unwrap();

        // A first commit on a table without a snapshot is an append.
        let f1 = write_data_file(&table, &[orders(&[("a", 1), ("b", 1)])], stamp(1).id)
            .await
            .unwrap();
        let t1 = commit_overwrite(&handle, &table, &[], f1.clone(), HashMap::new(), stamp(1))
            .await
            .unwrap();
        let s1 = t1.metadata().current_snapshot().unwrap();
        assert_eq!(s1.summary().operation, Operation::Append);
        assert_eq!(s1.parent_snapshot_id(), None);
        assert_eq!(s1.sequence_number(), 1);
        assert_eq!(s1.summary().additional_properties["total-records"], "2");
        assert_eq!(
            load_table(&handle, TABLE).await.unwrap().metadata_location(),
            t1.metadata_location()
        );

        let removed = [f1[0].file_path().to_string()];
        let fa = write_data_file(&t1, &[orders(&[("a", 2), ("b", 1)])], stamp(2).id)
            .await
            .unwrap();
        let fb = write_data_file(&t1, &[orders(&[("a", 3), ("b", 1)])], stamp(3).id)
            .await
            .unwrap();
        let ta = commit_overwrite(&handle, &t1, &removed, fa, HashMap::new(), stamp(2))
            .await
            .unwrap();
        let err = commit_overwrite(&handle, &t1, &removed, fb, HashMap::new(), stamp(3))
            .await
            .unwrap_err();
        match &err {
            TableError::CommitConflict { table, detail } => {
                assert_eq!(table, TABLE);
                assert!(detail.contains(t1.metadata_location().unwrap()), "{detail}");
                assert!(detail.contains(ta.metadata_location().unwrap()), "{detail}");
            }
            other => panic!("unexpected {other}"),
        }
        assert!(err.to_string().contains("reload the table"), "{err}");

        let now = load_table(&handle, TABLE).await.unwrap();
        assert_eq!(now.metadata_location(), ta.metadata_location());
        assert_eq!(rows(&now, None).await, want(&[("a", 2), ("b", 1)]));

        // The loser reloads and redoes its batch on the new state.
        let live = paths(&live_data_files(&now).await.unwrap());
        let fb2 = write_data_file(&now, &[orders(&[("a", 3), ("b", 1)])], stamp(4).id)
            .await
            .unwrap();
        let tb = commit_overwrite(&handle, &now, &live, fb2, HashMap::new(), stamp(4))
            .await
            .unwrap();
        assert_eq!(rows(&tb, None).await, want(&[("a", 3), ("b", 1)]));
        assert_eq!(tb.metadata().current_snapshot().unwrap().sequence_number(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn of_concurrent_commits_exactly_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let table = create_or_load_table(&handle, TABLE, &CompiledSpec::orders())
            .await
            .unwrap();
        let f1 = write_data_file(&table, &[orders(&[("a", 1)])], stamp(1).id)
            .await
            .unwrap();
        let base = commit_overwrite(&handle, &table, &[], f1.clone(), HashMap::new(), stamp(1))
            .await
            .unwrap();
        let removed = [f1[0].file_path().to_string()];

        let mut prepared = Vec::new();
        for n in 2..6 {
            prepared.push((
                n,
                write_data_file(&base, &[orders(&[("a", n as i64)])], stamp(n).id)
                    .await
                    .unwrap(),
            ));
        }
        let tasks = prepared.into_iter().map(|(n, files)| {
            let (handle, base, removed) = (handle.clone(), base.clone(), removed.clone());
            tokio::spawn(
                async move { commit_overwrite(&handle, &base, &removed, files, HashMap::new(), stamp(n)).await },
            )
        });
        let results: Vec<_> = futures::future::join_all(tasks)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let winners: Vec<&Table> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, TableError::CommitConflict { .. }), "{e}");
            }
        }
        let now = load_table(&handle, TABLE).await.unwrap();
        assert_eq!(now.metadata_location(), winners[0].metadata_location());
        assert_eq!(rows(&now, None).await.len(), 1);
    }

    #[tokio::test]
    async fn bad_commits_are_refused_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let table = create_or_load_table(&handle, TABLE, &CompiledSpec::orders())
            .await
            .unwrap();
        let f1 = write_data_file(&table, &[orders(&[("a", 1)])], stamp(1).id)
            .await
            .unwrap();
        let t1 = commit_overwrite(&handle, &table, &[], f1.clone(), HashMap::new(), stamp(1))
            .await
            .unwrap();

        let err = commit_overwrite(&handle, &t1, &[], Vec::new(), HashMap::new(), stamp(2))
            .await
            .unwrap_err();
        assert!(matches!(err, TableError::EmptyCommit { .. }), "{err}");
        let err = commit_overwrite(
            &handle,
            &t1,
            &["file:///nope.parquet".into()],
            Vec::new(),
            HashMap::new(),
            stamp(2),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, TableError::FileNotLive { path, .. } if path == "file:///nope.parquet"),
            "{err}"
        );
        let err = commit_overwrite(&handle, &t1, &[], f1.clone(), HashMap::new(), stamp(2))
            .await
            .unwrap_err();
        assert!(matches!(err, TableError::FileAlreadyLive { .. }), "{err}");
        assert_eq!(
            load_table(&handle, TABLE).await.unwrap().metadata_location(),
            t1.metadata_location()
        );

        // A batch whose columns are not the table's is refused before anything is written.
        let batch = orders(&[("a", 1)]);
        let renamed = Schema::new(
            batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_name(f.name().to_uppercase()))
                .collect::<Vec<_>>(),
        );
        let bad = RecordBatch::try_new(Arc::new(renamed), batch.columns().to_vec()).unwrap();
        let err = write_data_file(&t1, &[bad], stamp(3).id).await.unwrap_err();
        assert!(matches!(err, TableError::BatchSchema { .. }), "{err}");
        assert!(
            write_data_file(&t1, &[batch.slice(0, 0)], stamp(3).id)
                .await
                .unwrap()
                .is_empty()
        );
        // Reusing a file id would overwrite a live data file.
        let err = write_data_file(&t1, &[batch], stamp(1).id).await.unwrap_err();
        assert!(
            matches!(&err, TableError::DataFileExists { path, .. } if path == f1[0].file_path()),
            "{err}"
        );
        assert_eq!(rows(&t1, None).await, want(&[("a", 1)]));
    }

    /// The codec of the first column chunk of each file.
    async fn codecs(table: &Table, files: &[DataFile]) -> Vec<parquet::basic::Compression> {
        let mut out = Vec::new();
        for f in files {
            let bytes = table.file_io().new_input(f.file_path()).unwrap().read().await.unwrap();
            let reader = parquet::file::reader::SerializedFileReader::new(bytes).unwrap();
            use parquet::file::reader::FileReader;
            out.push(reader.metadata().row_group(0).column(0).compression());
        }
        out
    }

    #[tokio::test]
    async fn data_files_honour_the_compression_codec_property() {
        use parquet::basic::Compression;
        let dir = tempfile::tempdir().unwrap();
        let handle = catalog_in(dir.path()).await;
        let spec = CompiledSpec::orders();
        // Default: zstd, as Java and PyIceberg write.
        let table = create_or_load_table(&handle, TABLE, &spec).await.unwrap();
        let files = write_data_file(&table, &[orders(&[("a", 1)])], stamp(1).id)
            .await
            .unwrap();
        assert!(
            matches!(codecs(&table, &files).await[..], [Compression::ZSTD(_)]),
            "{:?}",
            codecs(&table, &files).await
        );
        for (codec, ok) in [("snappy", true), ("uncompressed", true), ("gzip", false)] {
            let props = HashMap::from([(PROP_PARQUET_CODEC.to_string(), codec.to_string())]);
            let name = format!("shop.{codec}");
            let t = crate::table::create_table_with_properties(&handle, &name, &spec, props)
                .await
                .unwrap();
            let got = write_data_file(&t, &[orders(&[("a", 1)])], stamp(2).id).await;
            match (ok, got) {
                (true, Ok(files)) => {
                    let want = if codec == "snappy" {
                        Compression::SNAPPY
                    } else {
                        Compression::UNCOMPRESSED
                    };
                    assert_eq!(codecs(&t, &files).await, vec![want], "{codec}");
                }
                (false, Err(TableError::Unsupported { reason, .. })) => {
                    assert!(
                        reason.contains("gzip") && reason.contains(PROP_PARQUET_CODEC),
                        "{reason}"
                    );
                    let data =
                        std::path::PathBuf::from(t.metadata().location().strip_prefix("file://").unwrap()).join("data");
                    assert!(!data.exists(), "nothing written for a refused codec");
                }
                (_, other) => panic!("{codec}: {other:?}"),
            }
        }
    }
}
