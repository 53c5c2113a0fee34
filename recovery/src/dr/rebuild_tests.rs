//! Tests of the catalog rebuild: head choice on hand-made logs, discovery, and rebuilding real
//! tables (with a stray, a fork and an undecidable pair) into a fresh catalog.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use bytes::Bytes;
use chrono::{TimeZone, Utc};
use iceberg::table::Table;
use serde_json::{Value, json};
use tidemark_journal::spec::CompiledSpec;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::store::tap::{GetCounts, Tapped};
use tidemark_journal::store::{ObjectStore, PutMode};

use super::head::{FolderHead, HeadRead, choose_folder_head};
use super::rebuild::{TableFiles, TableStatus, choose_head, discover, rebuild};
use crate::benchdata::order_columns;
use crate::catalog::sql::write_stray;
use crate::dr::test_support::{append_each, record_walk};
use crate::ids::{Ids, SeededIds};
use crate::table::read::read_table;
use crate::table::test_support::catalog_in;
use crate::table::{
    CommitStamp, arrow_schema, commit_overwrite, create_or_load_table, load_table, parse_ident, write_data_file,
};

// ---- choose_head on hand-made metadata ----

fn meta(name: &str, log: &[&str]) -> (String, Value) {
    let entries: Vec<Value> = log
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"metadata-file": format!("file:///wh/shop/t/metadata/{p}"), "timestamp-ms": i}))
        .collect();
    (format!("shop/t/metadata/{name}"), json!({"metadata-log": entries}))
}

fn key(name: &str) -> String {
    format!("shop/t/metadata/{name}")
}

const F0: &str = "00000-a.metadata.json";
const F1: &str = "00001-a.metadata.json";
const F2: &str = "00002-a.metadata.json";
const F2B: &str = "00002-b.metadata.json";
const F3: &str = "00003-a.metadata.json";

#[test]
fn a_single_unnamed_file_is_the_head() {
    let files = [meta(F0, &[]), meta(F1, &[F0]), meta(F2, &[F0, F1])];
    let c = choose_head(&files, None);
    assert_eq!(c.head, Some(key(F2)));
    assert!(c.strays.is_empty() && c.refused.is_none());
    assert!(c.reason.contains("only file"), "{}", c.reason);
}

#[test]
fn a_stray_sorting_after_the_head_is_not_chosen() {
    // The head's log copied with an extra entry naming an older predecessor: it derives from F1.
    let stray = "00009-z.metadata.json";
    let files = [
        meta(F0, &[]),
        meta(F1, &[F0]),
        meta(F2, &[F0, F1]),
        meta(F3, &[F0, F1, F2]),
        meta(stray, &[F0, F1, F2, F1]),
    ];
    let c = choose_head(&files, None);
    assert_eq!(c.head, Some(key(F3)), "{}", c.reason);
    assert_eq!(c.strays, vec![key(stray)]);
}

/// Four commits and a fork at version 2 (a commit that lost its swap).
fn forked_at_2() -> [(String, Value); 5] {
    [
        meta(F0, &[]),
        meta(F1, &[F0]),
        meta(F2, &[F0, F1]),
        meta(F2B, &[F0, F1]),
        meta(F3, &[F0, F1, F2]),
    ]
}

#[test]
fn a_fork_is_resolved_by_the_chain() {
    let files = forked_at_2();
    let c = choose_head(&files, None);
    assert_eq!(c.head, Some(key(F3)));
    assert_eq!(c.strays, vec![key(F2B)]);
    assert!(c.reason.contains("fork at version 2"), "{}", c.reason);
}

#[test]
fn equal_heads_are_refused_unless_a_hint_decides() {
    let files = [
        meta(F0, &[]),
        meta(F1, &[F0]),
        meta(F2, &[F0, F1]),
        meta(F2B, &[F0, F1]),
    ];
    let c = choose_head(&files, None);
    assert_eq!(c.head, None);
    let refused = c.refused.expect("refused");
    assert!(refused.contains(F2) && refused.contains(F2B), "{refused}");
    // A hint that names neither changes nothing.
    assert!(choose_head(&files, Some(F1)).refused.is_some());

    let c = choose_head(&files, Some(&format!("s3://bucket/wh/shop/t/metadata/{F2B}")));
    assert_eq!(c.head, Some(key(F2B)), "{}", c.reason);
    assert_eq!(c.strays, vec![key(F2)]);
}

#[test]
fn a_cycle_is_refused() {
    let files = [meta(F0, &[F1]), meta(F1, &[F0])];
    let c = choose_head(&files, None);
    assert_eq!(c.head, None);
    assert!(c.refused.is_some());
}

#[tokio::test]
async fn discover_groups_by_table_and_reads_nested_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::create(dir.path()).unwrap();
    for k in [
        "shop/orders/metadata/00000-a.metadata.json",
        "shop/orders/metadata/00001-b.metadata.json",
        "shop/orders/metadata/snap-1-1-x.avro",
        "shop/orders/data/x.parquet",
        "a/b/t/metadata/00000-c.metadata.json",
        "loose/metadata/00000-d.metadata.json",
    ] {
        store
            .put(k, Bytes::from_static(b"{}"), PutMode::Overwrite)
            .await
            .unwrap();
    }
    let found = discover(&store, None).await.unwrap();
    let got: Vec<(String, usize)> = found.iter().map(|t| (t.ident(), t.metadata_keys.len())).collect();
    assert_eq!(got, vec![("a.b.t".to_string(), 1), ("shop.orders".to_string(), 2)]);
    assert_eq!(found[0].prefix, "a/b/t");
    let only = discover(&store, Some("a.b")).await.unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].namespace, "a.b");
    assert!(discover(&store, Some("a..b")).await.is_err());
}

// ---- choose_folder_head: reading only what the choice needs ----

/// A folder of hand-made metadata files in a local store, found as `discover` finds it.
async fn folder_of(files: &[(String, Value)]) -> (tempfile::TempDir, LocalStore, TableFiles) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::create(dir.path()).unwrap();
    for (k, json) in files {
        let body = Bytes::from(serde_json::to_vec(json).unwrap());
        store.put(k, body, PutMode::Overwrite).await.unwrap();
    }
    let found = discover(&store, None).await.unwrap();
    assert_eq!(found.len(), 1);
    let files = found.into_iter().next().unwrap();
    (dir, store, files)
}

/// The choice with only the needed files read, and with every file read; the two must agree.
async fn both_ways(files: &[(String, Value)], hint: Option<&str>) -> (FolderHead, FolderHead) {
    let (_dir, store, found) = folder_of(files).await;
    let needed = HeadRead {
        hint,
        ..HeadRead::default()
    };
    let lazy = choose_folder_head(&store, &found, needed).await.unwrap();
    let every = HeadRead {
        every_file: true,
        ..needed
    };
    let full = choose_folder_head(&store, &found, every).await.unwrap();
    assert_eq!(lazy.choice, full.choice, "reading fewer files changed the choice");
    assert_eq!(lazy.chain, full.chain);
    assert_eq!(full.not_read, 0);
    (lazy, full)
}

#[tokio::test]
async fn a_head_whose_whole_log_names_its_ancestors_is_chosen_without_reading_them() {
    // The newest file and the one its log does not name are read, its three ancestors are not.
    let files = forked_at_2();
    let (lazy, _) = both_ways(&files, None).await;
    assert_eq!(lazy.choice.head, Some(key(F3)));
    assert_eq!(lazy.choice.strays, vec![key(F2B)]);
    assert!(
        lazy.choice.reason.contains("fork at version 2"),
        "{}",
        lazy.choice.reason
    );
    assert_eq!(lazy.not_read, 3);
    let read: Vec<&str> = lazy.parsed.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(read, vec![key(F2B), key(F3)]);
    assert_eq!(lazy.head_json(), Some(&files[4].1));
}

#[tokio::test]
async fn a_log_with_dropped_entries_makes_every_file_read() {
    // `write.metadata.previous-versions-max` = 2: each log keeps its last two entries. The head's
    // chain is only seen whole through its ancestors' logs; read from the head's log alone it
    // would look shorter than the stray's (S, F2, F1, F0) and the stray would be chosen.
    let f4 = "00004-a.metadata.json";
    let s3 = "00003-s.metadata.json";
    let files = [
        meta(F0, &[]),
        meta(F1, &[F0]),
        meta(F2, &[F0, F1]),
        meta(F3, &[F1, F2]),
        meta(s3, &[F0, F1, F2]),
        meta(f4, &[F2, F3]),
    ];
    let (lazy, _) = both_ways(&files, None).await;
    assert_eq!(lazy.choice.head, Some(key(f4)), "{}", lazy.choice.reason);
    assert_eq!(lazy.choice.strays, vec![key(s3)]);
    assert_eq!(lazy.not_read, 0);
}

#[tokio::test]
async fn a_fallback_to_every_file_reads_each_file_once() {
    // The head's log is whole, the stray's names a newer file: the head and the stray are read,
    // then every file; the two already read are not read again.
    let files = [
        meta(F0, &[]),
        meta(F1, &[F0]),
        meta(F2, &[F0, F1]),
        meta(F2B, &[F0, F3]),
        meta(F3, &[F0, F1, F2]),
    ];
    let (_dir, inner, found) = folder_of(&files).await;
    let counting = Tapped::new(Arc::new(inner), GetCounts::default());
    let folder = choose_folder_head(&counting, &found, HeadRead::default())
        .await
        .unwrap();
    assert_eq!(folder.not_read, 0);
    assert_eq!(folder.parsed.len(), 5);
    let gets = counting.tap().counts();
    assert_eq!(gets.len(), 5, "{gets:?}");
    assert!(gets.values().all(|n| *n == 1), "a file was read twice: {gets:?}");
}

#[tokio::test]
async fn every_hand_made_case_is_chosen_alike_either_way() {
    let stray = "00009-z.metadata.json";
    type Case = (Vec<(String, Value)>, Option<&'static str>);
    // two files end equally long chains: refused, or decided by a hint
    let tied = || {
        vec![
            meta(F0, &[]),
            meta(F1, &[F0]),
            meta(F2, &[F0, F1]),
            meta(F2B, &[F0, F1]),
        ]
    };
    let cases: Vec<Case> = vec![
        (vec![meta(F0, &[]), meta(F1, &[F0]), meta(F2, &[F0, F1])], None),
        // a log out of writer order (an entry twice): every file is read
        (
            vec![
                meta(F0, &[]),
                meta(F1, &[F0]),
                meta(F2, &[F0, F1]),
                meta(F3, &[F0, F1, F2]),
                meta(stray, &[F0, F1, F2, F1]),
            ],
            None,
        ),
        (tied(), None),
        (tied(), Some(F2B)),
        // a file the head's log does not name logs a newer file: every file is read
        (
            vec![
                meta(F0, &[]),
                meta(F1, &[F0]),
                meta(F2, &[F0, F1]),
                meta(F2B, &[F0, F3]),
                meta(F3, &[F0, F1, F2]),
            ],
            None,
        ),
        // the first file expired: the log no longer starts at version 0
        (
            vec![meta(F1, &[F0]), meta(F2, &[F0, F1]), meta(F3, &[F0, F1, F2])],
            None,
        ),
    ];
    for (files, hint) in &cases {
        both_ways(files, *hint).await;
    }
}

#[tokio::test]
async fn an_ancestor_the_whole_log_names_is_trusted_unread_and_read_when_asked() {
    // F0 was edited by hand to name F1, a newer file (no writer does that): the full read sees
    // the cycle and refuses; reading only what the choice needs trusts F0 as the head's log
    // describes it and chooses F1. Readers that must see every file ask for it.
    let files = [meta(F0, &[F1]), meta(F1, &[F0])];
    let (_dir, store, found) = folder_of(&files).await;
    let lazy = choose_folder_head(&store, &found, HeadRead::default()).await.unwrap();
    assert_eq!((lazy.choice.head, lazy.not_read), (Some(key(F1)), 1));
    let every = HeadRead {
        every_file: true,
        ..HeadRead::default()
    };
    let full = choose_folder_head(&store, &found, every).await.unwrap();
    assert_eq!(full.choice.head, None);
    assert!(full.choice.refused.unwrap().contains("cycle"));
}

#[tokio::test]
async fn a_newest_file_that_does_not_parse_makes_every_file_read_and_refuses() {
    let (dir, store, _) = folder_of(&[meta(F0, &[]), meta(F1, &[F0]), meta(F2, &[F0, F1])]).await;
    store
        .put(&key(F3), Bytes::from_static(b"{ torn"), PutMode::Overwrite)
        .await
        .unwrap();
    let found = discover(&store, None).await.unwrap().remove(0);
    let folder = choose_folder_head(&store, &found, HeadRead::default()).await.unwrap();
    assert_eq!(folder.not_read, 0);
    assert_eq!(folder.choice.head, Some(key(F2)));
    let unknown = folder.unparsable_off_chain();
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert_eq!(unknown[0].0, key(F3), "{unknown:?}");
    drop(dir);
}

#[tokio::test]
async fn a_head_that_is_json_but_not_iceberg_metadata_fails_its_table_and_registers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let warehouse = dir.path().join("warehouse");
    let store = LocalStore::create(&warehouse).unwrap();
    let (k, json) = meta(F0, &[]);
    store
        .put(&k, Bytes::from(serde_json::to_vec(&json).unwrap()), PutMode::Overwrite)
        .await
        .unwrap();
    let report = rebuild(&warehouse.display().to_string(), &handle, None, &HashMap::new())
        .await
        .unwrap();
    let t = &report.tables[0];
    assert_eq!(t.status, TableStatus::Failed, "{t:?}");
    let error = t.error.as_deref().unwrap();
    assert!(
        error.contains(F0) && error.contains("not Iceberg table metadata"),
        "{error}"
    );
    let ident = crate::table::parse_ident("shop.t").unwrap();
    assert_eq!(handle.metadata_pointer(&ident).await.unwrap(), None);
}

// ---- rebuilding real tables ----

fn stamp(ids: &SeededIds, n: i64) -> CommitStamp {
    CommitStamp {
        id: ids.uuid(),
        at: Utc.timestamp_opt(1_800_000_000 + n, 0).unwrap(),
    }
}

/// Appends `rows` fresh orders to `table` in one commit.
async fn append(handle: &crate::catalog::CatalogHandle, table: &Table, ids: &SeededIds, n: u64) -> Table {
    let start = n * 100;
    let keys: Vec<u64> = (start..start + 10).collect();
    let mut cols = order_columns(&keys, &vec![1; keys.len()], &vec![false; keys.len()]);
    cols.push(Arc::new(Int64Array::from(vec![n as i64; keys.len()])));
    let batch = RecordBatch::try_new(arrow_schema(table).unwrap(), cols).unwrap();
    let files = write_data_file(table, &[batch], ids.uuid()).await.unwrap();
    commit_overwrite(handle, table, &[], files, HashMap::new(), stamp(ids, n as i64))
        .await
        .unwrap()
}

async fn table_with_commits(
    handle: &crate::catalog::CatalogHandle,
    name: &str,
    commits: u64,
    ids: &SeededIds,
) -> Table {
    let mut table = create_or_load_table(handle, name, &CompiledSpec::orders())
        .await
        .unwrap();
    for n in 1..=commits {
        table = append(handle, &table, ids, n).await;
    }
    table
}

async fn row_count(table: &Table) -> usize {
    let batches = read_table(table).await.unwrap();
    batches.iter().map(RecordBatch::num_rows).sum()
}

fn metadata_dir(dir: &Path, ns: &str, table: &str) -> PathBuf {
    dir.join("warehouse").join(ns).join(table).join("metadata")
}

/// The metadata file names of one version number, sorted.
fn files_at(dir: &Path, version: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{version}-")) && n.ends_with(".metadata.json"))
        .collect();
    names.sort();
    names
}

fn file_name(location: &str) -> String {
    location.rsplit('/').next().unwrap().to_string()
}

#[tokio::test]
async fn a_lost_catalog_is_rebuilt_from_the_warehouse() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(5);
    let handle = catalog_in(dir.path()).await;

    // shop.orders: 3 commits, then a stray that sorts after the head, as a failed commit leaves.
    let orders = table_with_commits(&handle, "shop.orders", 3, &ids).await;
    let orders_head = file_name(orders.metadata_location().unwrap());
    let orders_rows = row_count(&orders).await;
    assert_eq!(orders_rows, 30);
    let mdir = metadata_dir(dir.path(), "shop", "orders");
    let mut stray: Value = serde_json::from_slice(&std::fs::read(mdir.join(&orders_head)).unwrap()).unwrap();
    let v1 = files_at(&mdir, "00001").remove(0);
    stray["metadata-log"].as_array_mut().unwrap().push(json!({
        "metadata-file": format!("file://{}", mdir.join(&v1).display()),
        "timestamp-ms": 1_800_000_001_000_i64,
    }));
    let stray_name = format!("00009-{}.metadata.json", ids.uuid());
    std::fs::write(mdir.join(&stray_name), serde_json::to_vec(&stray).unwrap()).unwrap();

    // shop.forked: a writer holding a stale table dies before its swap at version 3; the
    // winner goes on.
    let forked = table_with_commits(&handle, "shop.forked", 2, &ids).await;
    let winner = append(&handle, &forked, &ids, 3).await;
    write_stray(&forked, "a writer one commit behind").await.unwrap();
    let forked_head = append(&handle, &winner, &ids, 4).await;
    let forked_head = file_name(forked_head.metadata_location().unwrap());
    let fdir = metadata_dir(dir.path(), "shop", "forked");
    let at_3 = files_at(&fdir, "00003");
    assert_eq!(at_3.len(), 2, "{at_3:?}");
    let winner_3 = file_name(winner.metadata_location().unwrap());
    let loser_3 = at_3.iter().find(|n| **n != winner_3).unwrap().clone();

    // other.tied: the same stray with nothing after it: undecidable.
    let tied = table_with_commits(&handle, "other.tied", 1, &ids).await;
    let tied_winner = append(&handle, &tied, &ids, 2).await;
    let tied_winner = file_name(tied_winner.metadata_location().unwrap());
    write_stray(&tied, "a writer one commit behind").await.unwrap();

    // Lose the catalog.
    drop((orders, forked, winner, tied, handle));
    for f in ["catalog.db", "catalog.db-wal", "catalog.db-shm", "catalog.db-journal"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    let handle = catalog_in(dir.path()).await;
    let warehouse = dir.path().join("warehouse").display().to_string();

    let report = rebuild(&warehouse, &handle, None, &HashMap::new()).await.unwrap();
    let by_name: HashMap<&str, _> = report.tables.iter().map(|t| (t.table.as_str(), t)).collect();
    assert_eq!(report.format_version, 1);
    assert_eq!(report.totals.tables, 3);
    assert_eq!(report.totals.registered, 2);
    assert_eq!(report.totals.refused, 1);
    assert!(!report.is_complete());

    // (a) the stray is not chosen and is reported.
    let o = by_name["shop.orders"];
    assert_eq!(o.status, TableStatus::Registered, "{o:?}");
    let want = format!("file://{}", mdir.join(&orders_head).display());
    assert_eq!(o.metadata_file.as_deref(), Some(want.as_str()));
    assert_eq!(o.strays, vec![format!("shop/orders/metadata/{stray_name}")]);
    assert!(o.warning.is_none(), "{:?}", o.warning);

    // (b) the fork is resolved by the chain.
    let f = by_name["shop.forked"];
    assert_eq!(f.status, TableStatus::Registered, "{f:?}");
    assert!(f.metadata_file.as_deref().unwrap().ends_with(&forked_head));
    assert_eq!(f.strays, vec![format!("shop/forked/metadata/{loser_3}")]);
    assert!(f.reason.contains("fork at version 3"), "{}", f.reason);
    // Of its six files only the head and the loser were read: the head's log names the rest.
    let in_folder = std::fs::read_dir(&fdir).unwrap().filter(|e| {
        e.as_ref()
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".metadata.json")
    });
    assert_eq!(in_folder.count(), 6);
    assert_eq!(f.metadata_files_read, 2, "{f:?}");

    // (c) the undecidable table is refused, naming both files; the others went on.
    let t = by_name["other.tied"];
    assert_eq!(t.status, TableStatus::Refused);
    let refused = t.refused.as_deref().unwrap();
    let at_2 = files_at(&metadata_dir(dir.path(), "other", "tied"), "00002");
    assert_eq!(at_2.len(), 2, "{at_2:?}");
    assert!(at_2.iter().all(|n| refused.contains(n.as_str())), "{refused}");
    assert!(at_2.contains(&tied_winner));
    assert!(t.metadata_file.is_none());
    assert!(
        !handle
            .catalog()
            .table_exists(&parse_ident("other.tied").unwrap())
            .await
            .unwrap()
    );

    // (d) the rebuilt table loads and reads the same rows.
    let reloaded = load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(reloaded.metadata_location(), Some(want.as_str()));
    assert_eq!(row_count(&reloaded).await, orders_rows);
    let reloaded = load_table(&handle, "shop.forked").await.unwrap();
    assert_eq!(row_count(&reloaded).await, 40);

    // Again, with the expected head of the tied table: the rest is already there.
    let hints = HashMap::from([("other.tied".to_string(), tied_winner.clone())]);
    let again = rebuild(&warehouse, &handle, None, &hints).await.unwrap();
    assert_eq!(again.totals.already_registered, 2, "{again:?}");
    assert_eq!(again.totals.registered, 1);
    assert!(again.is_complete());
    let tied = load_table(&handle, "other.tied").await.unwrap();
    assert_eq!(file_name(tied.metadata_location().unwrap()), tied_winner);
    assert_eq!(row_count(&tied).await, 20);

    // A pointer that differs from the chosen head is a conflict and is left alone.
    let ident = parse_ident("shop.orders").unwrap();
    let older = format!("file://{}", mdir.join(&v1).display());
    assert!(handle.swap_metadata_pointer(&ident, &want, &older).await.unwrap());
    let third = rebuild(&warehouse, &handle, Some("shop"), &HashMap::new())
        .await
        .unwrap();
    assert_eq!(third.totals.tables, 2);
    let o = third.tables.iter().find(|t| t.table == "shop.orders").unwrap();
    assert_eq!(o.status, TableStatus::Conflict);
    assert_eq!(o.existing_pointer.as_deref(), Some(older.as_str()));
    assert_eq!(handle.metadata_pointer(&ident).await.unwrap(), Some(older));
    let json = serde_json::to_value(&third).unwrap();
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["tables"][1]["status"], "conflict");
}

/// A resync's record (`resync_record`) keeps the files it walked over out of the head choice: the
/// walked-over branch is the longest chain here, and without the record it would be chosen.
#[tokio::test]
async fn files_a_resync_walked_over_are_never_the_rebuilt_head() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(8);
    let handle = catalog_in(dir.path()).await;
    let kept = table_with_commits(&handle, "shop.orders", 2, &ids).await;
    let kept_location = kept.metadata_location().unwrap().to_string();
    let kept_rows = row_count(&kept).await;
    let (walked_head, walked) = append_each(&handle, &kept, &ids, 3..=4).await;
    record_walk(&kept_location, &walked).await;

    drop((kept, walked_head, handle));
    for f in ["catalog.db", "catalog.db-wal", "catalog.db-shm", "catalog.db-journal"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    let handle = catalog_in(dir.path()).await;
    let warehouse = dir.path().join("warehouse").display().to_string();
    let report = rebuild(&warehouse, &handle, None, &HashMap::new()).await.unwrap();
    let t = &report.tables[0];
    assert_eq!(t.status, TableStatus::Registered, "{t:?}");
    assert_eq!(t.metadata_file.as_deref(), Some(kept_location.as_str()), "{t:?}");
    assert_eq!(t.strays.len(), 2, "{t:?}");
    assert!(t.reason.contains("walked over by replica resync"), "{}", t.reason);
    let table = load_table(&handle, "shop.orders").await.unwrap();
    assert_eq!(row_count(&table).await, kept_rows);
}
