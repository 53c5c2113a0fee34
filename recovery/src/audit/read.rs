//! What an audit reads: the table metadata and the ancestry of its head snapshot, and the
//! context every step reads through ([`Ctx`]: the journal, the metadata, its FileIO).

use iceberg::io::FileIO;
use iceberg::spec::{SnapshotRef, TableMetadata};
use tidemark_journal::Journal;

use crate::audit::error::AuditError;
use crate::table::source::{PrefixMap, SnapshotSource, SourceError};

/// What every step of an audit reads through.
pub(crate) struct Ctx<'a> {
    pub journal: &'a Journal,
    pub meta: &'a TableMetadata,
    pub io: &'a FileIO,
    pub map: Option<PrefixMap>,
    /// The metadata file, for error messages.
    pub name: String,
}

impl Ctx<'_> {
    pub fn mapped(&self, path: &str) -> String {
        PrefixMap::apply(self.map.as_ref(), path)
    }
}

/// Reads the table metadata at `source`, and the sha256 of its bytes.
pub(super) async fn load(source: &SnapshotSource) -> Result<(TableMetadata, FileIO, String), AuditError> {
    let io = crate::table::source::file_io(&source.file_io_props);
    let path = PrefixMap::apply(source.prefix_map.as_ref(), &source.metadata_location);
    let bytes = crate::table::source::read(&io, &path, "table metadata").await?;
    let meta: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| SourceError::Iceberg {
        context: format!("parse {path}"),
        message: e.to_string(),
    })?;
    Ok((meta, io, tidemark_journal::sha256_digest(&bytes)))
}

/// The ancestry of `head`, oldest first, and the expired parent of its oldest snapshot if any.
pub(super) fn ancestry(
    meta: &TableMetadata,
    head: i64,
    name: &str,
) -> Result<(Vec<SnapshotRef>, Option<i64>), AuditError> {
    let mut chain = Vec::new();
    let mut expired = None;
    let mut next = Some(
        meta.snapshot_by_id(head)
            .cloned()
            .ok_or_else(|| AuditError::UnknownSnapshot {
                snapshot_id: head,
                metadata: name.to_string(),
            })?,
    );
    while let Some(s) = next {
        next = match s.parent_snapshot_id() {
            Some(p) => match meta.snapshot_by_id(p) {
                Some(ps) => Some(ps.clone()),
                None => {
                    expired = Some(p);
                    None
                }
            },
            None => None,
        };
        chain.push(s);
    }
    chain.reverse();
    Ok((chain, expired))
}
