//! The catalog contract: what tidemark needs from a catalog, and what each backend promises.
//!
//! tidemark reaches tables through one seam, [`CatalogBackend`], with one implementation per kind
//! of catalog (SQL on SQLite or PostgreSQL, Iceberg REST, AWS S3 Tables). Every command (apply,
//! fault delete, recover, route, query, the DR tools) goes through it, so a behaviour written here
//! holds on every backend, and one conformance suite (`catalog::conformance`) checks it on each.
//!
//! # A commit is data
//! As in iceberg-rust and the REST specification, a commit is a list of **requirements** that
//! the table's current metadata must meet and a list of **updates** to apply to it
//! ([`CommitRequest`]). tidemark's commits are:
//! - a snapshot commit: `assert-table-uuid` + `assert-ref-snapshot-id(main, <parent>)`, then
//!   `add-snapshot` + `set-snapshot-ref(main)`;
//! - a reference commit (tags and branches): `assert-table-uuid` + `assert-ref-snapshot-id` for each
//!   reference moved, then `set-snapshot-ref` for each.
//!
//! # What [`CatalogBackend::commit`] promises
//! - **Atomic.** Either every update is visible to every reader of the catalog at once, or none is.
//! - **Based on what was read.** The requirements are checked against the table's *current*
//!   metadata in the catalog, atomically with the publish. A requirement that does not hold is a
//!   [`CommitError::Conflict`] and changes nothing: the caller reloads the table and redoes its
//!   work against the new state (or finds it already done).
//! - **Outcome unknown is its own state.** A request whose reply was lost (a timeout, a reset after
//!   the request was sent, a 5xx from the server or a proxy) may or may not have been applied. A
//!   backend never reports that as a conflict and never blindly re-sends it: it resolves it with
//!   [`resolve_unknown`], which reloads the table and looks for what the commit added (the snapshot
//!   id for a snapshot commit, the reference targets for a reference commit). Found: the commit is
//!   tidemark's own success. Not found and the table still at the commit's base: not applied, and
//!   [`CommitError::NotApplied`] lets the caller redo it. When even the reload fails, the state is
//!   [`CommitError::Unknown`]: the command stops with a clear message and the next run resolves it
//!   the same way (every commit tidemark makes is recognisable by its snapshot summary).
//! - **How each backend publishes.**
//!   - SQL: apply the updates to the base metadata, write the new metadata file next to the base one
//!     (a new, never reused name), then swap the pointer with
//!     `UPDATE iceberg_tables … WHERE metadata_location = <base>` — the statement iceberg-rust,
//!     PyIceberg and Java commit with, so their commits and tidemark's exclude each other.
//!   - Iceberg REST: `POST /v1/{prefix}/namespaces/{ns}/tables/{table}` with the requirements and
//!     updates; the server writes the metadata. HTTP 409 is a conflict; 5xx and transport errors
//!     after the request was sent are "unknown".
//!   - AWS S3 Tables: write the new metadata file in the table's warehouse location, then
//!     `UpdateTableMetadataLocation` with the version token read with the table. A stale token
//!     (ConflictException) is a conflict.
//! - **No debris.** A backend that writes the new metadata file before its swap removes it when
//!   the swap certainly did not happen (a conflict, not applied, refused); an unknown outcome
//!   keeps it (SQL: `sql::drop_unpublished`). The conformance suite's stale commit checks that
//!   every metadata file is the table's current one or on its metadata log. Not checked: REST
//!   (the server writes its own files) and S3 Tables (its warehouse refuses deletes and lists;
//!   the service's unreferenced-file removal takes such a file away).
//!
//! # Other operations
//! - `load` reads the current metadata; `pointer` the current metadata location (None: no table).
//! - `register` adds an existing metadata file as a table. Not every catalog can
//!   ([`Capabilities::register`]); a command that needs it refuses *before it changes anything*,
//!   naming what the catalog lacks. tidemark never drops a table in order to register it again.
//!   `register_read` is the same for a caller that has read and parsed the file already
//!   (`catalog rebuild`): the SQL backend then records the pointer with one `INSERT` (the row
//!   iceberg-catalog-sql's `register_table` writes; a name that exists or a missing namespace is
//!   refused) instead of reading the file again; other backends read it through `register`.
//! - `swap_pointer` moves a table from one existing metadata file to another if and only if it
//!   still points at the first (restore, rebuild, the warm follower). Only catalogs whose pointer
//!   is a plain location can ([`Capabilities::swap_pointer`]).
//! - No secret (password, token, OAuth2 credential, AWS secret key) ever appears in a
//!   [`CatalogRef`], an error, a report or a log line.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableIdent, TableRequirement, TableUpdate};

use crate::table::TableError;

pub use tidemark_schemas::route::{CatalogKind, CatalogRef};

/// What a backend can do beyond load, create and commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Register an existing metadata file as a table.
    pub register: bool,
    /// Compare-and-swap the metadata pointer between two existing metadata files.
    pub swap_pointer: bool,
}

/// One commit as data: requirements checked against the current metadata, updates applied to it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitRequest {
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

/// How a commit failed. See the module documentation.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// A requirement did not hold: another writer committed first. Nothing changed.
    #[error("commit conflict on {table}: {detail}")]
    Conflict { table: String, detail: String },
    /// The reply was lost and the reload shows the commit was not applied; safe to redo.
    #[error("the commit to {table} was not applied (its reply was lost: {cause}); redo it")]
    NotApplied { table: String, cause: String },
    /// The outcome could not be established (the reload failed too). Run the command again: it
    /// resolves the state by looking for what this commit added.
    #[error("the outcome of the commit to {table} is unknown ({cause}); run the command again to resolve it")]
    Unknown { table: String, cause: String },
    /// Any other failure before anything was sent (bad metadata, an unreachable catalog, …).
    #[error(transparent)]
    Table(#[from] TableError),
}

/// A commit that failed as a [`TableError`] (the catalog's words for the same outcomes).
impl From<CommitError> for TableError {
    fn from(e: CommitError) -> Self {
        use CommitError as C;
        match e {
            C::Conflict { table, detail } => TableError::CommitConflict { table, detail },
            C::NotApplied { table, cause } => TableError::CommitNotApplied { table, cause },
            C::Unknown { table, cause } => TableError::CommitUnknown { table, cause },
            C::Table(t) => t,
        }
    }
}

/// The seam every catalog backend implements. See the module documentation for the contract.
#[async_trait]
pub trait CatalogBackend: Debug + Send + Sync {
    /// The catalog as it may be recorded (no secrets).
    fn reference(&self) -> &CatalogRef;

    fn capabilities(&self) -> Capabilities;

    /// The iceberg-rust catalog for namespaces, listing, creating and loading tables (and for the
    /// DataFusion catalog provider).
    fn iceberg(&self) -> Arc<dyn iceberg::Catalog>;

    /// The current metadata location of `ident`, or `None` when the catalog has no such table.
    async fn pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError>;

    /// Publishes `request` on top of `base` (the table as loaded). Returns the table as committed.
    async fn commit(&self, base: &Table, request: CommitRequest) -> Result<Table, CommitError>;

    /// Registers the existing metadata file `metadata_location` as `ident`.
    async fn register(&self, ident: &TableIdent, metadata_location: &str) -> Result<Table, TableError>;

    /// [`CatalogBackend::register`] for a caller that has already read and parsed the file
    /// (`metadata`; `catalog rebuild` has, to choose it): a backend that can record the pointer
    /// without reading the file again does (the SQL backend: one `INSERT`, refused when `ident`
    /// exists or its namespace does not). The default reads it again through `register`.
    async fn register_read(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
        metadata: &TableMetadata,
    ) -> Result<(), TableError> {
        let _ = metadata;
        self.register(ident, metadata_location).await.map(drop)
    }

    /// Moves `ident` from `expected` to `new` (both existing metadata files) if and only if it
    /// still points at `expected`. Returns whether this call won.
    async fn swap_pointer(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<bool, TableError>;

    /// Every table (`namespace.name`, sorted) with its metadata pointer; with `namespace`, only
    /// the tables directly in it. The default lists through [`CatalogBackend::iceberg`], every
    /// namespace level, and asks [`CatalogBackend::pointer`] per table; a backend with a cheaper
    /// way (one SQL query) overrides it.
    async fn pointers(&self, namespace: Option<&NamespaceIdent>) -> Result<Vec<(String, Option<String>)>, TableError> {
        let catalog = self.iceberg();
        let list_err = |what: String| {
            move |source: iceberg::Error| TableError::Iceberg {
                context: what,
                source: Box::new(source),
            }
        };
        let mut namespaces = Vec::new();
        match namespace {
            Some(ns) => namespaces.push(ns.clone()),
            None => {
                let mut todo = catalog
                    .list_namespaces(None)
                    .await
                    .map_err(list_err("list the namespaces".into()))?;
                while let Some(ns) = todo.pop() {
                    let children = catalog
                        .list_namespaces(Some(&ns))
                        .await
                        .map_err(list_err(format!("list the namespaces in {}", ns.join("."))))?;
                    todo.extend(children.into_iter().filter(|c| c != &ns));
                    namespaces.push(ns);
                }
            }
        }
        let mut out = Vec::new();
        for ns in namespaces {
            let tables = catalog
                .list_tables(&ns)
                .await
                .map_err(list_err(format!("list the tables in {}", ns.join("."))))?;
            for ident in tables {
                let pointer = self.pointer(&ident).await?;
                out.push((format!("{}.{}", ns.join("."), ident.name()), pointer));
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

/// What a commit added, to recognise it after a lost reply.
fn added_by(request: &CommitRequest) -> (Vec<i64>, Vec<(String, i64)>) {
    let mut snapshots = Vec::new();
    let mut refs = Vec::new();
    for update in &request.updates {
        match update {
            TableUpdate::AddSnapshot { snapshot } => snapshots.push(snapshot.snapshot_id()),
            TableUpdate::SetSnapshotRef { ref_name, reference } => refs.push((ref_name.clone(), reference.snapshot_id)),
            _ => {}
        }
    }
    (snapshots, refs)
}

/// Whether `current` holds everything `request` added (its snapshots, and its references at the
/// snapshots it set them to, or moved on past them by a later commit of a descendant).
pub fn holds_commit(current: &TableMetadata, request: &CommitRequest) -> bool {
    let (snapshots, refs) = added_by(request);
    snapshots.iter().all(|id| current.snapshot_by_id(*id).is_some())
        && refs.iter().all(|(name, id)| match current.snapshot_for_ref(name) {
            Some(s) if s.snapshot_id() == *id => true,
            // The ref moved on: our snapshot must be among its ancestors.
            Some(s) => ancestors(current, s.snapshot_id()).any(|a| a == *id),
            None => false,
        })
}

fn ancestors(meta: &TableMetadata, from: i64) -> impl Iterator<Item = i64> + '_ {
    let mut next = Some(from);
    std::iter::from_fn(move || {
        let id = next?;
        next = meta.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
        Some(id)
    })
}

/// Resolves a commit whose outcome is unknown: reloads the table and looks for what `request`
/// added. `Ok(Some(table))`: it was applied (tidemark's own success). `Err(NotApplied)`: it was
/// not. `Err(Unknown)`: the reload failed as well.
pub async fn resolve_unknown(
    backend: &dyn CatalogBackend,
    base: &Table,
    request: &CommitRequest,
    cause: String,
) -> Result<Table, CommitError> {
    let ident = base.identifier();
    let table = ident.to_string();
    match backend.iceberg().load_table(ident).await {
        Ok(current) if holds_commit(current.metadata(), request) => Ok(current),
        Ok(_) => Err(CommitError::NotApplied { table, cause }),
        Err(e) => Err(CommitError::Unknown {
            table,
            cause: format!("{cause}; reloading the table failed too: {e}"),
        }),
    }
}
