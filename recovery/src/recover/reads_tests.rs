//! The journal reads of one recovery (issue 31): the command verifies the chain once, from the
//! snapshot's batch on, and hands the verified range to the replay. Each event object of the
//! replayed range is then read three times, never more: hashed by the verification, decoded by
//! the replay, and read (and hashed again) by the validation's own reader, which shares nothing
//! with the replay's. The objects of the batches the snapshot already holds are not read at all.
//!
//! Counted with a store wrapper around the journal's folder, on every `get`.

use std::collections::BTreeMap;
use std::sync::Arc;

use tidemark_journal::Journal;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::store::tap::{GetCounts, Tapped};

use super::positions_tests::{applied_in_two, from_checkpoint, recovered};

/// The batch sequence of an `events/` or `manifests/` key (`events/00000000000000000007-….parquet`).
fn sequence(key: &str) -> u64 {
    let name = key.rsplit('/').next().unwrap();
    name[..20].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_recovery_reads_each_journal_object_a_counted_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    // 1,000 events in ten batches of 100; the snapshot holds batches 1–5 (position 500).
    let (_, _, handle, t) = applied_in_two(dir.path(), (9, 60, 1000), &[(1000, 100)], 500).await;

    let counting = Arc::new(Tapped::new(
        Arc::new(LocalStore::open(dir.path().join("journal")).unwrap()),
        GetCounts::default(),
    ));
    let journal = Journal::open(counting.clone()).await.unwrap();
    counting.tap().clear();
    let opts = from_checkpoint("r-reads", &t, Some(500), None, "shop.rec");
    let report = recovered(&journal, &handle, &opts, 3).await;
    assert_eq!(
        (report.snapshot_position, report.h, report.replay.events),
        (500, 1000, 500)
    );
    assert!(report.validation.ok, "{:?}", report.validation);

    let gets = counting.tap().counts();
    let of = |prefix: &str| -> BTreeMap<u64, u32> {
        gets.iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, n)| (sequence(k), *n))
            .collect()
    };
    let events = of("events/");
    let manifests = of("manifests/");
    // Hashed once by the one verification, decoded once by the replay, read once by the
    // validation's own reader; the batches the snapshot holds are not read.
    let expected_events: BTreeMap<u64, u32> = (6..=10).map(|s| (s, 3)).collect();
    assert_eq!(events, expected_events, "event object reads by batch (all: {gets:?})");
    // Each manifest of the range: read by the one verification and by the validation's own
    // reader, which finds its first manifest by bisection (one more read of a manifest or two
    // near the start); before, each was read three or four times.
    for s in 6..=10 {
        let n = manifests.get(&s).copied().unwrap_or(0);
        assert!((2..=3).contains(&n), "manifest {s} read {n} times (all: {gets:?})");
    }
    assert_eq!(
        (7..=10).map(|s| manifests[&s]).collect::<Vec<_>>(),
        [2, 2, 2, 2],
        "all: {gets:?}"
    );
    // Before the range: the snapshot's own manifest (the chain's anchor), and at most the
    // bisection's probes; the whole chain is not walked from its start any more.
    let before: u32 = (1..=4).filter_map(|s| manifests.get(&s)).sum();
    assert!(before <= 2, "manifests 1..=4 read {before} times (all: {gets:?})");
}
