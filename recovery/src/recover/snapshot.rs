//! Step 1: choose the trusted snapshot and prove its files are all there.
//!
//! The snapshot is read from the source table's catalog or from a DR replica's metadata file,
//! optionally through a prefix map (a replica copied under another root still names the source's
//! absolute paths until its metadata is rewritten). It is chosen by checkpoint (the newest at or
//! before a position), by snapshot id, or by tag, and it must come with the journal position it
//! holds: the position its own summary records, from the journal given, with which a checkpoint
//! naming it must agree ([`super::trust`]). Every file it references — manifest list, manifests, data files — must exist; the first
//! missing one is named and nothing is seeded.

use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, FormatVersion, ManifestList, Schema, TableMetadata};
use tidemark_journal::Journal;
use tidemark_journal::checkpoint::{self, CheckpointFilter};

use super::{RecoverError, trust};
use crate::table::files::{Deletes, snapshot_files};
pub use crate::table::source::{PrefixMap, SnapshotSource, file_io};

/// How to pick the snapshot.
#[derive(Debug, Clone)]
pub enum SnapshotChoice {
    /// The newest snapshot the audit trusts (no snapshot option): resolved by
    /// [`super::audited::resolve`] into one of the others.
    Trusted,
    /// The newest checkpoint of the table at or before a position (any when `None`).
    Checkpoint {
        at_or_before: Option<u64>,
    },
    SnapshotId(i64),
    Tag(String),
}

/// The chosen snapshot with everything later steps need.
#[derive(Debug, Clone)]
pub struct TrustedSnapshot {
    pub table_uuid: String,
    pub snapshot_id: i64,
    pub metadata_location: String,
    /// The journal position the snapshot holds: what its own summary records (a checkpoint naming
    /// the snapshot was checked to agree).
    pub position: u64,
    pub manifest_sequence: u64,
    pub manifest_digest: String,
    pub schema: Schema,
    /// Data files, as readable paths (prefix map applied).
    pub data_files: Vec<String>,
    /// Their manifest entries (same order as `data_files`): metrics and partition values.
    pub data_entries: Vec<DataFile>,
    /// Rows in the data files, before deletes.
    pub record_count: u64,
    /// The position and equality deletes of other writers that apply to the data files.
    pub deletes: Deletes,
    /// The source table's metadata (partition spec, sort order, properties of the snapshot's table).
    pub metadata: Arc<TableMetadata>,
    pub file_io: FileIO,
}

/// Loads the table metadata at `source` (and its raw JSON, for the refs map).
pub async fn load_metadata(
    source: &SnapshotSource,
) -> Result<(TableMetadata, serde_json::Value, FileIO), RecoverError> {
    Ok(crate::table::source::load_metadata(source).await?)
}

async fn read(io: &FileIO, path: &str, what: &str) -> Result<bytes::Bytes, RecoverError> {
    Ok(crate::table::source::read(io, path, what).await?)
}

/// Chooses the snapshot and checks that every file it references exists.
pub async fn choose(
    journal: &Journal,
    source: &SnapshotSource,
    choice: &SnapshotChoice,
) -> Result<TrustedSnapshot, RecoverError> {
    let (meta, raw, io) = load_metadata(source).await?;
    let table_uuid = meta.uuid().to_string();
    let filter = CheckpointFilter {
        table_uuid: Some(table_uuid.clone()),
        table_name: None,
    };
    let (snapshot_id, cp) = match choice {
        SnapshotChoice::Checkpoint { at_or_before } => {
            let cp = checkpoint::newest_at_or_before(journal.store.as_ref(), &filter, *at_or_before)
                .await?
                .ok_or_else(|| RecoverError::NoCheckpoint {
                    table_uuid: table_uuid.clone(),
                    at_or_before: *at_or_before,
                })?;
            (cp.snapshot_id, Some(cp))
        }
        SnapshotChoice::SnapshotId(id) => (*id, None),
        SnapshotChoice::Trusted => {
            return Err(RecoverError::Unsupported {
                reason: "the trusted snapshot is resolved by the audit before it is chosen".into(),
            });
        }
        SnapshotChoice::Tag(tag) => {
            let id = raw["refs"][tag]["snapshot-id"]
                .as_i64()
                .ok_or_else(|| RecoverError::UnknownSnapshot {
                    what: format!("tag {tag}"),
                })?;
            (id, None)
        }
    };
    let snapshot = meta
        .snapshot_by_id(snapshot_id)
        .ok_or_else(|| RecoverError::UnknownSnapshot {
            what: format!("snapshot {snapshot_id} in {}", source.metadata_location),
        })?;
    // The position the snapshot holds is what its own summary records (the newest tidemark
    // commit in its ancestry), from the journal given; a checkpoint naming it must agree.
    // (A snapshot chosen by id or tag is taken by its own record alone.)
    let recorded = trust::recorded_position(&meta, snapshot);
    trust::check(journal, snapshot_id, recorded.as_ref(), cp.as_ref())?;
    let recorded = recorded.ok_or(RecoverError::NoPosition { snapshot_id })?;
    let (position, manifest_sequence, manifest_digest) =
        (recorded.position, recorded.manifest_sequence, recorded.manifest_digest);
    let map = source.prefix_map.as_ref();
    let list_path = PrefixMap::apply(map, snapshot.manifest_list());
    // The manifest list and manifests must exist (the first missing one is named).
    let list = ManifestList::parse_with_version(&read(&io, &list_path, "manifest list").await?, FormatVersion::V2)
        .map_err(|e| RecoverError::Iceberg {
            context: format!("parse manifest list {list_path}"),
            message: e.to_string(),
        })?;
    for mf in list.entries() {
        let path = PrefixMap::apply(map, &mf.manifest_path);
        read(&io, &path, "manifest").await?;
    }
    let mapped = |p: &str| PrefixMap::apply(map, p);
    let files = snapshot_files(&io, &source.metadata_location, snapshot.manifest_list(), &mapped).await?;
    // The snapshot's own schema (a snapshot older than a schema change was written with it).
    let schema = snapshot
        .schema_id()
        .and_then(|id| meta.schema_by_id(id))
        .unwrap_or_else(|| meta.current_schema())
        .as_ref()
        .clone();
    let arrow = Arc::new(
        iceberg::arrow::schema_to_arrow_schema(&schema).map_err(|e| RecoverError::Iceberg {
            context: format!("convert the schema of snapshot {snapshot_id} to Arrow"),
            message: e.to_string(),
        })?,
    );
    let data_files: Vec<String> = files.data.iter().map(|f| f.path.clone()).collect();
    let data_entries: Vec<DataFile> = files.data.iter().map(|f| f.file.clone()).collect();
    let record_count = files.record_count();
    for path in data_files.iter().chain(files.deletes.iter().map(|f| &f.path)) {
        // Through the table-error classification: refused credentials exit 8 (issue 34).
        let exists = io
            .exists(path)
            .await
            .map_err(crate::table::iceberg_err(format!("check data file {path}")))?;
        if !exists {
            return Err(RecoverError::MissingFile {
                path: path.clone(),
                what: format!("data file of snapshot {snapshot_id}"),
            });
        }
    }
    let deletes = Deletes::load(&io, &source.metadata_location, &files, &arrow, &mapped).await?;
    Ok(TrustedSnapshot {
        table_uuid,
        snapshot_id,
        metadata_location: source.metadata_location.clone(),
        position,
        manifest_sequence,
        manifest_digest,
        schema,
        data_files,
        data_entries,
        record_count,
        deletes,
        metadata: Arc::new(meta.clone()),
        file_io: io,
    })
}
