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
//! - A commit that changed nothing (a conflict, not applied, failed before it was sent) removes
//!   the manifests and manifest list it wrote ([`written_by`]); an unknown outcome keeps them.
//!   Its data files stay with the caller, unreferenced; they never become visible.
//!
//! The children: [`checks`] (what a commit refuses before writing anything), [`write`] (data
//! files written as the table's Parquet settings say), [`publish`] (the catalog commit of the
//! new snapshot and of references), [`summary`] (the snapshot summary's counts).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use iceberg::spec::{
    DataContentType, DataFile, MAIN_BRANCH, ManifestListWriter, ManifestWriterBuilder, Operation, Snapshot, Summary,
    TableMetadata, TableMetadataBuilder,
};
use iceberg::table::Table;
use uuid::Uuid;

use super::deletes::{position_paths_to_read, still_applies};
use super::error::{TableError, iceberg_err};
use super::files::{LiveFile, SnapshotFiles, snapshot_files};
use crate::catalog::CatalogHandle;

mod checks;
mod publish;
mod summary;
mod write;
use checks::use_avro_codec;
pub use checks::{check_codecs, check_supported};
use publish::publish;
pub use publish::{commit_properties, commit_refs};
use summary::{Counts, summary_counts};
pub use write::{PROP_PARQUET_CODEC, PROP_PARQUET_LEVEL, copy_data_file, write_data_file, writer_properties};

/// The identity of one write or commit, minted by the caller (library code takes ids and time
/// injected, so drills replay exactly). `id` names the files; `at` is the snapshot time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitStamp {
    pub id: Uuid,
    pub at: DateTime<Utc>,
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
    // The data files this commit removes, with their data sequence numbers.
    let mut gone: Vec<(String, i64)> = Vec::new();
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
            gone.push((file.file_path().to_string(), seq));
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
    let gone: Vec<(&str, i64)> = gone.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    let read = position_paths_to_read(table.file_io(), &name, &current.deletes, &remaining, &gone).await?;
    let dropped: HashSet<&str> = current
        .deletes
        .iter()
        .filter(|d| !still_applies(d, &remaining, read.get(d.file.file_path())))
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
    let written = written_by(&stamp, &list_path, data_manifests.iter().chain(&delete_manifests));
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
        written,
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

/// The files this commit wrote into the metadata folder (its manifests and manifest list, each
/// named with the commit's own id), as opposed to the manifests it carries from the table.
fn written_by<'a>(
    stamp: &CommitStamp,
    list_path: &str,
    manifests: impl Iterator<Item = &'a iceberg::spec::ManifestFile>,
) -> Vec<String> {
    let id = stamp.id.to_string();
    manifests
        .map(|m| m.manifest_path.clone())
        .filter(|p| p.rsplit('/').next().is_some_and(|name| name.starts_with(&id)))
        .chain(std::iter::once(list_path.to_string()))
        .collect()
}

/// A snapshot to publish on `main` ([`publish_snapshot`]).
struct NewSnapshot {
    id: i64,
    sequence_number: i64,
    manifest_list: String,
    /// The manifests and the manifest list this commit wrote ([`written_by`]): removed when the
    /// commit is refused or found not applied, since nothing references them then.
    written: Vec<String>,
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
    let written = new.written.clone();
    let timestamp_ms = stamp.at.timestamp_millis().max(meta.last_updated_ms() + 1);
    let snapshot = Snapshot::builder()
        .with_snapshot_id(new.id)
        .with_parent_snapshot_id(meta.current_snapshot_id())
        .with_sequence_number(new.sequence_number)
        .with_timestamp_ms(timestamp_ms)
        .with_manifest_list(new.manifest_list.clone())
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
    let published = publish(handle, table, expected, new_metadata).await;
    // A commit that changed nothing (refused, found not applied, failed before anything was
    // sent) leaves its manifests and manifest list referenced by nothing: removed, so that they
    // do not take the room a re-run needs. An unknown outcome keeps them: the commit may be in.
    if let Err(e) = &published
        && !matches!(e, TableError::CommitUnknown { .. })
    {
        for path in &written {
            let _ = table.file_io().delete(path).await;
        }
    }
    published
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
    let written = written_by(&stamp, &list_path, std::iter::once(&manifest));
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
        written,
        operation: Operation::Delete,
        properties: summary,
    };
    publish_snapshot(handle, table, &expected, snapshot, &stamp).await
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

#[cfg(test)]
mod tests;
