//! Every boundary is a position, any position (issue 29): `apply --until`, `recover --to`,
//! `--at-or-before` and the writer after a flip, inside a journal batch and at its edges. Each
//! result is compared with an independent fold of the events as they were appended: the NDJSON
//! text itself, parsed here with serde_json — never the journal, its manifests or its readers.

use std::collections::BTreeMap;
use std::sync::Arc;

use tidemark_journal::Journal;
use tidemark_journal::checkpoint;
use tidemark_journal::generate;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::local::LocalStore;

use crate::apply::tests::append_opts;

use crate::apply::tests::clock;
use crate::apply::{ApplyOptions, apply};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::recover::snapshot::{SnapshotChoice, SnapshotSource};
use crate::recover::{RecoverError, RecoverOptions, recover};
use crate::reference::{Cell, rows_of};
use crate::table::mor::MergeMode;
use crate::table::read::read_table;
use crate::table::test_support::catalog_in;
use crate::table::{self};

/// What a key's row must be: its position, version and tombstone flag.
type Expected = BTreeMap<String, (u64, i64, bool)>;

/// The fold of the merge rules over the appended text's events with positions `..= to`: per
/// key, the first event of the highest version (a later identical retry changes nothing).
fn fold(lines: &[String], to: u64) -> Expected {
    let mut out = Expected::new();
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let position = v["position"].as_u64().unwrap();
        if position > to {
            break;
        }
        let key = v["order_id"].as_str().unwrap().to_string();
        let version = v["order_version"].as_i64().unwrap();
        let deleted = v["is_deleted"].as_bool().unwrap();
        match out.get(&key) {
            Some(&(_, have, _)) if have >= version => {}
            _ => {
                out.insert(key, (position, version, deleted));
            }
        }
    }
    out
}

/// The table's rows as (position, version, tombstone) by key.
async fn rows(handle: &CatalogHandle, name: &str) -> Expected {
    let t = table::load_table(handle, name).await.unwrap();
    let spec = tidemark_journal::spec::CompiledSpec::orders();
    let mut out = Expected::new();
    for row in rows_of(&spec, &read_table(&t).await.unwrap()) {
        let key = row.cells[spec.key_index].to_string();
        let version = match &row.cells[spec.version_index] {
            Cell::Long(v) => *v,
            Cell::Int(v) => i64::from(*v),
            other => panic!("version cell {other:?}"),
        };
        let deleted = matches!(row.cells[spec.delete_index], Cell::Bool(true));
        assert!(
            out.insert(key.clone(), (row.position, version, deleted)).is_none(),
            "key {key} twice in {name}"
        );
    }
    out
}

/// A small deterministic generator (xorshift), so that the cases are fixed by their seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

/// A journal of `lines`, appended in chunks of the given sizes, each chunk in batches of its own
/// size (so that batch edges fall everywhere).
pub(super) async fn journal_of(dir: &std::path::Path, lines: &[String], chunks: &[(usize, usize)]) -> Journal {
    std::fs::create_dir_all(dir).unwrap();
    let store = Arc::new(LocalStore::open(dir).unwrap());
    let j = Journal::init(store, orders_spec(), "j-positions".into(), &clock())
        .await
        .unwrap();
    let mut at = 0;
    for &(n, batch) in chunks {
        let text: String = lines[at..(at + n).min(lines.len())]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        at += n;
        let opts = append_opts(batch, "gen");
        crate::apply::tests::append_with(&j, &text, &opts).await.unwrap();
    }
    assert_eq!(at, lines.len());
    j
}

pub(super) fn lines(seed: u64, orders: u64, n: u64) -> Vec<String> {
    generate::ndjson(seed, orders, 1, n)
        .lines()
        .map(str::to_string)
        .collect()
}

pub(super) async fn apply_until(
    j: &Journal,
    handle: &CatalogHandle,
    name: &str,
    until: Option<u64>,
    mode: MergeMode,
    seed: u64,
) -> crate::apply::ApplyReport {
    let opts = ApplyOptions {
        until,
        merge_mode: Some(mode),
        ..Default::default()
    };
    apply(j, handle, name, &opts, &clock(), &SeededIds::new(seed), &mut |_| {})
        .await
        .unwrap()
}

pub(super) fn source_of(t: &iceberg::table::Table) -> SnapshotSource {
    SnapshotSource::at(t.metadata_location().unwrap())
}

pub(super) fn recover_opts(
    id: &str,
    source: SnapshotSource,
    choice: SnapshotChoice,
    to: Option<u64>,
    into: &str,
) -> RecoverOptions {
    RecoverOptions {
        to,
        ..RecoverOptions::new(id, source, choice, into)
    }
}

/// A journal in `dir/journal` of `lines(seed, orders, n)` appended in `chunks`, and a catalog in
/// `dir` whose `shop.orders` the applier took to `until`, then to the end: the lines, the
/// journal, the catalog and the table.
pub(super) async fn applied_in_two(
    dir: &std::path::Path,
    (seed, orders, n): (u64, u64, u64),
    chunks: &[(usize, usize)],
    until: u64,
) -> (Vec<String>, Journal, CatalogHandle, iceberg::table::Table) {
    let text = lines(seed, orders, n);
    let j = journal_of(&dir.join("journal"), &text, chunks).await;
    let handle = catalog_in(dir).await;
    apply_until(&j, &handle, "shop.orders", Some(until), MergeMode::CopyOnWrite, 1).await;
    apply_until(&j, &handle, "shop.orders", None, MergeMode::CopyOnWrite, 2).await;
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    (text, j, handle, t)
}

/// [`recover_opts`] from `t`'s newest checkpoint at or before `at_or_before`.
pub(super) fn from_checkpoint(
    id: &str,
    t: &iceberg::table::Table,
    at_or_before: Option<u64>,
    to: Option<u64>,
    into: &str,
) -> RecoverOptions {
    recover_opts(id, source_of(t), SnapshotChoice::Checkpoint { at_or_before }, to, into)
}

/// `recover` with `opts` (ids seeded `seed`), which must succeed: its report.
pub(super) async fn recovered(
    j: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    seed: u64,
) -> crate::recover::RecoveryReport {
    recover(j, handle, opts, &clock(), &SeededIds::new(seed), &mut |_| {})
        .await
        .unwrap()
        .0
}

/// Case 2: `apply --until` inside a batch, then a plain apply, reads the rest of that batch; a
/// second `--until` inside the same batch applies just the positions between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_until_inside_a_batch_then_resume_reads_the_rest_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines(7, 90, 1500);
    let j = journal_of(&dir.path().join("journal"), &text, &[(1500, 300)]).await;
    let handle = catalog_in(dir.path()).await;
    let r = apply_until(&j, &handle, "shop.orders", Some(1000), MergeMode::CopyOnWrite, 1).await;
    assert_eq!(r.applied_to_position, 1000);
    assert_eq!(rows(&handle, "shop.orders").await, fold(&text, 1000));
    let r = apply_until(&j, &handle, "shop.orders", Some(1100), MergeMode::CopyOnWrite, 2).await;
    assert_eq!(
        (r.started_after_position, r.applied_to_position, r.merge.events),
        (1000, 1100, 100)
    );
    assert_eq!(rows(&handle, "shop.orders").await, fold(&text, 1100));
    let r = apply_until(&j, &handle, "shop.orders", None, MergeMode::CopyOnWrite, 3).await;
    assert_eq!(
        (r.started_after_position, r.applied_to_position, r.merge.events),
        (1100, 1500, 400)
    );
    assert_eq!(rows(&handle, "shop.orders").await, fold(&text, 1500));
}

/// Cases 1 and 3: a recovery from a checkpoint inside a batch replays the rest of that batch,
/// one to an H inside a batch stops there, and the next writer on the recovered table starts
/// right after H.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_and_the_next_writer_resume_inside_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (text, j, handle, t) = applied_in_two(dir.path(), (8, 90, 2000), &[(2000, 400)], 1000).await;
    let opts = from_checkpoint("r1", &t, Some(1000), Some(1500), "shop.rec");
    let report = recovered(&j, &handle, &opts, 3).await;
    assert_eq!((report.snapshot_position, report.h), (1000, 1500));
    assert!(report.validation.ok, "{:?}", report.validation);
    assert_eq!(report.replay.events, 500);
    assert_eq!(rows(&handle, "shop.rec").await, fold(&text, 1500));
    // The next writer on the recovered table: 1501..=2000, all of them.
    let r = apply_until(&j, &handle, "shop.rec", None, MergeMode::CopyOnWrite, 4).await;
    assert_eq!(
        (r.started_after_position, r.applied_to_position, r.merge.events),
        (1500, 2000, 500)
    );
    assert_eq!(rows(&handle, "shop.rec").await, fold(&text, 2000));
}

/// The validation reads its events on its own: a replay that leaves out the tail of a batch is
/// caught (before, the validation read through the replay's chain anchor and agreed with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_validation_catches_a_replay_that_skipped_a_batch_tail() {
    let dir = tempfile::tempdir().unwrap();
    let text = lines(9, 60, 1200);
    std::fs::create_dir_all(dir.path().join("journal")).unwrap();
    let store = Arc::new(LocalStore::open(dir.path().join("journal")).unwrap());
    // A journal id of its own, so that the injected skip touches no other test's replay.
    let j = Journal::init(store, orders_spec(), "j-skip-tail".into(), &clock())
        .await
        .unwrap();
    let opts = append_opts(300, "gen");
    let body: String = text.iter().map(|l| format!("{l}\n")).collect();
    crate::apply::tests::append_with(&j, &body, &opts).await.unwrap();
    let handle = catalog_in(dir.path()).await;
    apply_until(&j, &handle, "shop.orders", Some(600), MergeMode::CopyOnWrite, 1).await;
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    // The replay leaves out positions 751..=900, the tail of the batch 601..=900.
    *crate::recover::replay::SKIP_FOR_TEST.lock().unwrap() = Some(("j-skip-tail".into(), 750, 900));
    let opts = from_checkpoint("r-skip", &t, None, Some(1200), "shop.rec");
    let got = recover(&j, &handle, &opts, &clock(), &SeededIds::new(3), &mut |_| {}).await;
    *crate::recover::replay::SKIP_FOR_TEST.lock().unwrap() = None;
    let (report, _) = got.unwrap();
    assert_eq!(report.replay.events, 450, "the skip was injected");
    assert!(!report.validation.ok, "a replay that skipped events passed validation");
    assert_ne!(rows(&handle, "shop.rec").await, fold(&text, 1200));
}

/// Case 4: a resumed recovery (same id) that chooses another snapshot or boundary than its seed
/// and replay record is refused before anything is written, naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_recovery_with_another_choice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, j, handle, t) = applied_in_two(dir.path(), (10, 60, 900), &[(900, 100)], 400).await;
    let first = from_checkpoint("r-same", &t, Some(400), Some(900), "shop.rec");
    let report = recovered(&j, &handle, &first, 3).await;
    assert_eq!(report.snapshot_position, 400);
    let before = table::load_table(&handle, "shop.rec").await.unwrap();
    let other = RecoverOptions {
        choice: SnapshotChoice::Checkpoint { at_or_before: None },
        ..first.clone()
    };
    let err = recover(&j, &handle, &other, &clock(), &SeededIds::new(4), &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RecoverError::ResumeMismatch { field, .. } if field == "source snapshot"),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("r-same") && msg.contains("shop.rec"), "{msg}");
    let after = table::load_table(&handle, "shop.rec").await.unwrap();
    assert_eq!(
        before.metadata_location(),
        after.metadata_location(),
        "nothing was written"
    );
    let other_h = RecoverOptions {
        to: Some(850),
        ..first.clone()
    };
    let err = recover(&j, &handle, &other_h, &clock(), &SeededIds::new(5), &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RecoverError::ResumeMismatch { field, recorded, asked, .. } if field == "boundary H" && recorded == "900" && asked == "850"),
        "{err}"
    );
    // The same choice resumes; so does one without --to (it keeps the H it replayed to).
    let again = RecoverOptions { to: None, ..first };
    let report = recovered(&j, &handle, &again, 6).await;
    assert!(report.seed_resumed && report.replay_resumed && report.validation.ok);
    assert_eq!(report.h, 900);
}

/// Randomized, fixed seeds: batch edges everywhere, `--until`, `--to` and `--at-or-before`
/// inside batches and on their edges, second recoveries from recovered tables, the writer after
/// each recovery, both merge modes; every table equals the independent fold every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_position_is_a_boundary_randomized_against_an_independent_fold() {
    for (seed, mode) in [
        (11u64, MergeMode::CopyOnWrite),
        (12, MergeMode::MergeOnRead),
        (13, MergeMode::CopyOnWrite),
        (14, MergeMode::MergeOnRead),
    ] {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let dir = tempfile::tempdir().unwrap();
        let n = rng.between(500, 900);
        let text = lines(seed, rng.between(20, 80), n);
        let mut chunks = Vec::new();
        let mut left = n as usize;
        while left > 0 {
            let c = (rng.between(1, 200) as usize).min(left);
            chunks.push((c, rng.between(1, 90) as usize));
            left -= c;
        }
        let j = journal_of(&dir.path().join("journal"), &text, &chunks).await;
        let handle = catalog_in(dir.path()).await;
        let ctx = |what: &str| format!("seed {seed} {mode:?} chunks {chunks:?}: {what}");
        // The applier, stopped at random positions.
        let mut at = 0;
        let mut stops = Vec::new();
        while at < n {
            let next = (at + rng.between(1, 250)).min(n);
            let r = apply_until(&j, &handle, "shop.orders", Some(next), mode, seed * 100 + at).await;
            assert_eq!(
                (r.started_after_position, r.applied_to_position),
                (at, next),
                "{}",
                ctx("apply")
            );
            assert_eq!(
                rows(&handle, "shop.orders").await,
                fold(&text, next),
                "{}",
                ctx(&format!("apply --until {next}"))
            );
            stops.push(next);
            at = next;
        }
        // Recoveries from random checkpoints to random boundaries, then the next writer.
        let cps = checkpoint::list(j.store.as_ref(), &Default::default()).await.unwrap();
        for round in 0..3u64 {
            let c = stops[rng.below(stops.len() as u64) as usize];
            let h = rng.between(c, n);
            let t = table::load_table(&handle, "shop.orders").await.unwrap();
            let into = format!("shop.rec{round}");
            let opts = from_checkpoint(&format!("r{seed}-{round}"), &t, Some(c), Some(h), &into);
            let report = recovered(&j, &handle, &opts, seed + round).await;
            let what = ctx(&format!("recover --at-or-before {c} --to {h}"));
            assert_eq!(report.snapshot_position, c, "{what}");
            assert!(report.validation.ok, "{what}: {:?}", report.validation);
            assert_eq!(rows(&handle, &into).await, fold(&text, h), "{what}");
            // The next writer, to a random position and then to the end.
            let h2 = rng.between(h, n);
            let r = apply_until(&j, &handle, &into, Some(h2), mode, seed * 1000 + round).await;
            assert_eq!((r.started_after_position, r.applied_to_position), (h, h2), "{what}");
            assert_eq!(rows(&handle, &into).await, fold(&text, h2), "{what}: writer to {h2}");
            // A second incident: recover the recovered table from its snapshot at h2.
            let rec = table::load_table(&handle, &into).await.unwrap();
            let h3 = rng.between(h2, n);
            let into2 = format!("shop.again{round}");
            let opts = recover_opts(
                &format!("r{seed}-{round}-again"),
                source_of(&rec),
                SnapshotChoice::SnapshotId(rec.metadata().current_snapshot_id().unwrap()),
                Some(h3),
                &into2,
            );
            let report = recovered(&j, &handle, &opts, seed + 50 + round).await;
            let what = ctx(&format!("second recovery from {h2} to {h3}"));
            assert_eq!(report.snapshot_position, h2, "{what}");
            assert!(report.validation.ok, "{what}: {:?}", report.validation);
            assert_eq!(rows(&handle, &into2).await, fold(&text, h3), "{what}");
            let r = apply_until(&j, &handle, &into2, None, mode, seed * 2000 + round).await;
            assert_eq!(r.applied_to_position, n, "{what}");
            assert_eq!(rows(&handle, &into2).await, fold(&text, n), "{what}: writer to the end");
        }
        assert!(!cps.is_empty());
    }
}
