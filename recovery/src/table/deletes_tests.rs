//! Tables that another engine writes with merge-on-read deletes: position delete files (Parquet
//! with the reserved `file_path`/`pos` field ids, as Java and PyIceberg write them) and equality
//! delete files (iceberg-rust's `EqualityDeleteFileWriterBuilder`), each committed in a delete
//! manifest of its own. After `apply`, `fault delete` and `recover`, the table must read as
//! iceberg-rust's own scan (which honours both kinds) says, row by row: a deleted row never comes
//! back, and delete files that no longer apply are dropped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use chrono::{DateTime, Duration};
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum};
use iceberg::table::Table;
use iceberg::writer::base_writer::equality_delete_writer::{
    EqualityDeleteFileWriterBuilder, EqualityDeleteWriterConfig,
};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, DefaultLocationGenerator};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::arrow::{ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use tidemark_journal::Journal;
use tidemark_journal::clock::StepClock;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::local::LocalStore;

use crate::apply::tests::append_opts;
use uuid::Uuid;

use crate::apply::tests::{apply_all, apply_all_accepting};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::recover::snapshot::{SnapshotChoice, SnapshotSource};
use crate::recover::{RecoverOptions, recover};
use crate::rehearse::fault::delete_rows;
use crate::table::commit::commit_delete_files;
use crate::table::files::{POS_DELETE_PATH_ID, POS_DELETE_POS_ID};
use crate::table::read::{read_paths, read_table};
use crate::table::test_support::{catalog_in, scanned_versions, summary, versions_by_key};
use crate::table::{self, CommitStamp, arrow_schema, live_data_files};

#[path = "deletes_more_tests.rs"]
mod more;

const TABLE: &str = "shop.orders";

fn clock() -> StepClock {
    StepClock::new(
        DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        Duration::milliseconds(1),
    )
}

fn stamp(n: u128) -> CommitStamp {
    CommitStamp {
        id: Uuid::from_u128(0xde1e_0000_0000_4000_8000_0000_0000_0000 + n),
        at: DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
    }
}

fn ev(pos: u64, id: &str, version: i64) -> String {
    format!(
        r#"{{"position":{pos},"order_id":"{id}","order_version":{version},"customer_id":"c-{id}","status":"s{version}","amount":"{version}.50","currency":"EUR","is_deleted":false,"event_time":"2026-11-01T10:00:00Z"}}"#
    ) + "\n"
}

async fn journal_in(dir: &std::path::Path) -> Journal {
    std::fs::create_dir_all(dir).unwrap();
    let store = Arc::new(LocalStore::open(dir).unwrap());
    Journal::init(store, orders_spec(), "j-deletes".into(), &clock())
        .await
        .unwrap()
}

/// A journal in `dir/journal` and a SQLite catalog in `dir`.
async fn site(dir: &std::path::Path) -> (Journal, CatalogHandle) {
    (journal_in(&dir.join("journal")).await, catalog_in(dir).await)
}

/// `(order_id, (order_version, journal_position))` pairs as a map, as [`scanned_versions`] gives.
fn by_key(rows: &[(&str, (i64, i64))]) -> BTreeMap<String, (i64, i64)> {
    rows.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

async fn append_text(j: &Journal, text: &str) {
    let opts = append_opts(100, "deletes");
    crate::apply::tests::append_with(j, text, &opts).await.unwrap();
}

/// The data file and row position of `key` in the current snapshot.
async fn locate(table: &Table, key: &str) -> (String, u64) {
    let schema = arrow_schema(table).unwrap();
    for f in live_data_files(table).await.unwrap() {
        let name = table.identifier().to_string();
        let batches = read_paths(
            table.file_io(),
            &name,
            &[f.file_path()],
            &schema,
            None,
            &Default::default(),
        )
        .await
        .unwrap();
        let mut offset = 0u64;
        for b in batches {
            let ids = b.column_by_name("order_id").unwrap();
            let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
            if let Some(r) = (0..b.num_rows()).find(|&r| ids.value(r) == key) {
                return (f.file_path().to_string(), offset + r as u64);
            }
            offset += b.num_rows() as u64;
        }
    }
    panic!("key {key} is in no data file");
}

/// A position delete file (as Java and PyIceberg write them: `file_path`, `pos` with the
/// reserved field ids, sorted, with the path bounds) removing `rows`.
async fn position_delete(table: &Table, rows: &[(String, u64)], n: u128) -> DataFile {
    position_delete_file(table, rows, n, true).await
}

/// [`position_delete`], with the `file_path` bounds in its metadata or (`bounds` false, as some
/// writers leave them out) without.
async fn position_delete_file(table: &Table, rows: &[(String, u64)], n: u128, bounds: bool) -> DataFile {
    let field = |name: &str, t: DataType, id: i32| {
        Field::new(name, t, false)
            .with_metadata(HashMap::from([(PARQUET_FIELD_ID_META_KEY.to_string(), id.to_string())]))
    };
    let schema = Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, POS_DELETE_PATH_ID),
        field("pos", DataType::Int64, POS_DELETE_POS_ID),
    ]));
    let mut rows = rows.to_vec();
    rows.sort();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str()))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1 as i64))),
        ],
    )
    .unwrap();
    let mut bytes = Vec::new();
    let mut w = ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let path = format!("{}/data/pos-delete-{n}.parquet", table.metadata().location());
    let size = bytes.len() as u64;
    table
        .file_io()
        .new_output(&path)
        .unwrap()
        .write(bytes.into())
        .await
        .unwrap();
    let mut file = DataFileBuilder::default();
    file.content(DataContentType::PositionDeletes)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .record_count(rows.len() as u64)
        .file_size_in_bytes(size);
    if bounds {
        file.lower_bounds(HashMap::from([(POS_DELETE_PATH_ID, Datum::string(&rows[0].0))]))
            .upper_bounds(HashMap::from([(
                POS_DELETE_PATH_ID,
                Datum::string(&rows.last().unwrap().0),
            )]));
    }
    file.build().unwrap()
}

/// An equality delete file on `order_id` (field id 1) removing `keys`, written by iceberg-rust.
async fn equality_delete(table: &Table, keys: &[&str], n: u128) -> Vec<DataFile> {
    let meta = table.metadata();
    let config = EqualityDeleteWriterConfig::new(vec![1], meta.current_schema().clone()).unwrap();
    // The file holds the equality columns only: its writer gets their schema.
    let key = meta.current_schema().field_by_id(1).unwrap().clone();
    let key_schema = iceberg::spec::Schema::builder().with_fields(vec![key]).build().unwrap();
    let parquet = ParquetWriterBuilder::new(Default::default(), Arc::new(key_schema));
    let rolling = RollingFileWriterBuilder::new(
        parquet,
        512 * 1024 * 1024,
        table.file_io().clone(),
        DefaultLocationGenerator::new(meta).unwrap(),
        DefaultFileNameGenerator::new(format!("eq-delete-{n}"), None, DataFileFormat::Parquet),
    );
    let mut writer = EqualityDeleteFileWriterBuilder::new(rolling, config)
        .build(None)
        .await
        .unwrap();
    // The writer projects full rows onto the equality columns.
    let rows = read_table(table).await.unwrap();
    for b in rows {
        let ids = b.column_by_name("order_id").unwrap();
        let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
        let keep: arrow::array::BooleanArray = (0..b.num_rows()).map(|r| Some(keys.contains(&ids.value(r)))).collect();
        let b = arrow::compute::filter_record_batch(&b, &keep).unwrap();
        if b.num_rows() > 0 {
            writer.write(b).await.unwrap();
        }
    }
    writer.close().await.unwrap()
}

/// A table of keys o-1..o-6 applied from the journal, then o-2 removed by a position delete and
/// o-4 by an equality delete, committed as another engine would. Returns the table.
async fn table_with_deletes(j: &Journal, handle: &CatalogHandle) -> Table {
    let text: String = (1..=6).map(|i| ev(i, &format!("o-{i}"), 1)).collect();
    append_text(j, &text).await;
    apply_all(j, handle, &SeededIds::new(1)).await;
    let t = table::load_table(handle, TABLE).await.unwrap();
    let pos = position_delete(&t, &[locate(&t, "o-2").await], 1).await;
    let t = commit_delete_files(handle, &t, vec![pos], stamp(1)).await.unwrap();
    let eq = equality_delete(&t, &["o-4"], 2).await;
    let t = commit_delete_files(handle, &t, eq, stamp(2)).await.unwrap();
    let keys: Vec<String> = scanned_versions(&t).await.into_keys().collect();
    assert_eq!(keys, ["o-1", "o-3", "o-5", "o-6"], "iceberg-rust applies both deletes");
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_applies_position_and_equality_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    let t = table_with_deletes(&j, &handle).await;
    assert_eq!(
        versions_by_key(&read_table(&t).await.unwrap()),
        scanned_versions(&t).await,
        "tidemark reads what iceberg-rust reads"
    );
}

/// The file column the merge reads beside each row names the row's own data file, deletes
/// applied, and holds the path once per batch (a dictionary), not once per row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_column_names_each_live_rows_file_once_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    let t = table_with_deletes(&j, &handle).await;
    let (files, deletes) = crate::table::read::live_files(&t).await.unwrap();
    let schema = arrow_schema(&t).unwrap();
    let cur = crate::merge::current_schema(&schema);
    let mut seen = BTreeMap::new();
    for f in &files {
        for b in crate::table::read::read_files(&t, &[f], &schema, Some(&cur), &deletes)
            .await
            .unwrap()
        {
            let col = b.column(b.num_columns() - 1);
            let dict = col.as_any_dictionary_opt().expect("the file column is a dictionary");
            assert_eq!(dict.values().len(), 1, "one path per batch");
            let paths = arrow::compute::cast(col, &DataType::Utf8).unwrap();
            let ids = b.column_by_name("order_id").unwrap();
            for r in 0..b.num_rows() {
                let path = paths.as_any().downcast_ref::<StringArray>().unwrap().value(r);
                assert_eq!(path, f.file_path());
                let id = ids.as_any().downcast_ref::<StringArray>().unwrap().value(r);
                seen.insert(id.to_string(), path.to_string());
            }
        }
    }
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["o-1", "o-3", "o-5", "o-6"]);
    for (key, path) in &seen {
        assert_eq!(locate(&t, key).await.0, *path, "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_keeps_deleted_rows_deleted_and_drops_spent_delete_files() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    table_with_deletes(&j, &handle).await;
    // An update of o-1 rewrites the one data file (which holds o-2 and o-4 too), and a new key.
    append_text(&j, &(ev(7, "o-1", 2) + &ev(8, "o-7", 1))).await;
    apply_all_accepting(&j, &handle, &SeededIds::new(2)).await;
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let rows = scanned_versions(&t).await;
    let want = by_key(&[
        ("o-1", (2, 7)),
        ("o-3", (1, 3)),
        ("o-5", (1, 5)),
        ("o-6", (1, 6)),
        ("o-7", (1, 8)),
    ]);
    assert_eq!(rows, want, "o-2 and o-4 stay deleted");
    assert_eq!(versions_by_key(&read_table(&t).await.unwrap()), want);
    // The rewritten file carried only live rows: both delete files no longer apply.
    let s = summary(&t);
    assert_eq!(s["total-delete-files"], "0", "{s:?}");
    assert_eq!(s["removed-delete-files"], "2", "{s:?}");
    assert_eq!(s["total-records"], "5", "{s:?}");
    let data_size: u64 = live_data_files(&t)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_size_in_bytes())
        .sum();
    assert_eq!(s["total-files-size"], data_size.to_string(), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_read_over_other_writers_deletes_keeps_them_applied() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    table_with_deletes(&j, &handle).await;
    // o-2 (position-deleted) and o-4 (equality-deleted) come back as new keys; o-1 is updated.
    append_text(&j, &(ev(7, "o-1", 2) + &ev(8, "o-2", 1) + &ev(9, "o-4", 3))).await;
    let opts = crate::apply::ApplyOptions {
        merge_mode: Some(crate::apply::mor::MergeMode::MergeOnRead),
        compact_at: Some(0.0),
        on_divergence: crate::apply::OnDivergence::Continue {
            reason: "another engine's deletes".into(),
        },
        ..Default::default()
    };
    let r = crate::apply::apply(&j, &handle, TABLE, &opts, &clock(), &SeededIds::new(2), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(
        r.writes.position_deletes_written, 1,
        "only o-1's live row is replaced: {:?}",
        r.writes
    );
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let want = by_key(&[
        ("o-1", (2, 7)),
        ("o-2", (1, 8)),
        ("o-3", (1, 3)),
        ("o-4", (3, 9)),
        ("o-5", (1, 5)),
        ("o-6", (1, 6)),
    ]);
    assert_eq!(scanned_versions(&t).await, want);
    assert_eq!(versions_by_key(&read_table(&t).await.unwrap()), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_files_that_still_apply_are_kept_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    table_with_deletes(&j, &handle).await;
    // A new key only: the old file stays, and so do its deletes.
    append_text(&j, &ev(7, "o-7", 1)).await;
    apply_all_accepting(&j, &handle, &SeededIds::new(2)).await;
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let keys: Vec<String> = scanned_versions(&t).await.into_keys().collect();
    assert_eq!(keys, ["o-1", "o-3", "o-5", "o-6", "o-7"]);
    let s = summary(&t);
    assert_eq!(s["total-delete-files"], "2", "{s:?}");
    assert_eq!(
        (
            s["total-position-deletes"].as_str(),
            s["total-equality-deletes"].as_str()
        ),
        ("1", "1")
    );
    // Sizes count delete files, as Java and PyIceberg do.
    let (files, _) = crate::table::read::live_files(&t).await.unwrap();
    let data: u64 = files.iter().map(|f| f.file_size_in_bytes()).sum();
    let name = t.identifier().to_string();
    let all = crate::table::files::snapshot_files(
        t.file_io(),
        &name,
        t.metadata().current_snapshot().unwrap().manifest_list(),
        &|p| p.to_string(),
    )
    .await
    .unwrap();
    let deletes: u64 = all.deletes.iter().map(|f| f.file.file_size_in_bytes()).sum();
    assert!(deletes > 0);
    assert_eq!(s["total-files-size"], (data + deletes).to_string(), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_delete_keeps_a_position_deleted_neighbour_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    table_with_deletes(&j, &handle).await;
    let r = delete_rows(&handle, TABLE, "order_id = 'o-3'", &clock(), &SeededIds::new(5))
        .await
        .unwrap();
    assert_eq!(r.rows_deleted, 1);
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let keys: Vec<String> = scanned_versions(&t).await.into_keys().collect();
    assert_eq!(keys, ["o-1", "o-5", "o-6"], "o-2 and o-4 stay deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_from_a_snapshot_with_deletes_keeps_them_applied() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    let t = table_with_deletes(&j, &handle).await;
    let snapshot_id = t.metadata().current_snapshot_id().unwrap();
    append_text(&j, &(ev(7, "o-1", 2) + &ev(8, "o-7", 1))).await;
    let opts = RecoverOptions {
        // The snapshot holds another engine's deletes of live keys: a divergence, accepted.
        trust: crate::recover::audited::TrustOptions {
            accept_divergence: Some("another engine's deletes".into()),
            ..Default::default()
        },
        ..RecoverOptions::new(
            "rec-deletes",
            SnapshotSource::at(t.metadata_location().unwrap()),
            SnapshotChoice::SnapshotId(snapshot_id),
            "shop.recovered",
        )
    };
    let (report, recovered) = recover(&j, &handle, &opts, &clock(), &SeededIds::new(9), &mut |_| {})
        .await
        .unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    assert_eq!(report.validation.keys_expected, 5, "{:?}", report.validation);
    let keys: Vec<String> = scanned_versions(&recovered).await.into_keys().collect();
    assert_eq!(keys, ["o-1", "o-3", "o-5", "o-6", "o-7"]);
    // Small partitions: the spilled validation applies the deletes as well.
    let opts = RecoverOptions {
        recovery_id: "rec-deletes-2".into(),
        into: "shop.recovered2".into(),
        partition_rows: Some(2),
        ..opts
    };
    let (report, _) = recover(&j, &handle, &opts, &clock(), &SeededIds::new(10), &mut |_| {})
        .await
        .unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    assert_eq!(report.validation.keys_expected, 5);
}

/// A position delete file whose `file_path` bounds span a data file it names no row of is
/// dropped once the files it does name are rewritten: the commit reads the paths it holds
/// instead of keeping it on its bounds alone (found when the 10M and 100M compactions of the
/// bench left one delete file every reader still loaded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_drops_a_delete_file_whose_bounds_span_a_file_it_spares() {
    let dir = tempfile::tempdir().unwrap();
    let (j, handle) = site(dir.path()).await;
    // Three commits of one new key each: three data files.
    for i in 1..=3u64 {
        append_text(&j, &ev(i, &format!("o-{i}"), 1)).await;
        apply_all(&j, &handle, &SeededIds::new(i)).await;
    }
    let t = table::load_table(&handle, TABLE).await.unwrap();
    let mut at = Vec::new();
    for i in 1..=3 {
        at.push((locate(&t, &format!("o-{i}")).await, format!("o-{i}")));
    }
    at.sort();
    assert!(at[0].0.0 < at[1].0.0 && at[1].0.0 < at[2].0.0, "{at:?}");
    // Rows in the first and the last file by path: the bounds span the middle one.
    let pos = position_delete(&t, &[at[0].0.clone(), at[2].0.clone()], 1).await;
    let t = commit_delete_files(&handle, &t, vec![pos], stamp(1)).await.unwrap();
    let opts = crate::apply::compact::CompactOptions {
        small_file_rows: 0,
        ..Default::default()
    };
    let (r, t) = crate::apply::compact::compact(&handle, t, &opts, &clock(), &SeededIds::new(9))
        .await
        .unwrap();
    assert_eq!(r.data_files_rewritten, 2, "{r:?}");
    assert_eq!(r.delete_files_after, 0, "{r:?}");
    let keys: Vec<String> = scanned_versions(&t).await.into_keys().collect();
    assert_eq!(keys, [at[1].1.clone()]);
}
