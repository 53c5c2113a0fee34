//! The catalogs that hold tidemark's tables, behind one contract ([`contract`]).
//!
//! [`CatalogHandle`] is what every command passes around: an open backend (SQL on SQLite or
//! PostgreSQL in [`sql`], Iceberg REST in [`rest`], AWS S3 Tables in [`s3tables`]) with its name,
//! warehouse and the FileIO properties its tables are read with. Which backend `--catalog` means
//! is decided in [`config`]; [`conformance`] is the suite every backend passes.
//!
//! Below every backend: [`contract`] (what a backend promises, [`CommitError`]), [`config`]
//! (what `--catalog` means; URIs shown without secrets), [`sqlite_check`] (a SQLite file must
//! be a catalog's), [`table_io`] (the storage of every FileIO: `s3_requests` counted, manifests
//! written with the table's Avro codec); the REST backend's HTTP side is [`rest_http`] and its
//! FileIO layers [`rest_io`]. Every one of them fails with [`crate::table::error::TableError`],
//! which sits below both `catalog` and `table`.

pub mod config;
pub mod conformance;
pub mod contract;
#[cfg(feature = "remote")]
pub mod rest;
#[cfg(feature = "remote")]
mod rest_http;
#[cfg(feature = "remote")]
mod rest_io;
#[cfg(feature = "remote")]
pub mod s3tables;
pub mod sql;
pub mod sql_open;
pub mod sqlite_check;
pub mod table_io;

#[cfg(test)]
mod like_tests;
#[cfg(test)]
mod live_tests;
#[cfg(test)]
pub(crate) mod server_tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableIdent};

pub use config::{Definitions, Resolved, redact, s3_props, same_catalog};
pub use contract::{
    Capabilities, CatalogBackend, CatalogKind, CatalogRef, CommitError, CommitRequest, holds_commit, resolve_unknown,
};
pub use sql::{Dialect, namespace_column};

/// The former path of [`table_io`]'s request counting, kept for its callers.
pub mod counted_io {
    pub use crate::catalog::table_io::{CountingStorage, CountingStorageFactory, install_retry_counter, request_stats};
}

/// The former path of [`table_io`]'s Avro codec of manifests, kept for its callers.
pub mod avro_io {
    pub use crate::catalog::table_io::{AvroCodecStorage, set_table_codec};
}

use crate::table::TableError;

/// Where the catalog is and what it is called, as the library's callers give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogConfig {
    /// What `--catalog` accepts: a SQLite file, `postgres://…`, `rest+http(s)://…`, an S3 Tables
    /// ARN, or the name of a defined catalog (see [`config`]).
    pub uri: String,
    /// A local folder (absolute path or `file://…`) or `s3://bucket/prefix`; empty: the
    /// definition's, or `warehouse/` beside a SQLite file.
    pub warehouse: String,
    /// The catalog name (the SQL `catalog_name` column; PyIceberg and Java readers must use the
    /// same); empty: the defined catalog's name, or `tidemark`.
    pub name: String,
}

impl CatalogConfig {
    /// A SQLite catalog `dir/catalog.db` named `name`, its warehouse the folder `dir/warehouse`
    /// (the embedded default's layout).
    pub fn in_folder(dir: &std::path::Path, name: &str) -> CatalogConfig {
        CatalogConfig {
            uri: dir.join("catalog.db").display().to_string(),
            warehouse: dir.join("warehouse").display().to_string(),
            name: name.into(),
        }
    }
}

/// An open catalog. Cheap to clone.
#[derive(Clone)]
pub struct CatalogHandle {
    backend: Arc<dyn CatalogBackend>,
    catalog: Arc<dyn iceberg::Catalog>,
    /// The SQL backend itself, for the one-query listings only it has.
    sql: Option<Arc<sql::SqlBackend>>,
    /// The catalog URI with any password replaced, safe for messages.
    uri: String,
    warehouse: String,
    file_io_props: HashMap<String, String>,
}

// Manual Debug: the FileIO props hold the S3 secret key.
impl std::fmt::Debug for CatalogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogHandle")
            .field("reference", self.backend.reference())
            .field("warehouse", &self.warehouse)
            .finish_non_exhaustive()
    }
}

impl CatalogHandle {
    /// A handle on `backend`, whose tables are read with `file_io_props`.
    pub fn new(backend: Arc<dyn CatalogBackend>, file_io_props: HashMap<String, String>) -> Self {
        let reference = backend.reference();
        CatalogHandle {
            catalog: backend.iceberg(),
            uri: redact(&reference.uri),
            warehouse: reference.warehouse.clone().unwrap_or_default(),
            backend,
            sql: None,
            file_io_props,
        }
    }

    fn from_sql(backend: sql::SqlBackend, file_io_props: HashMap<String, String>) -> Self {
        let backend = Arc::new(backend);
        let mut handle = Self::new(backend.clone(), file_io_props);
        handle.sql = Some(backend);
        handle
    }

    /// The iceberg-rust catalog: namespaces, listing, creating and loading tables.
    pub fn catalog(&self) -> &Arc<dyn iceberg::Catalog> {
        &self.catalog
    }

    pub fn backend(&self) -> &Arc<dyn CatalogBackend> {
        &self.backend
    }

    /// The SQL backend, when this is a SQL catalog.
    pub fn sql(&self) -> Option<&sql::SqlBackend> {
        self.sql.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.backend.reference().name
    }

    /// The catalog URI, password redacted.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The catalog as a route records it (no secrets).
    pub fn reference(&self) -> &CatalogRef {
        self.backend.reference()
    }

    pub fn kind(&self) -> CatalogKind {
        self.backend.reference().kind
    }

    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// The normalized warehouse location (`file:///…` or `s3://…`); empty when the catalog
    /// places tables itself and did not say where.
    pub fn warehouse(&self) -> &str {
        &self.warehouse
    }

    /// The FileIO properties (S3 endpoint, credentials, region, path style) the catalog uses.
    pub fn file_io_props(&self) -> &HashMap<String, String> {
        &self.file_io_props
    }

    /// The metadata file the catalog currently points at for `ident`, or `None` if the table
    /// is not registered.
    pub async fn metadata_pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError> {
        self.backend.pointer(ident).await
    }

    /// Every table of this catalog (`namespace.name`, sorted) with its metadata pointer; with
    /// `namespace`, only the tables directly in it.
    pub async fn pointers(&self, namespace: Option<&str>) -> Result<Vec<(String, Option<String>)>, TableError> {
        let ns = match namespace {
            Some(ns) => Some(
                NamespaceIdent::from_strs(ns.split('.'))
                    .map_err(|_| TableError::InvalidIdent { ident: ns.to_string() })?,
            ),
            None => None,
        };
        self.backend.pointers(ns.as_ref()).await
    }

    /// The namespaces that hold tables.
    pub async fn table_namespaces(&self) -> Result<BTreeSet<String>, TableError> {
        if let Some(sql) = &self.sql {
            return sql.table_namespaces().await;
        }
        Ok(self
            .pointers(None)
            .await?
            .into_iter()
            .filter_map(|(t, _)| t.rsplit_once('.').map(|(ns, _)| ns.to_string()))
            .collect())
    }

    /// Publishes `request` on top of `base`. See [`contract`] for what it promises.
    pub async fn commit(&self, base: &Table, request: CommitRequest) -> Result<Table, CommitError> {
        self.backend.commit(base, request).await
    }

    /// Refuses with [`TableError::MissingCapability`], before anything changes, unless the
    /// catalog can register (`register`) and swap pointers (`swap_pointer`) as `command` needs;
    /// `instead` tells the operator what to do instead.
    pub fn require(&self, register: bool, swap_pointer: bool, command: &str, instead: &str) -> Result<(), TableError> {
        let caps = self.capabilities();
        let lacks = match (register && !caps.register, swap_pointer && !caps.swap_pointer) {
            (true, true) => "registering an existing metadata file and swapping the metadata pointer",
            (true, false) => "registering an existing metadata file",
            (false, true) => "swapping the metadata pointer between metadata files",
            (false, false) => return Ok(()),
        };
        Err(TableError::MissingCapability {
            catalog: self.reference().to_string(),
            command: command.to_string(),
            lacks: lacks.to_string(),
            instead: instead.to_string(),
        })
    }

    /// The warehouse as one location that holds every table of this catalog, for the commands
    /// that read the tables' files under it (`command`); refused with
    /// [`TableError::MissingCapability`], before anything is read, when the catalog has none: S3
    /// Tables keeps each table in a bucket of its own, and a REST catalog's warehouse may be a
    /// name rather than a location.
    pub fn warehouse_location(&self, command: &str) -> Result<&str, TableError> {
        let w = self.warehouse.as_str();
        if ["s3://", "s3a://", "file://"]
            .iter()
            .any(|scheme| w.starts_with(scheme))
        {
            return Ok(w);
        }
        let (lacks, instead) = match self.kind() {
            CatalogKind::S3tables => (
                "one warehouse location for its tables (S3 Tables keeps each table in a bucket of its own)".to_string(),
                KEEP_STATE_INSTEAD,
            ),
            _ if w.is_empty() => ("a warehouse location".to_string(), INSTEAD_OF_WAREHOUSE),
            _ => (
                format!("a warehouse location (its warehouse {w:?} is a name, not s3://… or a folder)"),
                INSTEAD_OF_WAREHOUSE,
            ),
        };
        Err(TableError::MissingCapability {
            catalog: self.reference().to_string(),
            command: command.to_string(),
            lacks,
            instead: instead.to_string(),
        })
    }

    /// Registers the existing metadata file `metadata_location` as `ident` (refused, changing
    /// nothing, when the catalog cannot register).
    pub async fn register_table(&self, ident: &TableIdent, metadata_location: &str) -> Result<Table, TableError> {
        self.require(true, false, "register a table", INSTEAD_OF_REGISTER)?;
        self.backend.register(ident, metadata_location).await
    }

    /// [`CatalogHandle::register_table`] of a metadata file the caller has read and parsed
    /// (`metadata`), without reading it again where the catalog can
    /// ([`contract::CatalogBackend::register_read`]).
    pub async fn register_read(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
        metadata: &iceberg::spec::TableMetadata,
    ) -> Result<(), TableError> {
        self.require(true, false, "register a table", INSTEAD_OF_REGISTER)?;
        self.backend.register_read(ident, metadata_location, metadata).await
    }

    /// Moves the catalog pointer of `ident` from `expected` to `new` if and only if it still
    /// points at `expected`. Returns whether this call won.
    pub async fn swap_metadata_pointer(
        &self,
        ident: &TableIdent,
        expected: &str,
        new: &str,
    ) -> Result<bool, TableError> {
        self.require(false, true, "swap a metadata pointer", INSTEAD_OF_REGISTER)?;
        self.backend.swap_pointer(ident, expected, new).await
    }
}

/// What to do when a catalog cannot register or swap pointers.
pub const INSTEAD_OF_REGISTER: &str = "do this step on a SQL catalog (SQLite or PostgreSQL), or recreate the \
     table in this catalog from its metadata file with `tidemark recover --source-metadata FILE --into NS.NAME`";

/// What to do when a command needs the catalog's warehouse location and the catalog has none.
pub const INSTEAD_OF_WAREHOUSE: &str = "give --warehouse s3://bucket/prefix where the catalog's tables are (a REST catalog \
     whose warehouse is a location), or keep the table pointers with `tidemark catalog state --out FILE` and their \
     contents with `tidemark history record`";
const KEEP_STATE_INSTEAD: &str = "keep the table pointers with `tidemark catalog state --out FILE` and their contents \
     with `tidemark history record`";

/// Opens the catalog `cfg` names (and on first use initializes a SQL one). S3 settings come
/// from the environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION` or `AWS_DEFAULT_REGION`), overlaid by a defined catalog's
/// `s3.*` properties.
pub async fn open_catalog(cfg: &CatalogConfig) -> Result<CatalogHandle, TableError> {
    open_catalog_with_props(cfg, s3_props(|k| std::env::var(k).ok())).await
}

/// [`open_catalog`] with the FileIO properties given instead of read from the environment.
pub async fn open_catalog_with_props(
    cfg: &CatalogConfig,
    file_io_props: HashMap<String, String>,
) -> Result<CatalogHandle, TableError> {
    let defs = Definitions::load()?;
    let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.trim().is_empty());
    let resolved = config::resolve(
        &cfg.uri,
        non_empty(&cfg.name).as_deref(),
        non_empty(&cfg.warehouse).as_deref(),
        &defs,
    )?;
    open_resolved(&resolved, file_io_props).await
}

/// Opens a recorded catalog reference (a route's), with the reader's own definition of it when
/// there is one (see [`config::resolve_ref`]).
/// A reader never creates a catalog: a SQLite file the reference names that does not exist is
/// refused, not made anew (and empty).
pub async fn open_ref(reference: &CatalogRef) -> Result<CatalogHandle, TableError> {
    let defs = Definitions::load()?;
    let resolved = config::resolve_ref(reference, &defs);
    if resolved.kind == CatalogKind::Sqlite {
        let uri = resolved.props.get("uri").map(String::as_str).unwrap_or("");
        let file = config::sqlite_file(uri);
        if !file.is_file() {
            return Err(TableError::InvalidCatalog {
                uri: file.display().to_string(),
                reason: "the SQLite file does not exist (a reader opens a catalog, never creates one)".into(),
            });
        }
    }
    open_resolved(&resolved, s3_props(|k| std::env::var(k).ok())).await
}

/// Opens a resolved catalog; its `s3.*` and `client.*` properties overlay `file_io_props`.
pub async fn open_resolved(
    resolved: &Resolved,
    mut file_io_props: HashMap<String, String>,
) -> Result<CatalogHandle, TableError> {
    for (k, v) in &resolved.props {
        if k.starts_with("s3.") || k.starts_with("client.") {
            file_io_props.insert(k.clone(), v.clone());
        }
    }
    let uri = resolved.props.get("uri").map(String::as_str).unwrap_or("");
    if resolved.name.trim().is_empty() {
        return Err(TableError::InvalidCatalog {
            uri: redact(uri),
            reason: "the catalog name is empty".into(),
        });
    }
    match resolved.kind {
        CatalogKind::Sqlite => open_sql(resolved, uri, file_io_props).await,
        #[cfg(feature = "remote")]
        CatalogKind::Postgres => open_sql(resolved, uri, file_io_props).await,
        // The environment is the weakest layer of a REST catalog's S3 settings ([`rest_io`]).
        #[cfg(feature = "remote")]
        CatalogKind::Rest => {
            let backend = rest::RestBackend::open(&resolved.name, &resolved.props, &file_io_props).await?;
            let props = backend.file_io_props().clone();
            Ok(CatalogHandle::new(Arc::new(backend), props))
        }
        #[cfg(feature = "remote")]
        CatalogKind::S3tables => {
            let mut props = resolved.props.clone();
            props.extend(file_io_props.iter().map(|(k, v)| (k.clone(), v.clone())));
            let backend = s3tables::open(&resolved.name, &props).await?;
            Ok(CatalogHandle::new(backend, file_io_props))
        }
        #[cfg(not(feature = "remote"))]
        CatalogKind::Postgres | CatalogKind::Rest | CatalogKind::S3tables => Err(TableError::NotBuilt {
            what: format!(
                "the {} catalog {}",
                match resolved.kind {
                    CatalogKind::Postgres => "PostgreSQL",
                    CatalogKind::Rest => "Iceberg REST",
                    _ => "S3 Tables",
                },
                redact(uri)
            ),
        }),
    }
}

async fn open_sql(
    resolved: &Resolved,
    uri: &str,
    file_io_props: HashMap<String, String>,
) -> Result<CatalogHandle, TableError> {
    let warehouse = resolved.props.get("warehouse").map(String::as_str).unwrap_or("");
    let warehouse = config::normalize_warehouse(warehouse)?;
    let backend = sql_open::open(&resolved.name, uri, &warehouse, &file_io_props).await?;
    Ok(CatalogHandle::from_sql(backend, file_io_props))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sqlite_handle_reports_what_a_route_records() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.db");
        let cfg = CatalogConfig {
            uri: format!("sqlite:{}", file.display()),
            warehouse: String::new(),
            name: String::new(),
        };
        let handle = open_catalog_with_props(&cfg, HashMap::new()).await.unwrap();
        let r = handle.reference();
        assert_eq!(r.kind, CatalogKind::Sqlite);
        assert_eq!(r.uri, file.display().to_string());
        assert_eq!(r.name, "tidemark");
        assert_eq!(
            r.warehouse.as_deref(),
            Some(format!("file://{}/warehouse", dir.path().display()).as_str())
        );
        assert!(handle.capabilities().register && handle.capabilities().swap_pointer);
    }
}
