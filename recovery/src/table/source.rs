//! Where a snapshot's table metadata is read from: a metadata file (the source table's, or a DR
//! replica's copy of it) through an optional prefix map, with tidemark's counted FileIO. Shared
//! by recovery (which chooses a snapshot) and the audit (which walks a table's history).

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::spec::TableMetadata;

use crate::catalog::table_io::CountingStorageFactory;

/// A file of the source that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{what} is missing: {path}; the snapshot cannot be trusted (choose an older one, or repair the replica)")]
    MissingFile { path: String, what: String },
    /// The warehouse's store refused the credentials ([`super::refused`]): exit 8, as
    /// [`super::TableError::AccessDenied`].
    #[error(
        "{context}: access to the warehouse refused ({detail}); {hint}",
        hint = tidemark_journal::store::REFUSED_HINT
    )]
    AccessDenied { context: String, detail: String },
    #[error("{context}: {message}")]
    Iceberg { context: String, message: String },
}

/// An iceberg error with what was being done; refused credentials become
/// [`SourceError::AccessDenied`], naming the store's code.
fn from_iceberg(context: String, e: iceberg::Error) -> SourceError {
    match super::refused::refused_code(&e) {
        Some(detail) => SourceError::AccessDenied { context, detail },
        None => SourceError::Iceberg {
            context,
            message: e.to_string(),
        },
    }
}

/// Rewrites a path's prefix: `from` → `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixMap {
    pub from: String,
    pub to: String,
}

impl PrefixMap {
    /// `FROM=TO` (the form `--prefix-map` takes and the follower's state records); `None`
    /// without a `=`.
    pub fn parse(text: &str) -> Option<PrefixMap> {
        let (from, to) = text.split_once('=')?;
        Some(PrefixMap {
            from: from.into(),
            to: to.into(),
        })
    }

    pub fn apply(map: Option<&PrefixMap>, path: &str) -> String {
        match map {
            Some(m) if path.starts_with(&m.from) => format!("{}{}", m.to, &path[m.from.len()..]),
            _ => path.to_string(),
        }
    }
}

/// Where the snapshot's table metadata is.
#[derive(Debug, Clone)]
pub struct SnapshotSource {
    /// The metadata file (`…/metadata/00003-….metadata.json`), as the replica has it.
    pub metadata_location: String,
    pub file_io_props: HashMap<String, String>,
    pub prefix_map: Option<PrefixMap>,
}

impl SnapshotSource {
    /// The metadata file at `metadata_location`, read where it is with the default FileIO
    /// settings (the environment's credentials).
    pub fn at(metadata_location: impl Into<String>) -> SnapshotSource {
        SnapshotSource {
            metadata_location: metadata_location.into(),
            file_io_props: HashMap::new(),
            prefix_map: None,
        }
    }
}

pub fn file_io(props: &HashMap<String, String>) -> FileIO {
    FileIOBuilder::new(Arc::new(CountingStorageFactory::new()))
        .with_props(props.clone())
        .build()
}

/// Reads the file at `path`; a file that does not exist is [`SourceError::MissingFile`]. The
/// read comes first and the existence check only after a failed read: a HEAD reply has no
/// body, so a refusal answered with a 400 (`InvalidToken`) names its code only to the GET, and
/// a readable file costs one request.
pub async fn read(io: &FileIO, path: &str, what: &str) -> Result<bytes::Bytes, SourceError> {
    let input = io
        .new_input(path)
        .map_err(|e| from_iceberg(format!("open {what} {path}"), e))?;
    let failed = match input.read().await {
        Ok(bytes) => return Ok(bytes),
        Err(e) => from_iceberg(format!("read {what} {path}"), e),
    };
    if matches!(failed, SourceError::AccessDenied { .. }) {
        return Err(failed);
    }
    match input.exists().await {
        Ok(false) => Err(SourceError::MissingFile {
            path: path.to_string(),
            what: what.to_string(),
        }),
        // The file is there (or cannot be checked either): the read's own error.
        Ok(true) | Err(_) => Err(failed),
    }
}

/// Loads the table metadata at `source` (and its raw JSON, for the refs map).
pub async fn load_metadata(source: &SnapshotSource) -> Result<(TableMetadata, serde_json::Value, FileIO), SourceError> {
    let io = file_io(&source.file_io_props);
    let path = PrefixMap::apply(source.prefix_map.as_ref(), &source.metadata_location);
    let bytes = read(&io, &path, "table metadata").await?;
    let meta: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| SourceError::Iceberg {
        context: format!("parse {path}"),
        message: e.to_string(),
    })?;
    let raw: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| SourceError::Iceberg {
        context: format!("parse {path}"),
        message: e.to_string(),
    })?;
    Ok((meta, raw, io))
}
