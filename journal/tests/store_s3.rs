//! The S3 backend against a real S3-protocol endpoint (moto in the sandbox): the whole
//! conformance suite, plus the errors a missing bucket and refused credentials produce.
//!
//! Needs `AWS_ENDPOINT_URL` (and credentials) in the environment, as `sandbox/moto.sh start`
//! prints them, and `TIDEMARK_S3_AUTH_ENDPOINT`, an endpoint that refuses those credentials, as
//! `sandbox/moto.sh start-auth` prints it; `bash sandbox/test.sh` sets everything up.
//! `TIDEMARK_SKIP_S3=1` skips these tests on a machine without an endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tidemark_journal::store::s3::{S3Options, S3Store, create_test_bucket};
use tidemark_journal::store::{ObjectStore, PutMode, StoreError, conformance};

/// The options to use, or `None` when the tests are explicitly skipped. A missing endpoint is
/// a failure rather than a silent skip: these tests are the only check of the S3 backend.
fn s3_options() -> Option<S3Options> {
    if std::env::var("TIDEMARK_SKIP_S3").as_deref() == Ok("1") {
        eprintln!("S3 tests skipped (TIDEMARK_SKIP_S3=1)");
        return None;
    }
    if std::env::var_os("AWS_ENDPOINT_URL").is_none() {
        panic!(
            "AWS_ENDPOINT_URL is not set: run the tests via `bash sandbox/test.sh` (it starts a \
             local S3 endpoint), or set TIDEMARK_SKIP_S3=1 to skip the S3 tests"
        );
    }
    Some(S3Options::from_env())
}

/// A bucket name no other test (in this process or a concurrent one) uses.
fn unique_bucket(purpose: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("tidemark-{purpose}-{}-{n}", std::process::id()).to_lowercase()
}

/// A store on a new versioned bucket named for `purpose`, under the prefix `some/prefix`.
async fn fresh_store(opts: S3Options, purpose: &str) -> (S3Store, String) {
    let bucket = unique_bucket(purpose);
    create_test_bucket(&opts, &bucket, true).await.expect("create bucket");
    let store = S3Store::from_url(&format!("{bucket}/some/prefix"), opts)
        .await
        .expect("open store");
    (store, bucket)
}

/// A store on a bucket that does not exist: a put is `NoSuchStore` naming the bucket.
async fn a_put_into_a_missing_bucket_is_no_such_store(opts: S3Options, purpose: &str) -> S3Store {
    let bucket = unique_bucket(purpose);
    let store = S3Store::from_url(&format!("{bucket}/p"), opts)
        .await
        .expect("open store");
    let err = store
        .put("k", Bytes::from_static(b"x"), PutMode::Overwrite)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NoSuchStore { .. }), "put: {err:?}");
    assert!(err.to_string().contains(&bucket), "message names the bucket: {err}");
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_store_passes_conformance() {
    let Some(opts) = s3_options() else { return };
    let (store, bucket) = fresh_store(opts, "conf").await;
    assert_eq!(store.url(), format!("s3://{bucket}/some/prefix"));
    assert_eq!(store.bucket(), bucket);
    let store = Arc::new(store);
    conformance::run_all(store.clone()).await;

    // Keys live under the prefix in the bucket, and come back relative to it.
    let raw = store
        .client()
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("some/prefix/rt/")
        .send()
        .await
        .expect("raw listing");
    let raw_keys: Vec<&str> = raw.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(raw_keys, ["some/prefix/rt/a.bin"]);

    // Refused conditional writes say which condition failed.
    let err = store
        .put("rt/a.bin", Bytes::from_static(b"y"), PutMode::Create)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("If-None-Match"), "{err}");
    let stale = PutMode::Update {
        etag: "\"0123456789abcdef\"".into(),
    };
    let err = store
        .put("rt/a.bin", Bytes::from_static(b"y"), stale)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err:?}");
    assert!(err.to_string().contains("If-Match: \"0123456789abcdef\""), "{err}");
}

#[tokio::test]
async fn missing_bucket_is_no_such_store() {
    let Some(opts) = s3_options() else { return };
    let store = a_put_into_a_missing_bucket_is_no_such_store(opts, "absent").await;
    let err = store.get("k", None).await.unwrap_err();
    assert!(matches!(err, StoreError::NoSuchStore { .. }), "get: {err:?}");
    let err = store.list_versions("").await.unwrap_err();
    assert!(matches!(err, StoreError::NoSuchStore { .. }), "list_versions: {err:?}");
}

#[tokio::test]
async fn empty_bucket_is_invalid_url() {
    let err = S3Store::from_url("/prefix", S3Options::default()).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidUrl { .. }), "{err:?}");
}

/// The endpoint that refuses the sandbox credentials (`sandbox/moto.sh start-auth`), or `None`
/// when the S3 tests are explicitly skipped. Required like `AWS_ENDPOINT_URL`.
fn auth_endpoint() -> Option<String> {
    s3_options()?;
    match std::env::var("TIDEMARK_S3_AUTH_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => Some(e),
        _ => panic!(
            "TIDEMARK_S3_AUTH_ENDPOINT is not set: run the tests via `bash sandbox/test.sh` (it \
             starts an authenticating S3 endpoint), or set TIDEMARK_SKIP_S3=1 to skip the S3 tests"
        ),
    }
}

#[tokio::test]
async fn refused_credentials_are_access_denied() {
    let Some(endpoint) = auth_endpoint() else { return };
    // The environment's credentials (test/test in the sandbox), which that server does not know.
    let opts = S3Options {
        endpoint: Some(endpoint),
        ..S3Options::from_env()
    };
    let store = S3Store::from_url("tidemark/denied", opts).await.expect("open store");
    let url = store.url();
    assert_eq!(url, "s3://tidemark/denied");
    let check = |op: &str, err: StoreError| {
        assert!(matches!(err, StoreError::AccessDenied { .. }), "{op}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&url), "{op}: message names the store: {msg}");
        assert!(
            msg.contains("check the credentials"),
            "{op}: message says what to check: {msg}"
        );
    };
    let err = store
        .put("k", Bytes::from_static(b"x"), PutMode::Overwrite)
        .await
        .unwrap_err();
    check("put", err);
    let err = store
        .put("k", Bytes::from_static(b"x"), PutMode::Create)
        .await
        .unwrap_err();
    check("put (create-only)", err);
    check("get", store.get("k", None).await.unwrap_err());
    check("head", store.head("k", None).await.unwrap_err());
    check("list_page", store.list_page("", None, 10).await.unwrap_err());
    check("list_versions", store.list_versions("").await.unwrap_err());
}

/// SeaweedFS's S3 (sandbox/seaweedfs.sh: `TIDEMARK_SEAWEED_S3_ENDPOINT`), with the
/// environment's credentials (the sandbox starts it with the same keys), or `None` when
/// TIDEMARK_SKIP_SEAWEEDFS=1. A second real server beside moto: it checks signatures.
fn seaweedfs_options() -> Option<S3Options> {
    if std::env::var("TIDEMARK_SKIP_SEAWEEDFS").as_deref() == Ok("1") {
        eprintln!("SeaweedFS tests skipped (TIDEMARK_SKIP_SEAWEEDFS=1)");
        return None;
    }
    match std::env::var("TIDEMARK_SEAWEED_S3_ENDPOINT") {
        Ok(e) if !e.trim().is_empty() => Some(S3Options {
            endpoint: Some(e),
            ..S3Options::from_env()
        }),
        _ => panic!(
            "TIDEMARK_SEAWEED_S3_ENDPOINT is not set: run the tests via `bash sandbox/test.sh` (it \
             starts SeaweedFS), or set TIDEMARK_SKIP_SEAWEEDFS=1 to skip the SeaweedFS tests"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seaweedfs_store_passes_conformance() {
    let Some(opts) = seaweedfs_options() else { return };
    let (store, _) = fresh_store(opts, "sw-conf").await;
    conformance::run_all(Arc::new(store)).await;
}

#[tokio::test]
async fn seaweedfs_missing_bucket_is_no_such_store() {
    let Some(opts) = seaweedfs_options() else { return };
    a_put_into_a_missing_bucket_is_no_such_store(opts, "sw-absent").await;
}
