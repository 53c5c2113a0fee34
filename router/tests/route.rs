//! Route scenarios, each on a local folder and on S3: init and flips, a stale ETag refused, many
//! controllers racing, the version history, writer fencing, and a damaged route object.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use tidemark_journal::clock::StepClock;
use tidemark_journal::store::tap::{Tap, Tapped};
use tidemark_journal::store::{ObjectStore, PutMode, PutResult};
use tidemark_router::paths::ROUTE_KEY;
use tidemark_router::{Fence, FlipRequest, RouteError, RouteStore};
use tidemark_schemas::Route;

tidemark_journal::on_both!(
    bucket = "tm-router",
    prefix = "routes/orders";
    init_then_flip_then_flip,
    missing_route_is_not_found,
    stale_etag_is_refused_and_nothing_changes,
    if_match_decides_when_the_route_moves_after_the_check,
    mismatched_generation_is_refused,
    many_controllers_race_one_wins,
    concurrent_inits_one_wins,
    history_is_newest_first_and_chained,
    fence_detects_a_moved_generation,
    corrupt_route_is_a_format_error_naming_the_key,
    a_route_put_back_to_an_older_version_is_refused_and_fences,
);

fn clock() -> StepClock {
    StepClock::new(
        chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        chrono::Duration::milliseconds(1),
    )
}

fn request(table: &str, position: u64) -> FlipRequest {
    FlipRequest {
        table_name: format!("ns.{table}"),
        catalog: tidemark_schemas::CatalogRef::from_legacy_uri("/tmp/catalog.db"),
        metadata_location: format!("file:///warehouse/ns/{table}/metadata/00001.metadata.json"),
        table_uuid: format!("uuid-{table}"),
        applied_position: position,
        reason: format!("route to {table}"),
        recovery_id: None,
    }
}

async fn current(routes: &RouteStore) -> (Route, String, String) {
    routes.read().await.unwrap().expect("a route")
}

async fn init_then_flip_then_flip(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    let clock = clock();
    let (first, etag1) = routes.init(request("orders", 100), &clock).await.unwrap();
    assert_eq!((first.generation, first.previous.as_ref()), (1, None));
    assert_eq!(first.format_version, tidemark_schemas::FORMAT_VERSION);
    assert_eq!(first.written_at, "2026-09-21T14:13:20.000000Z");
    let (read, etag, _) = current(&routes).await;
    assert_eq!((&read, &etag), (&first, &etag1));

    let mut req = request("orders_recovered", 250);
    req.recovery_id = Some("rec-1".into());
    let (second, etag2) = routes.flip(&etag1, 1, req, &clock).await.unwrap();
    assert_eq!(second.generation, 2);
    assert_eq!(
        (second.table_name.as_str(), second.applied_position),
        ("ns.orders_recovered", 250)
    );
    assert_eq!(second.recovery_id.as_deref(), Some("rec-1"));
    let prev = second.previous.as_ref().unwrap();
    assert_eq!(
        (
            prev.generation,
            prev.table_name.as_str(),
            prev.metadata_location.as_str(),
            prev.etag.as_str()
        ),
        (1, "ns.orders", first.metadata_location.as_str(), etag1.as_str())
    );

    let (third, etag3) = routes.flip_from_current(request("orders", 300), &clock).await.unwrap();
    assert_eq!(third.generation, 3);
    assert_eq!(third.previous.as_ref().unwrap().etag, etag2);
    assert_eq!(routes.resolve().await.unwrap(), third);
    assert_eq!(current(&routes).await.1, etag3);

    // A second init never replaces the route.
    let err = routes.init(request("other", 1), &clock).await.unwrap_err();
    assert!(matches!(err, RouteError::AlreadyExists { .. }), "{err:?}");
    assert!(err.to_string().contains(&routes.url()), "{err}");
    assert_eq!(current(&routes).await.0, third);
}

async fn missing_route_is_not_found(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    assert!(routes.read().await.unwrap().is_none());
    assert!(routes.history().await.unwrap().is_empty());
    let err = routes.resolve().await.unwrap_err();
    assert!(
        matches!(&err, RouteError::NotFound { route } if route.ends_with("/route.json")),
        "{err:?}"
    );
    let err = routes.flip_from_current(request("t", 1), &clock()).await.unwrap_err();
    assert!(matches!(err, RouteError::NotFound { .. }), "{err:?}");
    let err = routes
        .flip("\"some-etag\"", 1, request("t", 1), &clock())
        .await
        .unwrap_err();
    assert!(matches!(err, RouteError::NotFound { .. }), "{err:?}");
    let err = Fence::acquire(&routes).await.unwrap_err();
    assert!(matches!(err, RouteError::NotFound { .. }), "{err:?}");
    assert!(routes.read().await.unwrap().is_none(), "refusals wrote nothing");
}

async fn stale_etag_is_refused_and_nothing_changes(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    let clock = clock();
    let (_, etag1) = routes.init(request("orders", 1), &clock).await.unwrap();
    let (winner, etag2) = routes.flip(&etag1, 1, request("a", 2), &clock).await.unwrap();

    // A controller still holding generation 1.
    let err = routes.flip(&etag1, 1, request("b", 3), &clock).await.unwrap_err();
    match &err {
        RouteError::StaleRoute {
            expected_etag,
            expected_generation,
            current_generation,
            ..
        } => {
            assert_eq!((expected_etag, *expected_generation), (&etag1, 1));
            assert_eq!(*current_generation, Some(2));
        }
        other => panic!("expected StaleRoute, got {other:?}"),
    }
    assert!(err.is_conflict());
    let msg = err.to_string();
    assert!(msg.contains("another controller flipped first"), "{msg}");
    assert!(msg.contains("tidemark route show"), "{msg}");

    let (now, etag, _) = current(&routes).await;
    assert_eq!((now, etag), (winner, etag2), "the refused flip changed nothing");
    assert_eq!(
        routes.history().await.unwrap().len(),
        2,
        "the refused flip wrote no version"
    );
}

/// A store that lets another controller flip right before the first conditional route write it
/// forwards: the flip under test passes its own check and is refused by `If-Match` alone.
struct Interloper {
    fired: AtomicBool,
}

#[async_trait]
impl Tap for Interloper {
    async fn put(
        &self,
        inner: &Arc<dyn ObjectStore>,
        key: &str,
        body: Bytes,
        mode: PutMode,
    ) -> tidemark_journal::store::Result<PutResult> {
        if matches!(mode, PutMode::Update { .. }) && !self.fired.swap(true, Ordering::SeqCst) {
            let other = RouteStore::new(inner.clone());
            other
                .flip_from_current(request("interloper", 7), &clock())
                .await
                .expect("the interloper's flip");
        }
        inner.put(key, body, mode).await
    }
}

async fn if_match_decides_when_the_route_moves_after_the_check(store: Arc<dyn ObjectStore>) {
    let plain = RouteStore::new(store.clone());
    let (_, etag1) = plain.init(request("orders", 1), &clock()).await.unwrap();
    let interloper = Interloper {
        fired: AtomicBool::new(false),
    };
    let routes = RouteStore::new(Arc::new(Tapped::new(store, interloper)));
    let err = routes.flip(&etag1, 1, request("late", 2), &clock()).await.unwrap_err();
    assert!(
        matches!(
            err,
            RouteError::StaleRoute {
                expected_generation: 1,
                current_generation: Some(2),
                ..
            }
        ),
        "{err:?}"
    );
    let (now, _, _) = current(&plain).await;
    assert_eq!((now.generation, now.table_name.as_str()), (2, "ns.interloper"));
    assert_eq!(plain.history().await.unwrap().len(), 2);
}

async fn mismatched_generation_is_refused(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    let clock = clock();
    let (first, etag1) = routes.init(request("orders", 1), &clock).await.unwrap();
    // The right ETag with a generation that is not the one read: the result would not be +1.
    for generation in [0, 2, 5, u64::MAX] {
        let err = routes
            .flip(&etag1, generation, request("x", 2), &clock)
            .await
            .unwrap_err();
        assert!(matches!(err, RouteError::InvalidFlip { .. }), "{generation}: {err:?}");
    }
    let mut empty = request("x", 2);
    empty.metadata_location = String::new();
    let err = routes.flip(&etag1, 1, empty, &clock).await.unwrap_err();
    assert!(err.to_string().contains("metadata_location is empty"), "{err}");
    assert_eq!(current(&routes).await.0, first);
    assert_eq!(routes.history().await.unwrap().len(), 1);
}

async fn many_controllers_race_one_wins(store: Arc<dyn ObjectStore>) {
    const CONTROLLERS: usize = 16;
    let routes = RouteStore::new(store);
    let (first, _) = routes.init(request("orders", 1), &clock()).await.unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(CONTROLLERS));
    let tasks: Vec<_> = (0..CONTROLLERS)
        .map(|i| {
            let routes = routes.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                let (route, etag, _) = routes.read().await.unwrap().unwrap();
                // Everyone has read generation 1 before anyone flips.
                barrier.wait().await;
                let result = routes
                    .flip(
                        &etag,
                        route.generation,
                        request(&format!("t{i}"), 10 + i as u64),
                        &clock(),
                    )
                    .await;
                (i, result)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (i, Ok((route, etag))) => winners.push((i, route, etag)),
            (
                _,
                Err(RouteError::StaleRoute {
                    expected_generation: 1,
                    current_generation,
                    ..
                }),
            ) => assert!(matches!(current_generation, Some(1 | 2)), "{current_generation:?}"),
            (i, Err(e)) => panic!("controller {i}: expected StaleRoute, got {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one controller wins: {winners:?}");
    let (i, won, won_etag) = winners.pop().unwrap();
    let (now, etag, _) = current(&routes).await;
    assert_eq!((&now, &etag), (&won, &won_etag), "the stored route is the winner's");
    assert_eq!((now.generation, now.table_name), (2, format!("ns.t{i}")));
    assert_eq!(now.previous.unwrap().metadata_location, first.metadata_location);
    assert_eq!(routes.history().await.unwrap().len(), 2, "the losers wrote nothing");
}

async fn concurrent_inits_one_wins(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let routes = routes.clone();
            tokio::spawn(async move { routes.init(request(&format!("t{i}"), 1), &clock()).await })
        })
        .collect();
    let mut won = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok((route, _)) => won.push(route),
            Err(RouteError::AlreadyExists { .. }) => {}
            Err(e) => panic!("expected AlreadyExists, got {e:?}"),
        }
    }
    assert_eq!(won.len(), 1);
    assert_eq!(routes.resolve().await.unwrap(), won[0]);
}

async fn history_is_newest_first_and_chained(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    let clock = clock();
    let (_, mut etag) = routes.init(request("t1", 1), &clock).await.unwrap();
    let mut etags = vec![etag.clone()];
    for (g, table) in [(1, "t2"), (2, "t3"), (3, "t4")] {
        (_, etag) = routes.flip(&etag, g, request(table, g * 10), &clock).await.unwrap();
        etags.push(etag.clone());
    }
    let history = routes.history().await.unwrap();
    let generations: Vec<u64> = history.iter().map(|(r, _)| r.generation).collect();
    assert_eq!(generations, [4, 3, 2, 1]);
    let tables: Vec<&str> = history.iter().map(|(r, _)| r.table_name.as_str()).collect();
    assert_eq!(tables, ["ns.t4", "ns.t3", "ns.t2", "ns.t1"]);
    let (_, _, current_version) = current(&routes).await;
    assert_eq!(history[0].1, current_version);
    for pair in history.windows(2) {
        let (newer, older) = (&pair[0].0, &pair[1].0);
        let prev = newer.previous.as_ref().expect("a flipped route points back");
        assert_eq!(prev.generation, older.generation);
        assert_eq!(prev.table_name, older.table_name);
        assert_eq!(prev.metadata_location, older.metadata_location);
        assert_eq!(prev.etag, etags[older.generation as usize - 1]);
    }
    assert!(history[3].0.previous.is_none());
    let versions: std::collections::HashSet<&str> = history.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(versions.len(), 4, "distinct version ids");
}

async fn fence_detects_a_moved_generation(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store);
    let clock = clock();
    routes.init(request("orders", 1), &clock).await.unwrap();
    let (fence, route) = Fence::acquire(&routes).await.unwrap();
    assert_eq!(fence.generation, 1);
    assert_eq!(route.table_name, "ns.orders");
    fence.check(&routes).await.unwrap();
    fence.check(&routes).await.unwrap();

    routes
        .flip(&fence.etag, fence.generation, request("next", 5), &clock)
        .await
        .unwrap();
    let err = fence.check(&routes).await.unwrap_err();
    assert!(
        matches!(
            err,
            RouteError::Fenced {
                started_generation: 1,
                current_generation: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_conflict());
    assert!(err.to_string().contains("tidemark route show"), "{err}");

    let (fresh, _) = Fence::acquire(&routes).await.unwrap();
    fresh.check(&routes).await.unwrap();
    let (route, etag, version_id) = current(&routes).await;
    assert_eq!(Fence::new(&route, etag, version_id), fresh);
}

async fn corrupt_route_is_a_format_error_naming_the_key(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store.clone());
    let (good, _) = routes.init(request("orders", 1), &clock()).await.unwrap();
    let put = store
        .put(ROUTE_KEY, Bytes::from_static(b"{ not json"), PutMode::Overwrite)
        .await
        .unwrap();

    let check = |err: RouteError| match err {
        RouteError::Format {
            ref key,
            ref version_id,
            ..
        } => {
            assert_eq!(key, ROUTE_KEY);
            assert_eq!(version_id, &put.version_id);
            let msg = err.to_string();
            assert!(msg.contains("route.json") && msg.contains(&store.url()), "{msg}");
        }
        other => panic!("expected Format, got {other:?}"),
    };
    check(routes.read().await.unwrap_err());
    check(routes.resolve().await.unwrap_err());
    check(routes.history().await.unwrap_err());
    check(routes.flip_from_current(request("x", 2), &clock()).await.unwrap_err());

    // The good version stays readable by id, which is how an operator restores it.
    let versions = store.list_versions(ROUTE_KEY).await.unwrap();
    let old = store.get(ROUTE_KEY, Some(&versions[1].version_id)).await.unwrap();
    assert_eq!(serde_json::from_slice::<Route>(&old.body).unwrap(), good);
}

/// Puts the bytes of `version_id` back as the current version (a restore from version history).
async fn put_back(store: &Arc<dyn ObjectStore>, version_id: &str) {
    let old = store.get(ROUTE_KEY, Some(version_id)).await.unwrap();
    store.put(ROUTE_KEY, old.body, PutMode::Overwrite).await.unwrap();
}

async fn a_route_put_back_to_an_older_version_is_refused_and_fences(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(store.clone());
    let clock = clock();
    routes.init(request("orders", 1), &clock).await.unwrap();
    let (_, _, v1) = current(&routes).await;
    routes.flip_from_current(request("recovered", 5), &clock).await.unwrap();
    let (gen2, _, v2) = current(&routes).await;
    let (writer, _) = Fence::acquire(&routes).await.unwrap();
    assert_eq!(writer.generation, 2);

    // Generation 1 put back as the current version: readers, fences and flips refuse it.
    put_back(&store, &v1).await;
    let not_newest = |err: RouteError, other: u64| {
        assert!(
            matches!(err, RouteError::NotNewest { current_generation: 1, other_generation, .. } if other_generation == other),
            "{err:?}"
        );
        assert!(err.to_string().contains("put the newest version back"), "{err}");
    };
    not_newest(routes.resolve().await.unwrap_err(), 2);
    not_newest(Fence::acquire(&routes).await.map(|_| ()).unwrap_err(), 2);
    let versions = store.list_versions(ROUTE_KEY).await.unwrap().len();
    not_newest(
        routes
            .flip_from_current(request("elsewhere", 9), &clock)
            .await
            .unwrap_err(),
        2,
    );
    assert_eq!(
        store.list_versions(ROUTE_KEY).await.unwrap().len(),
        versions,
        "a refused flip writes nothing"
    );
    assert!(matches!(
        writer.check(&routes).await.unwrap_err(),
        RouteError::Fenced { .. }
    ));

    // A second, different "generation 2" (what a flip from the restored version wrote before):
    // the writer that started under the first one is fenced, and readers refuse it.
    let (restored, etag, _) = current(&routes).await;
    let mut twin: Route = restored.clone();
    twin.generation = 2;
    twin.table_name = "ns.elsewhere".into();
    twin.written_at = "2026-09-21T15:00:00.000000Z".into();
    twin.previous = Some(tidemark_schemas::RoutePointer {
        generation: 1,
        table_name: restored.table_name.clone(),
        metadata_location: restored.metadata_location.clone(),
        etag,
    });
    store
        .put(
            ROUTE_KEY,
            Bytes::from(serde_json::to_vec(&twin).unwrap()),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let err = writer.check(&routes).await.unwrap_err();
    assert!(
        matches!(
            err,
            RouteError::Fenced {
                started_generation: 2,
                current_generation: 2,
                ..
            }
        ),
        "same generation, another route: {err:?}"
    );
    let err = routes.resolve().await.unwrap_err();
    assert!(
        matches!(err, RouteError::NotNewest { current_generation: 2, other_generation: 2, ref other_version, .. } if other_version == &v2),
        "{err:?}"
    );

    // The way out: the first generation 2 put back; then the next flip is generation 3.
    put_back(&store, &v2).await;
    assert_eq!(routes.resolve().await.unwrap(), gen2);
    let (third, _) = routes.flip_from_current(request("next", 7), &clock).await.unwrap();
    assert_eq!(third.generation, 3);
    assert_eq!(routes.resolve().await.unwrap(), third);
}
