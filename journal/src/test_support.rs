//! Stores for tests (feature `test-support`): a fresh local folder, or a fresh versioned bucket on
//! the real S3-protocol server that `sandbox/test.sh` starts, and [`on_both!`](crate::on_both)
//! to run one scenario on each. Used by this crate's and the router's tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::store::ObjectStore;
use crate::store::local::LocalStore;
use crate::store::s3::{S3Options, S3Store, create_test_bucket};

/// A store on a fresh temporary folder (removed when the returned guard drops).
pub fn local() -> (Arc<dyn ObjectStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    (Arc::new(store), dir)
}

/// A store under `prefix` in a fresh versioned bucket named `<bucket>-<pid>-<n>`; `None` only
/// when TIDEMARK_SKIP_S3=1.
pub async fn s3(bucket: &str, prefix: &str) -> Option<Arc<dyn ObjectStore>> {
    if std::env::var("TIDEMARK_SKIP_S3").is_ok_and(|v| v == "1") {
        eprintln!("S3 tests skipped (TIDEMARK_SKIP_S3=1)");
        return None;
    }
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "the S3 tests need a real S3-protocol server: run the tests with `bash sandbox/test.sh` (or set TIDEMARK_SKIP_S3=1)"
    );
    static N: AtomicU32 = AtomicU32::new(0);
    let bucket = format!("{bucket}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
    let opts = S3Options::from_env();
    create_test_bucket(&opts, &bucket, true).await.unwrap();
    let store = S3Store::from_url(&format!("{bucket}/{prefix}"), opts).await.unwrap();
    Some(Arc::new(store))
}

/// Runs each scenario `async fn name(store: Arc<dyn ObjectStore>)` on a local folder and on S3
/// (a bucket named after `bucket`, the store under `prefix`).
#[macro_export]
macro_rules! on_both {
    (bucket = $bucket:literal, prefix = $prefix:literal; $($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn local() {
                let (store, _dir) = $crate::test_support::local();
                super::$name(store).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn s3() {
                if let Some(store) = $crate::test_support::s3($bucket, $prefix).await {
                    super::$name(store).await
                }
            }
        }
    )*};
}
