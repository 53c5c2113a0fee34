//! The A–E story on a local folder, and every refusal of recovery.
//!
//! A cleanup job deletes orders from the state table; replication copies the damage to the DR
//! replica; the stream goes on. A: deleted by the bad job, untouched since. B: updated after it.
//! C: legitimately deleted after it. D: new after it. E: late (old business time, new position).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration};
use tidemark_journal::Journal;
use tidemark_journal::clock::StepClock;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::local::LocalStore;

use crate::apply::tests::append_opts;

use crate::apply::tests::apply_seeded;
use crate::apply::{ApplyOptions, apply};
use crate::catalog::CatalogHandle;
use crate::ids::SeededIds;
use crate::recover::snapshot::{PrefixMap, SnapshotChoice, SnapshotSource};
use crate::recover::validate::Split;
use crate::recover::{RecoverError, RecoverOptions, recover};
use crate::reference::Cell;
use crate::rehearse::fault::delete_rows;
use crate::table::test_support::catalog_in;
use crate::table::{self};

pub(crate) fn clock() -> StepClock {
    StepClock::new(
        DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        Duration::milliseconds(1),
    )
}

pub(crate) fn ev(pos: u64, id: &str, version: i64, status: &str, deleted: bool, time: &str) -> String {
    format!(
        r#"{{"position":{pos},"order_id":"{id}","order_version":{version},"customer_id":"c-{id}","status":"{status}","amount":"{version}.50","currency":"EUR","is_deleted":{deleted},"event_time":"{time}"}}"#
    ) + "\n"
}

/// Phase 1: positions 1..=20 (A, B, C and fillers F0..F16).
fn phase1() -> String {
    let mut s = ev(1, "A", 1, "placed", false, "2026-11-01T10:00:00Z")
        + &ev(2, "B", 1, "placed", false, "2026-11-01T10:01:00Z")
        + &ev(3, "C", 1, "placed", false, "2026-11-01T10:02:00Z");
    for i in 0..17 {
        s += &ev(4 + i, &format!("F{i:02}"), 1, "placed", false, "2026-11-01T11:00:00Z");
    }
    s
}

/// Phase 2, after the bad job: positions 21..=26.
fn phase2() -> String {
    ev(21, "B", 2, "shipped", false, "2026-11-20T09:00:00Z")
        + &ev(22, "C", 2, "cancelled", true, "2026-11-20T09:05:00Z")
        + &ev(23, "D", 1, "placed", false, "2026-11-20T09:10:00Z")
        + &ev(24, "E", 1, "placed", false, "2026-10-01T08:00:00Z") // late: old business time
        + &ev(25, "F03", 2, "paid", false, "2026-11-20T09:20:00Z")
        + &ev(26, "B", 2, "shipped", false, "2026-11-20T09:00:00Z") // an identical retry
}

pub(crate) struct Story {
    _dir: tempfile::TempDir,
    pub(crate) root: std::path::PathBuf,
    pub(crate) journal: Journal,
    pub(crate) source: CatalogHandle,
}

pub(crate) async fn append_text(j: &Journal, text: &str) {
    let opts = append_opts(5, "story");
    crate::apply::tests::append_with(j, text, &opts).await.unwrap();
}

/// Appends without the append's conflict check against the stored journal (what a journal
/// written before that check, or older than its window, can hold).
pub(crate) async fn append_unchecked(j: &Journal, text: &str) {
    let opts = append_opts(5, "story");
    tidemark_journal::writer::append_with_window(j, text.as_bytes(), &opts, 0, &clock(), &mut |_| {})
        .await
        .unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// Runs the story up to the damaged, replicated table; the DR copy is `<root>/dr/warehouse`.
pub(crate) async fn story() -> Story {
    story_partitioned(&[]).await
}

/// The story on a source table partitioned by `fields` (source field id, name, transform; none:
/// unpartitioned), as another engine would have created it.
pub(crate) async fn story_partitioned(fields: &[(i32, &str, iceberg::spec::Transform)]) -> Story {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    for d in ["journal", "source", "dr"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let store = Arc::new(LocalStore::open(root.join("journal")).unwrap());
    let journal = Journal::init(store, orders_spec(), "j-story".into(), &clock())
        .await
        .unwrap();
    let source = catalog_in(&root.join("source")).await;
    if !fields.is_empty() {
        crate::apply::tests::create_partitioned(&source, &journal.spec, fields).await;
    }
    // A snapshot and a checkpoint per batch: the recoveries below start at chosen positions.
    append_text(&journal, &phase1()).await;
    crate::apply::tests::apply_each_batch(&journal, &source, &SeededIds::new(1)).await;
    // The bad cleanup job.
    let r = delete_rows(
        &source,
        "shop.orders",
        "order_id IN ('A', 'B', 'C', 'F01')",
        &clock(),
        &SeededIds::new(2),
    )
    .await
    .unwrap();
    assert_eq!(r.rows_deleted, 4);
    append_text(&journal, &phase2()).await;
    // The stream goes on; the applier finds the bad job's commit and commits nothing on top.
    let one = ApplyOptions {
        grouping: crate::apply::Grouping::Fixed(1),
        ..Default::default()
    };
    let stopped = apply_seeded(&journal, &source, "shop.orders", &one, &clock(), 3).await;
    assert!(
        matches!(&stopped, Err(crate::apply::ApplyError::Divergence(d)) if d.removed == 4),
        "{stopped:?}"
    );
    // Replication copies the warehouse, damage included.
    copy_dir(&root.join("source/warehouse"), &root.join("dr/warehouse"));
    Story {
        _dir: dir,
        root,
        journal,
        source,
    }
}

impl Story {
    fn dr_source(&self, metadata_location: &str) -> SnapshotSource {
        let from = format!("file://{}", self.root.join("source/warehouse").display());
        let to = format!("file://{}", self.root.join("dr/warehouse").display());
        SnapshotSource {
            metadata_location: metadata_location.to_string(),
            file_io_props: HashMap::new(),
            prefix_map: Some(PrefixMap { from, to }),
        }
    }

    pub(crate) async fn source_metadata(&self) -> String {
        table::load_table(&self.source, "shop.orders")
            .await
            .unwrap()
            .metadata_location()
            .unwrap()
            .to_string()
    }

    /// `recover` of this story's journal into `target` with `opts`, ids seeded with `seed`.
    pub(crate) async fn recover(
        &self,
        target: &CatalogHandle,
        opts: &RecoverOptions,
        seed: u64,
    ) -> Result<(crate::recover::RecoveryReport, iceberg::table::Table), RecoverError> {
        recover(
            &self.journal,
            target,
            opts,
            &clock(),
            &SeededIds::new(seed),
            &mut |_| {},
        )
        .await
    }

    /// [`Story::recover`] with `opts` (ids seeded `seed`), row F07 of the recovered table lost
    /// behind recovery's back, and `recover` again with the same options: its report.
    pub(crate) async fn recover_damaged(
        &self,
        target: &CatalogHandle,
        opts: &RecoverOptions,
        seed: u64,
    ) -> crate::recover::RecoveryReport {
        self.recover(target, opts, seed).await.unwrap();
        lose_f07(target, &opts.into, seed + 1).await;
        self.recover(target, opts, seed + 2).await.unwrap().0
    }

    /// [`Story::recover`] of the source at `metadata` into `into` up to `to`, with [`Story::opts`].
    pub(crate) async fn recover_to(
        &self,
        target: &CatalogHandle,
        metadata: &str,
        into: &str,
        to: Option<u64>,
        seed: u64,
    ) -> Result<(crate::recover::RecoveryReport, iceberg::table::Table), RecoverError> {
        self.recover(target, &self.opts(metadata, into, to), seed).await
    }

    pub(crate) fn opts(&self, metadata: &str, into: &str, to: Option<u64>) -> RecoverOptions {
        RecoverOptions {
            to,
            ..RecoverOptions::new(
                format!("rec-{into}"),
                self.dr_source(metadata),
                SnapshotChoice::Checkpoint { at_or_before: Some(20) },
                into,
            )
        }
    }
}

/// The story, the metadata location of its source table, and an empty catalog in its `dr`
/// folder to recover into.
pub(crate) async fn story_with_target() -> (Story, String, CatalogHandle) {
    let s = story().await;
    let meta = s.source_metadata().await;
    let target = catalog_in(&s.root.join("dr")).await;
    (s, meta, target)
}

/// Damage a recovered table behind recovery's back: row F07 disappears.
async fn lose_f07(target: &CatalogHandle, table: &str, seed: u64) {
    delete_rows(target, table, "order_id = 'F07'", &clock(), &SeededIds::new(seed))
        .await
        .unwrap();
}

pub(crate) fn key(s: &str) -> Cell {
    Cell::Str(s.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a_to_e_story_recovers_from_the_dr_replica() {
    let (s, meta, target) = story_with_target().await;
    let (report, table) = s
        .recover_to(&target, &meta, "shop.orders_recovered", None, 4)
        .await
        .unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    assert_eq!((report.snapshot_position, report.h), (20, 26));
    assert_eq!(report.seed_rows, 20);
    let rows: HashMap<Cell, crate::reference::RefRow> = crate::recover::validate::table_rows(&s.journal.spec, &table)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.cells[0].clone(), r))
        .collect();
    let (version, status, deleted) = (1, 3, 6);
    assert_eq!(rows[&key("A")].cells[version], Cell::Long(1), "A is back");
    assert_eq!(
        rows[&key("B")].cells[status],
        Cell::Str("shipped".into()),
        "B has its update"
    );
    assert_eq!(rows[&key("B")].position, 21, "the retry at 26 is the same event");
    assert_eq!(rows[&key("C")].cells[deleted], Cell::Bool(true), "C is a tombstone");
    assert!(rows.contains_key(&key("D")) && rows.contains_key(&key("E")));
    assert!(rows.contains_key(&key("F01")), "every row the bad job deleted is back");
    assert_eq!(rows.len(), 22, "nothing the journal does not prove");
    // Resumable: the same recovery again redoes nothing and still validates.
    let (again, _) = s
        .recover_to(&target, &meta, "shop.orders_recovered", None, 5)
        .await
        .unwrap();
    assert!(again.seed_resumed && again.replay_resumed && again.validation.ok);
    // The next writer starts after H.
    let r = crate::apply::apply_all(
        &s.journal,
        &target,
        "shop.orders_recovered",
        &clock(),
        &SeededIds::new(6),
    )
    .await
    .unwrap();
    assert_eq!((r.started_after_position, r.commits), (26, 0));
}

/// Every `.parquet` file under `dir` whose path does not contain `but`, as bytes.
fn parquet_files_under(dir: &Path, but: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.display().to_string().contains(but) {
            continue;
        }
        if path.is_dir() {
            out.extend(parquet_files_under(&path, but));
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(std::fs::read(&path).unwrap());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_copies_the_snapshot_files_byte_for_byte() {
    let (s, meta, target) = story_with_target().await;
    let (report, table) = s
        .recover_to(&target, &meta, "shop.orders_copied", None, 4)
        .await
        .unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    let detail = &report.steps.iter().find(|st| st.step == "seed").unwrap().detail;
    let n = detail.split(", ").nth(1).unwrap();
    let (copied, of) = n.split_once(" of ").unwrap();
    assert_eq!(
        format!("{copied} files"),
        of.trim_end_matches(" copied byte for byte"),
        "every file copied: {detail}"
    );
    let seed = table
        .metadata()
        .snapshots()
        .find(|snap| {
            snap.summary()
                .additional_properties
                .get(crate::recover::seed::PROP_STEP)
                .map(String::as_str)
                == Some("seed")
        })
        .unwrap();
    let files =
        crate::table::files::snapshot_files(table.file_io(), "copied", seed.manifest_list(), &|p| p.to_string())
            .await
            .unwrap();
    assert!(!files.data.is_empty());
    // The replica's files (the source's own, and none of the recovered table's yet).
    let replica = parquet_files_under(&s.root.join("dr/warehouse"), "orders_copied");
    assert!(!replica.is_empty());
    for f in &files.data {
        let path = f.path.trim_start_matches("file://");
        assert!(path.contains("orders_copied"), "the new table owns its copy: {path}");
        let bytes = std::fs::read(path).unwrap();
        assert!(replica.contains(&bytes), "{path} is not a byte copy of a snapshot file");
        assert_eq!(f.file.file_size_in_bytes(), bytes.len() as u64);
        let key_id = table.metadata().current_schema().field_by_name("order_id").unwrap().id;
        assert!(
            f.file.lower_bounds().contains_key(&key_id),
            "the copy keeps the key bounds"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_refuses_what_it_cannot_prove() {
    let (s, meta, target) = story_with_target().await;
    // H past the verified range.
    let err = s.recover_to(&target, &meta, "shop.r1", Some(27), 7).await.unwrap_err();
    assert!(matches!(err, RecoverError::BeyondVerified { h: 27, .. }), "{err}");
    assert!(err.to_string().contains("21..=26"), "{err}");
    // A data file of the trusted snapshot missing on the replica: named, nothing seeded.
    let snap_files = {
        let t = table::load_table(&s.source, "shop.orders").await.unwrap();
        let trusted = t
            .metadata()
            .snapshots()
            .find(|s| {
                s.summary()
                    .additional_properties
                    .get("tidemark.last-position")
                    .map(String::as_str)
                    == Some("20")
            })
            .expect("the snapshot of checkpoint 20");
        trusted.manifest_list().to_string()
    };
    let list_on_dr = snap_files.replace(
        &s.root.join("source/warehouse").display().to_string(),
        &s.root.join("dr/warehouse").display().to_string(),
    );
    let saved = std::fs::read(list_on_dr.trim_start_matches("file://")).unwrap();
    std::fs::remove_file(list_on_dr.trim_start_matches("file://")).unwrap();
    let err = s.recover_to(&target, &meta, "shop.r2", Some(26), 71).await.unwrap_err();
    assert!(matches!(err, RecoverError::MissingFile { .. }), "{err}");
    assert!(
        err.to_string().contains(list_on_dr.trim_start_matches("file://")),
        "{err}"
    );
    std::fs::write(list_on_dr.trim_start_matches("file://"), saved).unwrap();
    // A conflicting payload inside the range (append refuses it; as a journal written before
    // that check would hold it).
    let conflicting = ev(27, "D", 1, "placed-differently", false, "2026-11-20T09:10:00Z");
    append_unchecked(&s.journal, &conflicting).await;
    let err = s.recover_to(&target, &meta, "shop.r3", Some(27), 72).await.unwrap_err();
    assert!(
        err.to_string().contains("key D version 1") && err.to_string().contains("positions 23 and 27"),
        "{err}"
    );
    // A tampered journal inside the range.
    let m = s.journal.read_manifest(6, None).await.unwrap();
    let path = s
        .root
        .join("journal/.tidemark/versions")
        .join(m.manifest.object_key.replace('/', "%2F"))
        .join(&m.manifest.object_version_id);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[60] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = s.recover_to(&target, &meta, "shop.r4", Some(26), 73).await.unwrap_err();
    assert!(
        matches!(err, RecoverError::ChainBroken { ref kind, .. } if kind == "checksum_mismatch"),
        "{err}"
    );
    // Checked before the seed: the refused recovery left no table behind.
    assert!(
        matches!(
            table::load_table(&target, "shop.r4").await,
            Err(table::TableError::TableNotFound { .. })
        ),
        "a refused recovery seeds nothing"
    );
    // The conflict is found by the replay, after the seed: that table is marked refused.
    let r3 = table::load_table(&target, "shop.r3").await.unwrap();
    assert!(
        r3.metadata()
            .properties()
            .contains_key(crate::recover::seed::PROP_REFUSED),
        "{:?}",
        r3.metadata().properties()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_left_by_a_refused_attempt_is_replaced_by_a_rerun() {
    let (s, meta, target) = story_with_target().await;
    let opts = s.opts(&meta, "shop.orders_recovered", None);
    // The recovered table is damaged; validating it again refuses it (and marks it).
    let refused = s.recover_damaged(&target, &opts, 8).await;
    assert!(!refused.validation.ok);
    // A rerun of the same recovery under a new id (the CLI's default) replaces the refused table
    // instead of stopping at "exists and is not this recovery's".
    let rerun = RecoverOptions {
        recovery_id: "rec-rerun".into(),
        ..opts.clone()
    };
    let (report, t) = s.recover(&target, &rerun, 11).await.unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    assert!(!report.seed_resumed);
    assert_ne!(report.table_uuid, refused.table_uuid);
    assert_eq!(
        t.metadata()
            .properties()
            .get(crate::recover::seed::PROP_RECOVERY_ID)
            .map(String::as_str),
        Some("rec-rerun")
    );
    // A validated table of another recovery is never replaced.
    let other = RecoverOptions {
        recovery_id: "rec-other".into(),
        ..opts
    };
    let err = s.recover(&target, &other, 12).await.unwrap_err();
    assert!(matches!(err, RecoverError::TargetExists { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_names_an_injected_wrong_row() {
    let (s, meta, target) = story_with_target().await;
    let opts = s.opts(&meta, "shop.orders_recovered", None);
    // Damage the recovered table behind recovery's back: one row disappears.
    let report = s.recover_damaged(&target, &opts, 8).await;
    assert!(!report.validation.ok);
    assert_eq!(report.validation.missing, 1);
    assert_eq!(report.validation.first_mismatches[0].key, "F07");
    assert_eq!(report.validation.first_mismatches[0].kind, "missing");

    // The same verdict when validation partitions (6 rows a partition), by key range (the
    // files' bounds) and by key hash (every row spilled).
    for (split, name) in [(Split::Auto, "key_range"), (Split::KeyHash, "key_hash")] {
        let partitioned = RecoverOptions {
            partition_rows: Some(6),
            validation_split: split,
            trust: Default::default(),
            ..opts.clone()
        };
        let (p, _) = s.recover(&target, &partitioned, 11).await.unwrap();
        assert_eq!(p.validation.split, name);
        assert!(p.validation.partitions > 1, "{name}");
        assert!(!p.validation.ok);
        assert_eq!(
            (
                p.validation.keys_expected,
                p.validation.rows_found,
                p.validation.missing,
                p.validation.extra
            ),
            (report.validation.keys_expected, report.validation.rows_found, 1, 0),
            "{name}"
        );
        assert_eq!(
            p.validation.first_mismatches, report.validation.first_mismatches,
            "{name}"
        );
    }
}

/// A key-range part with more events than it may hold makes the validation split by key hash
/// after all, with the events it had spilled by range read back: the same verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_with_too_many_events_falls_back_to_the_key_hash_split_with_every_event() {
    let (s, meta, target) = story_with_target().await;
    let opts = RecoverOptions {
        partition_rows: Some(6),
        ..s.opts(&meta, "shop.orders_crowded", None)
    };
    let (ranged, _) = s.recover(&target, &opts, 33).await.unwrap();
    assert_eq!(ranged.validation.split, "key_range");
    assert!(ranged.validation.ok, "{:?}", ranged.validation);
    // One event a part at most: the story's first part has more.
    let (crowded, _) = crate::recover::validate::MAX_PART_EVENTS
        .scope(1, s.recover(&target, &opts, 34))
        .await
        .unwrap();
    assert_eq!(crowded.validation.split, "key_hash");
    assert!(crowded.validation.ok, "{:?}", crowded.validation);
    assert_eq!(
        (
            crowded.validation.keys_expected,
            crowded.validation.rows_found,
            crowded.validation.tombstones_expected
        ),
        (
            ranged.validation.keys_expected,
            ranged.validation.rows_found,
            ranged.validation.tombstones_expected
        )
    );
}

/// The key-range parts checked at the same time hold a bounded number of rows: with a budget
/// of one row, every part (each larger than the budget) runs alone, and the verdict, mismatch
/// included, is the one of the default budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_range_parts_larger_than_the_rows_in_flight_run_alone_with_the_same_verdict() {
    let (s, meta, target) = story_with_target().await;
    let opts = RecoverOptions {
        partition_rows: Some(6),
        ..s.opts(&meta, "shop.orders_budget", None)
    };
    let free = s.recover_damaged(&target, &opts, 40).await;
    let (tight, _) = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        crate::recover::validate::ROWS_IN_FLIGHT.scope(1, s.recover(&target, &opts, 43)),
    )
    .await
    .expect("a part larger than the budget must not wait for ever")
    .unwrap();
    assert_eq!(
        (free.validation.split.as_str(), tight.validation.split.as_str()),
        ("key_range", "key_range")
    );
    assert!(tight.validation.partitions > 1);
    assert!(!tight.validation.ok);
    assert_eq!(tight.validation.missing, 1);
    let verdict = |v: &crate::recover::validate::ValidationReport| {
        (
            v.keys_expected,
            v.rows_found,
            v.missing,
            v.extra,
            v.partitions,
            v.first_mismatches.clone(),
        )
    };
    assert_eq!(verdict(&tight.validation), verdict(&free.validation));
}

/// The split by key range plans its parts from the manifests' key bounds but does not trust
/// them: a data file holding keys outside the bounds its manifest records (here the table's
/// lowest file, described with the highest file's bounds) stops the validation, naming the file
/// and the key, instead of comparing keys in the wrong part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_file_whose_keys_lie_outside_its_manifest_bounds_stops_the_validation() {
    use crate::table::read::key_bounds;
    let (s, meta, target) = story_with_target().await;
    let opts = RecoverOptions {
        partition_rows: Some(6),
        ..s.opts(&meta, "shop.orders_bounds", None)
    };
    let (report, table) = s.recover(&target, &opts, 30).await.unwrap();
    assert!(report.validation.ok, "{:?}", report.validation);
    assert_eq!(report.validation.split, "key_range");
    let key_id = table.metadata().current_schema().field_by_name("order_id").unwrap().id;
    let mut files = crate::table::commit::live_data_files(&table).await.unwrap();
    files.sort_by_key(|f| key_bounds(f, key_id).unwrap().0);
    let (lowest, highest) = (files.first().unwrap().clone(), files.last().unwrap().clone());
    assert!(key_bounds(&lowest, key_id).unwrap().1 < key_bounds(&highest, key_id).unwrap().0);
    // The lowest file's bytes under a new name, described with the highest file's bounds.
    let io = table.file_io();
    let bytes = io.new_input(lowest.file_path()).unwrap().read().await.unwrap();
    let lying = format!("{}.lying.parquet", lowest.file_path().trim_end_matches(".parquet"));
    io.new_output(&lying).unwrap().write(bytes.clone()).await.unwrap();
    let mut b = iceberg::spec::DataFileBuilder::default();
    b.content(iceberg::spec::DataContentType::Data)
        .file_path(lying.clone())
        .file_format(iceberg::spec::DataFileFormat::Parquet)
        .record_count(lowest.record_count())
        .file_size_in_bytes(bytes.len() as u64)
        .lower_bounds(highest.lower_bounds().clone())
        .upper_bounds(highest.upper_bounds().clone())
        .partition_spec_id(table.metadata().default_partition_spec_id());
    let stamp = crate::table::commit::CommitStamp {
        id: uuid::Uuid::from_u128(0xb0d5_0000_0000_4000_8000_0000_0000_0001),
        at: DateTime::from_timestamp(1_790_000_500, 0).unwrap(),
    };
    crate::table::commit::commit_overwrite(
        &target,
        &table,
        &[lowest.file_path().to_string()],
        vec![b.build().unwrap()],
        HashMap::new(),
        stamp,
    )
    .await
    .unwrap();
    let err = s.recover(&target, &opts, 31).await.unwrap_err().to_string();
    assert!(
        err.contains(&lying) && err.contains("outside the key bounds its manifest records"),
        "{err}"
    );
    // The split by key hash does not read the bounds: the same rows, the same verdict as before.
    let hashed = RecoverOptions {
        validation_split: Split::KeyHash,
        trust: Default::default(),
        ..opts.clone()
    };
    let (h, _) = s.recover(&target, &hashed, 32).await.unwrap();
    assert_eq!(h.validation.split, "key_hash");
    assert!(h.validation.ok, "{:?}", h.validation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_validation_agrees_with_the_whole_table_comparison() {
    let (s, meta, target) = story_with_target().await;
    let whole = s.opts(&meta, "shop.orders_whole", None);
    let (a, _) = s.recover(&target, &whole, 12).await.unwrap();
    let mut splits = std::collections::BTreeSet::new();
    for rows in [1, 2, 5, 7] {
        let mut opts = s.opts(&meta, &format!("shop.orders_p{rows}"), None);
        opts.partition_rows = Some(rows);
        let (b, _) = s.recover(&target, &opts, 13).await.unwrap();
        assert!(b.validation.ok, "{rows}: {:?}", b.validation);
        splits.insert(b.validation.split.clone());
        // Split by key hash instead: the same verdict and counts.
        let hashed = RecoverOptions {
            validation_split: Split::KeyHash,
            trust: Default::default(),
            ..opts.clone()
        };
        let (h, _) = s.recover(&target, &hashed, 13).await.unwrap();
        assert_eq!(h.validation.split, "key_hash", "{rows}");
        assert!(h.validation.ok, "{rows}: {:?}", h.validation);
        assert_eq!(
            (
                h.validation.keys_expected,
                h.validation.rows_found,
                h.validation.tombstones_expected
            ),
            (
                b.validation.keys_expected,
                b.validation.rows_found,
                b.validation.tombstones_expected
            ),
            "{rows}"
        );
        // The replay spilled its events (more than `rows`) and merged them in key ranges: the
        // same table, row for row, as the replay that held them in memory.
        let replay =
            |r: &crate::recover::RecoveryReport| r.steps.iter().find(|s| s.step == "replay").unwrap().detail.clone();
        assert_eq!(
            replay(&b).contains("spilled to disk"),
            b.replay.events > rows,
            "{rows}: {}",
            replay(&b)
        );
        assert!(!replay(&a).contains("spilled"), "{}", replay(&a));
        assert_eq!(
            crate::apply::tests::table_rows(&target, &format!("shop.orders_p{rows}")).await,
            crate::apply::tests::table_rows(&target, "shop.orders_whole").await,
            "{rows}"
        );
        assert_eq!(
            (
                b.validation.keys_expected,
                b.validation.rows_found,
                b.validation.tombstones_expected
            ),
            (
                a.validation.keys_expected,
                a.validation.rows_found,
                a.validation.tombstones_expected
            ),
            "{rows}"
        );
    }
    assert!(splits.contains("key_range"), "{splits:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_partitions_count_the_range_events() {
    // With a partition as large as the larger of the snapshot and the table, the rows alone
    // make one partition; the range's events (its manifests' row counts) make more, so that a
    // partition's share of the events does not grow with the range.
    let (s, meta, target) = story_with_target().await;
    let whole = s.opts(&meta, "shop.orders_whole", None);
    let (a, _) = s.recover(&target, &whole, 14).await.unwrap();
    assert_eq!(a.validation.partitions, 1);
    let rows = a.seed_rows.max(a.validation.rows_found);
    let events = a.h - a.snapshot_position;
    assert!(events > 0 && a.replay.events > 0);
    let mut opts = s.opts(&meta, "shop.orders_sized", None);
    opts.partition_rows = Some(rows);
    opts.validation_split = Split::KeyHash;
    let (b, _) = s.recover(&target, &opts, 15).await.unwrap();
    assert!(b.validation.ok, "{:?}", b.validation);
    assert_eq!(
        b.validation.partitions,
        (rows + events).div_ceil(rows),
        "{rows} rows, {events} events"
    );
    assert!(b.validation.partitions >= 2);
    assert_eq!(
        (b.validation.keys_expected, b.validation.rows_found),
        (a.validation.keys_expected, a.validation.rows_found)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_writer_never_commits_after_the_route_moved() {
    use crate::apply::{ApplyError, CommitGuard, Guard};
    use tidemark_router::{Fence, FlipRequest, RouteStore};

    struct RouteFence(RouteStore, Fence);
    #[async_trait::async_trait]
    impl CommitGuard for RouteFence {
        async fn check(&self) -> Result<(), String> {
            self.1.check(&self.0).await.map_err(|e| e.to_string())
        }
    }
    let s = story().await;
    std::fs::create_dir_all(s.root.join("route")).unwrap();
    let routes = RouteStore::new(Arc::new(LocalStore::open(s.root.join("route")).unwrap()));
    let t = table::load_table(&s.source, "shop.orders").await.unwrap();
    let req = |name: &str| FlipRequest {
        table_name: name.into(),
        catalog: s.source.reference().clone(),
        metadata_location: t.metadata_location().unwrap().into(),
        table_uuid: t.metadata().uuid().to_string(),
        applied_position: 26,
        reason: "test".into(),
        recovery_id: None,
    };
    routes.init(req("shop.orders"), &clock()).await.unwrap();
    let (fence, _) = Fence::acquire(&routes).await.unwrap();
    routes.flip_from_current(req("shop.elsewhere"), &clock()).await.unwrap();
    append_text(&s.journal, &ev(27, "G", 1, "placed", false, "2026-11-21T00:00:00Z")).await;
    let before = table::load_table(&s.source, "shop.orders")
        .await
        .unwrap()
        .metadata_location()
        .unwrap()
        .to_string();
    let opts = ApplyOptions {
        guard: Some(Guard(Arc::new(RouteFence(routes, fence)))),
        // Past the story's bad job (which the applier would stop at) to the fence.
        on_divergence: crate::apply::OnDivergence::Continue {
            reason: "the test reaches the fence".into(),
        },
        ..Default::default()
    };
    let err = apply(
        &s.journal,
        &s.source,
        "shop.orders",
        &opts,
        &clock(),
        &SeededIds::new(11),
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ApplyError::Fenced(ref m) if m.contains("generation 1") && m.contains("generation 2")),
        "{err}"
    );
    let after = table::load_table(&s.source, "shop.orders")
        .await
        .unwrap()
        .metadata_location()
        .unwrap()
        .to_string();
    assert_eq!(before, after, "the fenced writer committed nothing");
}

/// The id of the source table's snapshot whose own summary records `position`.
async fn snapshot_at(s: &Story, position: u64) -> i64 {
    let t = table::load_table(&s.source, "shop.orders").await.unwrap();
    t.metadata()
        .snapshots()
        .find(|snap| snap.summary().additional_properties.get("tidemark.last-position") == Some(&position.to_string()))
        .map(|snap| snap.snapshot_id())
        .expect("a snapshot at that position")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_that_disagrees_with_its_snapshot_is_refused() {
    use tidemark_journal::checkpoint;
    use tidemark_journal::store::PutMode;
    let (s, meta, target) = story_with_target().await;
    // The lie: checkpoint 20 rewritten to name the snapshot of position 15, its key, position,
    // manifest sequence and digest kept consistent.
    let cps = checkpoint::list(s.journal.store.as_ref(), &Default::default())
        .await
        .unwrap();
    let mut lie = cps.iter().find(|c| c.position == 20).unwrap().clone();
    lie.snapshot_id = snapshot_at(&s, 15).await;
    let key = tidemark_journal::paths::checkpoint_key(&lie.table_uuid, 20);
    s.journal
        .store
        .put(&key, serde_json::to_vec(&lie).unwrap().into(), PutMode::Overwrite)
        .await
        .unwrap();
    let err = s
        .recover_to(&target, &meta, "shop.orders_lied", None, 20)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RecoverError::CheckpointMismatch { ref field, .. } if field == "position"),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains(&key) && msg.contains("own summary records 15"), "{msg}");
    assert_eq!(
        crate::exit::code_of(&anyhow::Error::new(err)),
        crate::exit::VERIFY_FAILED
    );
    assert!(
        table::load_table(&target, "shop.orders_lied").await.is_err(),
        "nothing was seeded"
    );
    // The snapshot itself, chosen by id, is recovered by its own record (position 15).
    let mut by_id = s.opts(&meta, "shop.orders_by_id", None);
    by_id.choice = SnapshotChoice::SnapshotId(lie.snapshot_id);
    let (report, _) = s.recover(&target, &by_id, 21).await.unwrap();
    assert_eq!(report.snapshot_position, 15);
    assert!(report.validation.ok, "{:?}", report.validation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_recorded_from_another_journal_is_refused() {
    let (s, meta, target) = story_with_target().await;
    // Another journal with the same positions (and here even the same events).
    std::fs::create_dir_all(s.root.join("other")).unwrap();
    let store = Arc::new(LocalStore::open(s.root.join("other")).unwrap());
    let other = Journal::init(store, orders_spec(), "j-other".into(), &clock())
        .await
        .unwrap();
    append_text(&other, &(phase1() + &phase2())).await;
    let mut opts = s.opts(&meta, "shop.orders_other", None);
    opts.choice = SnapshotChoice::SnapshotId(snapshot_at(&s, 20).await);
    let err = recover(&other, &target, &opts, &clock(), &SeededIds::new(22), &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, RecoverError::OtherJournal { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("journal j-story") && msg.contains("not of journal j-other"),
        "{msg}"
    );
    assert_eq!(
        crate::exit::code_of(&anyhow::Error::new(err)),
        crate::exit::VERIFY_FAILED
    );
}

#[path = "faults_tests.rs"]
mod faults;
