//! The applier against a real SQLite catalog and local warehouse: the table equals the reference
//! fold, a stop between commit and checkpoint changes nothing, a conflicting payload commits
//! nothing, and a concurrent commit is retried, never lost.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Duration};
use tidemark_journal::clock::StepClock;
use tidemark_journal::spec::{CompiledSpec, orders_spec};
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_journal::{Journal, checkpoint, generate};

use crate::apply::{ApplyError, ApplyOptions, applied_state, apply};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::reference::{self, Cell, RefRow, RefState};
use crate::table::read::read_table;
use crate::table::test_support::{catalog_in, iceberg_scan};
use crate::table::{self, arrow_schema, live_data_files};

pub(crate) fn clock() -> StepClock {
    StepClock::new(
        DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        Duration::milliseconds(1),
    )
}

/// The append options of the lib tests: batches of `batch` events from writer `w`, the input
/// named `source`.
pub(crate) fn append_opts(batch: usize, source: &str) -> AppendOptions {
    AppendOptions {
        batch_size: batch,
        writer_id: "w".into(),
        source_name: source.into(),
    }
}

/// `append` of `text` to `j` with `opts`, the test clock and no progress.
pub(crate) async fn append_with(
    j: &Journal,
    text: &str,
    opts: &AppendOptions,
) -> tidemark_journal::Result<tidemark_schemas::AppendReport> {
    append(j, text.as_bytes(), opts, &clock(), &mut |_| {}).await
}

pub(crate) async fn journal_in(dir: &std::path::Path, text: &str, batch: usize) -> Journal {
    std::fs::create_dir_all(dir).unwrap();
    let store = Arc::new(LocalStore::open(dir).unwrap());
    let j = Journal::init(store, orders_spec(), "j-apply".into(), &clock())
        .await
        .unwrap();
    let opts = append_opts(batch, "gen");
    append_with(&j, text, &opts).await.unwrap();
    j
}

/// A scratch folder with a journal of `generate::ndjson(seed, orders, 1, events)` in batches of
/// `batch` (in `journal/`) and an empty SQLite catalog beside it.
pub(crate) async fn generated_site(
    seed: u64,
    orders: u64,
    events: u64,
    batch: usize,
) -> (tempfile::TempDir, Journal, CatalogHandle) {
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(
        &dir.path().join("journal"),
        &generate::ndjson(seed, orders, 1, events),
        batch,
    )
    .await;
    let handle = catalog_in(dir.path()).await;
    (dir, j, handle)
}

/// Every row of the table's current snapshot, by key; panics on a duplicate key.
pub(crate) async fn table_rows(handle: &CatalogHandle, name: &str) -> BTreeMap<Cell, RefRow> {
    let t = table::load_table(handle, name).await.unwrap();
    let batches = read_table(&t).await.unwrap();
    let spec = CompiledSpec::orders();
    let mut out = BTreeMap::new();
    for row in reference::rows_of(&spec, &batches) {
        let key = row.cells[spec.key_index].clone();
        assert!(out.insert(key.clone(), row).is_none(), "key {key} twice in the table");
    }
    out
}

/// `apply` of `j` into `table` with `opts` and `clock`, ids seeded with `seed`, no progress.
pub(crate) async fn apply_seeded(
    j: &Journal,
    handle: &CatalogHandle,
    table: &str,
    opts: &ApplyOptions,
    clock: &dyn tidemark_journal::clock::Clock,
    seed: u64,
) -> Result<crate::apply::ApplyReport, ApplyError> {
    apply(j, handle, table, opts, clock, &SeededIds::new(seed), &mut |_| {}).await
}

/// Applies everything verified to `shop.orders` with the default options and the test clock.
pub(crate) async fn apply_all(j: &Journal, handle: &CatalogHandle, ids: &SeededIds) -> crate::apply::ApplyReport {
    super::apply_all(j, handle, "shop.orders", &clock(), ids).await.unwrap()
}

/// [`apply_all`] on a table another engine also writes: its changes since the applier's last
/// commit are accepted (`--on-divergence continue`), as an operator of such a table does.
pub(crate) async fn apply_all_accepting(
    j: &Journal,
    handle: &CatalogHandle,
    ids: &SeededIds,
) -> crate::apply::ApplyReport {
    let opts = ApplyOptions {
        on_divergence: crate::apply::OnDivergence::Continue {
            reason: "another engine writes this table too".into(),
        },
        ..Default::default()
    };
    apply(j, handle, "shop.orders", &opts, &clock(), ids, &mut |_| {})
        .await
        .unwrap()
}

/// [`apply_all`] with a commit (and a snapshot and a checkpoint) per journal batch.
pub(crate) async fn apply_each_batch(
    j: &Journal,
    handle: &CatalogHandle,
    ids: &SeededIds,
) -> crate::apply::ApplyReport {
    let one = ApplyOptions {
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    apply(j, handle, "shop.orders", &one, &clock(), ids, &mut |_| {})
        .await
        .unwrap()
}

/// The reference fold of the journal, unit by unit as the applier sees it (one manifest a unit).
pub(crate) async fn reference_of(j: &Journal) -> RefState {
    reference::fold_journal(j).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_table_equals_the_reference_and_checkpoints_follow() {
    let (_dir, j, handle) = generated_site(3, 40, 300, 50).await;
    let ids = SeededIds::new(1);
    let r = apply(
        &j,
        &handle,
        "shop.orders",
        &ApplyOptions {
            until: Some(120),
            ..Default::default()
        },
        &clock(),
        &ids,
        &mut |_| {},
    )
    .await
    .unwrap();
    assert_eq!((r.started_after_position, r.applied_to_position), (0, 120));
    let r = apply_all(&j, &handle, &ids).await;
    assert_eq!((r.started_after_position, r.applied_to_position), (120, 300));
    assert_eq!(table_rows(&handle, "shop.orders").await, reference_of(&j).await.rows);
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(applied_state(&t).position, 300);
    let cps = checkpoint::list(j.store.as_ref(), &Default::default()).await.unwrap();
    assert_eq!(cps.last().unwrap().position, 300);
    assert_eq!(
        cps.last().unwrap().snapshot_id,
        t.metadata().current_snapshot_id().unwrap()
    );
    assert!(
        cps.iter().any(|c| c.position == 120),
        "the partial manifest's checkpoint: {cps:?}"
    );
    // Nothing left: a second run applies nothing and commits nothing.
    let again = apply_all(&j, &handle, &ids).await;
    assert_eq!(again.commits, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_between_commit_and_checkpoint_changes_nothing() {
    let text = generate::ndjson(5, 30, 1, 200);
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &text, 40).await;
    let handle = catalog_in(dir.path()).await;
    let crash = ApplyOptions {
        failpoint: Some("after-commit:2".into()),
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    let err = apply_seeded(&j, &handle, "shop.orders", &crash, &clock(), 2)
        .await
        .unwrap_err();
    assert!(matches!(err, ApplyError::Failpoint(_)), "{err}");
    let cps = checkpoint::list(j.store.as_ref(), &Default::default()).await.unwrap();
    assert_eq!(
        cps.last().unwrap().position,
        40,
        "the second commit has no checkpoint yet"
    );
    let r = apply_all(&j, &handle, &SeededIds::new(3)).await;
    assert!(r.recovered_checkpoint, "the missing checkpoint is detected and written");
    assert_eq!(r.started_after_position, 80, "positions 41..=80 are not applied twice");
    // The same state as an uninterrupted run into another table.
    let other = tempfile::tempdir().unwrap();
    let j2 = journal_in(&other.path().join("journal"), &text, 40).await;
    let h2 = catalog_in(other.path()).await;
    apply_all(&j2, &h2, &SeededIds::new(4)).await;
    assert_eq!(
        table_rows(&handle, "shop.orders").await,
        table_rows(&h2, "shop.orders").await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_payload_commits_nothing() {
    let e = |p: u64, status: &str| {
        format!(
            r#"{{"position":{p},"order_id":"o-1","order_version":1,"customer_id":"c","status":"{status}","amount":"1.00","currency":"EUR","is_deleted":false,"event_time":"2026-11-29T08:00:00Z"}}"#
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &format!("{}\n", e(1, "placed")), 10).await;
    // Append refuses the conflict, in one input and against the stored journal ...
    let opts = append_opts(10, "retry.ndjson");
    let both = format!("{}\n{}\n", e(2, "placed"), e(3, "paid"));
    let err = append_with(&j, &both, &opts).await.unwrap_err();
    assert!(
        err.to_string().starts_with(
            "retry.ndjson:2: the event at position 3 has key o-1 version 1 like position 1, already in the journal"
        ),
        "{err}"
    );
    let err = append_with(&j, &format!("{}\n", e(2, "paid")), &opts)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("like position 1, already in the journal"),
        "{err}"
    );
    assert_eq!(
        j.head().await.unwrap().unwrap().manifest.last_position,
        1,
        "nothing was written"
    );
    // ... but a journal written without that check (or older than its window) can hold one.
    tidemark_journal::writer::append_with_window(
        &j,
        format!("{}\n", e(2, "paid")).as_bytes(),
        &opts,
        0,
        &clock(),
        &mut |_| {},
    )
    .await
    .unwrap();
    let handle = catalog_in(dir.path()).await;
    let one_unit = ApplyOptions {
        grouping: crate::apply::Grouping::Fixed(2),
        ..Default::default()
    };
    let err = apply_seeded(&j, &handle, "shop.orders", &one_unit, &clock(), 5)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("key o-1 version 1") && msg.contains("positions 1 and 2"),
        "{msg}"
    );
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    assert!(t.metadata().current_snapshot().is_none(), "nothing was committed");
    assert!(
        checkpoint::list(j.store.as_ref(), &Default::default())
            .await
            .unwrap()
            .is_empty()
    );
    // The way past it: a recorded resolution keeps position 1 and voids position 2.
    let r = tidemark_journal::resolution::resolve(&j, "o-1", 1, 1, "the producer re-sent v1 by mistake", &clock())
        .await
        .unwrap();
    assert_eq!(r.void_positions, vec![2]);
    let again = tidemark_journal::resolution::resolve(&j, "o-1", 1, 2, "changed my mind", &clock())
        .await
        .unwrap_err();
    assert!(
        matches!(
            again,
            tidemark_journal::JournalError::ResolutionExists { kept: 1, asked: 2, .. }
        ),
        "{again}"
    );
    let report = apply_seeded(&j, &handle, "shop.orders", &ApplyOptions::default(), &clock(), 6)
        .await
        .unwrap();
    assert_eq!(report.applied_to_position, 2);
    let rows = table_rows(&handle, "shop.orders").await;
    let row = &rows[&Cell::Str("o-1".into())];
    assert_eq!((row.cells[3].clone(), row.position), (Cell::Str("placed".into()), 1));
    // A retry of the kept event is still welcome; another payload for key and version is refused.
    append_with(&j, &format!("{}\n", e(3, "placed")), &opts).await.unwrap();
    let err = append_with(&j, &format!("{}\n", e(4, "paid")), &opts)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already in the journal"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appliers_lose_nothing() {
    let (_dir, j, handle) = generated_site(9, 25, 150, 30).await;
    table::create_or_load_table(&handle, "shop.orders", &j.spec)
        .await
        .unwrap();
    let opts = ApplyOptions::default();
    // A loser is refused for a race it lost (never a crash or a silent double apply); after a
    // final run the table holds every event exactly once, as the reference says.
    two_appliers_at_once(&j, &handle, "shop.orders", &opts).await;
    apply_seeded(&j, &handle, "shop.orders", &opts, &clock(), 12)
        .await
        .unwrap();
    assert_eq!(table_rows(&handle, "shop.orders").await, reference_of(&j).await.rows);
}

/// Two appliers of `j` into `name` with `opts` at the same time (ids seeded 10 and 11): at least
/// one succeeds, and a loser is refused for the race it lost (a checkpoint conflict or a
/// contended table), never another error.
pub(crate) async fn two_appliers_at_once(j: &Journal, handle: &CatalogHandle, name: &str, opts: &ApplyOptions) {
    let (ids_a, ids_b) = (SeededIds::new(10), SeededIds::new(11));
    let (ca, cb) = (clock(), clock());
    let (mut pa, mut pb) = (|_: &_| {}, |_: &_| {});
    let (a, b) = tokio::join!(
        apply(j, handle, name, opts, &ca, &ids_a, &mut pa),
        apply(j, handle, name, opts, &cb, &ids_b, &mut pb)
    );
    assert!(a.is_ok() || b.is_ok(), "{a:?} / {b:?}");
    for r in [&a, &b] {
        if let Err(e) = r {
            assert!(
                matches!(
                    e,
                    ApplyError::Journal(tidemark_journal::JournalError::CheckpointConflict { .. })
                        | ApplyError::Contended { .. }
                ),
                "{e}"
            );
        }
    }
}

/// One order event line.
fn ev(p: u64, key: &str, version: i64, deleted: bool, amount: u64) -> String {
    format!(
        r#"{{"position":{p},"order_id":"{key}","order_version":{version},"customer_id":"c-1","status":"paid","amount":"{amount}.00","currency":"EUR","is_deleted":{deleted},"event_time":"2026-11-29T08:00:00Z"}}"#
    ) + "\n"
}

/// Six batches of ten new keys each (k000..k059, positions 1..=60): one data file per batch,
/// disjoint ranges. Then one unit of 41 events across every range: updates, tombstones,
/// retries, and new keys between and after the existing ranges.
pub(crate) fn six_ranges_text() -> String {
    let mut text = String::new();
    let mut p = 0;
    for k in 0..60u64 {
        p += 1;
        text += &ev(p, &format!("k{k:03}"), 1, false, k);
    }
    for i in 0..40u64 {
        p += 1;
        let k = (i * 7) % 60;
        text += &match i % 5 {
            0 => ev(p, &format!("k{k:03}"), 2, true, k),
            1 => ev(p, &format!("k{k:03}5"), 1, false, i), // a new key inside a file's range
            2 => ev(p, &format!("k{:03}", 100 + i), 1, false, i), // after every range
            _ => ev(p, &format!("k{k:03}"), 3, false, 1000 + i),
        };
    }
    p += 1;
    text += &ev(p, "k007", 3, false, 1000 + 1); // an identical retry of position 62's event
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_merged_in_key_range_chunks_equals_the_reference() {
    let text = six_ranges_text();
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &text, 10).await;
    let want = reference_of(&j).await.rows;
    let mut tables = Vec::new();
    for (name, chunk_rows) in [("chunked", 1), ("whole", crate::apply::MERGE_CHUNK_ROWS)] {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        let handle = catalog_in(&dir.path().join(name)).await;
        apply(
            &j,
            &handle,
            "shop.orders",
            &ApplyOptions {
                until: Some(60),
                chunk_rows,
                grouping: crate::apply::Grouping::Fixed(1),
                ..Default::default()
            },
            &clock(),
            &SeededIds::new(2),
            &mut |_| {},
        )
        .await
        .unwrap();
        let t = table::load_table(&handle, "shop.orders").await.unwrap();
        assert_eq!(
            live_data_files(&t).await.unwrap().len(),
            6,
            "one file per batch of new keys"
        );
        let r = apply(
            &j,
            &handle,
            "shop.orders",
            &ApplyOptions {
                grouping: crate::apply::Grouping::Fixed(100),
                chunk_rows,
                ..Default::default()
            },
            &clock(),
            &SeededIds::new(3),
            &mut |_| {},
        )
        .await
        .unwrap();
        assert_eq!(r.commits, 1);
        let rows = table_rows(&handle, "shop.orders").await;
        assert_eq!(rows, want, "{name}");
        tables.push(rows);
    }
    assert_eq!(tables[0], tables[1]);
}

/// Apply with the journal behind a faulty store: lost replies on every checkpoint write and
/// unavailable reads now and then. The table equals the reference, every checkpoint is there
/// once, and no conflict is reported for tidemark's own writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_through_lost_replies_and_errors() {
    use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &generate::ndjson(4, 40, 1, 200), 25).await;
    let faulty = Arc::new(FaultyStore::new(
        j.store.clone(),
        9,
        vec![
            Rule::new(Op::Put, Fault::LostReplyRetried)
                .prefix("checkpoints/")
                .mode(ModeFilter::Create),
            Rule::new(Op::Get, Fault::Delay(std::time::Duration::from_millis(2))).probability(0.2),
        ],
    ));
    let jf = Journal {
        store: faulty.clone(),
        ..j.clone()
    };
    let handle = catalog_in(dir.path()).await;
    let ids = SeededIds::new(3);
    // A commit and a checkpoint per batch: eight checkpoint writes to lose the replies of.
    let one = ApplyOptions {
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    let r = apply(&jf, &handle, "shop.orders", &one, &clock(), &ids, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(r.applied_to_position, 200);
    assert!(faulty.injected() >= 8, "{}", faulty.injected());
    assert_eq!(table_rows(&handle, "shop.orders").await, reference_of(&j).await.rows);
    let versions = j.store.list_versions("checkpoints/").await.unwrap();
    assert_eq!(versions.len(), 8, "one version per checkpoint");
}

/// Creates shop.orders with the orders schema, partitioned by `fields` (source id, name,
/// transform), as another engine would have.
pub(crate) async fn create_partitioned(
    handle: &CatalogHandle,
    spec: &CompiledSpec,
    fields: &[(i32, &str, iceberg::spec::Transform)],
) -> iceberg::table::Table {
    use iceberg::spec::UnboundPartitionSpec;
    use iceberg::{NamespaceIdent, TableCreation};
    let ns = NamespaceIdent::new("shop".into());
    handle
        .catalog()
        .create_namespace(&ns, Default::default())
        .await
        .unwrap();
    let mut builder = UnboundPartitionSpec::builder();
    for (source, name, transform) in fields {
        builder = builder.add_partition_field(*source, *name, *transform).unwrap();
    }
    let creation = TableCreation::builder()
        .name("orders".into())
        .schema(table::iceberg_schema(spec))
        .partition_spec(builder.build())
        .build();
    handle.catalog().create_table(&ns, creation).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_tables_are_written_per_partition() {
    use iceberg::spec::Transform;
    // identity, day, bucket and truncate: every file holds one partition, the table equals the
    // reference, and iceberg-rust's own scan reads the same rows.
    let specs: Vec<Vec<(i32, &str, Transform)>> = vec![
        vec![(6, "currency", Transform::Identity)],
        vec![(8, "event_day", Transform::Day)],
        vec![
            (1, "key_bucket", Transform::Bucket(4)),
            (4, "status_trunc", Transform::Truncate(2)),
        ],
        vec![(8, "event_hour", Transform::Hour)],
        vec![(8, "event_month", Transform::Month)],
        vec![(8, "event_year", Transform::Year)],
    ];
    for fields in specs {
        let dir = tempfile::tempdir().unwrap();
        let j = journal_in(&dir.path().join("journal"), &generate::ndjson(3, 40, 1, 300), 50).await;
        let handle = catalog_in(dir.path()).await;
        create_partitioned(&handle, &j.spec, &fields).await;
        apply_all(&j, &handle, &SeededIds::new(1)).await;
        assert_eq!(
            table_rows(&handle, "shop.orders").await,
            reference_of(&j).await.rows,
            "{fields:?}"
        );
        let t = table::load_table(&handle, "shop.orders").await.unwrap();
        let files = live_data_files(&t).await.unwrap();
        let spec = t.metadata().default_partition_spec().clone();
        let schema = t.metadata().current_schema().clone();
        let splitter =
            iceberg::arrow::RecordBatchPartitionSplitter::try_new_with_computed_values(schema, spec).unwrap();
        let mut partitions = std::collections::HashSet::new();
        for f in &files {
            assert_eq!(f.partition().fields().len(), fields.len());
            let rows = crate::table::read::read_files(&t, &[f], &arrow_schema(&t).unwrap(), None, &Default::default())
                .await
                .unwrap();
            for b in rows {
                for (key, _) in splitter.split(&b).unwrap() {
                    assert_eq!(
                        key.data(),
                        f.partition(),
                        "{fields:?}: {} holds one partition",
                        f.file_path()
                    );
                }
            }
            partitions.insert(f.partition().clone());
        }
        // The generator's 300 events span about three days (within one month and year).
        if !matches!(fields[0].2, Transform::Month | Transform::Year) {
            assert!(partitions.len() > 1, "{fields:?}: several partitions");
        }
        let scanned: usize = iceberg_scan(&t, None).await.iter().map(|b| b.num_rows()).sum();
        assert_eq!(scanned, reference_of(&j).await.rows.len(), "{fields:?}");
    }
}
