//! Opening the Iceberg SQL catalog that holds tidemark's tables, and the catalog's metadata-pointer
//! compare-and-swap.
//!
//! The catalog is iceberg-catalog-sql's `SqlCatalog` on SQLite or PostgreSQL, with its tables in
//! the standard layout (`iceberg_tables`, `iceberg_namespace_properties`) that PyIceberg's
//! `SqlCatalog` and the Java JDBC catalog read: tidemark adds no tables. One migration: a catalog
//! created by PyIceberg (0.10) or an older Java JDBC catalog lacks the `iceberg_type` column of
//! `iceberg_tables` that iceberg-catalog-sql 0.10.1 filters on (iceberg-rust issue #2068); tidemark
//! adds it (nullable, as Java's JdbcCatalog migration does), which those clients accept.
//!
//! Contract of the pointer swap ([`CatalogHandle::swap_metadata_pointer`]): one `UPDATE … WHERE
//! metadata_location = <expected>` statement, the same statement the SQL catalog itself commits
//! with. The database makes it atomic: of two writers that expected the same pointer, exactly
//! one sees one affected row; the other sees zero and must reload the table. A commit is visible
//! to every reader of the catalog as soon as that statement returns.

pub mod contract;
#[cfg(test)]
mod live_tests;
pub mod rest;
pub mod s3tables;

use std::collections::HashMap;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use iceberg::io::{
    S3_ACCESS_KEY_ID, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION, S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN,
};
use iceberg::{CatalogBuilder, TableIdent};
use iceberg_catalog_sql::{
    SQL_CATALOG_PROP_BIND_STYLE, SQL_CATALOG_PROP_URI, SQL_CATALOG_PROP_WAREHOUSE, SqlBindStyle, SqlCatalog,
    SqlCatalogBuilder,
};
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;
use sqlx::any::AnyPoolOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, ConnectOptions, Connection, Row};

use crate::table::TableError;

/// Where the catalog lives and what it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogConfig {
    /// A SQLite file (a path or `sqlite://path`) or `postgres://…` / `postgresql://…`.
    pub uri: String,
    /// A local folder (absolute path or `file://…`) or `s3://bucket/prefix`.
    pub warehouse: String,
    /// The catalog name (the `catalog_name` column); PyIceberg and Java readers must use the same.
    pub name: String,
}

/// The SQL dialect of the catalog database; it decides the bind-parameter style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// An open catalog: the iceberg `SqlCatalog` plus tidemark's own pool on the same database, used
/// for the pointer compare-and-swap that iceberg-rust's transaction API cannot express.
#[derive(Clone)]
pub struct CatalogHandle {
    catalog: Arc<SqlCatalog>,
    name: String,
    /// The catalog URI with any password replaced, safe for messages.
    uri: String,
    warehouse: String,
    file_io_props: HashMap<String, String>,
    pool: AnyPool,
    dialect: Dialect,
}

// Manual Debug: the FileIO props hold the S3 secret key.
impl std::fmt::Debug for CatalogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogHandle")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .field("warehouse", &self.warehouse)
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

impl CatalogHandle {
    pub fn catalog(&self) -> &Arc<SqlCatalog> {
        &self.catalog
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The catalog URI, password redacted.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The normalized warehouse location (`file:///…` or `s3://…`).
    pub fn warehouse(&self) -> &str {
        &self.warehouse
    }

    /// The FileIO properties (S3 endpoint, credentials, region, path style) the catalog uses.
    pub fn file_io_props(&self) -> &HashMap<String, String> {
        &self.file_io_props
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The metadata file the catalog currently points at for `ident`, or `None` if the table
    /// is not registered.
    pub async fn metadata_pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError> {
        let sql = self.bind_style(
            "SELECT metadata_location FROM iceberg_tables \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
        );
        let row = sqlx::query(&sql)
            .bind(self.name.as_str())
            .bind(namespace_column(ident))
            .bind(ident.name())
            .fetch_optional(&self.pool)
            .await
            .map_err(|source| TableError::Sql {
                context: format!("read the metadata pointer of {ident}"),
                source,
            })?;
        match row {
            None => Ok(None),
            Some(row) => row.try_get::<Option<String>, _>(0).map_err(|source| TableError::Sql {
                context: format!("decode the metadata pointer of {ident}"),
                source,
            }),
        }
    }

    /// Every table of this catalog (`namespace.name`, sorted) with its metadata pointer, in one
    /// query; with `namespace`, only the tables directly in it.
    pub async fn pointers(&self, namespace: Option<&str>) -> Result<Vec<(String, Option<String>)>, TableError> {
        let sql = self.bind_style(
            "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables \
             WHERE catalog_name = ? AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
        );
        let sql_err = |source| TableError::Sql {
            context: format!("list the tables of catalog {}", self.name),
            source,
        };
        let rows = sqlx::query(&sql)
            .bind(self.name.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(sql_err)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let ns: String = row.try_get(0).map_err(sql_err)?;
            if namespace.is_some_and(|want| want != ns) {
                continue;
            }
            let name: String = row.try_get(1).map_err(sql_err)?;
            out.push((
                format!("{ns}.{name}"),
                row.try_get::<Option<String>, _>(2).map_err(sql_err)?,
            ));
        }
        out.sort();
        Ok(out)
    }

    /// Moves the catalog pointer of `ident` from `expected` to `new` if and only if it still
    /// points at `expected`. Returns whether this call won.
    pub async fn swap_metadata_pointer(
        &self,
        ident: &TableIdent,
        expected: &str,
        new: &str,
    ) -> Result<bool, TableError> {
        // The same statement as iceberg-catalog-sql's `update_table`, so a tidemark commit and a
        // commit by iceberg-rust, PyIceberg or Java on this catalog exclude each other.
        let sql = self.bind_style(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL) \
             AND metadata_location = ?",
        );
        let result = sqlx::query(&sql)
            .bind(new)
            .bind(expected)
            .bind(self.name.as_str())
            .bind(namespace_column(ident))
            .bind(ident.name())
            .bind(expected)
            .execute(&self.pool)
            .await
            .map_err(|source| TableError::Sql {
                context: format!("swap the metadata pointer of {ident}"),
                source,
            })?;
        Ok(result.rows_affected() == 1)
    }

    /// sqlx's `Any` driver passes placeholders through unchanged, so PostgreSQL needs `$n`.
    fn bind_style(&self, sql: &str) -> String {
        match self.dialect {
            Dialect::Sqlite => sql.to_string(),
            Dialect::Postgres => {
                let mut out = String::with_capacity(sql.len() + 8);
                let mut n = 0;
                for c in sql.chars() {
                    if c == '?' {
                        n += 1;
                        out.push('$');
                        out.push_str(&n.to_string());
                    } else {
                        out.push(c);
                    }
                }
                out
            }
        }
    }
}

/// How iceberg-catalog-sql 0.10.1 stores a namespace in `table_namespace`: its levels joined
/// with `.` (PyIceberg and Java do the same).
pub fn namespace_column(ident: &TableIdent) -> String {
    ident.namespace().join(".")
}

/// Opens (and on first use initializes) the catalog. S3 settings come from the environment:
/// `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `AWS_REGION` (or `AWS_DEFAULT_REGION`).
pub async fn open_catalog(cfg: &CatalogConfig) -> Result<CatalogHandle, TableError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    open_catalog_with_props(cfg, s3_props(env)).await
}

/// [`open_catalog`] with the FileIO properties given instead of read from the environment.
pub async fn open_catalog_with_props(
    cfg: &CatalogConfig,
    file_io_props: HashMap<String, String>,
) -> Result<CatalogHandle, TableError> {
    if cfg.name.trim().is_empty() {
        return Err(TableError::InvalidCatalog {
            uri: redact(&cfg.uri),
            reason: "the catalog name is empty".into(),
        });
    }
    let (uri, dialect) = normalize_uri(&cfg.uri)?;
    let shown = redact(&uri);
    let warehouse = normalize_warehouse(&cfg.warehouse)?;
    let unreachable = |detail: String| TableError::CatalogUnreachable {
        uri: shown.clone(),
        detail,
    };

    if dialect == Dialect::Sqlite {
        // The catalog connects through sqlx's `Any` driver, which never creates a SQLite file.
        let opts = SqliteConnectOptions::from_str(&uri)
            .map_err(|e| unreachable(format!("bad SQLite URI: {e}")))?
            .create_if_missing(true);
        let conn = opts.connect().await.map_err(|e| unreachable(e.to_string()))?;
        conn.close().await.map_err(|e| unreachable(e.to_string()))?;
    }

    // On PostgreSQL, iceberg-catalog-sql creates its tables with `CREATE TABLE IF NOT EXISTS`,
    // which two sessions running it at once on a fresh database can still fail (on the unique
    // index of `pg_type`). A session advisory lock serializes the first-use initialization
    // between processes; it is released when that session closes, right after.
    let init_lock = match dialect {
        Dialect::Postgres => {
            let mut c = sqlx::PgConnection::connect(&uri)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(INIT_LOCK)
                .execute(&mut c)
                .await
                .map_err(|e| unreachable(format!("taking the initialization lock: {e}")))?;
            Some(c)
        }
        Dialect::Sqlite => None,
    };
    let handle = open_initialized(cfg, &uri, shown.clone(), dialect, warehouse, file_io_props).await;
    if let Some(c) = init_lock {
        // Closing the session releases the lock (also when closing fails: the server ends it).
        let _ = c.close().await;
    }
    handle
}

/// Advisory lock key of the catalog's first-use initialization on PostgreSQL ("tidemark").
const INIT_LOCK: i64 = 0x7469_6465_6d61_726b;

async fn open_initialized(
    cfg: &CatalogConfig,
    uri: &str,
    shown: String,
    dialect: Dialect,
    warehouse: String,
    file_io_props: HashMap<String, String>,
) -> Result<CatalogHandle, TableError> {
    let unreachable = |detail: String| TableError::CatalogUnreachable {
        uri: shown.clone(),
        detail,
    };
    sqlx::any::install_default_drivers();
    // A short acquire timeout so that an unreachable server fails the command in seconds, not
    // after the pool's default 30 s.
    let pool = AnyPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(10))
        .connect(uri)
        .await
        .map_err(|e| unreachable(e.to_string()))?;

    add_iceberg_type_column(&pool, dialect)
        .await
        .map_err(|e| unreachable(format!("migrating iceberg_tables: {e}")))?;

    let bind_style = match dialect {
        Dialect::Sqlite => SqlBindStyle::QMark,
        Dialect::Postgres => SqlBindStyle::DollarNumeric,
    };
    // Catalog props are forwarded to the catalog's FileIO, which is how S3 settings reach it.
    let mut props = file_io_props.clone();
    props.insert(SQL_CATALOG_PROP_URI.to_string(), uri.to_string());
    props.insert(SQL_CATALOG_PROP_WAREHOUSE.to_string(), warehouse.clone());
    props.insert(SQL_CATALOG_PROP_BIND_STYLE.to_string(), bind_style.to_string());
    let catalog = SqlCatalogBuilder::default()
        .with_storage_factory(Arc::new(OpenDalResolvingStorageFactory::new()))
        .load(cfg.name.clone(), props)
        .await
        .map_err(|e| unreachable(format!("{e:#}")))?;

    Ok(CatalogHandle {
        catalog: Arc::new(catalog),
        name: cfg.name.clone(),
        uri: shown,
        warehouse,
        file_io_props,
        pool,
        dialect,
    })
}

/// Adds `iceberg_tables.iceberg_type` when the table exists without it (see the module doc).
///
/// On PostgreSQL the table is the one the catalog's unqualified statements use: the one in the
/// connection's current schema (the first existing schema of its `search_path`). Other schemas
/// may hold other catalogs' `iceberg_tables`, with or without the column; they are not looked at.
/// `IF NOT EXISTS` makes a concurrent migration by another process harmless.
async fn add_iceberg_type_column(pool: &AnyPool, dialect: Dialect) -> Result<(), sqlx::Error> {
    let (exists, probe, alter) = match dialect {
        Dialect::Sqlite => (
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'iceberg_tables'",
            "SELECT COUNT(*) FROM pragma_table_info('iceberg_tables') WHERE name = 'iceberg_type'",
            "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)",
        ),
        Dialect::Postgres => (
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = 'iceberg_tables'",
            "SELECT COUNT(*) FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'iceberg_tables' \
             AND column_name = 'iceberg_type'",
            "ALTER TABLE iceberg_tables ADD COLUMN IF NOT EXISTS iceberg_type VARCHAR(5)",
        ),
    };
    let count = |sql: &'static str| async move {
        sqlx::query(sql)
            .fetch_one(pool)
            .await
            .map(|r| r.try_get::<i64, _>(0).unwrap_or(0))
    };
    if count(exists).await? > 0 && count(probe).await? == 0 {
        sqlx::query(alter).execute(pool).await?;
    }
    Ok(())
}

/// The S3 FileIO properties from environment-style variables (`env` returns a variable's value).
pub fn s3_props(env: impl Fn(&str) -> Option<String>) -> HashMap<String, String> {
    let mut props = HashMap::new();
    if let Some(endpoint) = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")) {
        // Virtual-host addressing puts the bucket in the host name, which an IP or localhost
        // endpoint (a local test server) cannot resolve.
        if endpoint_needs_path_style(&endpoint) {
            props.insert(S3_PATH_STYLE_ACCESS.to_string(), "true".to_string());
        }
        props.insert(S3_ENDPOINT.to_string(), endpoint);
    }
    if let Some(v) = env("AWS_ACCESS_KEY_ID") {
        props.insert(S3_ACCESS_KEY_ID.to_string(), v);
    }
    if let Some(v) = env("AWS_SECRET_ACCESS_KEY") {
        props.insert(S3_SECRET_ACCESS_KEY.to_string(), v);
    }
    if let Some(v) = env("AWS_SESSION_TOKEN") {
        props.insert(S3_SESSION_TOKEN.to_string(), v);
    }
    match env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")) {
        Some(region) => {
            props.insert(S3_REGION.to_string(), region);
        }
        // S3-compatible servers ignore the region but request signing needs one.
        None if props.contains_key(S3_ENDPOINT) => {
            props.insert(S3_REGION.to_string(), "us-east-1".to_string());
        }
        None => {}
    }
    props
}

pub(crate) fn endpoint_needs_path_style(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or(v6)
    } else {
        authority.split(':').next().unwrap_or(authority)
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok()
}

/// Turns the accepted URI forms into the one sqlx understands.
fn normalize_uri(uri: &str) -> Result<(String, Dialect), TableError> {
    let uri = uri.trim();
    let invalid = |reason: &str| TableError::InvalidCatalog {
        uri: redact(uri),
        reason: reason.into(),
    };
    if uri.is_empty() {
        return Err(invalid("the catalog URI is empty"));
    }
    if uri.starts_with("postgres://") || uri.starts_with("postgresql://") {
        return Ok((uri.to_string(), Dialect::Postgres));
    }
    if uri.contains(":memory:") || uri.contains("mode=memory") {
        // Each sqlx pool gets its own in-memory database, so the catalog and the pointer swap
        // would not see the same tables.
        return Err(invalid("an in-memory SQLite catalog is not supported; use a file"));
    }
    if uri.starts_with("sqlite:") {
        return Ok((uri.to_string(), Dialect::Sqlite));
    }
    if let Some((scheme, _)) = uri.split_once("://") {
        return Err(invalid(&format!(
            "scheme {scheme:?} is not supported (use a SQLite path or postgres://)"
        )));
    }
    // A bare path: sqlx strips `sqlite://` and keeps the rest, absolute or relative.
    Ok((format!("sqlite://{uri}"), Dialect::Sqlite))
}

/// `s3://bucket/prefix` stays; a local folder becomes `file:///abs/path`, because the storage
/// factory picks the backend from the URL scheme and a bare path is not a URL.
fn normalize_warehouse(warehouse: &str) -> Result<String, TableError> {
    let w = warehouse.trim().trim_end_matches('/');
    let invalid = |reason: String| TableError::InvalidWarehouse {
        warehouse: warehouse.to_string(),
        reason,
    };
    if w.is_empty() {
        return Err(invalid("the warehouse location is empty".into()));
    }
    if let Some(rest) = w.strip_prefix("s3://").or_else(|| w.strip_prefix("s3a://")) {
        if rest.is_empty() || rest.starts_with('/') {
            return Err(invalid("an S3 warehouse needs a bucket: s3://bucket/prefix".into()));
        }
        return Ok(w.to_string());
    }
    if let Some(path) = w.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(invalid("a file:// warehouse needs an absolute path (file:///…)".into()));
        }
        return Ok(w.to_string());
    }
    if let Some((scheme, _)) = w.split_once("://") {
        return Err(invalid(format!(
            "scheme {scheme:?} is not supported (use s3:// or a local folder)"
        )));
    }
    let abs = std::path::absolute(w).map_err(|e| invalid(format!("cannot make the path absolute: {e}")))?;
    let abs = abs.to_str().ok_or_else(|| invalid("the path is not UTF-8".into()))?;
    Ok(format!("file://{}", abs.trim_end_matches('/')))
}

/// Replaces the password of `scheme://user:password@host…` so the URI can go into messages.
pub fn redact(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => uri.to_string(),
        },
        None => uri.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_forms() {
        assert_eq!(
            normalize_uri("/tmp/c.db").unwrap(),
            ("sqlite:///tmp/c.db".into(), Dialect::Sqlite)
        );
        assert_eq!(
            normalize_uri("cat.db").unwrap(),
            ("sqlite://cat.db".into(), Dialect::Sqlite)
        );
        assert_eq!(normalize_uri("sqlite:///tmp/c.db").unwrap().1, Dialect::Sqlite);
        assert_eq!(normalize_uri("postgresql://u:p@h/db").unwrap().1, Dialect::Postgres);
        assert!(matches!(
            normalize_uri("mysql://h/db"),
            Err(TableError::InvalidCatalog { .. })
        ));
    }

    #[test]
    fn warehouse_forms() {
        assert_eq!(normalize_warehouse("/tmp/wh/").unwrap(), "file:///tmp/wh");
        assert_eq!(normalize_warehouse("file:///tmp/wh").unwrap(), "file:///tmp/wh");
        assert_eq!(
            normalize_warehouse("s3://bucket/prefix/").unwrap(),
            "s3://bucket/prefix"
        );
        assert!(normalize_warehouse("s3:///nobucket").is_err());
        assert!(normalize_warehouse("gs://b/p").is_err());
    }

    #[test]
    fn s3_props_from_env() {
        let env: HashMap<&str, &str> = HashMap::from([
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"),
            ("AWS_ACCESS_KEY_ID", "ak"),
            ("AWS_SECRET_ACCESS_KEY", "sk"),
        ]);
        let props = s3_props(|k| env.get(k).map(|v| v.to_string()));
        assert_eq!(props[S3_ENDPOINT], "http://127.0.0.1:9000");
        assert_eq!(props[S3_PATH_STYLE_ACCESS], "true");
        assert_eq!(props[S3_ACCESS_KEY_ID], "ak");
        assert_eq!(props[S3_SECRET_ACCESS_KEY], "sk");
        assert_eq!(props[S3_REGION], "us-east-1");
        assert!(!endpoint_needs_path_style("https://s3.eu-west-1.amazonaws.com"));
        assert!(endpoint_needs_path_style("http://localhost:4566"));
        assert!(endpoint_needs_path_style("http://[::1]:9000/"));
        assert!(s3_props(|_| None).is_empty());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/cat"),
            "postgres://me:***@db:5432/cat"
        );
        assert_eq!(redact("postgres://db/cat"), "postgres://db/cat");
        assert_eq!(redact("/tmp/c.db"), "/tmp/c.db");
    }

    #[tokio::test]
    async fn unreachable_catalog_names_the_uri() {
        let dir = tempfile::tempdir().unwrap();
        // A SQLite path under a missing folder cannot be created.
        let uri = format!("{}/no/such/dir/c.db", dir.path().display());
        let cfg = CatalogConfig {
            uri: uri.clone(),
            warehouse: dir.path().display().to_string(),
            name: "t".into(),
        };
        let err = open_catalog_with_props(&cfg, HashMap::new()).await.unwrap_err();
        assert!(matches!(err, TableError::CatalogUnreachable { .. }), "{err}");
        assert!(err.to_string().contains(&uri), "{err}");
    }
}
