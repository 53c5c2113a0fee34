//! Partitioned tables on the distributed engine (standalone): a recovery on Ballista of a table
//! partitioned by day, identity, truncate, year, month, hour or void equals the local one row for
//! row, its files carry the same partition values the local engine gives, and every file holds
//! only rows of its partition (checked with iceberg-rust's own partition splitter, the local
//! engine's transform code). A bucket spec is refused before anything is written.

use std::collections::BTreeSet;

use iceberg::spec::Transform;
use iceberg::table::Table;

use crate::recover::RecoverError;
use crate::recover::ballista_tests::{both, generated_tail, rows, run};
use crate::recover::engine::Engine;
use crate::recover::tests::{Story, append_text, ev, story_partitioned};
use crate::table::test_support::catalog_in;
use crate::table::{self, arrow_schema, live_data_files};

/// The partition values of `table`'s files, after checking that each file holds only rows of
/// its own partition.
async fn partitions_checked(table: &Table, what: &str) -> BTreeSet<String> {
    let meta = table.metadata();
    let splitter = iceberg::arrow::RecordBatchPartitionSplitter::try_new_with_computed_values(
        meta.current_schema().clone(),
        meta.default_partition_spec().clone(),
    )
    .unwrap();
    let mut out = BTreeSet::new();
    let files = live_data_files(table).await.unwrap();
    for f in &files {
        assert_eq!(
            f.partition().fields().len(),
            meta.default_partition_spec().fields().len()
        );
        let batches =
            crate::table::read::read_files(table, &[f], &arrow_schema(table).unwrap(), None, &Default::default())
                .await
                .unwrap();
        for b in batches {
            for (key, _) in splitter.split(&b).unwrap() {
                assert_eq!(
                    key.data(),
                    f.partition(),
                    "{what}: {} holds one partition",
                    f.file_path()
                );
            }
        }
        out.insert(format!("{:?}", f.partition()));
    }
    out
}

/// Events after the story with strings a folder name would mangle (`/`, `=`, non-ASCII, `%`).
fn odd_strings(first: u64) -> String {
    ev(first, "G/1", 1, "a/b=c é", false, "1969-12-31T23:30:00Z")
        + &ev(
            first + 1,
            "H%2",
            1,
            "__HIVE_DEFAULT_PARTITION__",
            false,
            "2026-11-21T00:00:00Z",
        )
        + &ev(first + 2, "I😀", 1, "", false, "2026-11-21T23:59:59Z")
}

async fn recovers_alike(fields: &[(i32, &str, Transform)], into: &str) {
    let s: Story = story_partitioned(fields).await;
    let tail = generated_tail(27, 200);
    append_text(&s.journal, &tail).await;
    append_text(&s.journal, &odd_strings(27 + tail.lines().count() as u64)).await;
    let (local, dist) = both(&s, None, into).await;
    let (l, d) = (rows(&s, &local).await, rows(&s, &dist).await);
    assert!(l.len() > 40, "{}", l.len());
    assert_eq!(l, d, "{fields:?}: row for row, positions included");
    assert_eq!(
        dist.metadata().default_partition_spec(),
        local.metadata().default_partition_spec(),
        "the source's spec"
    );
    let (lp, dp) = (
        partitions_checked(&local, "local").await,
        partitions_checked(&dist, "ballista").await,
    );
    assert_eq!(lp, dp, "{fields:?}: the same partition values as the local engine");
    if !matches!(fields[0].2, Transform::Year | Transform::Month) {
        assert!(dp.len() > 2, "{fields:?}: several partitions: {dp:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_partitioned_by_day_recovers_on_ballista_as_locally() {
    recovers_alike(&[(8, "event_day", Transform::Day)], "shop.pday").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_and_truncate_partitions_recover_on_ballista_as_locally() {
    recovers_alike(
        &[
            (4, "status", Transform::Identity),
            (2, "version_trunc", Transform::Truncate(2)),
            (1, "id_trunc", Transform::Truncate(1)),
        ],
        "shop.pident",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn year_month_hour_and_void_partitions_recover_on_ballista_as_locally() {
    // Iceberg allows one time transform per source column: a spec each.
    recovers_alike(&[(8, "event_year", Transform::Year)], "shop.pyear").await;
    recovers_alike(
        &[
            (8, "event_month", Transform::Month),
            (6, "currency_void", Transform::Void),
        ],
        "shop.pmonth",
    )
    .await;
    recovers_alike(&[(8, "event_hour", Transform::Hour)], "shop.phour").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_partition_is_refused_naming_the_field_before_anything_is_written() {
    let s = story_partitioned(&[(1, "id_bucket", Transform::Bucket(4))]).await;
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    let err = run(
        &s,
        &target,
        &s.opts(&meta, "shop.pbucket", None),
        &Engine::Standalone,
        50,
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RecoverError::Unsupported { .. }), "{msg}");
    assert!(
        msg.contains("partition field id_bucket is bucket[4](order_id)") && msg.contains("--engine local"),
        "{msg}"
    );
    assert_eq!(crate::exit::code_of(&anyhow::Error::new(err)), crate::exit::BAD_INPUT);
    let ident = table::parse_ident("shop.pbucket").unwrap();
    assert!(!target.catalog().table_exists(&ident).await.unwrap(), "nothing created");
}
