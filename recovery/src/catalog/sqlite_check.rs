//! What a SQLite catalog file must be before tidemark writes to it.
//!
//! Opening a SQL catalog creates its tables (`iceberg_tables`, `iceberg_namespace_properties`)
//! when they are missing, so `--catalog some.db` pointed by mistake at another application's
//! database would silently add tidemark's tables to it, and a file that is not SQLite at all
//! would fail deep inside the driver. [`check_sqlite_file`] runs first and allows:
//! * a path with no file yet, or an empty file (a new catalog is created);
//! * a SQLite database that already holds the Iceberg catalog tables (tidemark's, PyIceberg's
//!   `SqlCatalog`, the Java JDBC catalog);
//! * a SQLite database with no tables at all.
//!
//! It refuses, as bad input (exit 3), a file that is not a SQLite database, and a SQLite
//! database that holds other tables but no Iceberg catalog table, naming them, unless the
//! operator asks for the catalog to be added to it with `TIDEMARK_SQLITE_SHARED=1`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Row};

use crate::table::TableError;

/// The environment variable that allows adding the catalog tables to a SQLite database that
/// already holds other tables.
pub const ALLOW_SHARED_ENV: &str = "TIDEMARK_SQLITE_SHARED";

const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
const CATALOG_TABLES: [&str; 2] = ["iceberg_tables", "iceberg_namespace_properties"];

/// The file of a `sqlite://…` URI (`None` for an in-memory database).
pub fn sqlite_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("sqlite://").or_else(|| uri.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// Checks the SQLite catalog file at `path` (see the module documentation), with the
/// permission read from [`ALLOW_SHARED_ENV`].
pub async fn check_sqlite_file(path: &Path) -> Result<(), TableError> {
    let allow = std::env::var(ALLOW_SHARED_ENV).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    check_sqlite_file_with(path, allow).await
}

/// [`check_sqlite_file`] with the permission given.
pub async fn check_sqlite_file_with(path: &Path, allow_shared: bool) -> Result<(), TableError> {
    let invalid = |reason: String| TableError::InvalidCatalog {
        uri: path.display().to_string(),
        reason,
    };
    let mut header = Vec::with_capacity(16);
    match std::fs::File::open(path) {
        Ok(f) => {
            f.take(16)
                .read_to_end(&mut header)
                .map_err(|e| invalid(format!("cannot read the file: {e}")))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(invalid(format!("cannot open the file: {e}"))),
    }
    if header.is_empty() {
        return Ok(());
    }
    if header.as_slice() != SQLITE_HEADER {
        return Err(invalid(
            "the file exists and is not a SQLite database; give the path of a catalog (or of a file to create)".into(),
        ));
    }
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
        .map_err(|e| invalid(format!("bad SQLite path: {e}")))?;
    // Not read-only: after a crash mid-write SQLite must roll back the hot journal on open, which a
    // read-only connection cannot ("attempt to write a readonly database"). Nothing is written here.
    let mut conn = opts
        .connect()
        .await
        .map_err(|e| invalid(format!("cannot open the SQLite database: {e}")))?;
    let rows =
        sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .map_err(|e| invalid(format!("cannot list the database's tables: {e}")))?;
    let _ = conn.close().await;
    let tables: Vec<String> = rows.iter().map(|r| r.get::<String, _>(0)).collect();
    let has_catalog = tables.iter().any(|t| CATALOG_TABLES.contains(&t.as_str()));
    if tables.is_empty() || has_catalog || allow_shared {
        return Ok(());
    }
    let mut shown = tables.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if tables.len() > 5 {
        shown.push_str(&format!(" and {} more", tables.len() - 5));
    }
    Err(invalid(format!(
        "this SQLite database belongs to something else (tables {shown}, no Iceberg catalog table); tidemark will not add its tables to it: give another path, or set {ALLOW_SHARED_ENV}=1 to add the catalog tables to this database"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn sqlite_with(path: &Path, tables: &[&str]) {
        let mut conn = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .unwrap()
            .create_if_missing(true)
            .connect()
            .await
            .unwrap();
        for t in tables {
            sqlx::query(&format!("CREATE TABLE {t} (id INTEGER)"))
                .execute(&mut conn)
                .await
                .unwrap();
        }
        conn.close().await.unwrap();
    }

    #[tokio::test]
    async fn only_catalogs_new_files_and_empty_databases_pass() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("new.db");
        check_sqlite_file_with(&missing, false).await.unwrap();
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        check_sqlite_file_with(&empty, false).await.unwrap();
        let catalog = dir.path().join("catalog.db");
        sqlite_with(&catalog, &["iceberg_tables", "iceberg_namespace_properties"]).await;
        check_sqlite_file_with(&catalog, false).await.unwrap();

        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a database at all").unwrap();
        let err = check_sqlite_file_with(&text, false).await.unwrap_err();
        assert!(matches!(err, TableError::InvalidCatalog { .. }), "{err}");
        assert!(err.to_string().contains("is not a SQLite database"), "{err}");

        let app = dir.path().join("app.db");
        sqlite_with(&app, &["customers", "invoices"]).await;
        let err = check_sqlite_file_with(&app, false).await.unwrap_err().to_string();
        assert!(
            err.contains("customers, invoices") && err.contains(ALLOW_SHARED_ENV),
            "{err}"
        );
        check_sqlite_file_with(&app, true).await.unwrap();
    }

    #[tokio::test]
    async fn opening_a_catalog_on_another_applications_database_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let warehouse = dir.path().join("warehouse").display().to_string();
        let open = |uri: &Path| {
            let cfg = crate::catalog::CatalogConfig {
                uri: uri.display().to_string(),
                warehouse: warehouse.clone(),
                name: "tidemark".into(),
            };
            async move { crate::catalog::open_catalog_with_props(&cfg, Default::default()).await }
        };
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a database at all").unwrap();
        let err = open(&text).await.unwrap_err();
        assert!(matches!(err, TableError::InvalidCatalog { .. }), "{err}");
        assert_eq!(std::fs::read(&text).unwrap(), b"not a database at all");
        let app = dir.path().join("app.db");
        sqlite_with(&app, &["customers"]).await;
        let before = std::fs::read(&app).unwrap();
        let err = open(&app).await.unwrap_err();
        assert!(matches!(err, TableError::InvalidCatalog { .. }), "{err}");
        assert_eq!(std::fs::read(&app).unwrap(), before, "no table added");
    }

    #[test]
    fn the_path_of_a_sqlite_uri() {
        assert_eq!(sqlite_path("sqlite:///tmp/c.db"), Some(PathBuf::from("/tmp/c.db")));
        assert_eq!(sqlite_path("sqlite://cat.db?mode=rwc"), Some(PathBuf::from("cat.db")));
        assert_eq!(sqlite_path("sqlite::memory:"), None);
        assert_eq!(sqlite_path("postgres://h/db"), None);
    }
}
