//! The applier's default grouping ([`crate::apply::group`]) end to end: waiting batches in
//! bounded commits with a checkpoint each, one batch a commit once caught up, an event object
//! without its manifest left alone, a crash between a grouped commit and its checkpoint, and a
//! conflict in a group reported as at one batch a commit.

use tidemark_journal::{Journal, checkpoint, generate};

use crate::apply::tests::{apply_all, apply_seeded, clock, journal_in, reference_of, table_rows};
use crate::apply::{ApplyError, ApplyOptions, Grouping, apply};
use crate::ids::SeededIds;
use crate::table::{self, test_support::catalog_in};

/// The default grouping with small bounds: four batches or 1,000 events a commit.
fn small() -> ApplyOptions {
    ApplyOptions {
        grouping: Grouping::Waiting {
            max_batches: 4,
            max_events: 1_000,
        },
        ..Default::default()
    }
}

async fn checkpoint_positions(j: &Journal) -> Vec<u64> {
    let mut p: Vec<u64> = checkpoint::list(j.store.as_ref(), &Default::default())
        .await
        .unwrap()
        .iter()
        .map(|c| c.position)
        .collect();
    p.sort_unstable();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_batches_go_in_bounded_commits_and_a_caught_up_applier_commits_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    // Ten batches of 20 events: commits of 4, 4 and 2 batches.
    let j = journal_in(&dir.path().join("journal"), &generate::ndjson(3, 40, 1, 200), 20).await;
    let handle = catalog_in(dir.path()).await;
    let r = apply_seeded(&j, &handle, "shop.orders", &small(), &clock(), 1)
        .await
        .unwrap();
    assert_eq!((r.applied_to_position, r.commits, r.checkpoints_written), (200, 3, 3));
    assert_eq!(checkpoint_positions(&j).await, [80, 160, 200]);
    assert_eq!(table_rows(&handle, "shop.orders").await, reference_of(&j).await.rows);
    // The event bound: 50 events a commit at most, so two batches of 20 each time.
    let dir2 = tempfile::tempdir().unwrap();
    let j2 = journal_in(&dir2.path().join("journal"), &generate::ndjson(3, 40, 1, 200), 20).await;
    let h2 = catalog_in(dir2.path()).await;
    let by_events = ApplyOptions {
        grouping: Grouping::Waiting {
            max_batches: 100,
            max_events: 50,
        },
        ..Default::default()
    };
    let r = apply_seeded(&j2, &h2, "shop.orders", &by_events, &clock(), 1)
        .await
        .unwrap();
    assert_eq!(r.commits, 5);
    assert_eq!(table_rows(&h2, "shop.orders").await, reference_of(&j2).await.rows);
    // Caught up: the next batch appended is committed alone, at once.
    let text = generate::ndjson(3, 40, 1, 220);
    let more = text.lines().skip(200).collect::<Vec<_>>().join("\n") + "\n";
    let opts = crate::apply::tests::append_opts(20, "more");
    crate::apply::tests::append_with(&j, &more, &opts).await.unwrap();
    let r = apply_all(&j, &handle, &SeededIds::new(2)).await;
    assert_eq!(
        (r.started_after_position, r.applied_to_position, r.commits),
        (200, 220, 1)
    );
    assert_eq!(checkpoint_positions(&j).await, [80, 160, 200, 220]);
    assert_eq!(table_rows(&handle, "shop.orders").await, reference_of(&j).await.rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_object_without_its_manifest_is_not_a_batch_to_group() {
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &generate::ndjson(5, 40, 1, 60), 20).await;
    // An append stopped between its event object and its manifest: the object of sequence 4
    // is there, its manifest is not.
    let key = tidemark_journal::paths::event_key(4, &"ab".repeat(32));
    j.store
        .put(
            &key,
            bytes::Bytes::from_static(b"not yet a batch"),
            tidemark_journal::store::PutMode::Create,
        )
        .await
        .unwrap();
    let handle = catalog_in(dir.path()).await;
    let r = apply_all(&j, &handle, &SeededIds::new(1)).await;
    assert_eq!(
        (r.applied_to_position, r.commits),
        (60, 1),
        "the three committed batches, once"
    );
    assert_eq!(table_rows(&handle, "shop.orders").await, reference_of(&j).await.rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_between_a_grouped_commit_and_its_checkpoint_changes_nothing() {
    let text = generate::ndjson(5, 30, 1, 200);
    let dir = tempfile::tempdir().unwrap();
    let j = journal_in(&dir.path().join("journal"), &text, 20).await;
    let handle = catalog_in(dir.path()).await;
    let crash = ApplyOptions {
        failpoint: Some("after-commit:2".into()),
        ..small()
    };
    let err = apply_seeded(&j, &handle, "shop.orders", &crash, &clock(), 2)
        .await
        .unwrap_err();
    assert!(matches!(err, ApplyError::Failpoint(_)), "{err}");
    assert_eq!(
        checkpoint_positions(&j).await,
        [80],
        "the second group has no checkpoint yet"
    );
    let t = table::load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(
        crate::apply::applied_state(&t).position,
        160,
        "the second group is committed"
    );
    // The re-run writes the missing checkpoint and goes on from 160, grouped again.
    let r = apply_seeded(&j, &handle, "shop.orders", &small(), &clock(), 3)
        .await
        .unwrap();
    assert!(r.recovered_checkpoint);
    assert_eq!((r.started_after_position, r.commits), (160, 1));
    assert_eq!(checkpoint_positions(&j).await, [80, 160, 200]);
    // The same rows as an uninterrupted run, one batch a commit.
    let other = tempfile::tempdir().unwrap();
    let j2 = journal_in(&other.path().join("journal"), &text, 20).await;
    let h2 = catalog_in(other.path()).await;
    let one = ApplyOptions {
        grouping: Grouping::Fixed(1),
        ..Default::default()
    };
    apply(&j2, &h2, "shop.orders", &one, &clock(), &SeededIds::new(4), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        table_rows(&handle, "shop.orders").await,
        table_rows(&h2, "shop.orders").await
    );
}

/// A journal of 60 events (batches of 10 up to position 44, then 45..=54 and 55..=60) whose
/// position 45 has the key and version of an event of positions 11..=40 (the returned position; its key has no later event
/// before 45, so the table still holds that version) with another payload, written past the
/// append's conflict check.
async fn journal_with_conflict(dir: &std::path::Path) -> (Journal, u64) {
    let text = generate::ndjson(7, 30, 1, 60);
    let lines: Vec<&str> = text.lines().collect();
    let key = |l: &str| serde_json::from_str::<serde_json::Value>(l).unwrap()["order_id"].clone();
    let i = (10..40)
        .find(|&i| !lines[i + 1..44].iter().any(|l| key(l) == key(lines[i])))
        .expect("a key without a later event");
    let j = journal_in(dir, &(lines[..44].join("\n") + "\n"), 10).await;
    let mut twin: serde_json::Value = serde_json::from_str(lines[i]).unwrap();
    twin["position"] = 45.into();
    twin["status"] = if twin["status"] == "paid" { "shipped" } else { "paid" }.into();
    let rest = format!("{twin}\n{}\n", lines[45..].join("\n"));
    let opts = crate::apply::tests::append_opts(10, "late");
    tidemark_journal::writer::append_with_window(&j, rest.as_bytes(), &opts, 0, &clock(), &mut |_| {})
        .await
        .unwrap();
    (j, i as u64 + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_in_a_group_stops_where_one_batch_a_commit_stops() {
    let mut outcomes = Vec::new();
    let mut earlier = 0;
    for grouping in [Grouping::Fixed(1), Grouping::default()] {
        let dir = tempfile::tempdir().unwrap();
        let (j, p) = journal_with_conflict(&dir.path().join("journal")).await;
        earlier = p;
        let handle = catalog_in(dir.path()).await;
        let opts = ApplyOptions {
            grouping,
            ..Default::default()
        };
        let err = apply_seeded(&j, &handle, "shop.orders", &opts, &clock(), 5)
            .await
            .unwrap_err();
        assert!(err.is_conflict(), "{grouping:?}: {err}");
        let t = table::load_table(&handle, "shop.orders").await.unwrap();
        outcomes.push((
            err.to_string(),
            crate::apply::applied_state(&t).position,
            checkpoint_positions(&j).await.last().copied(),
            table_rows(&handle, "shop.orders").await,
        ));
    }
    let (one, grouped) = (&outcomes[0], &outcomes[1]);
    assert!(
        one.0.contains("event at position 45") && one.0.contains(&format!("written by position {earlier}")),
        "{}",
        one.0
    );
    // Batches 1..=5 (positions 1..=44) applied and checkpointed, the one of position 45 not.
    assert_eq!((one.1, one.2), (44, Some(44)));
    assert_eq!(grouped, one, "the same message, position, checkpoint and rows");
}
