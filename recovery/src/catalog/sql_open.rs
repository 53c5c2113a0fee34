//! Opening a SQL catalog ([`open`]): the URI forms it accepts ([`normalize_uri`]), the SQLite
//! file created on first use, the first-use initialization of a PostgreSQL catalog serialized by
//! an advisory lock, the `iceberg_type` migration (see [`super::sql`]), and what an error while
//! opening means (a full disk, or a catalog that cannot be reached; passwords never in it).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use iceberg::CatalogBuilder;
use iceberg_catalog_sql::{
    SQL_CATALOG_PROP_BIND_STYLE, SQL_CATALOG_PROP_URI, SQL_CATALOG_PROP_WAREHOUSE, SqlBindStyle, SqlCatalogBuilder,
};
use sqlx::any::AnyPoolOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, ConnectOptions, Connection, Row};

use super::config::{redact, strip_password};
use super::contract::{CatalogKind, CatalogRef};
use super::sql::{Dialect, SqlBackend, disk_full, write_failed};
use crate::catalog::table_io::CountingStorageFactory;
use crate::table::error::TableError;

/// Opens (and on first use initializes) the SQL catalog `name` at `uri` (a SQLite path, `sqlite:`
/// URI, or `postgres://…`) with its tables under `warehouse` (already normalized: `file:///…` or
/// `s3://…`). `file_io_props` go to the catalog's FileIO.
pub async fn open(
    name: &str,
    uri: &str,
    warehouse: &str,
    file_io_props: &HashMap<String, String>,
) -> Result<SqlBackend, TableError> {
    let (uri, dialect) = normalize_uri(uri)?;
    let shown = redact(&uri);
    if dialect == Dialect::Sqlite {
        open_sqlite_file(&uri, &shown).await?;
    }
    // On PostgreSQL, iceberg-catalog-sql creates its tables with `CREATE TABLE IF NOT EXISTS`,
    // which two sessions running it at once on a fresh database can still fail (on the unique
    // index of `pg_type`). A session advisory lock serializes the first-use initialization
    // between processes; it is released when that session closes, right after.
    let init_lock = match dialect {
        Dialect::Postgres => Some(init_lock(&uri, &shown).await?),
        Dialect::Sqlite => None,
    };
    let backend = open_initialized(name, &uri, shown, dialect, warehouse, file_io_props).await;
    if let Some(c) = init_lock {
        release(c).await;
    }
    backend
}

/// Takes the first-use initialization lock of a PostgreSQL catalog: a session of its own.
#[cfg(feature = "remote")]
async fn init_lock(uri: &str, shown: &str) -> Result<sqlx::PgConnection, TableError> {
    let unreachable = |detail: String| TableError::CatalogUnreachable {
        uri: shown.to_string(),
        detail,
    };
    let mut c = sqlx::PgConnection::connect(uri)
        .await
        .map_err(|e| unreachable(scrub(&e.to_string(), uri)))?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(INIT_LOCK)
        .execute(&mut c)
        .await
        .map_err(|e| unreachable(format!("taking the initialization lock: {e}")))?;
    Ok(c)
}

/// Closing the session releases the lock (also when closing fails: the server ends it).
#[cfg(feature = "remote")]
async fn release(c: sqlx::PgConnection) {
    let _ = c.close().await;
}

/// A build without `remote` has no PostgreSQL: no lock is ever taken.
#[cfg(not(feature = "remote"))]
enum NoPostgres {}

#[cfg(not(feature = "remote"))]
async fn init_lock(_uri: &str, shown: &str) -> Result<NoPostgres, TableError> {
    Err(TableError::NotBuilt {
        what: format!("the PostgreSQL catalog {shown}"),
    })
}

#[cfg(not(feature = "remote"))]
async fn release(c: NoPostgres) {
    match c {}
}

/// An error while the catalog is opened: a write that failed on a full disk (the catalog's
/// tables created on first use) is [`TableError::CatalogWriteFailed`]; anything else is a
/// catalog that cannot be reached (a missing folder, a file that is no database, a server
/// that does not answer).
fn open_failed(shown: &str, detail: String) -> TableError {
    if disk_full(&detail) {
        write_failed(shown, "opening it (its tables are created on first use)", &detail)
    } else {
        TableError::CatalogUnreachable {
            uri: shown.to_string(),
            detail,
        }
    }
}

/// Creates the SQLite file when it is missing (the catalog connects through sqlx's `Any` driver,
/// which never creates one). The one place a SQLite catalog file is first touched.
async fn open_sqlite_file(uri: &str, shown: &str) -> Result<(), TableError> {
    crate::catalog::sqlite_check::check_sqlite_file(
        &crate::catalog::sqlite_check::sqlite_path(uri).unwrap_or_default(),
    )
    .await?;
    let unreachable = |detail: String| open_failed(shown, detail);
    let opts = SqliteConnectOptions::from_str(uri)
        .map_err(|e| unreachable(format!("bad SQLite URI: {e}")))?
        .create_if_missing(true);
    let conn = opts.connect().await.map_err(|e| unreachable(e.to_string()))?;
    conn.close().await.map_err(|e| unreachable(e.to_string()))
}

/// Advisory lock key of the catalog's first-use initialization on PostgreSQL ("tidemark").
#[cfg(feature = "remote")]
const INIT_LOCK: i64 = 0x7469_6465_6d61_726b;

async fn open_initialized(
    name: &str,
    uri: &str,
    shown: String,
    dialect: Dialect,
    warehouse: &str,
    file_io_props: &HashMap<String, String>,
) -> Result<SqlBackend, TableError> {
    let unreachable = |detail: String| open_failed(&shown, scrub(&detail, uri));
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
    props.insert(SQL_CATALOG_PROP_WAREHOUSE.to_string(), warehouse.to_string());
    props.insert(SQL_CATALOG_PROP_BIND_STYLE.to_string(), bind_style.to_string());
    let catalog = SqlCatalogBuilder::default()
        .with_storage_factory(Arc::new(CountingStorageFactory::new()))
        .load(name.to_string(), props)
        .await
        .map_err(|e| unreachable(format!("{e:#}")))?;

    let kind = match dialect {
        Dialect::Sqlite => CatalogKind::Sqlite,
        Dialect::Postgres => CatalogKind::Postgres,
    };
    let reference = CatalogRef {
        kind,
        uri: match dialect {
            // Readers open the file by its absolute path, from any working folder.
            Dialect::Sqlite => super::config::sqlite_file(uri).display().to_string(),
            Dialect::Postgres => strip_password(uri),
        },
        warehouse: Some(warehouse.to_string()),
        name: name.to_string(),
    };
    Ok(SqlBackend {
        catalog: Arc::new(catalog),
        reference,
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

/// Turns the accepted URI forms into the one sqlx understands.
pub(crate) fn normalize_uri(uri: &str) -> Result<(String, Dialect), TableError> {
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

/// A driver message may quote the connection string; never let its password through.
fn scrub(message: &str, uri: &str) -> String {
    match password_of(uri) {
        Some(p) if !p.is_empty() => message.replace(p, "***"),
        _ => message.to_string(),
    }
}

fn password_of(uri: &str) -> Option<&str> {
    let rest = uri.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    userinfo.split_once(':').map(|(_, p)| p)
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
        let file = |uri: &str| super::super::config::sqlite_file(uri).display().to_string();
        assert_eq!(file("sqlite:///tmp/c.db?mode=rwc"), "/tmp/c.db");
        assert!(file("sqlite://c.db").starts_with('/'));
    }

    #[test]
    fn passwords_never_stay() {
        assert_eq!(
            strip_password("postgres://me:secret@db:5432/cat"),
            "postgres://me@db:5432/cat"
        );
        assert_eq!(strip_password("postgres://db/cat"), "postgres://db/cat");
        assert_eq!(
            scrub(
                "error connecting to postgres://me:s3cr3t@db",
                "postgres://me:s3cr3t@db/x"
            ),
            "error connecting to postgres://me:***@db"
        );
    }

    #[tokio::test]
    async fn unreachable_catalog_names_the_uri() {
        let dir = tempfile::tempdir().unwrap();
        // A SQLite path under a missing folder cannot be created.
        let uri = format!("{}/no/such/dir/c.db", dir.path().display());
        let warehouse = format!("file://{}", dir.path().display());
        let err = open("t", &uri, &warehouse, &HashMap::new()).await.unwrap_err();
        assert!(matches!(err, TableError::CatalogUnreachable { .. }), "{err}");
        assert!(err.to_string().contains(&uri), "{err}");
    }
}
