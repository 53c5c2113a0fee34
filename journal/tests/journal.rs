//! Journal scenarios, each on a local folder and on S3: append and verify, every refusal of bad
//! input, and every way the chain can break (tamper, deleted version, rewrite, fork, gap).

use std::sync::Arc;

use bytes::Bytes;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::clock::StepClock;
use tidemark_journal::generate;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::{ObjectStore, PutMode};
use tidemark_journal::verify::{VerifiedChain, VerifyOptions, verify};
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_journal::{Journal, JournalError, paths};
use tidemark_journal::{on_both, test_support};
use tidemark_schemas::{AppendReport, Checkpoint, FORMAT_VERSION};

fn clock() -> StepClock {
    StepClock::new(
        chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        chrono::Duration::milliseconds(1),
    )
}

async fn init(store: Arc<dyn ObjectStore>) -> Journal {
    Journal::init(store, orders_spec(), "journal-test".into(), &clock())
        .await
        .unwrap()
}

fn opts(batch_size: usize) -> AppendOptions {
    AppendOptions {
        batch_size,
        writer_id: "writer-a".into(),
        source_name: "input.ndjson".into(),
    }
}

async fn append_text(j: &Journal, text: &str, batch: usize) -> Result<AppendReport, JournalError> {
    append(j, text.as_bytes(), &opts(batch), &clock(), &mut |_| {}).await
}

async fn append_text_as(j: &Journal, text: &str, batch: usize, writer: &str) -> Result<AppendReport, JournalError> {
    let opts = AppendOptions {
        writer_id: writer.into(),
        ..opts(batch)
    };
    append(j, text.as_bytes(), &opts, &clock(), &mut |_| {}).await
}

async fn verify_to(j: &Journal, to: Option<u64>) -> VerifiedChain {
    verify(
        j,
        &VerifyOptions {
            to,
            concurrency: Some(3),
            ..Default::default()
        },
        &mut |_| {},
    )
    .await
    .unwrap()
}

/// Events 1..=n as NDJSON lines.
fn events(n: u64) -> Vec<String> {
    generate::ndjson(7, 20, 1, n).lines().map(str::to_string).collect()
}

fn join(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

async fn journal_with(store: Arc<dyn ObjectStore>, n: u64, batch: usize) -> Journal {
    let j = init(store).await;
    append_text(&j, &join(&events(n)), batch).await.unwrap();
    j
}

async fn append_then_verify(store: Arc<dyn ObjectStore>) {
    let j = init(store.clone()).await;
    let lines = events(25);
    let r1 = append_text(&j, &join(&lines[..10]), 4).await.unwrap();
    assert_eq!(
        (r1.batches, r1.events, r1.first_position, r1.last_position),
        (3, 10, Some(1), Some(10))
    );
    let r2 = append_text(&j, &join(&lines[10..]), 4).await.unwrap();
    assert_eq!(
        (r2.batches, r2.first_position, r2.last_position, r2.head_sequence),
        (4, Some(11), Some(25), Some(7))
    );
    let chain = verify_to(&j, None).await;
    let r = &chain.report;
    assert!(r.ok, "{:?}", r.first_break);
    assert_eq!(
        (r.verified_first_position, r.verified_last_position),
        (Some(1), Some(25))
    );
    assert_eq!((r.verified_manifests, r.verified_events), (7, 25));
    assert!(r.unaccepted_objects.is_empty());
    // The chain links: each manifest names the digest of the previous one.
    for pair in chain.manifests.windows(2) {
        assert_eq!(
            pair[1].manifest.previous_digest.as_deref(),
            Some(pair[0].digest.as_str())
        );
    }
    // A boundary inside the chain verifies up to the batch that holds it.
    let partial = verify_to(&j, Some(9)).await.report;
    assert!(partial.ok);
    assert_eq!(
        partial.verified_last_position,
        Some(10),
        "the batch 9..=10 holds position 9"
    );
    // A boundary past the end is refused with the verified range.
    let past = verify_to(&j, Some(26)).await.report;
    assert!(!past.ok);
    let b = past.first_break.unwrap();
    assert_eq!(b.kind, "boundary");
    assert!(
        b.message.contains("26") && b.message.contains("1..=25"),
        "{}",
        b.message
    );
    // Reopening reads the same header and head.
    let again = Journal::open(store).await.unwrap();
    assert_eq!(again.head().await.unwrap().unwrap().manifest.last_position, 25);
}

async fn bad_input_writes_nothing(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 5, 10).await;
    let next = generate::ndjson(7, 20, 1, 8);
    let lines: Vec<&str> = next.lines().collect();
    // A malformed line after good ones: nothing of the input is written.
    let input = format!("{}\n{}\n{{oops\n", lines[5], lines[6]);
    let err = append_text(&j, &input, 1).await.unwrap_err();
    assert!(err.to_string().contains("input.ndjson:3: malformed JSON"), "{err}");
    // A position that does not continue the journal.
    let err = append_text(&j, &format!("{}\n", lines[6]), 10).await.unwrap_err();
    assert!(
        matches!(
            err,
            JournalError::PositionMismatch {
                expected: 6,
                received: 7,
                line: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("expected position 6"), "{err}");
    // A position the journal holds with another event (an identical one is a re-send: no-op).
    let other = generate::ndjson(8, 20, 1, 8);
    let other: Vec<&str> = other.lines().collect();
    let err = append_text(&j, &format!("{}\n", other[4]), 10).await.unwrap_err();
    assert!(
        matches!(err, JournalError::ResentEventDiffers { position: 5, .. }),
        "{err}"
    );
    // A mistyped field.
    let bad = lines[5]
        .replace("\"is_deleted\":false", "\"is_deleted\":\"no\"")
        .replace("\"is_deleted\":true", "\"is_deleted\":\"no\"");
    let err = append_text(&j, &format!("{bad}\n"), 10).await.unwrap_err();
    assert!(err.to_string().contains("field `is_deleted` (position 6)"), "{err}");
    let chain = verify_to(&j, None).await.report;
    assert!(chain.ok);
    assert_eq!(
        chain.verified_last_position,
        Some(5),
        "nothing of the refused input was accepted"
    );
    assert_eq!(j.manifest_sequences().await.unwrap(), vec![1]);
}

async fn missing_journal_is_named(store: Arc<dyn ObjectStore>) {
    let err = Journal::open(store.clone()).await.unwrap_err();
    assert!(matches!(err, JournalError::NotInitialized { .. }));
    assert!(
        err.to_string().contains("journal.json") && err.to_string().contains(&store.url()),
        "{err}"
    );
    let j = init(store.clone()).await;
    let err = Journal::init(store, orders_spec(), "other".into(), &clock())
        .await
        .unwrap_err();
    assert!(err.to_string().contains(&j.header.journal_id), "{err}");
}

async fn deleted_event_version_is_a_missing_object(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 12, 4).await;
    let m = j.read_manifest(2, None).await.unwrap().manifest;
    store.delete_version(&m.object_key, &m.object_version_id).await.unwrap();
    let r = verify_to(&j, None).await.report;
    let b = r.first_break.expect("a break");
    assert_eq!((b.kind.as_str(), b.sequence), ("missing_object", Some(2)));
    assert_eq!(b.key, m.object_key);
    assert_eq!(b.version_id.as_deref(), Some(m.object_version_id.as_str()));
    assert_eq!(
        r.verified_last_position,
        Some(4),
        "the range before the break is still proven"
    );
}

async fn overwriting_an_event_object_does_not_change_the_batch(store: Arc<dyn ObjectStore>) {
    // Someone writes new bytes at an accepted object's key: the manifest pins the exact version,
    // so the batch is unchanged and verification still passes.
    let j = journal_with(store.clone(), 8, 4).await;
    let m = j.read_manifest(1, None).await.unwrap().manifest;
    store
        .put(&m.object_key, Bytes::from_static(b"not parquet"), PutMode::Overwrite)
        .await
        .unwrap();
    assert!(verify_to(&j, None).await.report.ok);
}

async fn rewritten_manifest_is_a_fork(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 12, 4).await;
    let key = paths::manifest_key(2);
    let mut m = j.read_manifest(2, None).await.unwrap().manifest;
    m.writer_id = "intruder".into();
    store
        .put(&key, Bytes::from(serde_json::to_vec(&m).unwrap()), PutMode::Overwrite)
        .await
        .unwrap();
    let b = verify_to(&j, None).await.report.first_break.expect("a break");
    assert_eq!((b.kind.as_str(), b.sequence), ("fork", Some(2)));
    assert!(b.message.contains("2 versions"), "{}", b.message);
    assert_eq!(b.key, key);
}

async fn manifest_claiming_another_sequence_is_a_fork(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 8, 4).await;
    // A second writer's manifest for sequence 2 placed at sequence 3's key.
    let mut m = j.read_manifest(2, None).await.unwrap().manifest;
    m.writer_id = "writer-b".into();
    store
        .put(
            &paths::manifest_key(3),
            Bytes::from(serde_json::to_vec(&m).unwrap()),
            PutMode::Create,
        )
        .await
        .unwrap();
    let b = verify_to(&j, None).await.report.first_break.expect("a break");
    assert_eq!((b.kind.as_str(), b.sequence), ("fork", Some(3)));
    assert!(b.message.contains("claims sequence 2"), "{}", b.message);
}

async fn removed_manifest_is_a_gap(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 16, 4).await;
    let stored = j.read_manifest(2, None).await.unwrap();
    store
        .delete_version(&stored.key, stored.version_id.as_deref().unwrap())
        .await
        .unwrap();
    let r = verify_to(&j, None).await.report;
    let b = r.first_break.expect("a break");
    assert_eq!((b.kind.as_str(), b.sequence), ("gap", Some(2)));
    assert!(b.message.contains("up to sequence 4"), "{}", b.message);
    assert_eq!(r.verified_last_position, Some(4));
}

async fn edited_previous_digest_breaks_the_link(store: Arc<dyn ObjectStore>) {
    // Rewriting manifest 2 in a fresh key history: delete it for good, then create an edited one.
    let j = journal_with(store.clone(), 12, 4).await;
    let stored = j.read_manifest(2, None).await.unwrap();
    let mut m = stored.manifest.clone();
    m.previous_digest = Some(format!("sha256:{}", "0".repeat(64)));
    store
        .delete_version(&stored.key, stored.version_id.as_deref().unwrap())
        .await
        .unwrap();
    store
        .put(
            &stored.key,
            Bytes::from(serde_json::to_vec(&m).unwrap()),
            PutMode::Create,
        )
        .await
        .unwrap();
    let b = verify_to(&j, None).await.report.first_break.expect("a break");
    assert_eq!((b.kind.as_str(), b.sequence), ("digest_mismatch", Some(2)));
}

async fn crash_between_writes_leaves_an_unaccepted_object(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 8, 4).await;
    // A writer stored the event object of sequence 3 and stopped before its manifest.
    let orphan = paths::event_key(3, &"f".repeat(64));
    store
        .put(&orphan, Bytes::from_static(b"half-done"), PutMode::Overwrite)
        .await
        .unwrap();
    let r = verify_to(&j, None).await.report;
    assert!(r.ok);
    assert_eq!(r.verified_last_position, Some(8), "the orphan is not counted");
    assert_eq!(r.unaccepted_objects, vec![orphan.clone()]);
    let more = generate::ndjson(7, 20, 1, 10);
    let tail: String = more.lines().skip(8).map(|l| format!("{l}\n")).collect();
    let report = append_text(&j, &tail, 4).await.unwrap();
    assert_eq!(
        report.unaccepted_objects,
        vec![orphan.clone()],
        "the next append reports it"
    );
    let r = verify_to(&j, None).await.report;
    assert!(r.ok);
    assert_eq!(r.verified_last_position, Some(10));
    assert_eq!(r.unaccepted_objects, vec![orphan]);
}

async fn racing_appenders_cannot_both_win(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 4, 4).await;
    let text = generate::ndjson(7, 20, 1, 8);
    let tail: String = text.lines().skip(4).map(|l| format!("{l}\n")).collect();
    let (a, b) = tokio::join!(append_text(&j, &tail, 4), append_text_as(&j, &tail, 4, "writer-b"));
    // One batch is written. The other writer lost the create-only race for sequence 2, or saw
    // the winner's head first and found its events already there (a re-send: a no-op).
    let written: u64 = [&a, &b].iter().filter_map(|r| r.as_ref().ok()).map(|r| r.batches).sum();
    assert_eq!(written, 1, "{a:?} / {b:?}");
    for r in [&a, &b] {
        match r {
            Ok(r) => assert!(r.batches == 1 || r.already_present == 4, "{r:?}"),
            Err(e) => assert!(matches!(e, JournalError::ConcurrentWriter { sequence: 2, .. }), "{e}"),
        }
    }
    assert_eq!(verify_to(&j, None).await.report.verified_manifests, 2);
    assert!(verify_to(&j, None).await.report.ok);
}

async fn checkpoints_are_create_only(store: Arc<dyn ObjectStore>) {
    let cp = |position: u64, snapshot_id: i64| Checkpoint {
        format_version: FORMAT_VERSION,
        journal_id: "journal-test".into(),
        table_uuid: "uuid-1".into(),
        table_name: "shop.orders".into(),
        snapshot_id,
        metadata_location: None,
        position,
        manifest_sequence: position / 10,
        manifest_digest: format!("sha256:{position}"),
        written_at: "2026-11-29T00:00:00Z".into(),
    };
    let s = store.as_ref();
    checkpoint::write(s, &cp(10, 100)).await.unwrap();
    checkpoint::write(s, &cp(20, 200)).await.unwrap();
    checkpoint::write(s, &cp(20, 200))
        .await
        .expect("the same checkpoint again is a no-op");
    let err = checkpoint::write(s, &cp(20, 999)).await.unwrap_err();
    assert!(
        matches!(
            err,
            JournalError::CheckpointConflict {
                existing_snapshot: 200,
                new_snapshot: 999,
                ..
            }
        ),
        "{err}"
    );
    let all = CheckpointFilter::default();
    assert_eq!(checkpoint::list(s, &all).await.unwrap().len(), 2);
    let at = |p| checkpoint::newest_at_or_before(s, &all, Some(p));
    assert_eq!(at(15).await.unwrap().unwrap().snapshot_id, 100);
    assert_eq!(at(20).await.unwrap().unwrap().snapshot_id, 200);
    assert!(at(9).await.unwrap().is_none());
    let other = CheckpointFilter {
        table_name: Some("other.table".into()),
        ..Default::default()
    };
    assert!(
        checkpoint::newest_at_or_before(s, &other, None)
            .await
            .unwrap()
            .is_none()
    );
}

on_both!(
    bucket = "tm-journal",
    prefix = "journal";
    append_then_verify,
    bad_input_writes_nothing,
    missing_journal_is_named,
    deleted_event_version_is_a_missing_object,
    overwriting_an_event_object_does_not_change_the_batch,
    rewritten_manifest_is_a_fork,
    manifest_claiming_another_sequence_is_a_fork,
    removed_manifest_is_a_gap,
    edited_previous_digest_breaks_the_link,
    crash_between_writes_leaves_an_unaccepted_object,
    racing_appenders_cannot_both_win,
    checkpoints_are_create_only,
    a_conflict_is_refused_and_writes_nothing,
);

/// `line` (an event) at `position` with another status: the same key and version, another payload.
fn changed(line: &str, position: u64) -> String {
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["position"] = position.into();
    v["status"] = "changed-by-someone".into();
    v.to_string()
}

async fn a_conflict_is_refused_and_writes_nothing(store: Arc<dyn ObjectStore>) {
    let j = journal_with(store.clone(), 5, 2).await;
    let lines = events(8);
    // In one input: lines 1 and 3 carry key and version of one event with different payloads.
    let input = format!("{}\n{}\n{}\n", lines[5], lines[6], changed(&lines[5], 8));
    let err = append_text(&j, &input, 1).await.unwrap_err();
    assert!(matches!(err, JournalError::ConflictingEvent { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("input.ndjson:3: the event at position 8 has key") && msg.contains("like line 1 (position 6)"),
        "{msg}"
    );
    // Against an event already in the journal (position 3).
    let err = append_text(&j, &format!("{}\n", changed(&lines[2], 6)), 10)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            JournalError::ConflictingEvent {
                first_line: None,
                first_position: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("like position 3, already in the journal"),
        "{err}"
    );
    assert_eq!(
        j.head().await.unwrap().unwrap().manifest.last_position,
        5,
        "nothing was written"
    );
    // An identical retry of a stored event at a new position is not a conflict.
    let mut retry: serde_json::Value = serde_json::from_str(&lines[2]).unwrap();
    retry["position"] = 6.into();
    append_text(&j, &format!("{retry}\n"), 10).await.unwrap();
}

/// Only possible on a folder: flip one byte of a stored version in place.
#[tokio::test]
async fn flipped_byte_is_a_checksum_mismatch() {
    let (store, dir) = test_support::local();
    let j = journal_with(store.clone(), 12, 4).await;
    let m = j.read_manifest(2, None).await.unwrap().manifest;
    let versions = dir
        .path()
        .join(".tidemark/versions")
        .join(m.object_key.replace('/', "%2F"));
    let path = versions.join(&m.object_version_id);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let b = verify_to(&j, None).await.report.first_break.expect("a break");
    assert_eq!((b.kind.as_str(), b.sequence), ("checksum_mismatch", Some(2)));
    assert!(b.message.contains(&m.object_sha256), "{}", b.message);
    assert_eq!(b.version_id.as_deref(), Some(m.object_version_id.as_str()));
}
