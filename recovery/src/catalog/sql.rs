//! The SQL catalog backend: iceberg-catalog-sql's `SqlCatalog` on SQLite or PostgreSQL, and the
//! contract's commit published with the catalog's own compare-and-swap.
//!
//! The catalog's tables are the standard layout (`iceberg_tables`, `iceberg_namespace_properties`)
//! that PyIceberg's `SqlCatalog` and the Java JDBC catalog read: tidemark adds no tables. One
//! migration: a catalog created by PyIceberg (0.10) or an older Java JDBC catalog lacks the
//! `iceberg_type` column of `iceberg_tables` that iceberg-catalog-sql 0.10.1 filters on
//! (iceberg-rust issue #2068); tidemark adds it (nullable, as Java's JdbcCatalog migration does),
//! which those clients accept.
//!
//! A commit ([`CatalogBackend::commit`]): check the requirements against the metadata the table
//! was loaded with, apply the updates to it (`TableUpdate::apply` on a `TableMetadataBuilder`),
//! write the result as the next metadata file (a new, never reused name), then swap the pointer
//! with one `UPDATE … WHERE metadata_location = <base>` statement, the statement the SQL catalog
//! itself commits with. The database makes it atomic: of two writers that expected the same
//! pointer, exactly one sees one affected row; the other sees zero, a conflict. A database error
//! once the statement was sent leaves the outcome unknown and is resolved by reloading
//! ([`resolve_unknown`]).
//!
//! Opening the catalog (and its first-use initialization and migration) is
//! [`super::sql_open`].

use std::collections::BTreeSet;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::{MAIN_BRANCH, TableMetadata, TableMetadataBuilder};
use iceberg::table::Table;
use iceberg::{Catalog, MetadataLocation, NamespaceIdent, Runtime, TableIdent, TableUpdate};
use iceberg_catalog_sql::SqlCatalog;
use sqlx::{AnyPool, Row};

use super::contract::{Capabilities, CatalogBackend, CatalogRef, CommitError, CommitRequest, resolve_unknown};
use crate::table::error::{TableError, iceberg_err};

/// The SQL dialect of the catalog database; it decides the bind-parameter style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// An open SQL catalog: the iceberg `SqlCatalog` plus tidemark's own pool on the same database,
/// used for the pointer compare-and-swap that iceberg-rust's transaction API cannot express.
pub struct SqlBackend {
    pub(super) catalog: Arc<SqlCatalog>,
    pub(super) reference: CatalogRef,
    pub(super) pool: AnyPool,
    pub(super) dialect: Dialect,
}

// Manual Debug: the pool and catalog hold the connection URI (with its password).
impl std::fmt::Debug for SqlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlBackend")
            .field("reference", &self.reference)
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

/// Whether `detail` (an error's text, its causes included) says the disk is full: SQLite's
/// `SQLITE_FULL` (code 13, "database or disk is full") or the system's `ENOSPC`.
pub(crate) fn disk_full(detail: &str) -> bool {
    detail.contains("database or disk is full")
        || detail.contains("(code: 13)")
        || detail.contains("No space left on device")
}

/// A write to the catalog's database that failed: [`TableError::CatalogWriteFailed`], naming a
/// full disk as the cause when it is one.
pub(crate) fn write_failed(uri: &str, action: &str, e: &dyn std::fmt::Display) -> TableError {
    let detail = e.to_string();
    TableError::CatalogWriteFailed {
        uri: uri.to_string(),
        action: action.to_string(),
        cause: if disk_full(&detail) {
            format!("the disk is full ({detail})")
        } else {
            detail
        },
    }
}

impl SqlBackend {
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn name(&self) -> &str {
        &self.reference.name
    }

    /// Every table of this catalog (`namespace.name`, sorted) with its metadata pointer, in one
    /// query; with `namespace`, only the tables directly in it.
    pub async fn list_pointers(&self, namespace: Option<&str>) -> Result<Vec<(String, Option<String>)>, TableError> {
        let what = "list the tables";
        let sql_err = self.sql_err(what);
        let rows = self
            .catalog_rows(
                "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables \
                 WHERE catalog_name = ? AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
                what,
            )
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let ns: String = row.try_get(0).map_err(&sql_err)?;
            if namespace.is_some_and(|want| want != ns) {
                continue;
            }
            let name: String = row.try_get(1).map_err(&sql_err)?;
            out.push((
                format!("{ns}.{name}"),
                row.try_get::<Option<String>, _>(2).map_err(&sql_err)?,
            ));
        }
        out.sort();
        Ok(out)
    }

    /// Creates the namespace `ns` (one that exists is no error) with the row iceberg-catalog-sql
    /// writes for it (`exists = true`). Written here rather than by its `create_namespace`,
    /// which ignores a failed commit: on a full disk it reported the namespace created, and the
    /// table's creation then failed with `NamespaceNotFound`, hiding the cause.
    pub async fn create_namespace(&self, ns: &NamespaceIdent) -> Result<(), TableError> {
        let name = ns.join(".");
        let sql = self.bind_style(
            "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) \
             SELECT CAST(? AS VARCHAR(255)), CAST(? AS VARCHAR(255)), 'exists', 'true' WHERE NOT EXISTS (SELECT 1 FROM iceberg_namespace_properties \
             WHERE catalog_name = ? AND namespace = ? AND property_key = 'exists')",
        );
        sqlx::query(&sql)
            .bind(self.name())
            .bind(&name)
            .bind(self.name())
            .bind(&name)
            .execute(&self.pool)
            .await
            .map_err(|e| write_failed(&self.reference.uri, &format!("create namespace {name}"), &e))?;
        Ok(())
    }

    /// Makes sure the catalog holds the row of the table `id` that `create_table` just made at
    /// `metadata_location`: iceberg-catalog-sql ignores a failed commit (a full disk), so its
    /// `create_table` can report a table it never recorded. The row is written again when it is
    /// not there (`INSERT … WHERE NOT EXISTS`, as the SQL catalog writes it), and a failed write
    /// is reported with its cause ([`write_failed`]: "the disk is full").
    pub async fn ensure_table_row(&self, id: &TableIdent, metadata_location: &str) -> Result<(), TableError> {
        let (ns, name) = (id.namespace().join("."), id.name().to_string());
        let sql = self.bind_style(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) \
             SELECT CAST(? AS VARCHAR(255)), CAST(? AS VARCHAR(255)), CAST(? AS VARCHAR(255)), CAST(? AS VARCHAR(1000)), 'TABLE' \
             WHERE NOT EXISTS (SELECT 1 FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?)",
        );
        sqlx::query(&sql)
            .bind(self.name())
            .bind(&ns)
            .bind(&name)
            .bind(metadata_location)
            .bind(self.name())
            .bind(&ns)
            .bind(&name)
            .execute(&self.pool)
            .await
            .map_err(|e| write_failed(&self.reference.uri, &format!("create table {id}"), &e))?;
        Ok(())
    }

    /// The namespaces that hold tables, read from the catalog database: the SQL catalog's
    /// `list_namespaces` cannot reach `a.b` when `a` itself was never created.
    pub async fn table_namespaces(&self) -> Result<BTreeSet<String>, TableError> {
        let what = "list the namespaces";
        let sql_err = self.sql_err(what);
        let rows = self
            .catalog_rows(
                "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?",
                what,
            )
            .await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(&sql_err))
            .collect()
    }

    /// The one `UPDATE … WHERE metadata_location = <expected>` (see the module doc).
    async fn swap(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<bool, sqlx::Error> {
        let sql = self.bind_style(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL) \
             AND metadata_location = ?",
        );
        let result = sqlx::query(&sql)
            .bind(new)
            .bind(expected)
            .bind(self.name())
            .bind(namespace_column(ident))
            .bind(ident.name())
            .bind(expected)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    /// The rows of `sql`, a query whose one parameter is this catalog's name; a failure is a
    /// [`TableError::Sql`] saying `what` (`"list the tables"`) was done to the catalog.
    async fn catalog_rows(&self, sql: &str, what: &str) -> Result<Vec<sqlx::any::AnyRow>, TableError> {
        sqlx::query(&self.bind_style(sql))
            .bind(self.name())
            .fetch_all(&self.pool)
            .await
            .map_err(self.sql_err(what))
    }

    /// A failed statement or column read as [`TableError::Sql`]: `what` of this catalog.
    fn sql_err(&self, what: &str) -> impl Fn(sqlx::Error) -> TableError + use<> {
        let context = format!("{what} of catalog {}", self.name());
        move |source| TableError::Sql {
            context: context.clone(),
            source,
        }
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

#[async_trait]
impl CatalogBackend for SqlBackend {
    fn reference(&self) -> &CatalogRef {
        &self.reference
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            register: true,
            swap_pointer: true,
        }
    }

    fn iceberg(&self) -> Arc<dyn Catalog> {
        self.catalog.clone()
    }

    async fn pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError> {
        let sql = self.bind_style(
            "SELECT metadata_location FROM iceberg_tables \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
        );
        let row = sqlx::query(&sql)
            .bind(self.name())
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

    async fn commit(&self, base: &Table, request: CommitRequest) -> Result<Table, CommitError> {
        let ident = base.identifier();
        let name = ident.to_string();
        let io_err = |what: &str| iceberg_err(format!("{what} for {name}"));
        let expected = base
            .metadata_location_result()
            .map_err(io_err("metadata location"))?
            .to_string();
        // The base is what the swap below expects in the catalog, so the requirements are
        // checked against it: if the catalog moved on, the swap refuses.
        for requirement in &request.requirements {
            if let Err(e) = requirement.check(Some(base.metadata())) {
                return Err(CommitError::Conflict {
                    table: name,
                    detail: e.message().to_string(),
                });
            }
        }
        let new_metadata = apply_updates(&name, base.metadata(), &expected, &request)?;
        let location = write_next_metadata(base, &expected, &new_metadata).await?;

        let swapped = match self.swap(ident, &expected, &location).await {
            Ok(true) => Ok(None),
            Ok(false) => match self.pointer(ident).await {
                Ok(actual) => Err(CommitError::Conflict {
                    table: name.clone(),
                    detail: format!(
                        "expected metadata {expected}, the catalog now points at {}",
                        actual.as_deref().unwrap_or("nothing (the table was dropped)")
                    ),
                }),
                Err(e) => Err(e.into()),
            },
            Err(e) => resolve_unknown(self, base, &request, format!("swapping the metadata pointer: {e}"))
                .await
                .map(Some),
        };
        if let Some(current) = drop_unpublished(base.file_io(), &location, swapped).await? {
            return Ok(current);
        }
        let runtime = Runtime::try_current().map_err(io_err("find the tokio runtime"))?;
        Ok(Table::builder()
            .file_io(base.file_io().clone())
            .identifier(ident.clone())
            .metadata_location(location)
            .metadata(new_metadata)
            .runtime(runtime)
            .build()
            .map_err(io_err("open the committed table"))?)
    }

    async fn register(&self, ident: &TableIdent, metadata_location: &str) -> Result<Table, TableError> {
        self.catalog
            .register_table(ident, metadata_location.to_string())
            .await
            .map_err(iceberg_err(format!("register {ident} at {metadata_location}")))
    }

    /// One `INSERT` (iceberg-catalog-sql's `register_table` reads the file again first): the
    /// row `register_table` writes, the table's primary key refusing a name that exists.
    async fn register_read(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
        _metadata: &TableMetadata,
    ) -> Result<(), TableError> {
        let context = format!("register {ident} at {metadata_location}");
        if !self
            .catalog
            .namespace_exists(ident.namespace())
            .await
            .map_err(iceberg_err(context.clone()))?
        {
            return Err(iceberg_err(context)(iceberg::Error::new(
                iceberg::ErrorKind::NamespaceNotFound,
                format!("no namespace {}", ident.namespace().join(".")),
            )));
        }
        let sql = self.bind_style(
            "INSERT INTO iceberg_tables \
             (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) \
             VALUES (?, ?, ?, ?, 'TABLE')",
        );
        sqlx::query(&sql)
            .bind(self.name())
            .bind(namespace_column(ident))
            .bind(ident.name())
            .bind(metadata_location)
            .execute(&self.pool)
            .await
            .map_err(|source| TableError::Sql { context, source })?;
        Ok(())
    }

    async fn swap_pointer(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<bool, TableError> {
        self.swap(ident, expected, new).await.map_err(|source| TableError::Sql {
            context: format!("swap the metadata pointer of {ident}"),
            source,
        })
    }

    async fn pointers(&self, namespace: Option<&NamespaceIdent>) -> Result<Vec<(String, Option<String>)>, TableError> {
        self.list_pointers(namespace.map(|n| n.join(".")).as_deref()).await
    }
}

/// Writes `new_metadata` as the next metadata file after `expected` of `base`:
/// `<version+1>-<uuid>.metadata.json` next to it (compression suffix kept), a name never reused.
pub(crate) async fn write_next_metadata(
    base: &Table,
    expected: &str,
    new_metadata: &TableMetadata,
) -> Result<String, TableError> {
    let io_err = |what: &str| iceberg_err(format!("{what} for {}", base.identifier()));
    let location = MetadataLocation::from_str(expected)
        .map_err(io_err("parse the current metadata file name"))?
        .with_next_version()
        .with_new_metadata(new_metadata);
    new_metadata
        .write_to(base.file_io(), &location)
        .await
        .map_err(io_err("write the metadata file"))?;
    Ok(location.to_string())
}

/// The end of a commit that wrote `location` (its new metadata file) before the pointer swap:
/// when the swap certainly did not happen (a conflict, not applied, refused), nothing
/// references the file, so it is removed (best effort) and does not take the room a re-run
/// needs; an unknown outcome keeps it (the commit may be in), as does a success.
async fn drop_unpublished<T>(
    io: &iceberg::io::FileIO,
    location: &str,
    result: Result<T, CommitError>,
) -> Result<T, CommitError> {
    if let Err(e) = &result
        && !matches!(e, CommitError::Unknown { .. })
    {
        let _ = io.delete(location).await;
    }
    result
}

/// Writes the metadata file a commit on `base` would publish (setting the table property
/// `tidemark.stray` to `note`; stamped like a references-only commit, see [`apply_updates`])
/// and stops before the swap: what a writer that dies between its write and its swap leaves in
/// the table's metadata folder, a stray at the next version forked from `base`. The game day and the head-choice tests build their strays with it. Returns the
/// file's location.
pub async fn write_stray(base: &Table, note: &str) -> Result<String, TableError> {
    let name = base.identifier().to_string();
    let expected = base.metadata_location().ok_or_else(|| TableError::Unsupported {
        table: name.clone(),
        reason: "the table has no metadata file to fork from".into(),
    })?;
    let mut json = metadata_json(&name, base.metadata())?;
    json["properties"]["tidemark.stray"] = note.into();
    let new_metadata = next_from_json(&name, base.metadata(), expected, json)?;
    write_next_metadata(base, expected, &new_metadata).await
}

/// The metadata `request`'s updates make of `base` (loaded from `expected`).
///
/// `TableUpdate::apply` on a `TableMetadataBuilder`, except for a commit that only sets
/// references other than `main` (tags and branches): the builder stamps such a commit with the
/// wall clock and then refuses it when the table's snapshots are stamped later (a clock behind
/// the table's history), so those updates are made on the spec's JSON form instead, stamped just
/// after the table's last update when the clock is behind it, and validated by the parse.
pub(crate) fn apply_updates(
    table: &str,
    base: &TableMetadata,
    expected: &str,
    request: &CommitRequest,
) -> Result<TableMetadata, TableError> {
    let io_err = |what: &str| iceberg_err(format!("{what} for {table}"));
    let refs_only = !request.updates.is_empty()
        && request
            .updates
            .iter()
            .all(|u| matches!(u, TableUpdate::SetSnapshotRef { ref_name, .. } if ref_name != MAIN_BRANCH));
    if !refs_only {
        let mut builder = TableMetadataBuilder::new_from_metadata(base.clone(), Some(expected.to_string()));
        for update in request.updates.iter().cloned() {
            builder = update.apply(builder).map_err(io_err("apply the commit's updates"))?;
        }
        return Ok(builder
            .build()
            .map_err(io_err("build the new table metadata"))?
            .metadata);
    }
    let invalid = |reason: String| TableError::Unsupported {
        table: table.to_string(),
        reason,
    };
    let mut json = metadata_json(table, base)?;
    for update in &request.updates {
        if let TableUpdate::SetSnapshotRef { ref_name, reference } = update {
            if base.snapshot_by_id(reference.snapshot_id).is_none() {
                return Err(invalid(format!(
                    "reference {ref_name} names snapshot {}, which the table does not have",
                    reference.snapshot_id
                )));
            }
            json["refs"][ref_name] = serde_json::to_value(reference)
                .map_err(|e| invalid(format!("cannot serialize reference {ref_name}: {e}")))?;
        }
    }
    next_from_json(table, base, expected, json)
}

/// `meta` in the spec's JSON form, to be changed and parsed back by [`next_from_json`].
fn metadata_json(table: &str, meta: &TableMetadata) -> Result<serde_json::Value, TableError> {
    serde_json::to_value(meta).map_err(|e| TableError::Unsupported {
        table: table.to_string(),
        reason: format!("cannot serialize the metadata: {e}"),
    })
}

/// The metadata whose spec JSON form is `json` (made from `base`, loaded from `expected`), as
/// the next version: `expected` appended to the metadata log, stamped now or just after
/// `base`'s last update when the clock is behind it; validated by the parse.
fn next_from_json(
    table: &str,
    base: &TableMetadata,
    expected: &str,
    mut json: serde_json::Value,
) -> Result<TableMetadata, TableError> {
    // The metadata's last-updated time is the time of the commit itself, as iceberg-rust's
    // builder stamps it for every other commit; it takes no part in what the table holds.
    #[allow(clippy::disallowed_methods)]
    let now = chrono::Utc::now().timestamp_millis();
    let log_entry = serde_json::json!({"timestamp-ms": base.last_updated_ms(), "metadata-file": expected});
    match json.get_mut("metadata-log").and_then(serde_json::Value::as_array_mut) {
        Some(log) => log.push(log_entry),
        None => json["metadata-log"] = serde_json::Value::Array(vec![log_entry]),
    }
    json["last-updated-ms"] = now.max(base.last_updated_ms() + 1).into();
    serde_json::from_value(json).map_err(|e| TableError::Unsupported {
        table: table.to_string(),
        reason: format!("the updated metadata does not parse: {e}"),
    })
}

/// How iceberg-catalog-sql 0.10.1 stores a namespace in `table_namespace`: its levels joined
/// with `.` (PyIceberg and Java do the same).
pub fn namespace_column(ident: &TableIdent) -> String {
    ident.namespace().join(".")
}
