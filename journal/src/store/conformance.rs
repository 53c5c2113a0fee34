//! The conformance suite of the object-store contract (see [`super`]). Every backend's tests call
//! [`run_all`] on a fresh, empty store; each check is also public so that a failure names it.

use std::sync::Arc;

use bytes::Bytes;

use super::faulty::FaultyStore;
use super::{ObjectStore, PutMode, StoreError, list_all, put_resolved};

/// Runs every check in order on an empty store.
pub async fn run_all(store: Arc<dyn ObjectStore>) {
    put_get_roundtrip(store.as_ref()).await;
    get_missing_is_not_found(store.as_ref()).await;
    versions_are_kept_and_readable(store.as_ref()).await;
    create_only_refuses_existing(store.as_ref()).await;
    cas_refuses_stale_etag(store.as_ref()).await;
    create_race_has_one_winner(store.clone(), 16).await;
    cas_race_has_one_winner(store.clone(), 16).await;
    list_is_sorted_and_paginated(store.as_ref()).await;
    delete_adds_marker_and_keeps_versions(store.as_ref()).await;
    delete_version_removes_it(store.as_ref()).await;
}

pub async fn put_get_roundtrip(store: &dyn ObjectStore) {
    let put = store
        .put("rt/a.bin", Bytes::from_static(b"hello"), PutMode::Overwrite)
        .await
        .expect("put");
    let version = put.version_id.clone().expect("versioned store returns a version id");
    let got = store.get("rt/a.bin", None).await.expect("get");
    assert_eq!(&got.body[..], b"hello");
    assert_eq!(got.meta.size, 5);
    assert_eq!(got.meta.etag, put.etag);
    assert_eq!(got.meta.version_id.as_deref(), Some(version.as_str()));
    let head = store.head("rt/a.bin", None).await.expect("head");
    assert_eq!(head.size, 5);
    assert_eq!(head.etag, put.etag);
    let by_version = store.get("rt/a.bin", Some(&version)).await.expect("get by version");
    assert_eq!(&by_version.body[..], b"hello");
}

pub async fn get_missing_is_not_found(store: &dyn ObjectStore) {
    let err = store.get("missing/none", None).await.unwrap_err();
    assert!(err.is_not_found(), "expected NotFound, got {err:?}");
    assert!(err.to_string().contains("missing/none"), "error names the key: {err}");
    let err = store.head("missing/none", None).await.unwrap_err();
    assert!(err.is_not_found(), "expected NotFound from head, got {err:?}");
}

pub async fn versions_are_kept_and_readable(store: &dyn ObjectStore) {
    let v1 = store
        .put("ver/k", Bytes::from_static(b"one"), PutMode::Overwrite)
        .await
        .unwrap();
    let v2 = store
        .put("ver/k", Bytes::from_static(b"two"), PutMode::Overwrite)
        .await
        .unwrap();
    let (v1, v2) = (v1.version_id.unwrap(), v2.version_id.unwrap());
    assert_ne!(v1, v2);
    assert_eq!(&store.get("ver/k", None).await.unwrap().body[..], b"two");
    assert_eq!(&store.get("ver/k", Some(&v1)).await.unwrap().body[..], b"one");
    assert_eq!(&store.get("ver/k", Some(&v2)).await.unwrap().body[..], b"two");
    let versions = store.list_versions("ver/").await.unwrap();
    let ids: Vec<&str> = versions.iter().map(|v| v.version_id.as_str()).collect();
    assert_eq!(ids, vec![v2.as_str(), v1.as_str()], "newest first");
    assert!(versions[0].is_latest && !versions[1].is_latest);
    assert_eq!(versions[1].size, 3);
}

pub async fn create_only_refuses_existing(store: &dyn ObjectStore) {
    store
        .put("co/k", Bytes::from_static(b"first"), PutMode::Create)
        .await
        .expect("first create");
    let err = store
        .put("co/k", Bytes::from_static(b"second"), PutMode::Create)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "expected Conflict, got {err:?}");
    assert_eq!(&store.get("co/k", None).await.unwrap().body[..], b"first");
    assert_eq!(
        store.list_versions("co/k").await.unwrap().len(),
        1,
        "the refused write left no version"
    );
}

pub async fn cas_refuses_stale_etag(store: &dyn ObjectStore) {
    let first = store
        .put("cas/k", Bytes::from_static(b"1"), PutMode::Create)
        .await
        .unwrap();
    let second = store
        .put(
            "cas/k",
            Bytes::from_static(b"2"),
            PutMode::Update {
                etag: first.etag.clone(),
            },
        )
        .await
        .expect("CAS with the current etag succeeds");
    let err = store
        .put(
            "cas/k",
            Bytes::from_static(b"3"),
            PutMode::Update {
                etag: first.etag.clone(),
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { .. }),
        "stale etag must conflict: {err:?}"
    );
    let now = store.get("cas/k", None).await.unwrap();
    assert_eq!(&now.body[..], b"2");
    assert_eq!(now.meta.etag, second.etag);
    let err = store
        .put(
            "cas/absent",
            Bytes::from_static(b"x"),
            PutMode::Update { etag: first.etag },
        )
        .await
        .unwrap_err();
    assert!(
        err.is_conflict() || err.is_not_found(),
        "CAS on a missing key fails: {err:?}"
    );
}

pub async fn create_race_has_one_winner(store: Arc<dyn ObjectStore>, writers: usize) {
    race_has_one_winner(
        store,
        "race/create",
        PutMode::Create,
        "writer",
        "create-only writer",
        writers,
    )
    .await;
}

pub async fn cas_race_has_one_winner(store: Arc<dyn ObjectStore>, writers: usize) {
    let base = store
        .put("race/cas", Bytes::from_static(b"base"), PutMode::Overwrite)
        .await
        .unwrap();
    let mode = PutMode::Update { etag: base.etag };
    race_has_one_winner(store, "race/cas", mode, "controller", "CAS writer", writers).await;
}

/// `writers` puts of `key` with the same conditional `mode`, side by side, each writing
/// `"{who} {i}"`: exactly one wins, the others get Conflict, and the key holds the winner's body.
async fn race_has_one_winner(
    store: Arc<dyn ObjectStore>,
    key: &'static str,
    mode: PutMode,
    who: &'static str,
    kind: &str,
    writers: usize,
) {
    let mut tasks = Vec::new();
    for i in 0..writers {
        let (store, mode) = (store.clone(), mode.clone());
        tasks.push(tokio::spawn(async move {
            store.put(key, Bytes::from(format!("{who} {i}")), mode).await.map(|_| i)
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(i) => winners.push(i),
            Err(e) => assert!(e.is_conflict(), "losers get Conflict, got {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one {kind} wins: {winners:?}");
    let body = store.get(key, None).await.unwrap().body;
    assert_eq!(body, Bytes::from(format!("{who} {}", winners[0])));
}

pub async fn list_is_sorted_and_paginated(store: &dyn ObjectStore) {
    for i in (0..7).rev() {
        store
            .put(&format!("list/{i:03}"), Bytes::from(vec![b'x'; i]), PutMode::Overwrite)
            .await
            .unwrap();
    }
    store
        .put("listing-other", Bytes::from_static(b"no"), PutMode::Overwrite)
        .await
        .unwrap();
    let mut keys = Vec::new();
    let mut token = None;
    let mut pages = 0;
    loop {
        let page = store.list_page("list/", token.as_deref(), 3).await.unwrap();
        assert!(page.objects.len() <= 3);
        pages += 1;
        keys.extend(page.objects.iter().map(|o| o.key.clone()));
        match page.next {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    let expected: Vec<String> = (0..7).map(|i| format!("list/{i:03}")).collect();
    assert_eq!(keys, expected);
    assert!(pages >= 3, "7 keys at 3 a page take at least 3 pages");
    let all = list_all(store, "list/").await.unwrap();
    assert_eq!(all.len(), 7);
    assert_eq!(all[4].size, 4);
}

pub async fn delete_adds_marker_and_keeps_versions(store: &dyn ObjectStore) {
    let put = store
        .put("del/k", Bytes::from_static(b"kept"), PutMode::Overwrite)
        .await
        .unwrap();
    store.delete("del/k").await.unwrap();
    assert!(store.get("del/k", None).await.unwrap_err().is_not_found());
    assert!(list_all(store, "del/").await.unwrap().is_empty());
    let v = put.version_id.unwrap();
    assert_eq!(&store.get("del/k", Some(&v)).await.unwrap().body[..], b"kept");
    let versions = store.list_versions("del/").await.unwrap();
    assert_eq!(versions.len(), 2);
    assert!(versions[0].is_delete_marker && versions[0].is_latest);
    // A deleted key can be created again.
    store
        .put("del/k", Bytes::from_static(b"again"), PutMode::Create)
        .await
        .expect("create after delete");
}

pub async fn delete_version_removes_it(store: &dyn ObjectStore) {
    let v1 = store
        .put("dv/k", Bytes::from_static(b"a"), PutMode::Overwrite)
        .await
        .unwrap();
    let v2 = store
        .put("dv/k", Bytes::from_static(b"b"), PutMode::Overwrite)
        .await
        .unwrap();
    let (v1, v2) = (v1.version_id.unwrap(), v2.version_id.unwrap());
    store.delete_version("dv/k", &v1).await.unwrap();
    let err = store.get("dv/k", Some(&v1)).await.unwrap_err();
    assert!(err.is_not_found(), "deleted version is gone: {err:?}");
    assert!(err.to_string().contains(&v1), "error names the version: {err}");
    assert_eq!(&store.get("dv/k", None).await.unwrap().body[..], b"b");
    store.delete_version("dv/k", &v2).await.unwrap();
    assert!(store.get("dv/k", None).await.unwrap_err().is_not_found());
}

/// The contract's rule for unknown outcomes, through a [`FaultyStore`] over the backend: a
/// conditional write whose reply is lost (or met by its own `412` on a backend retry) is this
/// writer's, found by reading back; a refused one stays refused.
pub async fn lost_replies_are_resolved_by_reading_back(store: Arc<FaultyStore>) {
    use super::faulty::{Fault, ModeFilter, Op, Rule};
    for (i, fault) in [Fault::LostReply, Fault::LostReplyRetried].into_iter().enumerate() {
        store.set_rules(vec![Rule::new(Op::Put, fault).mode(ModeFilter::Conditional)]);
        let key = format!("lost/{i}");
        let created = put_resolved(store.as_ref(), &key, Bytes::from_static(b"one"), PutMode::Create)
            .await
            .expect("a create whose reply was lost is the writer's own");
        assert!(created.read_back, "{fault:?}: resolved by reading back");
        let updated = put_resolved(
            store.as_ref(),
            &key,
            Bytes::from_static(b"two"),
            PutMode::Update { etag: created.put.etag },
        )
        .await
        .expect("a compare-and-swap whose reply was lost is the writer's own");
        assert!(updated.read_back);
        let inner = store.inner();
        assert_eq!(&inner.get(&key, None).await.unwrap().body[..], b"two");
        assert_eq!(
            inner.list_versions(&key).await.unwrap().len(),
            2,
            "{fault:?}: nothing doubled"
        );
        let err = put_resolved(store.as_ref(), &key, Bytes::from_static(b"three"), PutMode::Create)
            .await
            .unwrap_err();
        assert!(err.is_conflict(), "{fault:?}: a real conflict stays one: {err:?}");
    }
    store.set_rules(vec![]);
}
