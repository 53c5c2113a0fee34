//! What stops an audit ([`AuditError`]).

use tidemark_journal::store::StoreError;

use crate::table::TableError;
use crate::table::source::SourceError;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("snapshot {snapshot_id} is not in the table metadata {metadata}")]
    UnknownSnapshot { snapshot_id: i64, metadata: String },
    #[error("the history of table {table_uuid} cannot be audited: {reason}")]
    Undecidable { table_uuid: String, reason: String },
    #[error("audit record {key}: {reason}")]
    BadRecord { key: String, reason: String },
}
