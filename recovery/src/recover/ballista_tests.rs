//! The distributed engine in standalone mode (scheduler and executor in this process on
//! 127.0.0.1): a recovery on Ballista equals the local one row for row — on the A–E story and on
//! a generated stream with retries, tombstones and late events — and a conflict stops the job
//! with nothing committed. The S3 variant runs against moto when `TIDEMARK_S3_ENDPOINT` is set.

use std::collections::BTreeMap;

use iceberg::table::Table;

use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::recover::engine::{self, Engine};
use crate::recover::tests::{Story, append_text, append_unchecked, clock, ev, story};
use crate::recover::{RecoverError, RecoverOptions, validate};
use crate::reference::Cell;
use crate::table::test_support::catalog_in;
use crate::table::{self};

/// Every row of `table` by key (all columns, and the position that wrote it).
pub(crate) async fn rows(s: &Story, table: &Table) -> BTreeMap<Cell, (Vec<Cell>, u64)> {
    validate::table_rows(&s.journal.spec, table)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.cells[0].clone(), (r.cells.clone(), r.position)))
        .collect()
}

pub(crate) async fn run(
    s: &Story,
    target: &CatalogHandle,
    opts: &RecoverOptions,
    engine: &Engine,
    seed: u64,
) -> Result<(crate::recover::RecoveryReport, Table), RecoverError> {
    engine::recover(
        &s.journal,
        target,
        opts,
        engine,
        &clock(),
        &SeededIds::new(seed),
        &mut |_| {},
    )
    .await
}

/// Recovers `into_local` locally and `into_dist` on standalone Ballista, and returns both tables.
pub(crate) async fn both(s: &Story, to: Option<u64>, into: &str) -> (Table, Table) {
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let local_into = format!("{into}_local");
    let dist_into = format!("{into}_dist");
    let (lr, local) = run(s, &target, &s.opts(&meta, &local_into, to), &Engine::Local, 40)
        .await
        .unwrap();
    let (dr, dist) = run(s, &target, &s.opts(&meta, &dist_into, to), &Engine::Standalone, 41)
        .await
        .unwrap();
    assert!(
        lr.validation.ok && dr.validation.ok,
        "{:?} {:?}",
        lr.validation,
        dr.validation
    );
    assert_eq!((dr.snapshot_position, dr.h), (lr.snapshot_position, lr.h));
    assert_eq!(
        (
            dr.replay.events,
            dr.replay.inserted,
            dr.replay.updated,
            dr.replay.unchanged
        ),
        (
            lr.replay.events,
            lr.replay.inserted,
            lr.replay.updated,
            lr.replay.unchanged
        ),
        "the same decisions"
    );
    (local, dist)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a_to_e_story_recovers_on_ballista_as_it_does_locally() {
    let s = story().await;
    let (local, dist) = both(&s, None, "shop.ae").await;
    let (l, d) = (rows(&s, &local).await, rows(&s, &dist).await);
    assert_eq!(d.len(), 22);
    assert_eq!(l, d, "row for row, positions included");
    // The commit carries the provenance of a local recovery, and names the engine.
    let summary = &dist
        .metadata()
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    for (k, v) in [
        ("tidemark.recovery-step", "replay"),
        ("tidemark.first-position", "21"),
        ("tidemark.last-position", "26"),
        ("tidemark.recovery-engine", "ballista-standalone"),
    ] {
        assert_eq!(summary.get(k).map(String::as_str), Some(v), "{k}: {summary:?}");
    }
    assert!(summary.contains_key("tidemark.manifest-digest") && summary.contains_key("tidemark.source-metadata"));
    // The manifests were built from the footers: counts and key bounds.
    let files = table::live_data_files(&dist).await.unwrap();
    assert_eq!(files.iter().map(|f| f.record_count()).sum::<u64>(), 22);
    for f in &files {
        assert!(
            f.lower_bounds().contains_key(&1) && f.upper_bounds().contains_key(&1),
            "{f:?}"
        );
        assert_eq!(f.null_value_counts().get(&1), Some(&0));
    }
    // Resumable: the same recovery again commits nothing and still validates.
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let (again, t) = run(
        &s,
        &target,
        &s.opts(&meta, "shop.ae_dist", None),
        &Engine::Standalone,
        42,
    )
    .await
    .unwrap();
    assert!(again.replay_resumed && again.validation.ok);
    assert_eq!(
        t.metadata().current_snapshot_id(),
        dist.metadata().current_snapshot_id()
    );
}

/// Generated events after the story (tombstones and comebacks from the generator), with
/// identical retries at new positions and late events (old business time).
pub(crate) fn generated_tail(first: u64, n: u64) -> String {
    let text = tidemark_journal::generate::ndjson(7, 40, first, n);
    let mut out = String::new();
    let mut pos = first;
    for (i, line) in text.lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["position"] = pos.into();
        pos += 1;
        if i % 9 == 4 {
            v["event_time"] = "2026-01-01T00:00:00Z".into(); // late
        }
        out += &(v.to_string() + "\n");
        if i % 7 == 3 {
            // An identical retry of the same event at the next position.
            v["position"] = pos.into();
            pos += 1;
            out += &(v.to_string() + "\n");
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_stream_recovers_on_ballista_as_it_does_locally() {
    let s = story().await;
    append_text(&s.journal, &generated_tail(27, 300)).await;
    let (local, dist) = both(&s, None, "shop.gen").await;
    let (l, d) = (rows(&s, &local).await, rows(&s, &dist).await);
    assert!(l.len() > 40, "{}", l.len());
    let deleted = s
        .journal
        .spec
        .spec
        .columns
        .iter()
        .position(|c| c.name == s.journal.spec.spec.delete_column)
        .unwrap();
    assert!(
        d.values().any(|(cells, _)| cells[deleted] == Cell::Bool(true)),
        "tombstones are kept"
    );
    assert_eq!(l, d, "row for row, positions included");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_stops_the_distributed_job_and_commits_nothing() {
    let s = story().await;
    append_unchecked(
        &s.journal,
        &ev(27, "D", 1, "placed-differently", false, "2026-11-20T09:10:00Z"),
    )
    .await;
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let err = run(
        &s,
        &target,
        &s.opts(&meta, "shop.conflict", Some(27)),
        &Engine::Standalone,
        43,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("key D version 1") && err.to_string().contains("positions 23 and 27"),
        "{err}"
    );
    let t = table::load_table(&target, "shop.conflict").await.unwrap();
    assert!(t.metadata().current_snapshot().is_none(), "nothing committed");
    assert!(
        t.metadata()
            .properties()
            .contains_key(crate::recover::seed::PROP_REFUSED)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_a_cluster_error() {
    let s = story().await;
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let engine: Engine = "ballista://127.0.0.1:9".parse().unwrap();
    let err = run(&s, &target, &s.opts(&meta, "shop.nocluster", None), &engine, 44)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RecoverError::Engine(engine::EngineError::Unreachable { .. })),
        "{err}"
    );
    let code = crate::exit::code_of(&anyhow::Error::new(err));
    assert_eq!(code, crate::exit::CLUSTER);
}

/// The distributed validation is independent of the merge it checks: a merge broken on purpose
/// (the oldest version of each key wins; `ballista::sabotage`, test build only) is caught on the
/// cluster before the commit, and nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_distributed_merge_is_caught_by_the_distributed_validation() {
    let s = story().await;
    append_text(&s.journal, &generated_tail(27, 300)).await;
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let mut opts = s.opts(&meta, "shop.broken", None);
    opts.recovery_id = format!("{}broken", crate::recover::ballista::sabotage::PREFIX);
    let err = run(&s, &target, &opts, &Engine::Standalone, 45).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, RecoverError::Validation { .. }) && msg.contains("the distributed validation found"),
        "{msg}"
    );
    assert!(
        msg.contains("nothing was committed") && msg.contains("first keys [\""),
        "{msg}"
    );
    let t = table::load_table(&target, "shop.broken").await.unwrap();
    assert!(t.metadata().current_snapshot().is_none(), "nothing committed");
    assert_eq!(
        crate::exit::code_of(&anyhow::Error::new(err)),
        crate::exit::VERIFY_FAILED
    );
}

/// A distributed recovery reports its distributed check of every key, and the reference on a
/// sample of the key partitions once the table spans more than one (here: 4 rows a partition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_distributed_recovery_checks_every_key_on_the_cluster_and_a_sample_by_the_reference() {
    let s = story().await;
    append_text(&s.journal, &generated_tail(27, 300)).await;
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let mut opts = s.opts(&meta, "shop.sampled", None);
    opts.partition_rows = Some(4);
    let (r, t) = run(&s, &target, &opts, &Engine::Standalone, 46).await.unwrap();
    let rows = rows(&s, &t).await.len() as u64;
    let d = r.validation.distributed.as_ref().expect("the distributed check ran");
    assert!(d.ok && r.validation.ok, "{:?}", r.validation);
    assert_eq!((d.keys_expected, d.rows_found, d.duplicate_keys), (rows, rows, 0));
    let sample = r.validation.sample.as_ref().expect("a sample");
    assert!(sample.of >= validate::MIN_SAMPLE_PARTITIONS && !sample.partitions.is_empty());
    assert!(sample.partitions.len() < sample.of);
    assert!(
        r.validation.keys_expected > 0 && r.validation.keys_expected < rows,
        "the sample's keys: {} of {rows}",
        r.validation.keys_expected
    );
    // A table that fits one partition is compared whole.
    let (whole, _) = run(&s, &target, &s.opts(&meta, "shop.whole", None), &Engine::Standalone, 47)
        .await
        .unwrap();
    assert!(whole.validation.sample.is_none() && whole.validation.keys_expected == rows);
}

/// The distributed plan reads the snapshot's files as Parquet listings, by column name: a
/// snapshot whose schema names a field otherwise than its files do (another writer renamed the
/// column) is refused before anything is created (exit 3), instead of reading it as nulls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_whose_files_name_a_column_otherwise_is_refused() {
    let s = story().await;
    let meta = s.source_metadata().await;
    let opts = s.opts(&meta, "shop.renamed", None);
    let mut snap = crate::recover::snapshot::choose(&s.journal, &opts.source, &opts.choice)
        .await
        .unwrap();
    let runtime = datafusion::execution::runtime_env::RuntimeEnv::default();
    // iceberg-rust's files carry field ids that agree with the schema.
    crate::recover::footer::check_field_names(&runtime, &snap)
        .await
        .unwrap();
    let mut fields: Vec<_> = snap.schema.as_struct().fields().iter().map(|f| (**f).clone()).collect();
    let old = fields[1].name.clone();
    fields[1].name = format!("{old}_renamed");
    snap.schema = iceberg::spec::Schema::builder()
        .with_schema_id(snap.schema.schema_id() + 1)
        .with_fields(fields.into_iter().map(std::sync::Arc::new))
        .build()
        .unwrap();
    let err = crate::recover::footer::check_field_names(&runtime, &snap)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("is `{old}` in the file but `{old}_renamed`")) && msg.contains(&snap.data_files[0]),
        "{msg}"
    );
    assert_eq!(crate::exit::code_of(&anyhow::Error::new(err)), crate::exit::BAD_INPUT);
}
