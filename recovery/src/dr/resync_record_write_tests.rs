//! The resync record under concurrent writers and lost replies, on a local folder and on
//! SeaweedFS (sandbox/seaweedfs.sh; skipped with TIDEMARK_SKIP_SEAWEEDFS=1).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::store::s3::{S3Options, create_test_bucket};
use tidemark_journal::store::tap::{Tap, Tapped};
use tidemark_journal::store::{ObjectStore, PutMode, PutResult, Result};

use super::*;
use crate::dr::resync_record::{ResyncRecord, parse};

const TABLE: &str = "shop.orders";

/// The one record key the writers race on (a record of one walk is named by the walk; here they
/// share a key, as two resyncs of the same walk do).
const KEY: &str = "tidemark-resync-0123456789abcdef.json";

const DEMOTED: &str = "sqlite catalog tidemark at /sites/old.db";

fn walk(tag: &str) -> Walk {
    Walk {
        from: format!("wh/shop/orders/metadata/00003-{tag}.metadata.json"),
        walked_back_to: "wh/shop/orders/metadata/00001-a.metadata.json".into(),
        walked_over: vec![
            format!("wh/shop/orders/metadata/00003-{tag}.metadata.json"),
            format!("wh/shop/orders/metadata/00002-{tag}.metadata.json"),
        ],
    }
}

async fn read(store: &dyn ObjectStore) -> ResyncRecord {
    let got = store.get(KEY, None).await.unwrap();
    parse(KEY, &got.body).unwrap()
}

/// Another `replica resync` of the same table: before each of the first `times` conditional puts
/// of the record that reach it, it lands its own walk (the tag `other-<n>`) through the inner
/// store, as a second process between our read and our write would.
struct SecondWriter {
    times: usize,
    done: AtomicUsize,
}

impl SecondWriter {
    /// `store` with a second writer before each of the first `times` puts of the record.
    fn on(store: &Arc<dyn ObjectStore>, times: usize) -> Tapped<SecondWriter> {
        Tapped::new(
            store.clone(),
            SecondWriter {
                times,
                done: AtomicUsize::new(0),
            },
        )
    }
}

#[async_trait]
impl Tap for SecondWriter {
    async fn put(&self, inner: &Arc<dyn ObjectStore>, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        if key == KEY {
            let n = self.done.fetch_add(1, Ordering::SeqCst);
            if n < self.times {
                let theirs = walk(&format!("other-{n}"));
                record_in(inner.as_ref(), key, KEY, TABLE, DEMOTED, &theirs)
                    .await
                    .expect("the second writer records its walk");
            }
        }
        inner.put(key, body, mode).await
    }
}

/// A second resync's walk lands between our read of the record and our write, the first time
/// (the record absent: both create) and again once it exists (both If-Match the same ETag):
/// every walk is kept, none is written twice.
async fn concurrent_resyncs_never_lose_a_walk(store: Arc<dyn ObjectStore>) {
    let raced = SecondWriter::on(&store, 1);
    record_in(&raced, KEY, KEY, TABLE, DEMOTED, &walk("ours-1"))
        .await
        .unwrap();
    let rec = read(store.as_ref()).await;
    let froms: Vec<&str> = rec.walks.iter().map(|w| w.from.as_str()).collect();
    assert_eq!(froms.len(), 2, "{rec:?}");
    assert!(
        froms.iter().any(|f| f.contains("other-0")),
        "the other writer's walk was lost: {rec:?}"
    );
    assert!(froms.iter().any(|f| f.contains("ours-1")), "our walk was lost: {rec:?}");

    let raced = SecondWriter::on(&store, 1);
    record_in(&raced, KEY, KEY, TABLE, DEMOTED, &walk("ours-2"))
        .await
        .unwrap();
    let rec = read(store.as_ref()).await;
    let mut froms: Vec<String> = rec
        .walks
        .iter()
        .map(|w| w.from.rsplit('/').next().unwrap().to_string())
        .collect();
    froms.sort();
    assert_eq!(
        froms,
        [
            "00003-other-0.metadata.json",
            "00003-ours-1.metadata.json",
            "00003-ours-2.metadata.json"
        ],
        "{rec:?}"
    );
}

/// Our write reached the store but its reply was lost (or the backend's own retry of it got a
/// 412): reading back finds our walk, so it is our success, never a conflict, and it is not
/// written twice.
async fn a_lost_reply_on_our_own_write_is_our_success(store: Arc<dyn ObjectStore>) {
    for (n, fault) in [Fault::LostReply, Fault::LostReplyRetried].into_iter().enumerate() {
        let rules = vec![Rule::new(Op::Put, fault).prefix(KEY).mode(ModeFilter::Any).times(1)];
        let faulty = FaultyStore::new(store.clone(), 7, rules);
        let ours = walk(&format!("lost-{n}"));
        record_in(&faulty, KEY, KEY, TABLE, DEMOTED, &ours).await.unwrap();
        assert_eq!(faulty.injected(), 1, "{fault:?} was not injected");
        let rec = read(store.as_ref()).await;
        assert_eq!(rec.walks.len(), n + 1, "{rec:?}");
        assert_eq!(rec.walks.last(), Some(&ours), "{rec:?}");
    }
}

/// A record that another writer changes before every one of our writes: refused after
/// [`ATTEMPTS`], naming the table and the record, every walk the others wrote still there.
async fn a_record_that_keeps_changing_is_refused(store: Arc<dyn ObjectStore>) {
    let raced = SecondWriter::on(&store, usize::MAX);
    let err = record_in(
        &raced,
        KEY,
        &format!("s3://b/wh/shop/orders/metadata/{KEY}"),
        TABLE,
        DEMOTED,
        &walk("ours"),
    )
    .await
    .unwrap_err();
    assert!(err.is_contended(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(TABLE) && msg.contains(KEY) && msg.contains("again"),
        "{msg}"
    );
    let rec = read(store.as_ref()).await;
    assert_eq!(rec.walks.len(), ATTEMPTS, "{rec:?}");
}

/// Each walk gets a record of its own beside the file it started from (format 2, naming the
/// demoted catalog); the same walk again adds nothing and writes no second record.
#[tokio::test]
async fn a_walk_gets_a_record_of_its_own_and_a_rerun_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("wh/shop/orders/metadata");
    std::fs::create_dir_all(&folder).unwrap();
    let at = |n: &str| format!("{}/{n}", folder.display());
    let walk_of = |tag: &str| Walk {
        from: at(&format!("00003-{tag}.metadata.json")),
        walked_back_to: at("00001-a.metadata.json"),
        walked_over: vec![
            at(&format!("00003-{tag}.metadata.json")),
            at(&format!("00002-{tag}.metadata.json")),
        ],
    };
    let props = HashMap::new();
    let ours = walk_of("ours");
    let location = record(&props, TABLE, DEMOTED, &ours).await.unwrap().unwrap();
    assert_eq!(location, crate::dr::resync_record::record_location(&ours));
    let theirs = walk_of("theirs");
    let other = record(&props, TABLE, "postgres catalog pg at postgres://db/dr", &theirs)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(other, location, "two walks share a record");
    assert_eq!(
        record(&props, TABLE, DEMOTED, &ours).await.unwrap(),
        Some(location.clone())
    );
    let records: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tidemark-resync"))
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    let rec = parse(&location, &std::fs::read(&location).unwrap()).unwrap();
    assert_eq!(rec.format_version, 2);
    assert_eq!(rec.demoted_catalog.as_deref(), Some(DEMOTED));
    assert_eq!(rec.walks, vec![ours]);
    // Nothing walked over, nothing recorded.
    let none = Walk {
        walked_over: Vec::new(),
        ..walk_of("none")
    };
    assert_eq!(record(&props, TABLE, DEMOTED, &none).await.unwrap(), None);
}

fn local() -> (Arc<dyn ObjectStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (Arc::new(LocalStore::open(dir.path()).unwrap()), dir)
}

/// A fresh versioned bucket on SeaweedFS, opened by [`record_store`] with a catalog's S3
/// properties (endpoint and keys); `None` when skipped.
async fn seaweedfs() -> Option<Arc<dyn ObjectStore>> {
    if std::env::var("TIDEMARK_SKIP_SEAWEEDFS").is_ok_and(|v| v == "1") {
        eprintln!("skipped (TIDEMARK_SKIP_SEAWEEDFS=1)");
        return None;
    }
    let endpoint = std::env::var("TIDEMARK_SEAWEED_S3_ENDPOINT")
        .expect("TIDEMARK_SEAWEED_S3_ENDPOINT: run under sandbox/test.sh, or TIDEMARK_SKIP_SEAWEEDFS=1");
    static N: AtomicUsize = AtomicUsize::new(0);
    let bucket = format!(
        "resync-record-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let opts = S3Options {
        endpoint: Some(endpoint.clone()),
        ..S3Options::from_env()
    };
    create_test_bucket(&opts, &bucket, true).await.unwrap();
    let key = |v: &str| std::env::var(v).unwrap_or_else(|_| "test".into());
    let props = HashMap::from([
        ("s3.endpoint".to_string(), endpoint),
        ("s3.access-key-id".to_string(), key("AWS_ACCESS_KEY_ID")),
        ("s3.secret-access-key".to_string(), key("AWS_SECRET_ACCESS_KEY")),
        ("s3.region".to_string(), "us-east-1".to_string()),
    ]);
    let location = format!("s3://{bucket}/wh/shop/orders/metadata/{KEY}");
    let (store, name) = record_store(&location, &props).await.unwrap();
    assert_eq!(name, KEY);
    Some(store)
}

macro_rules! on_local_and_seaweedfs {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local() {
                let (store, _dir) = super::local();
                super::$name(store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn seaweedfs() {
                if let Some(store) = super::seaweedfs().await {
                    super::$name(store).await
                }
            }
        }
    )*};
}

on_local_and_seaweedfs!(
    concurrent_resyncs_never_lose_a_walk,
    a_lost_reply_on_our_own_write_is_our_success,
    a_record_that_keeps_changing_is_refused,
);
