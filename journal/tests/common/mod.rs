//! Stores for the journal tests: a fresh local folder, or a fresh versioned bucket on the real
//! S3-protocol server that `sandbox/test.sh` starts.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tidemark_journal::store::ObjectStore;
use tidemark_journal::store::s3::{S3Options, S3Store, create_test_bucket};

pub fn local() -> (Arc<dyn ObjectStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = tidemark_journal::store::local::LocalStore::open(dir.path()).unwrap();
    (Arc::new(store), dir)
}

/// A fresh versioned bucket; `None` only when TIDEMARK_SKIP_S3=1.
pub async fn s3() -> Option<Arc<dyn ObjectStore>> {
    if std::env::var("TIDEMARK_SKIP_S3").is_ok_and(|v| v == "1") {
        eprintln!("S3 tests skipped (TIDEMARK_SKIP_S3=1)");
        return None;
    }
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "the S3 tests need a real S3-protocol server: run the tests with `bash sandbox/test.sh` (or set TIDEMARK_SKIP_S3=1)"
    );
    static N: AtomicU32 = AtomicU32::new(0);
    let bucket = format!("tm-journal-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let opts = S3Options::from_env();
    create_test_bucket(&opts, &bucket, true).await.unwrap();
    let store = S3Store::from_url(&format!("{bucket}/journal"), opts).await.unwrap();
    Some(Arc::new(store))
}

/// Runs a scenario on a local folder and on S3.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local() {
                let (store, _dir) = super::common::local();
                super::$name(store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn s3() {
                if let Some(store) = super::common::s3().await {
                    super::$name(store).await
                }
            }
        }
    )*};
}
