//! Failover on local folders: the follower and a writer under the old route are fenced, the
//! route flips to the DR table, and the promotion says what the DR side lacks.

use std::path::Path;

use iceberg::table::Table;
use tidemark_journal::clock::StepClock;
use tidemark_router::{Fence, RouteError};

use super::*;
use crate::dr::follow::tests::{Site, clock, once};
use crate::dr::follow::{FollowError, cycle};
use crate::dr::lease::Lease;
use crate::dr::test_support::append_at_position;
use crate::table::create_or_load_table;
use chrono::Duration;

/// `shop.orders` on the site's primary with one [`append_at_position`] for each of `positions`:
/// the primary the failover tests start from.
async fn orders_at(site: &Site, positions: &[u64]) -> Table {
    let spec = tidemark_journal::spec::CompiledSpec::orders();
    let mut t = create_or_load_table(&site.src, "shop.orders", &spec).await.unwrap();
    for &p in positions {
        t = append_at_position(&site.src, &t, &site.ids, p).await;
    }
    t
}

/// [`failover`] without the journal, over the route folders `routes`: the promotion the tests
/// ask for, naming only what differs between them.
async fn failover_routes(
    opts: &FollowOptions,
    dr: &CatalogHandle,
    state: &Arc<dyn ObjectStore>,
    routes: &[&Path],
    id: &str,
    reason: &str,
    c: &StepClock,
) -> Result<Promotion, FailoverError> {
    let routes: Vec<String> = routes.iter().map(|d| d.display().to_string()).collect();
    failover(opts, dr, state.clone(), &routes, id, reason, None, c).await
}

#[tokio::test]
async fn failover_fences_the_follower_and_the_old_writer_and_reports_the_gap() {
    let site = Site::new().await;
    let mut t = orders_at(&site, &[10, 20]).await;
    site.replicate(true);
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "follower-a");
    once(&opts, &dr, &state, &c).await.unwrap();
    // The follower keeps running (holds the lease) while the primary commits once more, whose
    // data never reaches the replica.
    let follower = Lease::acquire(state.clone(), "follower-a", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
    t = append_at_position(&site.src, &t, &site.ids, 30).await;
    site.replicate(false);

    // The route readers and the writer use, on the primary.
    let route_dir = site.dir.path().join("route");
    let routes = RouteStore::open_or_create(&route_dir.display().to_string())
        .await
        .unwrap();
    routes
        .init(
            FlipRequest {
                table_name: "shop.orders".into(),
                catalog: site.src.reference().clone(),
                metadata_location: t.metadata_location().unwrap().into(),
                table_uuid: t.metadata().uuid().to_string(),
                applied_position: 30,
                reason: "primary".into(),
                recovery_id: None,
            },
            &c,
        )
        .await
        .unwrap();
    let (writer, _) = Fence::acquire(&routes).await.unwrap();

    let p = failover_routes(&opts, &dr, &state, &[&route_dir], "failover-1", "region loss drill", &c)
        .await
        .unwrap();
    assert_eq!(p.fenced_holder.as_deref(), Some("follower-a"));
    assert_eq!(p.routes.len(), 1);
    let flip = &p.routes[0];
    assert_eq!(
        (flip.from_generation, flip.to_generation, flip.applied_position),
        (1, 2, 20)
    );
    let ident = parse_ident("shop.orders").unwrap();
    let dr_pointer = dr.metadata_pointer(&ident).await.unwrap().unwrap();
    assert_eq!(flip.to_metadata, dr_pointer);
    let route = routes.resolve().await.unwrap();
    assert_eq!(route.catalog, *dr.reference());
    let table = &p.tables[0];
    assert_eq!(table.status, TableStatus::MissingFiles);
    assert_eq!(
        (
            table.dr_position,
            table.primary_latest_position,
            table.commits_behind,
            table.positions_behind
        ),
        (Some(20), Some(30), Some(1), Some(10))
    );
    assert_eq!(table.missing_count, 1);

    // The writer that started under generation 1 is fenced; so is the follower.
    assert!(matches!(writer.check(&routes).await, Err(RouteError::Fenced { .. })));
    let err = cycle(&opts, &dr, &follower, None, 9, &c).await;
    assert!(
        matches!(err, Err(FollowError::Lease(LeaseError::Fenced { .. }))),
        "{err:?}"
    );
    assert_eq!(
        dr.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(dr_pointer.as_str())
    );
    // The promotion is recorded once: the same id again is that record, and nothing is done
    // again (no flip, no scan: the lease and the state are as they were).
    let recorded = state.get("promotions/failover-1.json", None).await.unwrap();
    let (lease_before, state_before) = (
        state.head("lease.json", None).await.unwrap().etag,
        state.head("state.json", None).await.unwrap().etag,
    );
    let again = failover_routes(&opts, &dr, &state, &[&route_dir], "failover-1", "again", &c)
        .await
        .unwrap();
    assert!(again.already_recorded);
    assert_eq!(
        Promotion {
            already_recorded: false,
            ..again
        },
        p
    );
    assert_eq!(routes.resolve().await.unwrap().generation, 2);
    assert_eq!(state.head("lease.json", None).await.unwrap().etag, lease_before);
    assert_eq!(state.head("state.json", None).await.unwrap().etag, state_before);
    let now = state.get("promotions/failover-1.json", None).await.unwrap();
    assert_eq!(now.body, recorded.body);
    // Another DR catalog's promotion under the same id is refused, naming both.
    let (other, _) = site.dr("dr-other").await;
    let err = failover_routes(&opts, &other, &state, &[], "failover-1", "again", &c)
        .await
        .unwrap_err();
    assert!(matches!(err, FailoverError::RecordedForAnother { .. }), "{err:?}");
    assert!(err.to_string().contains("--failover-id"), "{err}");
}

#[tokio::test]
async fn a_route_to_a_table_the_dr_side_lacks_flips_nothing() {
    let site = Site::new().await;
    let t = orders_at(&site, &[10]).await;
    site.replicate(true);
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let make = |name: &str| FlipRequest {
        table_name: name.into(),
        catalog: site.src.reference().clone(),
        metadata_location: t.metadata_location().unwrap().into(),
        table_uuid: t.metadata().uuid().to_string(),
        applied_position: 10,
        reason: "primary".into(),
        recovery_id: None,
    };
    let good = site.dir.path().join("route-good");
    let bad = site.dir.path().join("route-bad");
    for (dir, name) in [(&good, "shop.orders"), (&bad, "shop.gone")] {
        let r = RouteStore::open_or_create(&dir.display().to_string()).await.unwrap();
        r.init(make(name), &c).await.unwrap();
    }
    let opts = site.opts(FollowMode::Strict, "f");
    let err = failover_routes(&opts, &dr, &state, &[&good, &bad], "failover-2", "drill", &c)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FailoverError::NoDrTable { ref table, .. } if table == "shop.gone"),
        "{err:?}"
    );
    let r = RouteStore::open(&good.display().to_string()).await.unwrap();
    assert_eq!(r.resolve().await.unwrap().generation, 1);
}

/// Issue 29, case 5: the primary committed (and checkpointed) after the last replication. The
/// replica cannot see that commit, so without the journal the promotion says 0 positions behind;
/// with `--journal` it reports the primary's newest checkpoint, the real gap and that a recovery
/// must close it (the writer's `apply --route` would refuse the DR table: its checkpoints are
/// ahead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_the_journal_reports_commits_the_replica_never_saw() {
    use crate::apply::{ApplyError, ApplyOptions, apply};
    let site = Site::new().await;
    let text = tidemark_journal::generate::ndjson(5, 40, 1, 300);
    let j = crate::apply::tests::journal_in(&site.dir.path().join("journal"), &text, 50).await;
    let c = clock();
    let until = |p| ApplyOptions {
        until: Some(p),
        ..Default::default()
    };
    apply(&j, &site.src, "shop.orders", &until(100), &c, &site.ids, &mut |_| {})
        .await
        .unwrap();
    site.replicate(true);
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "follower-a");
    once(&opts, &dr, &state, &c).await.unwrap();
    // The primary goes on to 220 (commits and checkpoints); nothing of it is replicated.
    apply(&j, &site.src, "shop.orders", &until(220), &c, &site.ids, &mut |_| {})
        .await
        .unwrap();
    let p = failover(&opts, &dr, state.clone(), &[], "failover-j", "drill", Some(&j), &c)
        .await
        .unwrap();
    let t = p.tables.iter().find(|t| t.table == "shop.orders").unwrap();
    assert_eq!(t.dr_position, Some(100));
    assert_eq!(t.journal_checkpoint_position, Some(220));
    assert_eq!(t.journal_head_position, Some(300));
    assert_eq!(t.positions_behind, Some(120));
    assert_eq!(t.recover_needed, Some(true));
    // What the report warns of: the writer on the DR table is refused.
    let err = apply(
        &j,
        &dr,
        "shop.orders",
        &ApplyOptions::default(),
        &c,
        &site.ids,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ApplyError::CheckpointAhead { .. }), "{err}");
}
