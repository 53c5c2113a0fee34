//! The catalog conformance suite: one set of `pub async fn`s over a [`CatalogHandle`] that every
//! backend passes (the SQL backend on SQLite in this crate's tests and on PostgreSQL in
//! `tests/postgres.rs`; the REST and S3 Tables backends in their own tests). Each function takes
//! a namespace of its own (`ns`), which it creates, so that runs on a shared server do not see
//! each other; it panics with a message naming what the backend got wrong.
//!
//! What is checked is the contract of [`super::contract`]: namespaces; create, load, list;
//! an overwrite snapshot committed as requirements + updates; a stale commit refused as a
//! conflict and changing nothing; 8 racing committers with exactly one winner; a commit whose
//! reply was lost resolved by reloading (applied: the committed table; dropped: not applied);
//! register where the catalog has it, and a refusal that changes nothing where it has not.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use iceberg::spec::Operation;
use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent, TableIdent};
use tidemark_journal::spec::CompiledSpec;

use super::CatalogHandle;
use super::contract::{Capabilities, CatalogBackend, CatalogRef, CommitError, CommitRequest, resolve_unknown};
use crate::benchdata::order_columns;
use crate::ids::{Ids, RandomIds};
use crate::table::{
    self, CommitStamp, TableError, arrow_schema, commit_overwrite, create_or_load_table, live_data_files,
    write_data_file,
};

/// Runs every check of the suite, each in a namespace `<ns>_<check>`.
pub async fn run_all(handle: &CatalogHandle, ns: &str) {
    namespaces(handle, &format!("{ns}_ns")).await;
    create_load_list(handle, &format!("{ns}_cll")).await;
    commit_an_overwrite(handle, &format!("{ns}_ow")).await;
    a_stale_commit_is_a_conflict(handle, &format!("{ns}_stale")).await;
    racing_committers_have_one_winner(handle, &format!("{ns}_race"), 8).await;
    a_lost_reply_is_resolved_by_reload(handle, &format!("{ns}_lost")).await;
    register_where_capable(handle, &format!("{ns}_reg")).await;
}

fn ns_ident(ns: &str) -> NamespaceIdent {
    NamespaceIdent::from_strs(ns.split('.')).expect("a valid namespace")
}

/// Creating a namespace makes it exist and listed; creating it again is refused.
pub async fn namespaces(handle: &CatalogHandle, ns: &str) {
    let catalog = handle.catalog();
    let ident = ns_ident(ns);
    assert!(
        !catalog.namespace_exists(&ident).await.unwrap(),
        "{ns} exists before it was created"
    );
    catalog.create_namespace(&ident, HashMap::new()).await.unwrap();
    assert!(
        catalog.namespace_exists(&ident).await.unwrap(),
        "{ns} does not exist after create"
    );
    let listed = catalog.list_namespaces(None).await.unwrap();
    assert!(listed.contains(&ident), "{ns} is not in {listed:?}");
    assert!(
        catalog.create_namespace(&ident, HashMap::new()).await.is_err(),
        "creating {ns} twice was accepted"
    );
}

/// A table created in the namespace loads with the same uuid and is listed with its pointer.
pub async fn create_load_list(handle: &CatalogHandle, ns: &str) {
    let name = format!("{ns}.orders");
    let created = create_or_load_table(handle, &name, &CompiledSpec::orders())
        .await
        .unwrap();
    let loaded = table::load_table(handle, &name).await.unwrap();
    assert_eq!(
        loaded.metadata().uuid(),
        created.metadata().uuid(),
        "load returned another table"
    );
    let tables = handle.catalog().list_tables(&ns_ident(ns)).await.unwrap();
    assert_eq!(tables, vec![TableIdent::new(ns_ident(ns), "orders".into())]);
    let pointers = handle.pointers(Some(ns)).await.unwrap();
    assert_eq!(
        pointers,
        vec![(name.clone(), loaded.metadata_location().map(str::to_string))],
        "pointers of {ns}"
    );
    assert_eq!(
        handle.metadata_pointer(loaded.identifier()).await.unwrap().as_deref(),
        loaded.metadata_location()
    );
    let missing = TableIdent::new(ns_ident(ns), "missing".into());
    assert_eq!(handle.metadata_pointer(&missing).await.unwrap(), None);
    // Creating an existing table is refused, and the table is left as it was.
    let again = table::create_table_with_properties(handle, &name, &CompiledSpec::orders(), HashMap::new()).await;
    assert!(again.is_err(), "creating {name} twice was accepted");
    assert_eq!(
        table::load_table(handle, &name).await.unwrap().metadata().uuid(),
        created.metadata().uuid()
    );
}

async fn fresh_table(handle: &CatalogHandle, ns: &str) -> Table {
    create_or_load_table(handle, &format!("{ns}.orders"), &CompiledSpec::orders())
        .await
        .unwrap()
}

/// Writes orders `n*100 .. n*100+10` and commits them on top of `table` (removing `removed`).
pub async fn commit_rows(
    handle: &CatalogHandle,
    table: &Table,
    n: u64,
    removed: &[String],
) -> Result<Table, TableError> {
    let keys: Vec<u64> = (n * 100..n * 100 + 10).collect();
    let mut cols = order_columns(&keys, &vec![1; keys.len()], &vec![false; keys.len()]);
    cols.push(Arc::new(Int64Array::from(vec![n as i64; keys.len()])));
    let batch = RecordBatch::try_new(arrow_schema(table)?, cols).expect("a batch of the orders table");
    let files = write_data_file(table, &[batch], RandomIds.uuid()).await?;
    let stamp = CommitStamp {
        id: RandomIds.uuid(),
        at: Utc
            .timestamp_millis_opt(table.metadata().last_updated_ms() + 1)
            .single()
            .expect("a time"),
    };
    commit_overwrite(handle, table, removed, files, HashMap::new(), stamp).await
}

/// An append, then an overwrite that replaces its file: both visible on reload, exactly.
pub async fn commit_an_overwrite(handle: &CatalogHandle, ns: &str) {
    let t0 = fresh_table(handle, ns).await;
    let t1 = commit_rows(handle, &t0, 1, &[]).await.unwrap();
    let first = live_data_files(&t1).await.unwrap();
    assert_eq!(first.len(), 1);
    let removed = vec![first[0].file_path().to_string()];
    let t2 = commit_rows(handle, &t1, 2, &removed).await.unwrap();
    let reloaded = table::load_table(handle, &format!("{ns}.orders")).await.unwrap();
    assert_eq!(
        reloaded.metadata_location(),
        t2.metadata_location(),
        "the reload is not the commit"
    );
    let snapshot = reloaded.metadata().current_snapshot().expect("a snapshot");
    assert_eq!(Some(snapshot.snapshot_id()), t2.metadata().current_snapshot_id());
    assert_eq!(snapshot.parent_snapshot_id(), t1.metadata().current_snapshot_id());
    assert_eq!(snapshot.summary().operation, Operation::Overwrite);
    let live = live_data_files(&reloaded).await.unwrap();
    assert_eq!(live.len(), 1);
    assert_ne!(live[0].file_path(), removed[0], "the replaced file is still live");
    assert_eq!(live[0].record_count(), 10);
    assert_eq!(reloaded.metadata().snapshots().count(), 2);
}

/// A commit based on metadata another commit replaced is a conflict and changes nothing.
pub async fn a_stale_commit_is_a_conflict(handle: &CatalogHandle, ns: &str) {
    let t0 = fresh_table(handle, ns).await;
    let t1 = commit_rows(handle, &t0, 1, &[]).await.unwrap();
    let err = commit_rows(handle, &t0, 2, &[]).await.unwrap_err();
    assert!(
        matches!(err, TableError::CommitConflict { .. }),
        "expected a conflict, got {err}"
    );
    assert!(err.is_retryable_commit());
    let now = table::load_table(handle, &format!("{ns}.orders")).await.unwrap();
    assert_eq!(
        now.metadata_location(),
        t1.metadata_location(),
        "the stale commit changed the table"
    );
    assert_eq!(now.metadata().snapshots().count(), 1);
    no_unreferenced_metadata(handle, &now).await;
}

/// Every metadata file in `table`'s metadata folder is its current one or on its metadata log:
/// a backend that writes the new metadata file before its pointer swap removes it when the
/// swap did not happen. Not checked: a REST catalog (its server writes its own files) and S3
/// Tables (its warehouse answers neither list nor delete; the service's unreferenced-file
/// removal takes such files away).
async fn no_unreferenced_metadata(handle: &CatalogHandle, table: &Table) {
    if matches!(handle.kind(), super::CatalogKind::Rest | super::CatalogKind::S3tables) {
        return;
    }
    let meta = table.metadata();
    let folder = format!("{}/metadata", meta.location());
    let store = tidemark_journal::store::open(&folder)
        .await
        .unwrap_or_else(|e| panic!("open {folder}: {e}"));
    let listed = tidemark_journal::store::list_all(store.as_ref(), "")
        .await
        .unwrap_or_else(|e| panic!("list {folder}: {e}"));
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let mut referenced: Vec<String> = meta.metadata_log().iter().map(|l| name(&l.metadata_file)).collect();
    referenced.extend(table.metadata_location().map(name));
    let stray: Vec<String> = listed
        .into_iter()
        .map(|o| name(&o.key))
        .filter(|k| k.ends_with(".metadata.json") && !referenced.contains(k))
        .collect();
    assert!(
        stray.is_empty(),
        "metadata files of {folder} that the table does not reference (a commit that did not go in left them): {stray:?}"
    );
}

/// `n` committers on the same base: exactly one wins, every other gets a conflict.
pub async fn racing_committers_have_one_winner(handle: &CatalogHandle, ns: &str, n: u64) {
    let base = fresh_table(handle, ns).await;
    let mut tasks = Vec::new();
    for i in 0..n {
        let (handle, base) = (handle.clone(), base.clone());
        tasks.push(tokio::spawn(
            async move { commit_rows(&handle, &base, i + 1, &[]).await },
        ));
    }
    let now = one_winner(handle, &format!("{ns}.orders"), tasks).await;
    assert_eq!(now.metadata().snapshots().count(), 1);
}

/// Awaits `committers`, commits made side by side on one base: exactly one wins and every other
/// gets a conflict, and the table `name` is now the winner's. Returns the table as loaded.
pub async fn one_winner(
    handle: &CatalogHandle,
    name: &str,
    committers: Vec<tokio::task::JoinHandle<Result<Table, TableError>>>,
) -> Table {
    let n = committers.len();
    let mut winners = Vec::new();
    for task in committers {
        match task.await.expect("a committer panicked") {
            Ok(t) => winners.push(t),
            Err(TableError::CommitConflict { .. }) => {}
            Err(e) => panic!("a racing committer failed with something other than a conflict: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "{} of {n} racing committers won", winners.len());
    let now = table::load_table(handle, name).await.unwrap();
    assert_eq!(now.metadata_location(), winners[0].metadata_location());
    now
}

/// What a lost reply did to a commit, for the wrappers below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loss {
    /// The commit reached the catalog and was applied; only the reply was lost.
    Reply,
    /// The request never reached the catalog.
    Request,
}

/// A backend whose commits lose their reply (or their request): the rest goes to `inner`.
#[derive(Debug)]
struct Lossy {
    inner: Arc<dyn CatalogBackend>,
    loss: Loss,
}

#[async_trait]
impl CatalogBackend for Lossy {
    fn reference(&self) -> &CatalogRef {
        self.inner.reference()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn iceberg(&self) -> Arc<dyn Catalog> {
        self.inner.iceberg()
    }
    async fn pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError> {
        self.inner.pointer(ident).await
    }
    async fn commit(&self, base: &Table, request: CommitRequest) -> Result<Table, CommitError> {
        if self.loss == Loss::Reply {
            self.inner.commit(base, request.clone()).await?;
        }
        resolve_unknown(self, base, &request, "the reply was lost (injected)".into()).await
    }
    async fn register(&self, ident: &TableIdent, metadata_location: &str) -> Result<Table, TableError> {
        self.inner.register(ident, metadata_location).await
    }
    async fn register_read(
        &self,
        ident: &TableIdent,
        metadata_location: &str,
        metadata: &iceberg::spec::TableMetadata,
    ) -> Result<(), TableError> {
        self.inner.register_read(ident, metadata_location, metadata).await
    }
    async fn swap_pointer(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<bool, TableError> {
        self.inner.swap_pointer(ident, expected, new).await
    }
}

/// A commit applied whose reply was lost is found by reloading and reported as the success it
/// was; a commit whose request was lost is reported not applied (and redoing it succeeds).
pub async fn a_lost_reply_is_resolved_by_reload(handle: &CatalogHandle, ns: &str) {
    let lossy = |loss| {
        let backend = Arc::new(Lossy {
            inner: handle.backend().clone(),
            loss,
        });
        CatalogHandle::new(backend, handle.file_io_props().clone())
    };
    let name = format!("{ns}.orders");
    let t0 = fresh_table(handle, ns).await;

    let t1 = commit_rows(&lossy(Loss::Reply), &t0, 1, &[])
        .await
        .expect("an applied commit whose reply was lost is the committer's own success");
    let now = table::load_table(handle, &name).await.unwrap();
    assert_eq!(now.metadata_location(), t1.metadata_location());
    assert_eq!(
        now.metadata().current_snapshot_id(),
        t1.metadata().current_snapshot_id()
    );
    assert_eq!(now.metadata().snapshots().count(), 1, "the commit was applied twice");

    let err = commit_rows(&lossy(Loss::Request), &t1, 2, &[]).await.unwrap_err();
    assert!(
        matches!(err, TableError::CommitNotApplied { .. }),
        "expected not applied, got {err}"
    );
    assert!(err.is_retryable_commit());
    let now = table::load_table(handle, &name).await.unwrap();
    assert_eq!(
        now.metadata_location(),
        t1.metadata_location(),
        "a dropped commit changed the table"
    );
    // Redone on the reloaded table, it applies.
    let t2 = commit_rows(handle, &now, 2, &[]).await.unwrap();
    assert_eq!(t2.metadata().snapshots().count(), 2);
}

/// Where the catalog can register, an existing metadata file registered under a new name loads
/// as the same table; where it cannot, the refusal names what it lacks and changes nothing.
pub async fn register_where_capable(handle: &CatalogHandle, ns: &str) {
    let t0 = fresh_table(handle, ns).await;
    let t1 = commit_rows(handle, &t0, 1, &[]).await.unwrap();
    let location = t1.metadata_location().expect("a metadata file").to_string();
    let copy = TableIdent::new(ns_ident(ns), "registered".into());
    let result = handle.register_table(&copy, &location).await;
    if handle.capabilities().register {
        let registered = result.unwrap();
        assert_eq!(registered.metadata().uuid(), t1.metadata().uuid());
        assert_eq!(
            registered.metadata().current_snapshot_id(),
            t1.metadata().current_snapshot_id()
        );
        assert_eq!(
            handle.metadata_pointer(&copy).await.unwrap().as_deref(),
            Some(location.as_str())
        );
        // Registered from the metadata already read: the same table loads, and a name that
        // exists is refused without changing its pointer.
        let read = TableIdent::new(ns_ident(ns), "registered_read".into());
        handle.register_read(&read, &location, t1.metadata()).await.unwrap();
        let loaded = table::load_table(handle, &format!("{ns}.registered_read"))
            .await
            .unwrap();
        assert_eq!(loaded.metadata().uuid(), t1.metadata().uuid());
        assert_eq!(loaded.metadata_location(), Some(location.as_str()));
        let t0_location = t0.metadata_location().unwrap();
        let again = handle.register_read(&read, t0_location, t0.metadata()).await;
        assert!(again.is_err(), "a second register of one name was accepted");
        assert_eq!(
            handle.metadata_pointer(&read).await.unwrap().as_deref(),
            Some(location.as_str())
        );
        let missing = TableIdent::new(ns_ident(&format!("{ns}_none")), "t".into());
        let err = handle
            .register_read(&missing, &location, t1.metadata())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("namespace"), "{err}");
    } else {
        let err = result.unwrap_err();
        assert!(matches!(err, TableError::MissingCapability { .. }), "{err}");
        let err = handle.register_read(&copy, &location, t1.metadata()).await.unwrap_err();
        assert!(matches!(err, TableError::MissingCapability { .. }), "{err}");
        assert_eq!(
            handle.metadata_pointer(&copy).await.unwrap(),
            None,
            "a refused register changed the catalog"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogConfig, open_catalog_with_props};

    #[tokio::test]
    async fn the_sqlite_backend_conforms() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = CatalogConfig {
            uri: dir.path().join("c.db").display().to_string(),
            warehouse: String::new(),
            name: String::new(),
        };
        let handle = open_catalog_with_props(&cfg, HashMap::new()).await.unwrap();
        run_all(&handle, "conf").await;
    }
}
