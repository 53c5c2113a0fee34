use std::sync::Arc;

use arrow_array::RecordBatch;

use arrow_array::{Array, ArrayRef, BooleanArray, Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema};
use chrono::TimeZone;
use datafusion::prelude::SessionContext;
use iceberg::spec::ManifestStatus;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg_datafusion::IcebergCatalogProvider;
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN, UTC};

use super::*;
use crate::table::test_support::{catalog_in, iceberg_scan};
use crate::table::{create_or_load_table, load_table};

const TABLE: &str = "shop.orders";

/// Stamps with fixed ids and a clock in 2023, behind the table's creation time on purpose:
/// the commit raises it to the table's last update.
fn stamp(n: u128) -> CommitStamp {
    CommitStamp {
        id: Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0000 + n),
        at: Utc.timestamp_opt(1_700_000_000 + n as i64, 0).unwrap(),
    }
}

/// Orders rows `(order_id, order_version)` as a batch without field ids (the writer adds them).
fn orders(rows: &[(&str, i64)]) -> RecordBatch {
    let spec = CompiledSpec::orders();
    let n = rows.len();
    let versions: Vec<i64> = rows.iter().map(|r| r.1).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(versions.clone())),
        Arc::new(StringArray::from(vec!["cust-1"; n])),
        Arc::new(StringArray::from(vec!["open"; n])),
        Arc::new(
            Decimal128Array::from(vec![1999_i128; n])
                .with_precision_and_scale(18, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from(vec!["EUR"; n])),
        Arc::new(BooleanArray::from(vec![false; n])),
        Arc::new(TimestampMicrosecondArray::from(vec![1_700_000_000_000_000_i64; n]).with_timezone(UTC)),
        Arc::new(Int64Array::from(versions.iter().map(|v| v * 100).collect::<Vec<_>>())),
    ];
    let mut fields: Vec<Field> = spec
        .spec
        .columns
        .iter()
        .zip(&spec.types)
        .map(|(c, t)| Field::new(&c.name, t.arrow_type(), c.nullable))
        .collect();
    fields.push(Field::new(POSITION_COLUMN, DataType::Int64, false));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

fn want(rows: &[(&str, i64)]) -> Vec<(String, i64)> {
    let mut v: Vec<_> = rows.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    v.sort();
    v
}

/// `(order_id, order_version)` of every row a scan returns, sorted.
async fn rows(table: &Table, snapshot_id: Option<i64>) -> Vec<(String, i64)> {
    let batches = iceberg_scan(table, snapshot_id).await;
    let mut out = Vec::new();
    for b in &batches {
        let ids = b
            .column_by_name("order_id")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let versions = b
            .column_by_name("order_version")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        for i in 0..b.num_rows() {
            out.push((ids.value(i).to_string(), versions.value(i)));
        }
    }
    out.sort();
    out
}

fn paths(files: &[DataFile]) -> Vec<String> {
    let mut v: Vec<String> = files.iter().map(|f| f.file_path().to_string()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn overwrite_replaces_a_file_and_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, table) = empty_table(dir.path()).await;
    let f1 = file_of(&table, &[("a", 1), ("b", 1)], 1).await;
    let f2 = file_of(&table, &[("c", 1), ("d", 1)], 2).await;
    assert_eq!((f1.len(), f2.len()), (1, 1));
    assert!(
        f1[0]
            .file_path()
            .starts_with(&format!("{}/data/{}", table.metadata().location(), stamp(1).id))
    );

    // The first commit goes through iceberg-rust's fast_append, whose ADDED entries leave
    // their sequence numbers to inheritance: the overwrite must carry them correctly.
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files(f1.iter().chain(&f2).cloned())
        .apply(tx)
        .unwrap();
    let t1 = tx.commit(handle.catalog().as_ref()).await.unwrap();
    let first = t1.metadata().current_snapshot().unwrap().clone();
    assert_eq!(rows(&t1, None).await, want(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)]));

    let f3 = file_of(&t1, &[("a", 2), ("b", 1)], 3).await;
    let summary = HashMap::from([("tidemark.batch".to_string(), "7".to_string())]);
    let removed = [f1[0].file_path().to_string()];
    let t2 = commit_overwrite(&handle, &t1, &removed, f3.clone(), summary, stamp(3))
        .await
        .unwrap();

    let snap = t2.metadata().current_snapshot().unwrap().clone();
    assert_eq!(snap.summary().operation, Operation::Overwrite);
    let props = &snap.summary().additional_properties;
    for (k, v) in [
        ("added-data-files", "1"),
        ("deleted-data-files", "1"),
        ("added-records", "2"),
        ("deleted-records", "2"),
        ("total-records", "4"),
        ("total-data-files", "2"),
        ("total-delete-files", "0"),
        ("tidemark.batch", "7"),
    ] {
        assert_eq!(props.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert_eq!(snap.sequence_number(), first.sequence_number() + 1);
    assert_eq!(snap.parent_snapshot_id(), Some(first.snapshot_id()));
    assert!(snap.timestamp_ms() > first.timestamp_ms());
    assert_eq!(rows(&t2, None).await, want(&[("a", 2), ("b", 1), ("c", 1), ("d", 1)]));
    // Time travel: the previous snapshot still reads its rows.
    assert_eq!(
        rows(&t2, Some(first.snapshot_id())).await,
        want(&[("a", 1), ("b", 1), ("c", 1), ("d", 1)])
    );

    // The catalog points at the new metadata file (version 2: create, fast_append, ours).
    let reloaded = load_table(&handle, TABLE).await.unwrap();
    assert_eq!(reloaded.metadata_location(), t2.metadata_location());
    assert!(
        reloaded.metadata_location().unwrap().contains("/metadata/00002-"),
        "{:?}",
        reloaded.metadata_location()
    );
    assert_eq!(reloaded.metadata().metadata_log().len(), 2);
    assert_eq!(
        paths(&live_data_files(&reloaded).await.unwrap()),
        paths(&[f2[0].clone(), f3[0].clone()])
    );

    // One manifest says exactly what changed; the kept file keeps its snapshot and sequence.
    let list = reloaded.manifest_list_reader(&snap).load().await.unwrap();
    assert_eq!(list.entries().len(), 1);
    let manifest = list.entries()[0].load_manifest(reloaded.file_io()).await.unwrap();
    let entry = |path: &str| {
        manifest
            .entries()
            .iter()
            .find(|e| e.file_path() == path)
            .unwrap()
            .clone()
    };
    let gone = entry(f1[0].file_path());
    assert_eq!(gone.status(), ManifestStatus::Deleted);
    assert_eq!(gone.snapshot_id(), Some(snap.snapshot_id()));
    assert_eq!(gone.sequence_number(), Some(first.sequence_number()));
    let kept = entry(f2[0].file_path());
    assert_eq!(kept.status(), ManifestStatus::Existing);
    assert_eq!(kept.snapshot_id(), Some(first.snapshot_id()));
    assert_eq!(kept.sequence_number(), Some(first.sequence_number()));
    assert_eq!(kept.file_sequence_number, Some(first.sequence_number()));
    let new = entry(f3[0].file_path());
    assert_eq!(new.status(), ManifestStatus::Added);
    assert_eq!(new.sequence_number(), Some(snap.sequence_number()));

    // DataFusion, reading through the catalog, sees the new state.
    let ctx = SessionContext::new();
    let provider = IcebergCatalogProvider::try_new(handle.catalog().clone()).await.unwrap();
    ctx.register_catalog("tm", Arc::new(provider));
    let out = ctx
        .sql("SELECT count(*) AS n, sum(order_version) AS v FROM tm.shop.orders")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let n = out[0].column(0).as_any().downcast_ref::<Int64Array>().unwrap().value(0);
    let v = out[0].column(1).as_any().downcast_ref::<Int64Array>().unwrap().value(0);
    assert_eq!((n, v), (4, 5));
}

#[tokio::test]
async fn the_second_of_two_commits_from_one_base_conflicts_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, table) = empty_table(dir.path()).await;

    // A first commit on a table without a snapshot is an append.
    let f1 = file_of(&table, &[("a", 1), ("b", 1)], 1).await;
    let t1 = commit_overwrite(&handle, &table, &[], f1.clone(), HashMap::new(), stamp(1))
        .await
        .unwrap();
    let s1 = t1.metadata().current_snapshot().unwrap();
    assert_eq!(s1.summary().operation, Operation::Append);
    assert_eq!(s1.parent_snapshot_id(), None);
    assert_eq!(s1.sequence_number(), 1);
    assert_eq!(s1.summary().additional_properties["total-records"], "2");
    assert_eq!(
        load_table(&handle, TABLE).await.unwrap().metadata_location(),
        t1.metadata_location()
    );

    let removed = [f1[0].file_path().to_string()];
    let fa = file_of(&t1, &[("a", 2), ("b", 1)], 2).await;
    let fb = file_of(&t1, &[("a", 3), ("b", 1)], 3).await;
    let ta = commit_overwrite(&handle, &t1, &removed, fa, HashMap::new(), stamp(2))
        .await
        .unwrap();
    let err = commit_overwrite(&handle, &t1, &removed, fb, HashMap::new(), stamp(3))
        .await
        .unwrap_err();
    match &err {
        TableError::CommitConflict { table, detail } => {
            assert_eq!(table, TABLE);
            assert!(detail.contains(t1.metadata_location().unwrap()), "{detail}");
            assert!(detail.contains(ta.metadata_location().unwrap()), "{detail}");
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains("reload the table"), "{err}");

    let now = load_table(&handle, TABLE).await.unwrap();
    assert_eq!(now.metadata_location(), ta.metadata_location());
    assert_eq!(rows(&now, None).await, want(&[("a", 2), ("b", 1)]));

    // The loser reloads and redoes its batch on the new state.
    let live = paths(&live_data_files(&now).await.unwrap());
    let fb2 = file_of(&now, &[("a", 3), ("b", 1)], 4).await;
    let tb = commit_overwrite(&handle, &now, &live, fb2, HashMap::new(), stamp(4))
        .await
        .unwrap();
    assert_eq!(rows(&tb, None).await, want(&[("a", 3), ("b", 1)]));
    assert_eq!(tb.metadata().current_snapshot().unwrap().sequence_number(), 3);
}

/// A new orders table in `dir` with one commit (stamp 1) of one file holding key `a` at
/// version 1: the catalog, the table after that commit, and the file.
async fn committed(dir: &std::path::Path) -> (crate::catalog::CatalogHandle, Table, Vec<DataFile>) {
    let (handle, table) = empty_table(dir).await;
    let f1 = file_of(&table, &[("a", 1)], 1).await;
    let t1 = commit_overwrite(&handle, &table, &[], f1.clone(), HashMap::new(), stamp(1))
        .await
        .unwrap();
    (handle, t1, f1)
}

/// A SQLite catalog in `dir` and an orders table without a snapshot in it.
async fn empty_table(dir: &std::path::Path) -> (crate::catalog::CatalogHandle, Table) {
    let handle = catalog_in(dir).await;
    let table = create_or_load_table(&handle, TABLE, &CompiledSpec::orders())
        .await
        .unwrap();
    (handle, table)
}

/// The data files of `rows` (`(order_id, order_version)`), written for `table` by commit `n`.
async fn file_of(table: &Table, rows: &[(&str, i64)], n: u128) -> Vec<DataFile> {
    write_data_file(table, &[orders(rows)], stamp(n).id).await.unwrap()
}

/// The files in the table's metadata folder named with a commit's id (its manifests and manifest
/// list).
fn metadata_files_of(dir: &std::path::Path, id: Uuid) -> Vec<String> {
    let metadata = dir.join("warehouse/shop/orders/metadata");
    std::fs::read_dir(metadata)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&id.to_string()))
        .collect()
}

/// A refused commit (issue 34) removes the manifests and manifest list it wrote: nothing
/// references them, and they would take the room a re-run needs. The winner's stay.
#[tokio::test]
async fn a_refused_commit_removes_the_manifests_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, t1, f1) = committed(dir.path()).await;
    let removed = [f1[0].file_path().to_string()];
    let fa = file_of(&t1, &[("a", 2)], 2).await;
    let fb = file_of(&t1, &[("a", 3)], 3).await;
    commit_overwrite(&handle, &t1, &removed, fa, HashMap::new(), stamp(2))
        .await
        .unwrap();
    let err = commit_overwrite(&handle, &t1, &removed, fb, HashMap::new(), stamp(3))
        .await
        .unwrap_err();
    assert!(matches!(err, TableError::CommitConflict { .. }), "{err}");
    assert_eq!(metadata_files_of(dir.path(), stamp(3).id), Vec::<String>::new());
    // The winner's manifest and manifest list are where its snapshot says.
    assert_eq!(
        metadata_files_of(dir.path(), stamp(2).id).len(),
        2,
        "{:?}",
        metadata_files_of(dir.path(), stamp(2).id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_concurrent_commits_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, base, f1) = committed(dir.path()).await;
    let removed = [f1[0].file_path().to_string()];

    let mut prepared = Vec::new();
    for n in 2..6 {
        prepared.push((n, file_of(&base, &[("a", n as i64)], n).await));
    }
    let tasks = prepared.into_iter().map(|(n, files)| {
        let (handle, base, removed) = (handle.clone(), base.clone(), removed.clone());
        tokio::spawn(async move { commit_overwrite(&handle, &base, &removed, files, HashMap::new(), stamp(n)).await })
    });
    let now = crate::catalog::conformance::one_winner(&handle, TABLE, tasks.collect()).await;
    assert_eq!(rows(&now, None).await.len(), 1);
}

#[tokio::test]
async fn bad_commits_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (handle, t1, f1) = committed(dir.path()).await;

    let err = commit_overwrite(&handle, &t1, &[], Vec::new(), HashMap::new(), stamp(2))
        .await
        .unwrap_err();
    assert!(matches!(err, TableError::EmptyCommit { .. }), "{err}");
    let err = commit_overwrite(
        &handle,
        &t1,
        &["file:///nope.parquet".into()],
        Vec::new(),
        HashMap::new(),
        stamp(2),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, TableError::FileNotLive { path, .. } if path == "file:///nope.parquet"),
        "{err}"
    );
    let err = commit_overwrite(&handle, &t1, &[], f1.clone(), HashMap::new(), stamp(2))
        .await
        .unwrap_err();
    assert!(matches!(err, TableError::FileAlreadyLive { .. }), "{err}");
    assert_eq!(
        load_table(&handle, TABLE).await.unwrap().metadata_location(),
        t1.metadata_location()
    );

    // A batch whose columns are not the table's is refused before anything is written.
    let batch = orders(&[("a", 1)]);
    let renamed = Schema::new(
        batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_name(f.name().to_uppercase()))
            .collect::<Vec<_>>(),
    );
    let bad = RecordBatch::try_new(Arc::new(renamed), batch.columns().to_vec()).unwrap();
    let err = write_data_file(&t1, &[bad], stamp(3).id).await.unwrap_err();
    assert!(matches!(err, TableError::BatchSchema { .. }), "{err}");
    assert!(
        write_data_file(&t1, &[batch.slice(0, 0)], stamp(3).id)
            .await
            .unwrap()
            .is_empty()
    );
    // Reusing a file id would overwrite a live data file.
    let err = write_data_file(&t1, &[batch], stamp(1).id).await.unwrap_err();
    assert!(
        matches!(&err, TableError::DataFileExists { path, .. } if path == f1[0].file_path()),
        "{err}"
    );
    assert_eq!(rows(&t1, None).await, want(&[("a", 1)]));
}

/// The first row group's column chunks of a data file, as its footer describes them.
async fn first_row_group(table: &Table, file: &DataFile) -> parquet::file::metadata::RowGroupMetaData {
    let bytes = table
        .file_io()
        .new_input(file.file_path())
        .unwrap()
        .read()
        .await
        .unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(bytes).unwrap();
    use parquet::file::reader::FileReader;
    reader.metadata().row_group(0).clone()
}

/// The codec of the first column chunk of each file.
async fn codecs(table: &Table, files: &[DataFile]) -> Vec<parquet::basic::Compression> {
    let mut out = Vec::new();
    for f in files {
        out.push(first_row_group(table, f).await.column(0).compression());
    }
    out
}

/// Whether each column chunk of the file's first row group has a dictionary page, by column name.
async fn dictionaries(table: &Table, file: &DataFile) -> Vec<(String, bool)> {
    first_row_group(table, file)
        .await
        .columns()
        .iter()
        .map(|c| (c.column_path().string(), c.dictionary_page_offset().is_some()))
        .collect()
}

#[tokio::test]
async fn the_key_column_is_written_without_a_dictionary_and_the_others_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let table = create_or_load_table(&handle, TABLE, &CompiledSpec::orders())
        .await
        .unwrap();
    let rows: Vec<(String, i64)> = (0..1000).map(|i| (format!("o-{i:09}"), 1)).collect();
    let rows: Vec<(&str, i64)> = rows.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let files = file_of(&table, &rows, 1).await;
    let found = dictionaries(&table, &files[0]).await;
    let with: Vec<&str> = found.iter().filter(|c| c.1).map(|c| c.0.as_str()).collect();
    assert!(found.iter().any(|c| c.0 == "order_id" && !c.1), "{found:?}");
    assert!(with.contains(&"customer_id") && with.contains(&"status"), "{found:?}");
}

#[test]
fn the_writer_settings_follow_the_identifier_and_the_level_property() {
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::schema::types::ColumnPath;
    let spec = CompiledSpec::orders();
    let keyed = crate::table::schema::iceberg_schema(&spec);
    let props = iceberg::spec::TableProperties::try_from(&HashMap::new()).unwrap();
    let settings = |properties: &HashMap<String, String>, schema: &iceberg::spec::Schema| {
        writer_properties(TABLE, properties, &props, schema).unwrap()
    };
    let dictionary =
        |w: &parquet::file::properties::WriterProperties, c: &str| w.dictionary_enabled(&ColumnPath::from(c));
    // No level set: zstd level 1, what PyIceberg (pyarrow) writes.
    let default = settings(&HashMap::new(), &keyed);
    let key = ColumnPath::from("order_id");
    assert_eq!(
        default.compression(&key),
        Compression::ZSTD(ZstdLevel::try_new(1).unwrap())
    );
    let three = HashMap::from([(PROP_PARQUET_LEVEL.to_string(), "3".to_string())]);
    assert_eq!(
        settings(&three, &keyed).compression(&key),
        Compression::ZSTD(ZstdLevel::try_new(3).unwrap())
    );
    // The single identifier field goes without a dictionary; every other column keeps one.
    assert!(!dictionary(&default, "order_id") && dictionary(&default, "customer_id"));
    // A table without identifier (another engine created it) or with two: every column keeps it.
    let fields: Vec<_> = keyed.as_struct().fields().to_vec();
    let schema_with = |ids: Vec<i32>| {
        iceberg::spec::Schema::builder()
            .with_fields(fields.clone())
            .with_identifier_field_ids(ids)
            .build()
            .unwrap()
    };
    for ids in [vec![], vec![1, 3]] {
        let w = settings(&HashMap::new(), &schema_with(ids.clone()));
        assert!(dictionary(&w, "order_id") && dictionary(&w, "customer_id"), "{ids:?}");
    }
}

#[tokio::test]
async fn data_files_honour_the_compression_codec_property() {
    use parquet::basic::Compression;
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let spec = CompiledSpec::orders();
    // Default: zstd, as Java and PyIceberg write (its level: the test above).
    let table = create_or_load_table(&handle, TABLE, &spec).await.unwrap();
    let files = file_of(&table, &[("a", 1)], 1).await;
    assert!(
        matches!(codecs(&table, &files).await[..], [Compression::ZSTD(_)]),
        "{:?}",
        codecs(&table, &files).await
    );
    for (codec, ok) in [("snappy", true), ("uncompressed", true), ("gzip", false)] {
        let props = HashMap::from([(PROP_PARQUET_CODEC.to_string(), codec.to_string())]);
        let name = format!("shop.{codec}");
        let t = crate::table::create_table_with_properties(&handle, &name, &spec, props)
            .await
            .unwrap();
        let got = write_data_file(&t, &[orders(&[("a", 1)])], stamp(2).id).await;
        match (ok, got) {
            (true, Ok(files)) => {
                let want = if codec == "snappy" {
                    Compression::SNAPPY
                } else {
                    Compression::UNCOMPRESSED
                };
                assert_eq!(codecs(&t, &files).await, vec![want], "{codec}");
            }
            (false, Err(TableError::Unsupported { reason, .. })) => {
                assert!(
                    reason.contains("gzip") && reason.contains(PROP_PARQUET_CODEC),
                    "{reason}"
                );
                let data =
                    std::path::PathBuf::from(t.metadata().location().strip_prefix("file://").unwrap()).join("data");
                assert!(!data.exists(), "nothing written for a refused codec");
            }
            (_, other) => panic!("{codec}: {other:?}"),
        }
    }
}
