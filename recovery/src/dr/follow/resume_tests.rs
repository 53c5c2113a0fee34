//! A follower stopped between its catalog writes and its state write (a crash, `kill -9`): the
//! next run finds the DR pointers at its own writes, adopts them and goes on; nothing is reported
//! as someone else's change and nothing moves backwards; and what is not adopted (a commit on the
//! DR table itself).

use chrono::Duration;

use super::tests::{Site, clock, once};
use super::*;
use crate::dr::follow_state::TableStatus;
use crate::dr::test_support::{append, table_with};
use crate::table::parse_ident;

#[tokio::test]
async fn a_run_stopped_before_its_state_is_written_is_resumed_not_reported_as_a_conflict() {
    let site = Site::new().await;
    let mut orders = table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    table_with(&site.src, "shop.other", &site.ids, 1..=1).await;
    site.replicate(true);
    let c = clock();
    let opts = site.opts(FollowMode::Strict, "f1");
    let (dr, state) = site.dr("dr").await;
    let first = once(&opts, &dr, &state, &c).await.unwrap();

    // The primary moves on; a cycle moves the DR pointers and stops before writing its state
    // (the lease is left held, as a killed process leaves it).
    orders = append(&site.src, &orders, &site.ids, 3).await;
    site.replicate(true);
    let lease = Lease::acquire(state.clone(), "f1", "dr", Duration::minutes(10), &c)
        .await
        .unwrap();
    let lost = cycle(&opts, &dr, &lease, Some(&first), 2, &c).await.unwrap();
    let ident = parse_ident("shop.orders").unwrap();
    let moved = dr.metadata_pointer(&ident).await.unwrap();
    assert_eq!(moved, lost.table("shop.orders").unwrap().registered_metadata);
    assert_ne!(moved, first.table("shop.orders").unwrap().registered_metadata);

    // The next run reads the old state, finds its own write and adopts it.
    let next = once(&opts, &dr, &state, &c).await.unwrap();
    let t = next.table("shop.orders").unwrap();
    assert_eq!(t.status, TableStatus::Ok, "{t:?}");
    assert!(t.head_choice.contains("adopted"), "{}", t.head_choice);
    assert_eq!(t.registered_metadata, moved);
    assert_eq!(
        t.verified_metadata.as_deref().map(rebuild::file_name),
        orders.metadata_location().map(rebuild::file_name)
    );
    assert_eq!(next.table("shop.other").unwrap().status, TableStatus::Ok);

    // The very first run stopped the same way: no state at all, the tables registered.
    let (dr2, state2) = site.dr("dr2").await;
    let lease2 = Lease::acquire(state2.clone(), "f1", "dr2", Duration::minutes(10), &c)
        .await
        .unwrap();
    cycle(&opts, &dr2, &lease2, None, 1, &c).await.unwrap();
    let fresh = once(&opts, &dr2, &state2, &c).await.unwrap();
    for t in &fresh.tables {
        assert_eq!(t.status, TableStatus::Ok, "{t:?}");
    }

    // Someone else moving the pointer back to an older version is still a conflict.
    let older = first.table("shop.orders").unwrap().registered_metadata.clone().unwrap();
    assert!(
        dr.swap_metadata_pointer(&ident, moved.as_deref().unwrap(), &older)
            .await
            .unwrap()
    );
    let after = once(&opts, &dr, &state, &c).await.unwrap();
    assert_eq!(after.table("shop.orders").unwrap().status, TableStatus::Conflict);
    assert_eq!(
        dr.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(older.as_str())
    );
}

/// With a prefix map the follower registers only its rewrites: a commit on the DR table itself
/// (its metadata file lands beside the replica's, naming the follower's rewrite as its
/// predecessor) is someone else's change, not adopted as a replicated version of its own.
#[tokio::test]
async fn a_commit_on_the_dr_table_is_a_conflict_not_adopted() {
    let site = Site::new().await;
    table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    site.replicate(true);
    let c = clock();
    let opts = site.opts(FollowMode::Strict, "f1");
    let (dr, state) = site.dr("dr").await;
    let first = once(&opts, &dr, &state, &c).await.unwrap();
    assert_eq!(first.table("shop.orders").unwrap().status, TableStatus::Ok);

    let ident = parse_ident("shop.orders").unwrap();
    let dr_table = dr.catalog().load_table(&ident).await.unwrap();
    let theirs = append(&dr, &dr_table, &site.ids, 3).await;
    let theirs_at = theirs.metadata_location().unwrap().to_string();
    assert!(
        theirs_at.starts_with(&format!("file://{}", site.replica().display())),
        "{theirs_at}"
    );
    let next = once(&opts, &dr, &state, &c).await.unwrap();
    let t = next.table("shop.orders").unwrap();
    assert_eq!(t.status, TableStatus::Conflict, "{t:?}");
    assert!(t.reason.contains("someone else"), "{}", t.reason);
    assert_eq!(
        dr.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(theirs_at.as_str())
    );
}

/// A run killed while it wrote its rewrite of a replica file (the rewrite is written before the
/// pointer moves) leaves a torn file beside the replica's files: the next run knows it by its
/// name as its own rewrite, writes it again and moves on; the table is not held for it.
#[tokio::test]
async fn a_rewrite_torn_by_a_crash_is_written_again_not_held() {
    let site = Site::new().await;
    let mut orders = table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    site.replicate(true);
    let c = clock();
    let opts = site.opts(FollowMode::Strict, "f1");
    let (dr, state) = site.dr("dr").await;
    once(&opts, &dr, &state, &c).await.unwrap();
    orders = append(&site.src, &orders, &site.ids, 3).await;
    site.replicate(true);
    let head = rebuild::file_name(orders.metadata_location().unwrap()).to_string();
    let ident = parse_ident("shop.orders").unwrap();
    let pointer = dr.metadata_pointer(&ident).await.unwrap().unwrap();
    let folder = pointer
        .trim_start_matches("file://")
        .rsplit_once('/')
        .unwrap()
        .0
        .to_string();
    let torn = format!("{folder}/{}", crate::dr::follow::step::rewrite_name(&head).unwrap());
    std::fs::write(&torn, b"{\"format-version\": 2, \"table-uu").unwrap();

    let next = once(&opts, &dr, &state, &c).await.unwrap();
    let t = next.table("shop.orders").unwrap();
    assert_eq!(t.status, TableStatus::Ok, "{t:?}");
    assert_eq!(
        t.verified_metadata.as_deref().map(rebuild::file_name),
        Some(head.as_str())
    );
    let whole: serde_json::Value = serde_json::from_slice(&std::fs::read(&torn).unwrap()).unwrap();
    assert!(whole["metadata-log"].is_array(), "{whole}");
}
