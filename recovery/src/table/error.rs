//! What catalog and table work fails with ([`TableError`]), and iceberg's errors wrapped with what
//! was being done ([`iceberg_err`]; refused credentials named, see [`super::refused`]).

use super::refused;

/// Errors of catalog and table work. Each carries the facts an operator needs to act.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("table {table}: another writer committed first ({detail}); reload the table and redo the batch")]
    CommitConflict { table: String, detail: String },

    /// The reply of a commit was lost and the reload shows it was not applied: safe to redo.
    #[error("table {table}: the commit was not applied (its reply was lost: {cause}); reload the table and redo it")]
    CommitNotApplied { table: String, cause: String },

    /// Neither the commit's reply nor a reload established whether it was applied.
    #[error(
        "table {table}: the outcome of the commit is unknown ({cause}); nothing else was changed. Run the \
         command again once the catalog answers: it finds the commit by its snapshot and does not apply it twice"
    )]
    CommitUnknown { table: String, cause: String },

    /// A catalog on a server asked of a build without the `remote` feature (the embedded drill's).
    #[error(
        "{what}: this tidemark was built without the catalogs and stores on servers (the embedded build of \
         `sandbox/drill.sh`: local folders and SQLite only); build it with its default features (`cargo build \
         --release`) for PostgreSQL, Iceberg REST, S3 Tables and S3"
    )]
    NotBuilt { what: String },

    #[error("{catalog} cannot {command}: it lacks {lacks}. Nothing was changed; {instead}")]
    MissingCapability {
        catalog: String,
        command: String,
        lacks: String,
        instead: String,
    },

    #[error("table {table}: column {column:?} does not match the spec: expected {expected}, found {found}")]
    SchemaMismatch {
        table: String,
        column: String,
        expected: String,
        found: String,
    },

    #[error("catalog {uri} cannot be reached: {detail}")]
    CatalogUnreachable { uri: String, detail: String },

    /// A write to a catalog that was opened failed: not a catalog that cannot be reached.
    #[error("catalog {uri}: {action} failed: {cause}")]
    CatalogWriteFailed { uri: String, action: String, cause: String },

    #[error("catalog {uri}: {reason}")]
    InvalidCatalog { uri: String, reason: String },

    #[error("warehouse {warehouse:?}: {reason}")]
    InvalidWarehouse { warehouse: String, reason: String },

    #[error("table name {ident:?} is not of the form namespace.name")]
    InvalidIdent { ident: String },

    #[error("table {table} does not exist in the catalog")]
    TableNotFound { table: String },

    #[error("table {table} is not supported: {reason}")]
    Unsupported { table: String, reason: String },

    #[error("table {table}: data file {path} is not live in the snapshot the commit is based on")]
    FileNotLive { table: String, path: String },

    #[error("table {table}: data file {path} is already in the table")]
    FileAlreadyLive { table: String, path: String },

    #[error("table {table}: data file {path} exists already; write with a fresh file id")]
    DataFileExists { table: String, path: String },

    #[error("table {table}: record batch does not fit the table schema: {detail}")]
    BatchSchema { table: String, detail: String },

    #[error("table {table}: a commit needs added or removed files")]
    EmptyCommit { table: String },

    #[error(
        "{context}: access to the warehouse refused ({detail}); {hint}",
        hint = tidemark_journal::store::REFUSED_HINT
    )]
    AccessDenied { context: String, detail: String },

    /// Boxed because iceberg's error is large and every `Result` here would carry its size.
    #[error("{context}: {source}")]
    Iceberg {
        context: String,
        #[source]
        source: Box<iceberg::Error>,
    },

    #[error("{context}: {source}")]
    Sql {
        context: String,
        #[source]
        source: sqlx::Error,
    },
}

impl TableError {
    /// Whether the error says "reload the table and redo the commit": a conflict, or a commit
    /// whose reply was lost and that was found not applied.
    pub fn is_retryable_commit(&self) -> bool {
        matches!(
            self,
            TableError::CommitConflict { .. } | TableError::CommitNotApplied { .. }
        )
    }
}

/// A closure for `map_err` that wraps an iceberg error with what was being done.
pub(crate) fn iceberg_err(context: impl Into<String>) -> impl FnOnce(iceberg::Error) -> TableError {
    let context = context.into();
    move |source| from_iceberg(context, source)
}

/// An iceberg error with what was being done. Credentials the warehouse's store refused (which
/// iceberg reports as an unexpected I/O failure) become [`TableError::AccessDenied`], naming the
/// store's error code ([`refused::refused_code`]), so that every command exits with the same
/// code and message for them.
pub(crate) fn from_iceberg(context: String, source: iceberg::Error) -> TableError {
    match refused::refused_code(&source) {
        Some(detail) => TableError::AccessDenied { context, detail },
        None => TableError::Iceberg {
            context,
            source: Box::new(source),
        },
    }
}
