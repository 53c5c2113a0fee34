//! Tables for the DR tests: small appends with fixed commit times, tags and branches.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use chrono::{TimeZone, Utc};
use iceberg::spec::{SnapshotReference, SnapshotRetention};
use iceberg::table::Table;

use crate::benchdata::order_columns;
use crate::catalog::CatalogHandle;
use crate::ids::{Ids, SeededIds};
use crate::table::read::read_table;
use crate::table::{CommitStamp, TableError, arrow_schema, commit_overwrite, commit_refs, write_data_file};

/// Appends orders `n*100 .. n*100+10` at version 1 (journal position `n`), committed at
/// 1,800,000,000 + `n` seconds.
pub async fn append(handle: &CatalogHandle, table: &Table, ids: &SeededIds, n: u64) -> Table {
    try_append(handle, table, ids, n).await.unwrap()
}

/// A SQLite catalog in `dir` (made if missing) with `shop.orders` registered at `metadata`: a
/// replica's copy of the table, read where `metadata` names its files.
pub async fn register(dir: &Path, metadata: &str) -> Table {
    std::fs::create_dir_all(dir).unwrap();
    let handle = crate::table::test_support::catalog_in(dir).await;
    let ns = iceberg::NamespaceIdent::new("shop".into());
    handle.catalog().create_namespace(&ns, HashMap::new()).await.unwrap();
    handle
        .catalog()
        .register_table(&iceberg::TableIdent::new(ns, "orders".into()), metadata.to_string())
        .await
        .unwrap()
}

/// A SQLite catalog and its warehouse in `dir/src`, the primary site of a test.
pub async fn source_catalog(dir: &Path) -> CatalogHandle {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    crate::table::test_support::catalog_in(&dir.join("src")).await
}

/// Creates `name` (the orders spec) and makes one [`append`] for each of `commits`.
pub async fn table_with(
    handle: &CatalogHandle,
    name: &str,
    ids: &SeededIds,
    commits: std::ops::RangeInclusive<u64>,
) -> Table {
    let mut t = crate::table::create_or_load_table(handle, name, &tidemark_journal::spec::CompiledSpec::orders())
        .await
        .unwrap();
    for n in commits {
        t = append(handle, &t, ids, n).await;
    }
    t
}

/// One [`append`] for each of `commits` on top of `table`: the table at the last one, and the
/// metadata locations of the commits, newest first (the order a resync walk lists them).
pub async fn append_each(
    handle: &CatalogHandle,
    table: &Table,
    ids: &SeededIds,
    commits: std::ops::RangeInclusive<u64>,
) -> (Table, Vec<String>) {
    let mut t = table.clone();
    let mut locations = Vec::new();
    for n in commits {
        t = append(handle, &t, ids, n).await;
        locations.insert(0, t.metadata_location().unwrap().to_string());
    }
    (t, locations)
}

/// Records, as `replica resync` does beside `shop.orders`'s metadata files, a walk from the
/// newest of `walked` (newest first) back to `kept`, over every file of `walked`.
pub async fn record_walk(kept: &str, walked: &[String]) {
    let walk = super::resync_record::Walk {
        from: walked[0].clone(),
        walked_back_to: kept.to_string(),
        walked_over: walked.to_vec(),
    };
    super::resync_record_write::record(&HashMap::new(), "shop.orders", "the old primary", &walk)
        .await
        .unwrap();
}

/// [`append`], returning the commit's error (a lost race, for a stale `table`).
pub async fn try_append(handle: &CatalogHandle, table: &Table, ids: &SeededIds, n: u64) -> Result<Table, TableError> {
    try_append_with(handle, table, ids, n, HashMap::new()).await
}

/// [`append`] as the applier commits it: the snapshot records journal position `n`
/// (`tidemark.last-position`).
pub async fn append_at_position(handle: &CatalogHandle, table: &Table, ids: &SeededIds, n: u64) -> Table {
    let summary = HashMap::from([("tidemark.last-position".to_string(), n.to_string())]);
    try_append_with(handle, table, ids, n, summary).await.unwrap()
}

async fn try_append_with(
    handle: &CatalogHandle,
    table: &Table,
    ids: &SeededIds,
    n: u64,
    summary: HashMap<String, String>,
) -> Result<Table, TableError> {
    let keys: Vec<u64> = (n * 100..n * 100 + 10).collect();
    let mut cols = order_columns(&keys, &vec![1; keys.len()], &vec![false; keys.len()]);
    cols.push(Arc::new(Int64Array::from(vec![n as i64; keys.len()])));
    let batch = RecordBatch::try_new(arrow_schema(table).unwrap(), cols).unwrap();
    let files = write_data_file(table, &[batch], ids.uuid()).await.unwrap();
    let stamp = CommitStamp {
        id: ids.uuid(),
        at: Utc.timestamp_opt(1_800_000_000 + n as i64, 0).unwrap(),
    };
    commit_overwrite(handle, table, &[], files, summary, stamp).await
}

/// Tags the current snapshot `tag` and starts branch `branch` at it.
pub async fn tag_and_branch(handle: &CatalogHandle, table: &Table, tag: &str, branch: &str) -> Table {
    let id = table.metadata().current_snapshot_id().unwrap();
    let tag_ref = SnapshotReference::new(id, SnapshotRetention::Tag { max_ref_age_ms: None });
    let branch_ref = SnapshotReference::new(
        id,
        SnapshotRetention::Branch {
            min_snapshots_to_keep: None,
            max_snapshot_age_ms: None,
            max_ref_age_ms: None,
        },
    );
    let at = Utc
        .timestamp_millis_opt(table.metadata().last_updated_ms() + 1)
        .unwrap();
    commit_refs(
        handle,
        table,
        vec![(tag.into(), tag_ref), (branch.into(), branch_ref)],
        at,
    )
    .await
    .unwrap()
}

/// Rows of the table's current snapshot.
pub async fn row_count(table: &Table) -> Result<usize, TableError> {
    let batches = read_table(table).await?;
    Ok(batches.iter().map(RecordBatch::num_rows).sum())
}

/// Copies the folder `src` into `dst`, recursively.
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let target = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
