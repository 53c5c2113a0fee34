//! Reading a table folder's resync records (`resync_record`): every record the listing shows, the
//! single record of format 1 among them, taken together; a listed record that cannot be read is
//! an error naming it, and no record is read that the listing does not show.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;
use tidemark_journal::store::faulty::{Fault, FaultyStore, Op, Rule};
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::store::{ObjectStore, PutMode};

use super::*;
use crate::dr::head::read_metadata;
use crate::dr::rebuild::{choose_head, discover};

const DIR: &str = "shop/orders/metadata";

async fn put(store: &dyn ObjectStore, name: &str, body: Value) {
    let bytes = Bytes::from(serde_json::to_vec(&body).unwrap());
    store
        .put(&format!("{DIR}/{name}"), bytes, PutMode::Overwrite)
        .await
        .unwrap();
}

/// A metadata file named `name` whose log is `log` (oldest first).
async fn metadata(store: &dyn ObjectStore, name: &str, log: &[&str]) {
    let log: Vec<Value> = log
        .iter()
        .map(|l| json!({"metadata-file": format!("s3://b/wh/{DIR}/{l}"), "timestamp-ms": 1}))
        .collect();
    put(store, name, json!({"metadata-log": log})).await;
}

fn walk_over(names: &[&str]) -> Walk {
    let at = |n: &str| format!("s3://b/wh/{DIR}/{n}");
    Walk {
        from: at(names[0]),
        walked_back_to: at("1.metadata.json"),
        walked_over: names.iter().map(|&n| at(n)).collect(),
    }
}

fn record(format_version: u32, walks: Vec<Walk>) -> Value {
    serde_json::to_value(ResyncRecord {
        format_version,
        table: "shop.orders".into(),
        demoted_catalog: (format_version > 1).then(|| "postgres catalog pg at postgres://db/dr".into()),
        walks,
    })
    .unwrap()
}

/// One table: `1` and three branches off it, each one file longer than the last: `2c` (the head
/// once the others are out), `2b` (walked over on one side, recorded in the single record of
/// format 1), `2a`→`3a` (walked over on the other side, in its own record).
async fn folder_with_two_records() -> (Arc<dyn ObjectStore>, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    metadata(store.as_ref(), "1.metadata.json", &[]).await;
    metadata(store.as_ref(), "2c.metadata.json", &["1.metadata.json"]).await;
    metadata(store.as_ref(), "2b.metadata.json", &["1.metadata.json"]).await;
    metadata(store.as_ref(), "2a.metadata.json", &["1.metadata.json"]).await;
    metadata(
        store.as_ref(),
        "3a.metadata.json",
        &["1.metadata.json", "2a.metadata.json"],
    )
    .await;
    let legacy = walk_over(&["2b.metadata.json"]);
    put(store.as_ref(), LEGACY_RECORD_NAME, record(1, vec![legacy])).await;
    let ours = walk_over(&["3a.metadata.json", "2a.metadata.json"]);
    let name = record_name(&ours);
    put(store.as_ref(), &name, record(FORMAT_VERSION, vec![ours])).await;
    (store, dir, name)
}

async fn read_folder(store: &dyn ObjectStore) -> (TableFiles, Vec<(String, Value)>) {
    let found = discover(store, None).await.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let files = found.into_iter().next().unwrap();
    let (parsed, _) = read_metadata(store, &files).await.unwrap();
    (files, parsed)
}

#[tokio::test]
async fn every_record_of_the_folder_is_read_and_their_walks_taken_together() {
    let (store, _dir, name) = folder_with_two_records().await;
    let (files, mut parsed) = read_folder(store.as_ref()).await;
    assert_eq!(
        files.record_keys,
        [format!("{DIR}/{name}"), format!("{DIR}/{LEGACY_RECORD_NAME}")],
        "the listing finds both records, and only records"
    );
    assert_eq!(files.metadata_keys.len(), 5);
    let excluded = exclude_recorded(store.as_ref(), &files, &mut parsed).await.unwrap();
    assert_eq!(
        excluded.keys,
        ["2a", "2b", "3a"].map(|n| format!("{DIR}/{n}.metadata.json")),
        "each side's walk is excluded"
    );
    assert!(
        excluded.note.contains(&name) && excluded.note.contains(LEGACY_RECORD_NAME),
        "{}",
        excluded.note
    );
    let choice = choose_head(&parsed, None);
    assert_eq!(
        choice.head.as_deref(),
        Some(format!("{DIR}/2c.metadata.json").as_str()),
        "{choice:?}"
    );
}

#[tokio::test]
async fn without_the_other_sides_record_its_walked_over_file_ties_with_the_head() {
    // What a replica that lacks the other side's record sees (the gap a single record name left):
    // `2b` and `2c` end equally long chains, undecidable.
    let (store, _dir, _) = folder_with_two_records().await;
    store.delete(&format!("{DIR}/{LEGACY_RECORD_NAME}")).await.unwrap();
    let (files, mut parsed) = read_folder(store.as_ref()).await;
    exclude_recorded(store.as_ref(), &files, &mut parsed).await.unwrap();
    let choice = choose_head(&parsed, None);
    assert!(choice.head.is_none(), "{choice:?}");
    assert!(choice.reason.contains("undecidable"), "{choice:?}");
}

#[tokio::test]
async fn a_listed_record_that_cannot_be_read_is_an_error_naming_it() {
    let (store, _dir, name) = folder_with_two_records().await;
    let (files, mut parsed) = read_folder(store.as_ref()).await;
    let key = format!("{DIR}/{name}");
    let faulty = FaultyStore::new(
        store.clone(),
        3,
        vec![Rule::new(Op::Get, Fault::Unavailable).prefix(&key)],
    );
    let err = match exclude_recorded(&faulty, &files, &mut parsed).await {
        Err(e) => e,
        Ok(_) => panic!("an unreadable record was skipped"),
    };
    assert_eq!(faulty.injected(), 1);
    assert!(
        err.contains(&key) && err.contains("cannot read the resync record"),
        "{err}"
    );
    assert_eq!(parsed.len(), 5, "nothing excluded on a partial read");

    // Not a resync record at all: an error too, never skipped.
    put(store.as_ref(), &name, json!({"walks": "?"})).await;
    let err = match exclude_recorded(store.as_ref(), &files, &mut parsed).await {
        Err(e) => e,
        Ok(_) => panic!("an unparsable record was skipped"),
    };
    assert!(err.contains(&key) && err.contains("not a resync record"), "{err}");
}

#[tokio::test]
async fn no_record_is_read_that_the_listing_does_not_show() {
    // A store that refuses every read but of metadata files (as SeaweedFS's table buckets answer
    // 403 for any other name, a missing one too): a folder without records is read fine.
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
    metadata(store.as_ref(), "1.metadata.json", &[]).await;
    metadata(store.as_ref(), "2.metadata.json", &["1.metadata.json"]).await;
    let (files, mut parsed) = read_folder(store.as_ref()).await;
    assert!(files.record_keys.is_empty(), "{files:?}");
    let faulty = FaultyStore::new(
        store.clone(),
        3,
        vec![Rule::new(Op::Get, Fault::Unavailable).prefix(&format!("{DIR}/tidemark-"))],
    );
    let excluded = exclude_recorded(&faulty, &files, &mut parsed).await.unwrap();
    assert!(excluded.keys.is_empty() && excluded.note.is_empty());
    assert_eq!(faulty.injected(), 0, "a record key was read");
    assert_eq!(parsed.len(), 2);
}
