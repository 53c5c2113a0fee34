//! What every DR reader shares about a warehouse: its errors ([`DrError`]), one table folder's
//! metadata files ([`TableFiles`]), a metadata file's name ([`file_name`]) and the warehouse as
//! table locations spell it ([`warehouse_base`]).

use tidemark_journal::store::StoreError;

use crate::table::TableError;

/// Errors of DR work; each names the warehouse, table or object it is about.
#[derive(Debug, thiserror::Error)]
pub enum DrError {
    #[error("warehouse {warehouse:?}: {reason}")]
    InvalidWarehouse { warehouse: String, reason: String },

    #[error("namespace {namespace:?} is not a dotted namespace name (like `shop` or `a.b`)")]
    InvalidNamespace { namespace: String },

    #[error("cannot open warehouse {warehouse}: {source}")]
    Open {
        warehouse: String,
        #[source]
        source: StoreError,
    },

    #[error("cannot list the metadata files in warehouse {warehouse}: {source}")]
    List {
        warehouse: String,
        #[source]
        source: StoreError,
    },

    #[error("table {table}: cannot read metadata file {key}: {source}")]
    Read {
        table: String,
        key: String,
        #[source]
        source: Box<StoreError>,
    },

    #[error("table folder {prefix:?} does not make a table name namespace.name")]
    InvalidTableName { prefix: String },

    #[error("table {table}: cannot {action} in catalog {catalog}: {source}")]
    Catalog {
        table: String,
        action: String,
        catalog: String,
        #[source]
        source: Box<iceberg::Error>,
    },

    #[error("table {table}: {source}")]
    Pointer {
        table: String,
        #[source]
        source: Box<TableError>,
    },
}

/// The metadata files found under one table's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFiles {
    /// Dotted namespace (`a.b` for the folder `a/b/t`).
    pub namespace: String,
    pub name: String,
    /// The table's folder relative to the warehouse root (`a/b/t`).
    pub prefix: String,
    /// Keys of its `*.metadata.json` files relative to the warehouse root, sorted.
    pub metadata_keys: Vec<String>,
    /// Keys of the resync records in its metadata folder
    /// ([`super::resync_record::is_record_name`]), sorted.
    pub record_keys: Vec<String>,
}

impl TableFiles {
    /// `namespace.name`, as the catalog and the CLI spell it.
    pub fn ident(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }
}

/// The last path segment: log entries hold absolute URLs (`file:///…`, `s3://…`), keys are
/// relative, and within one table's metadata folder the file name alone is unique.
pub(crate) fn file_name(location: &str) -> &str {
    location.rsplit('/').next().unwrap_or(location)
}

/// The warehouse as table locations spell it, the same normalization the catalog applies:
/// `s3://bucket/prefix` and `file:///abs` stay, a local path becomes `file:///abs/path`.
pub fn warehouse_base(warehouse: &str) -> Result<String, DrError> {
    let w = warehouse.trim().trim_end_matches('/');
    let invalid = |reason: &str| DrError::InvalidWarehouse {
        warehouse: warehouse.to_string(),
        reason: reason.to_string(),
    };
    if w.is_empty() {
        return Err(invalid("the warehouse location is empty"));
    }
    if let Some(rest) = w.strip_prefix("s3://") {
        if rest.is_empty() || rest.starts_with('/') {
            return Err(invalid("an S3 warehouse needs a bucket: s3://bucket/prefix"));
        }
        return Ok(w.to_string());
    }
    if let Some(path) = w.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(invalid("a file:// warehouse needs an absolute path (file:///…)"));
        }
        return Ok(w.to_string());
    }
    if w.contains("://") {
        return Err(invalid("supported are s3://bucket/prefix and local folders"));
    }
    let abs = std::path::absolute(w).map_err(|e| invalid(&format!("cannot make the path absolute: {e}")))?;
    let abs = abs.to_str().ok_or_else(|| invalid("the path is not UTF-8"))?;
    Ok(format!("file://{}", abs.trim_end_matches('/')))
}
