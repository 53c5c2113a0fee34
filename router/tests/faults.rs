//! The route under lost replies, each on a local folder and on S3: the first route write and a
//! flip whose reply was lost (or met by their own `412` on a retry) succeeded, and are reported
//! so, also when another controller flipped after them; a real conflict stays one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use tidemark_journal::clock::StepClock;
use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};
use tidemark_journal::store::tap::{Tap, Tapped};
use tidemark_journal::store::{ObjectStore, PutMode, PutResult, Result, StoreError};
use tidemark_router::paths::ROUTE_KEY;
use tidemark_router::{FlipRequest, RouteError, RouteStore};

tidemark_journal::on_both!(
    bucket = "tm-router-faults",
    prefix = "routes/orders";
    lost_reply_on_init_is_own_route,
    lost_reply_on_flip_is_own_flip,
    own_flip_found_in_history_after_a_later_flip,
    stale_flip_with_lost_reply_is_still_stale,
);

fn clock() -> StepClock {
    StepClock::new(
        chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        chrono::Duration::milliseconds(1),
    )
}

fn request(table: &str) -> FlipRequest {
    FlipRequest {
        table_name: format!("ns.{table}"),
        catalog: tidemark_schemas::CatalogRef::from_legacy_uri("/tmp/catalog.db"),
        metadata_location: format!("file:///warehouse/ns/{table}/metadata/00001.metadata.json"),
        table_uuid: format!("uuid-{table}"),
        applied_position: 10,
        reason: format!("route to {table}"),
        recovery_id: Some(format!("rec-{table}")),
    }
}

/// The finding: `journal init` / the first route write with a lost reply said "a route already
/// exists" (its own).
async fn lost_reply_on_init_is_own_route(store: Arc<dyn ObjectStore>) {
    for fault in [Fault::LostReply, Fault::LostReplyRetried] {
        let f = Arc::new(FaultyStore::new(
            store.clone(),
            1,
            vec![Rule::new(Op::Put, fault).mode(ModeFilter::Create).times(1)],
        ));
        let routes = RouteStore::new(f.clone());
        let (route, _) = routes.init(request("orders"), &clock()).await.unwrap();
        assert_eq!(route.generation, 1);
        assert_eq!(f.injected(), 1);
        assert_eq!(routes.history().await.unwrap().len(), 1);
        store
            .delete_version(ROUTE_KEY, &routes.read().await.unwrap().unwrap().2)
            .await
            .unwrap();
    }
}

/// The finding: `route flip` and recover's flip with a lost reply said "another controller
/// flipped first … nothing was written" while the route was at the generation this flip wrote.
async fn lost_reply_on_flip_is_own_flip(store: Arc<dyn ObjectStore>) {
    let f = Arc::new(FaultyStore::new(store.clone(), 2, vec![]));
    let routes = RouteStore::new(f.clone());
    routes.init(request("orders"), &clock()).await.unwrap();
    for (i, fault) in [Fault::LostReply, Fault::LostReplyRetried].into_iter().enumerate() {
        f.set_rules(vec![Rule::new(Op::Put, fault).mode(ModeFilter::Update).times(1)]);
        let (route, _) = routes
            .flip_from_current(request(&format!("r{i}")), &clock())
            .await
            .unwrap();
        assert_eq!(route.generation, i as u64 + 2);
        let (current, _, _) = routes.read().await.unwrap().unwrap();
        assert_eq!(current, route);
    }
    assert_eq!(f.injected(), 2);
    assert_eq!(routes.history().await.unwrap().len(), 3, "one version per flip");
}

/// A store where the reply of the first compare-and-swap is lost and another controller flips
/// from it before the writer reads back.
struct OvertakenFlip {
    done: AtomicBool,
}

#[async_trait]
impl Tap for OvertakenFlip {
    async fn put(&self, inner: &Arc<dyn ObjectStore>, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        let first = matches!(mode, PutMode::Update { .. }) && !self.done.swap(true, Ordering::SeqCst);
        let put = inner.put(key, body, mode).await?;
        if !first {
            return Ok(put);
        }
        let other = RouteStore::new(inner.clone());
        other.flip_from_current(request("later"), &clock()).await.unwrap();
        Err(StoreError::OutcomeUnknown {
            store: inner.url(),
            op: "put",
            key: key.into(),
            detail: "reply lost".into(),
        })
    }
}

async fn own_flip_found_in_history_after_a_later_flip(store: Arc<dyn ObjectStore>) {
    let routes = RouteStore::new(Arc::new(Tapped::new(
        store.clone(),
        OvertakenFlip {
            done: AtomicBool::new(false),
        },
    )));
    routes.init(request("orders"), &clock()).await.unwrap();
    let (mine, _) = routes.flip_from_current(request("recovered"), &clock()).await.unwrap();
    assert_eq!(mine.generation, 2);
    let (current, _, _) = routes.read().await.unwrap().unwrap();
    assert_eq!((current.generation, current.table_name.as_str()), (3, "ns.later"));
    let found = routes
        .find_recovery_flip("rec-recovered", "uuid-recovered")
        .await
        .unwrap()
        .expect("the recovery's flip is in the history");
    assert_eq!(found.0, mine);
}

async fn stale_flip_with_lost_reply_is_still_stale(store: Arc<dyn ObjectStore>) {
    let f = Arc::new(FaultyStore::new(store.clone(), 3, vec![]));
    let routes = RouteStore::new(f.clone());
    let (_, etag1) = routes.init(request("orders"), &clock()).await.unwrap();
    routes.flip_from_current(request("a"), &clock()).await.unwrap();
    f.set_rules(vec![Rule::new(Op::Put, Fault::LostReply)]);
    let err = routes.flip(&etag1, 1, request("b"), &clock()).await.unwrap_err();
    assert!(matches!(err, RouteError::StaleRoute { .. }), "{err}");
    assert_eq!(routes.read().await.unwrap().unwrap().0.table_name, "ns.a");
}
