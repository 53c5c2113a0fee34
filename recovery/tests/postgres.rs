//! The Iceberg SQL catalog on a real PostgreSQL server: opening and reopening a catalog, the
//! applier's commits, the metadata-pointer compare-and-swap, and the `iceberg_type` migration of a
//! catalog made by PyIceberg.
//!
//! Needs `TIDEMARK_TEST_PG_URI=postgres://user:password@host:port/database`: `bash sandbox/test.sh`
//! starts a throwaway server (sandbox/postgres.sh) and sets it. Without it every test fails, unless
//! `TIDEMARK_SKIP_POSTGRES=1`, which skips them.
//!
//! The tests share one database: each uses its own catalog name (the `catalog_name` column) and
//! its own local warehouse, so they neither see each other's tables nor the tables of an earlier
//! run against the same server. The migration test needs an `iceberg_tables` of its own and gets a
//! schema of its own for it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration};
use iceberg::table::Table;
use sqlx::{Connection, PgConnection, Row};
use tidemark_journal::clock::StepClock;
use tidemark_journal::spec::{CompiledSpec, orders_spec};
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_journal::{Journal, generate};
use tidemark_recovery::apply::{ApplyOptions, ApplyReport, applied_state, apply};
use tidemark_recovery::catalog::{CatalogConfig, CatalogHandle, Dialect, open_catalog};
use tidemark_recovery::ids::SeededIds;
use tidemark_recovery::reference::{self, Cell, RefRow, RefState};
use tidemark_recovery::table::{
    CommitStamp, TableError, commit_overwrite, create_or_load_table, live_data_files, load_table, write_data_file,
};
use uuid::Uuid;

const TABLE: &str = "shop.orders";

/// The server's URI, or `None` (after printing why) when the tests are to be skipped.
fn pg_uri(test: &str) -> Option<String> {
    if let Ok(uri) = std::env::var("TIDEMARK_TEST_PG_URI")
        && !uri.trim().is_empty()
    {
        return Some(uri.trim().to_string());
    }
    if std::env::var("TIDEMARK_SKIP_POSTGRES").as_deref() == Ok("1") {
        println!("skipping {test}: TIDEMARK_SKIP_POSTGRES=1 and no TIDEMARK_TEST_PG_URI");
        return None;
    }
    panic!(
        "TIDEMARK_TEST_PG_URI is not set: run `bash sandbox/test.sh` (it starts a throwaway PostgreSQL \
         server and sets it), or `eval \"$(bash sandbox/postgres.sh start)\"` before `cargo test`; \
         TIDEMARK_SKIP_POSTGRES=1 skips these tests"
    );
}

/// A name no other test and no earlier run uses: the test's, the process id and the random
/// name of the test's temporary folder. Lowercase, so that it is a PostgreSQL identifier as is.
fn unique_name(test: &str, dir: &Path) -> String {
    let random: String = dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    format!("tm_{test}_{}_{random}", std::process::id()).to_lowercase()
}

/// One test's place on the server: the URI, a temporary folder (journal and warehouse) and a
/// catalog name no other test or run uses.
struct Pg {
    uri: String,
    dir: tempfile::TempDir,
    name: String,
}

impl Pg {
    /// `None` (after printing why) when the tests are to be skipped.
    fn new(test: &str, purpose: &str) -> Option<Pg> {
        let uri = pg_uri(test)?;
        let dir = tempfile::tempdir().unwrap();
        let name = unique_name(purpose, dir.path());
        Some(Pg { uri, dir, name })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The catalog `name` on this server with this test's warehouse.
    fn config(&self, name: &str) -> CatalogConfig {
        config(&self.uri, self.path(), name)
    }

    /// The test's own catalog.
    async fn open(&self) -> CatalogHandle {
        open(&self.config(&self.name)).await
    }

    /// The test's journal, holding `text` in batches of `batch`.
    async fn journal(&self, text: &str, batch: usize) -> Journal {
        journal_in(&self.path().join("journal"), text, batch).await
    }
}

/// The catalog `name` on `uri` with a warehouse in `dir`.
fn config(uri: &str, dir: &Path, name: &str) -> CatalogConfig {
    CatalogConfig {
        uri: uri.to_string(),
        warehouse: dir.join("warehouse").display().to_string(),
        name: name.to_string(),
    }
}

/// Opens the catalog (tidemark serializes the first-use initialization on PostgreSQL itself; see
/// `a_new_catalog_opened_by_many_at_once`).
async fn open(cfg: &CatalogConfig) -> CatalogHandle {
    let handle = open_catalog(cfg)
        .await
        .unwrap_or_else(|e| panic!("open the catalog {} on PostgreSQL: {e}", cfg.name));
    assert_eq!(handle.sql().map(|s| s.dialect()), Some(Dialect::Postgres));
    handle
}

fn clock() -> StepClock {
    StepClock::new(
        DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        Duration::milliseconds(1),
    )
}

/// Fixed stamps, behind the table's creation time on purpose (the commit raises them).
fn stamp(n: u128) -> CommitStamp {
    CommitStamp {
        id: Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0000 + n),
        at: DateTime::from_timestamp(1_700_000_000 + n as i64, 0).unwrap(),
    }
}

/// A local journal in `dir` holding `text` (NDJSON events) in batches of `batch`.
async fn journal_in(dir: &Path, text: &str, batch: usize) -> Journal {
    std::fs::create_dir_all(dir).unwrap();
    let store = Arc::new(LocalStore::open(dir).unwrap());
    let j = Journal::init(store, orders_spec(), "j-postgres".into(), &clock())
        .await
        .unwrap();
    let opts = AppendOptions {
        batch_size: batch,
        writer_id: "w".into(),
        source_name: "gen".into(),
    };
    append(&j, text.as_bytes(), &opts, &clock(), &mut |_| {}).await.unwrap();
    j
}

/// The reference fold of the journal, one unit per journal batch (one manifest) as the applier
/// sees it.
async fn reference_of(j: &Journal) -> RefState {
    reference::fold_journal(j).await.unwrap()
}

/// Every row of the table's current snapshot, by key; panics on a duplicate key.
fn rows_by_key(batches: &[arrow_array::RecordBatch]) -> BTreeMap<Cell, RefRow> {
    let spec = CompiledSpec::orders();
    let mut out = BTreeMap::new();
    for row in reference::rows_of(&spec, batches) {
        let key = row.cells[spec.key_index].clone();
        assert!(out.insert(key.clone(), row).is_none(), "key {key} twice in the table");
    }
    out
}

/// The live data of `table` as record batches in the table's schema.
async fn table_batches(table: &Table) -> Vec<arrow_array::RecordBatch> {
    tidemark_recovery::table::read::read_table(table).await.unwrap()
}

/// Every row of the table as the catalog now has it.
async fn table_rows(handle: &CatalogHandle, name: &str) -> BTreeMap<Cell, RefRow> {
    let t = load_table(handle, name).await.unwrap();
    rows_by_key(&table_batches(&t).await)
}

/// The paths of `table`'s live data files.
async fn live_paths(table: &Table) -> Vec<String> {
    live_data_files(table)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_path().to_string())
        .collect()
}

/// Rewrites every live data file of `base` as one new file, committed with `stamp(n)`.
async fn rewrite_all(handle: &CatalogHandle, base: &Table, n: u128) -> Result<Table, TableError> {
    let removed = live_paths(base).await;
    let files = write_data_file(base, &table_batches(base).await, stamp(n).id).await?;
    commit_overwrite(handle, base, &removed, files, HashMap::new(), stamp(n)).await
}

/// Applies the whole journal into `name`.
async fn apply_all(j: &Journal, handle: &CatalogHandle, name: &str, seed: u64) -> ApplyReport {
    apply(
        j,
        handle,
        name,
        &ApplyOptions::default(),
        &clock(),
        &SeededIds::new(seed),
        &mut |_| {},
    )
    .await
    .unwrap_or_else(|e| panic!("apply into {name}: {e}"))
}

/// `uri` with `search_path` set to `schema` for every connection (libpq's `options` parameter,
/// which sqlx understands too).
fn with_search_path(uri: &str, schema: &str) -> String {
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}options=-c%20search_path%3D{schema}")
}

/// The columns of `schema.iceberg_tables`, in order.
async fn columns(uri: &str, schema: &str) -> Vec<String> {
    let mut c = PgConnection::connect(uri).await.unwrap();
    let rows = sqlx::query(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_schema::text = $1 AND table_name = 'iceberg_tables' ORDER BY ordinal_position",
    )
    .bind(schema)
    .fetch_all(&mut c)
    .await
    .unwrap();
    c.close().await.unwrap();
    rows.iter().map(|r| r.get::<String, _>(0)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_create_reopen_and_load() {
    let Some(pg) = Pg::new("open_create_reopen_and_load", "reopen") else {
        return;
    };
    let cfg = pg.config(&pg.name);
    let spec = CompiledSpec::orders();

    let handle = open(&cfg).await;
    // The password stays out of messages.
    if let Some((_, pass_and_host)) = pg.uri.split_once("://").and_then(|(_, r)| r.split_once(':'))
        && let Some((pass, _)) = pass_and_host.split_once('@')
        && !pass.is_empty()
    {
        assert!(!handle.uri().contains(&format!(":{pass}@")), "{}", handle.uri());
    }
    let ident = tidemark_recovery::table::parse_ident(TABLE).unwrap();
    assert_eq!(handle.metadata_pointer(&ident).await.unwrap(), None);
    let err = load_table(&handle, TABLE).await.unwrap_err();
    assert!(matches!(err, TableError::TableNotFound { .. }), "{err}");

    let created = create_or_load_table(&handle, TABLE, &spec).await.unwrap();
    let location = created.metadata_location().unwrap().to_string();
    assert!(location.starts_with("file://"), "{location}");
    assert_eq!(
        handle.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(location.as_str())
    );
    // Loading an existing table does not create another one.
    let again = create_or_load_table(&handle, TABLE, &spec).await.unwrap();
    assert_eq!(again.metadata_location(), Some(location.as_str()));
    drop(handle);

    // A new connection (another process, say) sees the table.
    let reopened = open(&cfg).await;
    let loaded = load_table(&reopened, TABLE).await.unwrap();
    assert_eq!(loaded.metadata_location(), Some(location.as_str()));
    assert_eq!(loaded.metadata().uuid(), created.metadata().uuid());
    assert!(loaded.metadata().current_snapshot().is_none());
    let listed = iceberg::Catalog::list_tables(
        reopened.catalog().as_ref(),
        &iceberg::NamespaceIdent::new("shop".into()),
    )
    .await
    .unwrap();
    assert_eq!(listed, vec![ident.clone()]);

    // Another catalog name in the same database does not see it.
    let other = open(&pg.config(&format!("{}_other", pg.name))).await;
    let err = load_table(&other, TABLE).await.unwrap_err();
    assert!(matches!(err, TableError::TableNotFound { .. }), "{err}");
    assert_eq!(other.metadata_pointer(&ident).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_journal_equals_the_reference() {
    let Some(pg) = Pg::new("applied_journal_equals_the_reference", "apply") else {
        return;
    };
    let j = pg.journal(&generate::ndjson(11, 40, 1, 250), 50).await;
    let handle = pg.open().await;

    let r = apply(
        &j,
        &handle,
        TABLE,
        &ApplyOptions {
            until: Some(100),
            ..Default::default()
        },
        &clock(),
        &SeededIds::new(1),
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!((r.started_after_position, r.applied_to_position), (0, 100));
    let r = apply_all(&j, &handle, TABLE, 2).await;
    assert_eq!((r.started_after_position, r.applied_to_position), (100, 250));
    assert!(r.commits > 0);

    let want = reference_of(&j).await.rows;
    assert!(!want.is_empty());
    assert_eq!(table_rows(&handle, TABLE).await, want);

    // Through a fresh connection too, and nothing is left to apply.
    let reopened = pg.open().await;
    assert_eq!(table_rows(&reopened, TABLE).await, want);
    let t = load_table(&reopened, TABLE).await.unwrap();
    assert_eq!(applied_state(&t).position, 250);
    let again = apply_all(&j, &reopened, TABLE, 3).await;
    assert_eq!(again.commits, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_of_two_overwrites_from_one_base_conflicts() {
    let Some(pg) = Pg::new("the_second_of_two_overwrites_from_one_base_conflicts", "cas") else {
        return;
    };
    let j = pg.journal(&generate::ndjson(12, 20, 1, 60), 30).await;
    let handle = pg.open().await;
    apply_all(&j, &handle, TABLE, 1).await;

    // Two writers load the same table and each rewrites all of its live files.
    let base = load_table(&handle, TABLE).await.unwrap();
    let before = rows_by_key(&table_batches(&base).await);
    let removed: Vec<String> = live_paths(&base).await;
    assert!(!removed.is_empty());
    let batches = table_batches(&base).await;
    let fa = write_data_file(&base, &batches, stamp(1).id).await.unwrap();
    let fb = write_data_file(&base, &batches, stamp(2).id).await.unwrap();

    let ta = commit_overwrite(&handle, &base, &removed, fa, HashMap::new(), stamp(1))
        .await
        .unwrap();
    let err = commit_overwrite(&handle, &base, &removed, fb, HashMap::new(), stamp(2))
        .await
        .unwrap_err();
    match &err {
        TableError::CommitConflict { table, detail } => {
            assert_eq!(table, TABLE);
            assert!(detail.contains(base.metadata_location().unwrap()), "{detail}");
            assert!(detail.contains(ta.metadata_location().unwrap()), "{detail}");
        }
        other => panic!("expected a commit conflict, got {other}"),
    }

    // The loser changed nothing; the winner's state is what every reader sees.
    let now = load_table(&handle, TABLE).await.unwrap();
    assert_eq!(now.metadata_location(), ta.metadata_location());
    assert_eq!(rows_by_key(&table_batches(&now).await), before);

    // The pointer swap itself: a stale expectation loses, the current one wins once.
    let ident = now.identifier().clone();
    let current = now.metadata_location().unwrap().to_string();
    let stale = base.metadata_location().unwrap().to_string();
    assert!(!handle.swap_metadata_pointer(&ident, &stale, &stale).await.unwrap());
    assert!(handle.swap_metadata_pointer(&ident, &current, &current).await.unwrap());
    assert_eq!(handle.metadata_pointer(&ident).await.unwrap(), Some(current));

    // The loser reloads and redoes its work on the new state.
    let tb = rewrite_all(&handle, &now, 3).await.unwrap();
    assert_eq!(
        load_table(&handle, TABLE).await.unwrap().metadata_location(),
        tb.metadata_location()
    );
    assert_eq!(table_rows(&handle, TABLE).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_overwrites_exactly_one_wins() {
    let Some(pg) = Pg::new("of_concurrent_overwrites_exactly_one_wins", "race") else {
        return;
    };
    let j = pg.journal(&generate::ndjson(13, 10, 1, 30), 30).await;
    let cfg = pg.config(&pg.name);
    let handle = open(&cfg).await;
    apply_all(&j, &handle, TABLE, 1).await;
    let base = load_table(&handle, TABLE).await.unwrap();
    let removed: Vec<String> = live_paths(&base).await;
    let batches = table_batches(&base).await;

    // Each writer has its own connection pool, as separate processes would.
    let mut writers = Vec::new();
    for n in 1..=4u128 {
        let files = write_data_file(&base, &batches, stamp(n).id).await.unwrap();
        writers.push((n, open(&cfg).await, files));
    }
    let tasks = writers.into_iter().map(|(n, handle, files)| {
        let (base, removed) = (base.clone(), removed.clone());
        tokio::spawn(async move { commit_overwrite(&handle, &base, &removed, files, HashMap::new(), stamp(n)).await })
    });
    let now = tidemark_recovery::catalog::conformance::one_winner(&handle, TABLE, tasks.collect()).await;
    assert_eq!(rows_by_key(&table_batches(&now).await), rows_by_key(&batches));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pyiceberg_catalog_gets_the_iceberg_type_column() {
    let Some(pg) = Pg::new("a_pyiceberg_catalog_gets_the_iceberg_type_column", "pyice") else {
        return;
    };
    // The catalog tables of the other tests (with `iceberg_type`) are in the default schema;
    // make sure they exist, so that the migration must look at the right schema's table.
    open(&pg.config(&format!("{}_default", pg.name))).await;

    // A schema of its own holding `iceberg_tables` as PyIceberg's SqlCatalog creates it.
    let schema = pg.name.clone();
    let mut admin = PgConnection::connect(&pg.uri).await.unwrap();
    sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let scoped = with_search_path(&pg.uri, &schema);
    let mut conn = PgConnection::connect(&scoped).await.unwrap();
    let current: String = sqlx::query("SELECT current_schema()")
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(0);
    assert_eq!(current, schema, "the search_path option reaches the server");
    sqlx::raw_sql(
        "CREATE TABLE iceberg_tables (
            catalog_name VARCHAR(255) NOT NULL,
            table_namespace VARCHAR(255) NOT NULL,
            table_name VARCHAR(255) NOT NULL,
            metadata_location VARCHAR(1000),
            previous_metadata_location VARCHAR(1000),
            PRIMARY KEY (catalog_name, table_namespace, table_name))",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert!(!columns(&pg.uri, &schema).await.contains(&"iceberg_type".to_string()));

    // Opening the catalog adds the column; the catalog then works.
    let cfg = config(&scoped, pg.path(), &pg.name);
    let handle = open(&cfg).await;
    assert_eq!(
        columns(&pg.uri, &schema).await,
        [
            "catalog_name",
            "table_namespace",
            "table_name",
            "metadata_location",
            "previous_metadata_location",
            "iceberg_type"
        ]
    );
    let j = pg.journal(&generate::ndjson(14, 20, 1, 80), 40).await;
    apply_all(&j, &handle, TABLE, 1).await;
    let want = reference_of(&j).await.rows;
    assert_eq!(table_rows(&handle, TABLE).await, want);
    let kind: Option<String> = sqlx::query("SELECT iceberg_type FROM iceberg_tables WHERE catalog_name = $1")
        .bind(&pg.name)
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(0);
    assert_eq!(kind.as_deref(), Some("TABLE"));

    // A row PyIceberg wrote has no iceberg_type: such a table loads and commits too.
    sqlx::query("UPDATE iceberg_tables SET iceberg_type = NULL WHERE catalog_name = $1")
        .bind(&pg.name)
        .execute(&mut conn)
        .await
        .unwrap();
    let base = load_table(&handle, TABLE).await.unwrap();
    let t = rewrite_all(&handle, &base, 1).await.unwrap();
    drop(handle);

    // Opening it again is a no-op for the migration, and sees the commit.
    let reopened = open(&cfg).await;
    assert_eq!(
        load_table(&reopened, TABLE).await.unwrap().metadata_location(),
        t.metadata_location()
    );
    assert_eq!(table_rows(&reopened, TABLE).await, want);
    drop(reopened);

    conn.close().await.unwrap();
    sqlx::raw_sql(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
}

/// The DR commands on a PostgreSQL catalog: history record (its namespace query), backup (its
/// pointer query), a rebuild into a second catalog name and a restore into a third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_backup_rebuild_and_restore_on_postgres() {
    use tidemark_recovery::dr::backup::{self, Expected, RestoreAction};
    use tidemark_recovery::dr::{history, rebuild};
    let Some(pg) = Pg::new("history_backup_rebuild_and_restore_on_postgres", "dr") else {
        return;
    };
    let j = pg.journal(&generate::ndjson(5, 30, 1, 120), 40).await;
    let handle = pg.open().await;
    apply_all(&j, &handle, TABLE, 1).await;
    apply_all(&j, &handle, "a.b.nested", 2).await;

    let rec = history::record(&handle, None).await.unwrap();
    let names: Vec<&str> = rec.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(names, ["a.b.nested", TABLE]);
    assert!(rec.tables.iter().all(|t| t.row_count > 0));

    let backups = LocalStore::create(pg.path().join("backups")).unwrap();
    let out = backup::backup(&handle, None, &backups).await.unwrap();
    assert_eq!(out.tables, 2);
    let b = backup::load(&backups, &out.id).await.unwrap();

    let rebuilt = open(&pg.config(&format!("{}_rb", pg.name))).await;
    let r = rebuild::rebuild(
        &pg.path().join("warehouse").display().to_string(),
        &rebuilt,
        None,
        &HashMap::new(),
    )
    .await
    .unwrap();
    assert_eq!(r.totals.registered, 2, "{r:?}");
    let after = history::record(&rebuilt, None).await.unwrap();
    assert!(history::compare(&rec, &after).iter().all(|d| d.informational));

    let restored = open(&pg.config(&format!("{}_rs", pg.name))).await;
    let report = backup::restore(&restored, &b, &Expected::Empty, false).await.unwrap();
    assert!(report.applied, "{report:?}");
    assert!(report.tables.iter().all(|t| t.action == RestoreAction::Register));
    assert_eq!(table_rows(&restored, TABLE).await, table_rows(&handle, TABLE).await);
}

/// Several processes opening a catalog on a fresh database (here: a fresh schema) at once: the
/// first-use `CREATE TABLE IF NOT EXISTS` of iceberg-catalog-sql is serialized by tidemark's
/// advisory lock, so every open succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_catalog_opened_by_many_at_once() {
    let Some(pg) = Pg::new("a_new_catalog_opened_by_many_at_once", "race") else {
        return;
    };
    let mut c = PgConnection::connect(&pg.uri).await.unwrap();
    sqlx::query(&format!("CREATE SCHEMA {}", pg.name))
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    let scoped = with_search_path(&pg.uri, &pg.name);
    let opens: Vec<_> = (0..6)
        .map(|i| {
            let cfg = config(&scoped, pg.path(), &format!("{}_{i}", pg.name));
            tokio::spawn(async move { open_catalog(&cfg).await.map(|_| ()) })
        })
        .collect();
    for o in opens {
        o.await
            .unwrap()
            .unwrap_or_else(|e| panic!("a concurrent first open failed: {e}"));
    }
    assert!(columns(&pg.uri, &pg.name).await.contains(&"iceberg_type".to_string()));
}

/// The catalog conformance suite (`catalog::conformance`) on the SQL backend on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_backend_conforms() {
    let Some(pg) = Pg::new("the_postgres_backend_conforms", "conform") else {
        return;
    };
    let handle = pg.open().await;
    tidemark_recovery::catalog::conformance::run_all(&handle, "conf").await;
}

/// `tidemark drill --catalog postgres://…`: the A–E story with the source and recovered tables
/// in PostgreSQL, and the route naming the catalog without its password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drill_on_a_postgres_catalog() {
    let Some(uri) = pg_uri("the_drill_on_a_postgres_catalog") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = tidemark_recovery::rehearse::drill::DrillOptions {
        work: dir.path().to_path_buf(),
        store: None,
        orders: 200,
        events: 2_000,
        seed: 7,
        catalog: Some(uri.clone()),
    };
    let clock = tidemark_journal::clock::SystemClock;
    let report = tidemark_recovery::rehearse::drill::run(&opts, &clock, &SeededIds::new(11), &mut |_| {})
        .await
        .unwrap();
    let failed: Vec<_> = report.checks.iter().filter(|c| !c.ok).collect();
    assert!(report.ok && failed.is_empty(), "{failed:?}");
    let route = std::fs::read_to_string(dir.path().join("route/route.json")).unwrap();
    let route: serde_json::Value = serde_json::from_str(&route).unwrap();
    assert_eq!(route["catalog"]["kind"], "postgres", "{route}");
    assert!(route["table_name"].as_str().unwrap().starts_with("drill_"), "{route}");
    let password = uri
        .split_once("://")
        .unwrap()
        .1
        .split_once('@')
        .unwrap()
        .0
        .split_once(':')
        .unwrap()
        .1;
    assert!(
        !route["catalog"]["uri"]
            .as_str()
            .unwrap()
            .contains(&format!(":{password}@")),
        "{route}"
    );
}
