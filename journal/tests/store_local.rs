//! The local-folder backend passes the conformance suite, and its conditional writes hold between
//! processes (this test binary re-runs itself as the racing child processes).

use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::store::{ObjectStore, PutMode, conformance};

#[tokio::test]
async fn local_store_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(Arc::new(LocalStore::open(dir.path()).unwrap())).await;
}

#[tokio::test]
async fn missing_folder_is_refused_with_its_name() {
    let err = LocalStore::open("/nonexistent/tidemark-journal").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/tidemark-journal"), "{err}");
}

#[tokio::test]
async fn plain_files_written_by_other_tools_are_unversioned_objects() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("warehouse/t")).unwrap();
    std::fs::write(dir.path().join("warehouse/t/data.parquet"), b"abc").unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let got = store.get("warehouse/t/data.parquet", None).await.unwrap();
    assert_eq!(&got.body[..], b"abc");
    assert_eq!(got.meta.version_id.as_deref(), Some("null"));
    let err = store
        .put("warehouse/t/data.parquet", Bytes::from_static(b"x"), PutMode::Create)
        .await
        .unwrap_err();
    assert!(err.is_conflict());
    let versions = store.list_versions("warehouse/").await.unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].version_id, "null");
}

/// In a child process: one create-only put; exit 0 if it won, 10 if it lost.
#[tokio::test]
async fn child_create_only_writer() {
    let (Ok(root), Ok(id)) = (std::env::var("TIDEMARK_CHILD_ROOT"), std::env::var("TIDEMARK_CHILD_ID")) else {
        return; // not a child run
    };
    let store = LocalStore::open(&root).unwrap();
    match store.put("race/key", Bytes::from(id), PutMode::Create).await {
        Ok(_) => std::process::exit(0),
        Err(e) if e.is_conflict() => std::process::exit(10),
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn create_only_is_atomic_between_processes() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(&exe)
                .args(["--exact", "child_create_only_writer", "--nocapture", "--test-threads=1"])
                .env("TIDEMARK_CHILD_ROOT", dir.path())
                .env("TIDEMARK_CHILD_ID", format!("process {i}"))
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<i32> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap().status.code().unwrap())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == 0).count(),
        1,
        "exactly one process wins: {codes:?}"
    );
    assert!(
        codes.iter().all(|c| *c == 0 || *c == 10),
        "losers report a conflict: {codes:?}"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let versions = rt.block_on(store.list_versions("race/")).unwrap();
    assert_eq!(versions.len(), 1, "losers left no version");
}

/// The finding: `replica copy` of a local folder copied the bookkeeping (`.tidemark/versions/…/
/// .lock`) of a store opened on one of its subfolders. Bookkeeping at any depth is not listed.
#[tokio::test]
async fn bookkeeping_of_a_nested_store_is_never_listed() {
    let dir = tempfile::tempdir().unwrap();
    let nested = LocalStore::create(dir.path().join("ns/t")).unwrap();
    nested
        .put("data/a.parquet", Bytes::from_static(b"a"), PutMode::Create)
        .await
        .unwrap();
    let root = LocalStore::open(dir.path()).unwrap();
    let keys: Vec<String> = tidemark_journal::store::list_all(&root, "")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(keys, vec!["ns/t/data/a.parquet".to_string()]);
    let under: Vec<String> = tidemark_journal::store::list_all(&root, "ns/t/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(under, keys);
}
