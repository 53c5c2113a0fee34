//! Path rewrite: making a copy of a table under another bucket or prefix readable.
//!
//! A table's metadata holds absolute paths: the metadata JSON (location, metadata log, manifest
//! lists, statistics), each manifest list (manifest paths) and each manifest (data and delete
//! file paths). A copy under another prefix is unreadable until all of them are rewritten.
//!
//! Contract of [`rewrite_paths`]:
//! - every string value of the metadata JSON that starts with `from_prefix` gets `to_prefix`
//!   instead (unknown fields are kept as they are);
//! - every manifest of every snapshot is rewritten into a new file `<name>-rewritten-<n>.avro`
//!   in the copy's metadata folder; entries keep their status, snapshot id and sequence numbers,
//!   and the manifest-list rows keep everything but the path and length;
//! - every snapshot gets a new manifest list with the same snapshot id, parent and sequence
//!   number;
//! - the new metadata file is written beside the old one with the next version number and the
//!   suffix `-rewritten`; its metadata log ends with the old file, so it derives from it;
//! - the new manifests and manifest lists are compressed with the codec of the table's
//!   `write.avro.compression-codec` (see [`crate::catalog::avro_io`]);
//! - no existing file is overwritten or deleted. Only format version 2 tables with unencrypted
//!   manifests are supported.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestList, ManifestListWriter, ManifestStatus,
    ManifestWriterBuilder, deserialize_data_file_from_json, serialize_data_file_to_json,
};
use serde::Serialize;
use serde_json::Value;

use crate::catalog::avro_io::set_table_codec;
use crate::table::avro_codec::AvroCodec;
use crate::table::source::file_io;

/// Version of the JSON report.
pub const FORMAT_VERSION: u32 = 1;

/// What a path rewrite did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RewriteReport {
    pub format_version: u32,
    /// The copy's metadata file that was read.
    pub old_metadata: String,
    /// The metadata file written; register this one.
    pub new_metadata: String,
    pub manifests_rewritten: usize,
    pub manifest_lists_rewritten: usize,
    /// String values replaced: in the metadata JSON, manifest lists and manifests.
    pub paths_rewritten: usize,
    /// Every file the metadata references under the old prefix, with its path under the new one
    /// (what a copier must have put in place), sorted by old path.
    pub copy_plan: Vec<(String, String)>,
}

/// Errors of a path rewrite; each names the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: String,
        path: String,
        #[source]
        source: Box<iceberg::Error>,
    },

    #[error("metadata file {path} is not valid JSON: {source}")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },

    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },

    #[error("{path}: unsupported: {reason}")]
    Unsupported { path: String, reason: String },
}

fn io_err(action: &str, path: &str) -> impl FnOnce(iceberg::Error) -> RewriteError {
    let (action, path) = (action.to_string(), path.to_string());
    move |e| RewriteError::Io {
        action,
        path,
        source: Box::new(e),
    }
}

/// Replaces prefixes and records what it replaced.
struct Rewriter<'a> {
    from: &'a str,
    to: &'a str,
    count: usize,
    plan: BTreeMap<String, String>,
}

impl Rewriter<'_> {
    /// The path under the new prefix, if `s` is under the old one.
    fn map(&self, s: &str) -> Option<String> {
        s.strip_prefix(self.from).map(|rest| format!("{}{rest}", self.to))
    }

    /// Rewrites a file path, counting it and adding it to the copy plan.
    fn file(&mut self, s: &str) -> String {
        match self.map(s) {
            Some(new) => {
                self.count += 1;
                self.plan.insert(s.to_string(), new.clone());
                new
            }
            None => s.to_string(),
        }
    }

    /// Rewrites every string in `value`; `key` (the enclosing object key, `None` inside table
    /// properties) decides whether the value names a file for the copy plan.
    fn json(&mut self, value: &mut Value, key: Option<&str>) {
        match value {
            Value::String(s) => {
                if let Some(new) = self.map(s) {
                    self.count += 1;
                    // The table location and properties are folders, not files to copy.
                    if !matches!(key, Some("location") | None) && !s.ends_with('/') {
                        self.plan.insert(s.clone(), new.clone());
                    }
                    *s = new;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v, key)),
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    let k = if k == "properties" { None } else { Some(k.as_str()) };
                    self.json(v, k);
                }
            }
            _ => {}
        }
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `<dir>/<stem>-rewritten-<n>.avro` for the smallest `n` that names no existing file.
async fn free_avro_name(io: &FileIO, dir: &str, old: &str) -> Result<String, RewriteError> {
    let name = file_name(old);
    let stem = name.strip_suffix(".avro").unwrap_or(name);
    for n in 0.. {
        let path = format!("{dir}/{stem}-rewritten-{n}.avro");
        if !io.exists(&path).await.map_err(io_err("check", &path))? {
            return Ok(path);
        }
    }
    unreachable!("some name is free")
}

async fn write_new(io: &FileIO, path: &str, bytes: Bytes) -> Result<(), RewriteError> {
    if io.exists(path).await.map_err(io_err("check", path))? {
        return Err(RewriteError::Invalid {
            path: path.to_string(),
            reason: "already exists; it is never overwritten".into(),
        });
    }
    io.new_output(path)
        .map_err(io_err("open", path))?
        .write(bytes)
        .await
        .map_err(io_err("write", path))
}

/// `data_file` with every path under the old prefix moved to the new one.
fn rewrite_data_file(
    rw: &mut Rewriter<'_>,
    file: DataFile,
    spec_id: i32,
    partition_type: &iceberg::spec::StructType,
    schema: &iceberg::spec::Schema,
    manifest: &str,
) -> Result<DataFile, RewriteError> {
    let json = serialize_data_file_to_json(file, partition_type, FormatVersion::V2)
        .map_err(io_err("serialize a data file of", manifest))?;
    let mut value: Value = serde_json::from_str(&json).map_err(|source| RewriteError::Json {
        path: manifest.to_string(),
        source,
    })?;
    if let Value::Object(map) = &mut value {
        for key in ["file_path", "referenced_data_file"] {
            if let Some(Value::String(s)) = map.get_mut(key) {
                *s = rw.file(s);
            }
        }
    }
    deserialize_data_file_from_json(&value.to_string(), spec_id, partition_type, schema)
        .map_err(io_err("rebuild a data file of", manifest))
}

/// Writes a rewritten copy of `row`'s manifest (its path already under the new prefix) and
/// returns the manifest-list row pointing at it.
async fn rewrite_manifest(
    io: &FileIO,
    rw: &mut Rewriter<'_>,
    dir: &str,
    row: &ManifestFile,
) -> Result<ManifestFile, RewriteError> {
    let path = row.manifest_path.as_str();
    if row.key_metadata.is_some() {
        return Err(RewriteError::Unsupported {
            path: path.to_string(),
            reason: "encrypted manifest".into(),
        });
    }
    // `load_manifest` fills in the values entries inherit from their manifest-list row.
    let manifest = row.load_manifest(io).await.map_err(io_err("read manifest", path))?;
    let (entries, meta) = manifest.into_parts();
    if *meta.format_version() != FormatVersion::V2 {
        return Err(RewriteError::Unsupported {
            path: path.to_string(),
            reason: format!("manifest format version {:?}", meta.format_version()),
        });
    }
    let schema = meta.schema().clone();
    let spec = meta.partition_spec().clone();
    let partition_type = spec
        .partition_type(&schema)
        .map_err(io_err("read the partition of", path))?;
    let new_path = free_avro_name(io, dir, path).await?;
    let output = io.new_output(&new_path).map_err(io_err("open", &new_path))?;
    let builder = ManifestWriterBuilder::new(output, Some(row.added_snapshot_id), schema.clone(), spec.clone());
    let mut writer = match meta.content() {
        ManifestContentType::Data => builder.build_v2_data(),
        ManifestContentType::Deletes => builder.build_v2_deletes(),
    };
    for entry in entries {
        let (Some(seq), Some(snapshot)) = (entry.sequence_number(), entry.snapshot_id()) else {
            return Err(RewriteError::Invalid {
                path: path.to_string(),
                reason: format!("entry of {} has no sequence number or snapshot id", entry.file_path()),
            });
        };
        let file_seq = entry.file_sequence_number.or(Some(seq));
        let status = entry.status();
        let file = rewrite_data_file(
            rw,
            entry.data_file().clone(),
            spec.spec_id(),
            &partition_type,
            &schema,
            path,
        )?;
        let added = match status {
            ManifestStatus::Added => writer.add_file(file, seq),
            ManifestStatus::Existing => writer.add_existing_file(file, snapshot, seq, file_seq),
            ManifestStatus::Deleted => writer.add_delete_file(file, seq, file_seq),
        };
        added.map_err(io_err("add an entry to", &new_path))?;
    }
    let written = writer
        .write_manifest_file()
        .await
        .map_err(io_err("write manifest", &new_path))?;
    let mut new_row = row.clone();
    new_row.manifest_path = written.manifest_path;
    new_row.manifest_length = written.manifest_length;
    Ok(new_row)
}

fn number(snapshot: &Value, key: &str, path: &str) -> Result<i64, RewriteError> {
    snapshot
        .get(key)
        .and_then(Value::as_i64)
        .ok_or_else(|| RewriteError::Invalid {
            path: path.to_string(),
            reason: format!("a snapshot has no {key}"),
        })
}

/// Rewrites the paths of the table copy whose metadata file is `metadata_location` from
/// `from_prefix` to `to_prefix`. See the module documentation for the contract.
pub async fn rewrite_paths(
    metadata_location: &str,
    from_prefix: &str,
    to_prefix: &str,
    file_io_props: &HashMap<String, String>,
) -> Result<RewriteReport, RewriteError> {
    rewrite_paths_as(metadata_location, from_prefix, to_prefix, file_io_props, None).await
}

/// [`rewrite_paths`], writing the new metadata file under `new_name` (in the same folder) instead
/// of `<next version>-rewritten.metadata.json`: the warm follower names its rewrites the way
/// iceberg-rust requires of a table it commits to (`NNNNN-<uuid>.metadata.json`).
pub async fn rewrite_paths_as(
    metadata_location: &str,
    from_prefix: &str,
    to_prefix: &str,
    file_io_props: &HashMap<String, String>,
    new_name: Option<&str>,
) -> Result<RewriteReport, RewriteError> {
    let io = file_io(file_io_props);
    // A plain path (absolute or relative) is a local file, spelled as the table's own paths are:
    // file:///abs/path. The storage layer takes only URLs.
    let old_metadata = if metadata_location.contains("://") {
        metadata_location.to_string()
    } else {
        crate::dr::rebuild::warehouse_base(metadata_location).map_err(|e| RewriteError::Invalid {
            path: metadata_location.to_string(),
            reason: e.to_string(),
        })?
    };
    let bytes = io
        .new_input(&old_metadata)
        .map_err(io_err("open", &old_metadata))?
        .read()
        .await
        .map_err(io_err("read", &old_metadata))?;
    let mut meta: Value = serde_json::from_slice(&bytes).map_err(|source| RewriteError::Json {
        path: old_metadata.clone(),
        source,
    })?;
    if meta.get("format-version").and_then(Value::as_i64) != Some(2) {
        return Err(RewriteError::Unsupported {
            path: old_metadata,
            reason: "only format version 2 tables are rewritten".into(),
        });
    }
    let mut rw = Rewriter {
        from: from_prefix,
        to: to_prefix,
        count: 0,
        plan: BTreeMap::new(),
    };
    rw.json(&mut meta, Some("metadata"));

    let dir = parent(&old_metadata).to_string();
    // The new manifests and lists get the codec the table's properties ask for.
    let properties: HashMap<String, String> = meta
        .get("properties")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let codec = AvroCodec::from_properties(&properties).map_err(|reason| RewriteError::Unsupported {
        path: old_metadata.clone(),
        reason,
    })?;
    if let Some(home) = dir.strip_suffix("/metadata") {
        set_table_codec(home, codec);
    }
    let mut manifests_rewritten = 0;
    let mut manifest_lists_rewritten = 0;
    // A manifest shared by several snapshots is rewritten once.
    let mut done: HashMap<String, (String, i64)> = HashMap::new();
    let snapshots = match meta.get_mut("snapshots") {
        Some(Value::Array(s)) => s,
        _ => &mut Vec::new(),
    };
    for snapshot in snapshots.iter_mut() {
        let snapshot_id = number(snapshot, "snapshot-id", &old_metadata)?;
        let sequence_number = number(snapshot, "sequence-number", &old_metadata)?;
        let parent_id = snapshot.get("parent-snapshot-id").and_then(Value::as_i64);
        let Some(list_path) = snapshot
            .get("manifest-list")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Err(RewriteError::Unsupported {
                path: old_metadata,
                reason: format!("snapshot {snapshot_id} has no manifest list"),
            });
        };
        let list_bytes = io
            .new_input(&list_path)
            .map_err(io_err("open manifest list", &list_path))?
            .read()
            .await
            .map_err(io_err("read manifest list", &list_path))?;
        let list = ManifestList::parse_with_version(&list_bytes, FormatVersion::V2)
            .map_err(io_err("parse manifest list", &list_path))?;
        let mut rows = Vec::new();
        for mut row in list.consume_entries() {
            let old_path = row.manifest_path.clone();
            row.manifest_path = rw.file(&old_path);
            if let Some((path, length)) = done.get(&old_path) {
                row.manifest_path = path.clone();
                row.manifest_length = *length;
                rows.push(row);
                continue;
            }
            let new_row = rewrite_manifest(&io, &mut rw, &dir, &row).await?;
            manifests_rewritten += 1;
            done.insert(old_path, (new_row.manifest_path.clone(), new_row.manifest_length));
            rows.push(new_row);
        }
        let new_list = free_avro_name(&io, &dir, &list_path).await?;
        let out = io
            .new_output(&new_list)
            .map_err(io_err("open", &new_list))?
            .writer()
            .await
            .map_err(io_err("open", &new_list))?;
        let mut writer = ManifestListWriter::v2(out, snapshot_id, parent_id, sequence_number);
        writer
            .add_manifests(rows.into_iter())
            .map_err(io_err("list the manifests in", &new_list))?;
        writer.close().await.map_err(io_err("write", &new_list))?;
        manifest_lists_rewritten += 1;
        snapshot["manifest-list"] = Value::String(new_list);
    }

    // The new file derives from the old one.
    let last_updated = meta.get("last-updated-ms").cloned().unwrap_or(Value::Null);
    let entry = serde_json::json!({ "timestamp-ms": last_updated, "metadata-file": old_metadata });
    match meta.get_mut("metadata-log") {
        Some(Value::Array(log)) => log.push(entry),
        _ => meta["metadata-log"] = Value::Array(vec![entry]),
    }

    // `00006-<uuid>.metadata.json` (SQL catalogs, iceberg-rust) or `v6.metadata.json` (the
    // Hadoop layout, SeaweedFS's REST catalog).
    let name = file_name(&old_metadata);
    let version: u64 = name
        .split(['-', '.'])
        .next()
        .map(|v| v.strip_prefix('v').unwrap_or(v))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| RewriteError::Invalid {
            path: old_metadata.clone(),
            reason: "the file name does not start with a version number".into(),
        })?;
    let mut new_metadata = match new_name {
        Some(name) => format!("{dir}/{name}"),
        None => format!("{dir}/{:05}-rewritten.metadata.json", version + 1),
    };
    let mut n = 1;
    while new_name.is_none() && io.exists(&new_metadata).await.map_err(io_err("check", &new_metadata))? {
        new_metadata = format!("{dir}/{:05}-rewritten-{n}.metadata.json", version + 1);
        n += 1;
    }
    let body = serde_json::to_vec_pretty(&meta).map_err(|source| RewriteError::Json {
        path: new_metadata.clone(),
        source,
    })?;
    write_new(&io, &new_metadata, Bytes::from(body)).await?;

    Ok(RewriteReport {
        format_version: FORMAT_VERSION,
        old_metadata,
        new_metadata,
        manifests_rewritten,
        manifest_lists_rewritten,
        paths_rewritten: rw.count,
        copy_plan: rw.plan.into_iter().collect(),
    })
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod rewrite_tests;
