//! The live files of a snapshot — data files and the delete files other writers added (position
//! and equality deletes, merge-on-read) — with their data sequence numbers ([`snapshot_files`]).
//! What the delete files remove, and which of them still apply, is [`super::deletes`] (its items
//! are also named from here, their former home).

use arrow_schema::Field;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestList};

pub use super::deletes::{Deletes, PositionDeleteCache, position_paths_to_read, still_applies};
use super::error::{TableError, iceberg_err};

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

/// The Iceberg field id an Arrow field carries (`PARQUET:field_id`).
pub fn field_id(field: &Field) -> Option<i32> {
    field
        .metadata()
        .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}
