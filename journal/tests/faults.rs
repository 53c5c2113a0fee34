//! The journal under injected faults (`store::faulty`), each on a local folder and on S3: a lost
//! reply on any conditional write is resolved by reading back, so tidemark never takes its own
//! write for another writer's; the conformance suite holds through delays; unavailable stores
//! give clear errors and nothing half-written.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidemark_journal::checkpoint;
use tidemark_journal::clock::StepClock;
use tidemark_journal::generate;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};
use tidemark_journal::store::{ObjectStore, PutMode, conformance, put_resolved};
use tidemark_journal::verify::{VerifyOptions, verify};
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_journal::{Journal, JournalError, on_both};
use tidemark_schemas::{Checkpoint, FORMAT_VERSION};

fn clock() -> StepClock {
    StepClock::new(
        chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
        chrono::Duration::milliseconds(1),
    )
}

fn faulty(store: Arc<dyn ObjectStore>, rules: Vec<Rule>) -> Arc<FaultyStore> {
    Arc::new(FaultyStore::new(store, 42, rules))
}

fn opts() -> AppendOptions {
    AppendOptions {
        batch_size: 10,
        writer_id: "writer-a".into(),
        source_name: "input.ndjson".into(),
    }
}

/// Positions `first..=last` of one generated stream (a re-send repeats the same events).
fn events(first: u64, last: u64) -> String {
    generate::ndjson(7, 20, 1, last)
        .lines()
        .skip(first as usize - 1)
        .map(|l| format!("{l}\n"))
        .collect()
}

async fn append_text(j: &Journal, text: &str) -> Result<tidemark_schemas::AppendReport, JournalError> {
    append(j, text.as_bytes(), &opts(), &clock(), &mut |_| {}).await
}

async fn verified_last(j: &Journal) -> Option<u64> {
    let chain = verify(j, &VerifyOptions::default(), &mut |_| {}).await.unwrap();
    assert!(chain.report.ok, "the journal verifies: {:?}", chain.report);
    chain.report.verified_last_position
}

/// The finding: a lost reply on a manifest write, retried by the backend, met its own manifest
/// (`412`) and was reported as another writer's ("another writer appended sequence 3 first").
async fn lost_reply_on_manifest_is_own_write(store: Arc<dyn ObjectStore>) {
    let f = faulty(store, vec![]);
    let j = Journal::init(f.clone(), orders_spec(), "j".into(), &clock())
        .await
        .unwrap();
    append_text(&j, &events(1, 20)).await.unwrap();
    for fault in [Fault::LostReplyRetried, Fault::LostReply] {
        f.set_rules(vec![
            Rule::new(Op::Put, fault)
                .prefix("manifests/")
                .mode(ModeFilter::Create)
                .times(1),
        ]);
        let head = verified_last(&j).await.unwrap();
        let report = append_text(&j, &events(head + 1, head + 10)).await.unwrap();
        assert_eq!(report.last_position, Some(head + 10), "{fault:?}");
        assert_eq!(verified_last(&j).await, Some(head + 10), "{fault:?}");
    }
    assert_eq!(f.injected(), 2);
}

/// Lost replies on the event object and on every probe write of the capability check: the
/// append completes, nothing doubles.
async fn lost_replies_on_events_and_probe(store: Arc<dyn ObjectStore>) {
    let f = faulty(store, vec![]);
    let j = Journal::init(f.clone(), orders_spec(), "j".into(), &clock())
        .await
        .unwrap();
    f.set_rules(vec![
        Rule::new(Op::Put, Fault::LostReplyRetried).prefix("_probe/").times(3),
        Rule::new(Op::Put, Fault::LostReply).prefix("events/").times(1),
        Rule::new(Op::Put, Fault::LostReplyRetried).prefix("events/").times(1),
    ]);
    let report = append_text(&j, &events(1, 30)).await.unwrap();
    assert_eq!((report.batches, report.last_position), (3, Some(30)));
    assert!(report.unaccepted_objects.is_empty());
    assert_eq!(f.injected(), 5);
    f.set_rules(vec![]);
    assert_eq!(verified_last(&j).await, Some(30));
}

/// `journal init` and a checkpoint whose replies were lost: their own objects, not "already exists".
async fn lost_reply_on_init_and_checkpoint(store: Arc<dyn ObjectStore>) {
    let f = faulty(
        store,
        vec![
            Rule::new(Op::Put, Fault::LostReplyRetried)
                .mode(ModeFilter::Create)
                .times(2),
        ],
    );
    let j = Journal::init(f.clone(), orders_spec(), "j".into(), &clock())
        .await
        .unwrap();
    assert_eq!(j.header.journal_id, "j");
    let cp = Checkpoint {
        format_version: FORMAT_VERSION,
        journal_id: "j".into(),
        table_uuid: "u-1".into(),
        table_name: "shop.orders".into(),
        snapshot_id: 7,
        metadata_location: None,
        position: 10,
        manifest_sequence: 1,
        manifest_digest: "sha256:00".into(),
        written_at: "2026-01-01T00:00:00Z".into(),
    };
    checkpoint::write(f.as_ref(), &cp).await.unwrap();
    assert_eq!(f.injected(), 2);
    // A second init is still refused, naming the existing journal.
    let err = Journal::init(f.clone(), orders_spec(), "other".into(), &clock())
        .await
        .unwrap_err();
    assert!(matches!(err, JournalError::AlreadyInitialized { .. }), "{err}");
}

/// A conflict found by reading back is still a conflict: another writer's bytes at the key.
async fn read_back_keeps_real_conflicts(store: Arc<dyn ObjectStore>) {
    let f = faulty(store.clone(), vec![]);
    store
        .put("k/create", Bytes::from_static(b"theirs"), PutMode::Create)
        .await
        .unwrap();
    f.set_rules(vec![Rule::new(Op::Put, Fault::LostReply)]);
    let err = put_resolved(f.as_ref(), "k/create", Bytes::from_static(b"mine"), PutMode::Create)
        .await
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let base = store
        .put("k/cas", Bytes::from_static(b"base"), PutMode::Overwrite)
        .await
        .unwrap();
    store
        .put(
            "k/cas",
            Bytes::from_static(b"theirs"),
            PutMode::Update {
                etag: base.etag.clone(),
            },
        )
        .await
        .unwrap();
    let err = put_resolved(
        f.as_ref(),
        "k/cas",
        Bytes::from_static(b"mine"),
        PutMode::Update { etag: base.etag },
    )
    .await
    .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(&store.get("k/cas", None).await.unwrap().body[..], b"theirs");
    // An unavailable store before the request left: written again under the same condition.
    f.set_rules(vec![Rule::new(Op::Put, Fault::Unavailable).times(1)]);
    let r = put_resolved(f.as_ref(), "k/new", Bytes::from_static(b"mine"), PutMode::Create)
        .await
        .unwrap();
    assert!(!r.read_back);
    assert_eq!(store.list_versions("k/new").await.unwrap().len(), 1);
}

/// A store that stays unavailable: the append stops with an error naming the operation and the
/// key, and a plain re-run once it is back completes with nothing doubled.
async fn unavailable_store_then_rerun(store: Arc<dyn ObjectStore>) {
    let f = faulty(store, vec![]);
    let j = Journal::init(f.clone(), orders_spec(), "j".into(), &clock())
        .await
        .unwrap();
    f.set_rules(vec![Rule::new(Op::Put, Fault::Unavailable).prefix("manifests/")]);
    let err = append_text(&j, &events(1, 20)).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("manifests/00000000000000000001.json"), "{msg}");
    assert!(msg.contains("outcome unknown"), "{msg}");
    f.set_rules(vec![]);
    let report = append_text(&j, &events(1, 20)).await.unwrap();
    assert_eq!(report.last_position, Some(20));
    assert_eq!(verified_last(&j).await, Some(20));
}

/// The contract holds through the wrapper with delays on every operation.
async fn conformance_under_delays(store: Arc<dyn ObjectStore>) {
    let delay = Fault::Delay(Duration::from_millis(3));
    let rules = [
        Op::Put,
        Op::Get,
        Op::Head,
        Op::List,
        Op::ListVersions,
        Op::Delete,
        Op::DeleteVersion,
    ]
    .into_iter()
    .map(|op| Rule::new(op, delay).probability(0.3))
    .collect();
    let f = faulty(store, rules);
    conformance::run_all(f.clone()).await;
    assert!(f.injected() > 0);
}

/// The contract's read-back rule, checked on the backend through lost replies.
async fn conformance_read_back(store: Arc<dyn ObjectStore>) {
    let f = faulty(store, vec![]);
    conformance::lost_replies_are_resolved_by_reading_back(f).await;
}

/// The finding: re-running the same input after a lost reply was refused ("position 2001 does
/// not continue the journal: expected 3001"). A re-send is now a no-op where identical and a
/// refusal naming the first differing position where not.
async fn resending_is_idempotent(store: Arc<dyn ObjectStore>) {
    let j = Journal::init(store, orders_spec(), "j".into(), &clock()).await.unwrap();
    append_text(&j, &events(1, 20)).await.unwrap();
    let again = append_text(&j, &events(1, 20)).await.unwrap();
    assert_eq!((again.already_present, again.events, again.batches), (20, 0, 0));
    let more = append_text(&j, &events(11, 35)).await.unwrap();
    assert_eq!((more.already_present, more.events), (10, 15));
    assert_eq!((more.first_position, more.last_position), (Some(21), Some(35)));
    assert_eq!(verified_last(&j).await, Some(35));
    // One event changed among the re-sent ones: refused, naming it; nothing appended.
    let changed: String = events(15, 40)
        .lines()
        .map(|l| {
            if l.contains("\"position\":18,") {
                l.replace("\"currency\":\"", "\"currency\":\"X")
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect();
    let err = append_text(&j, &changed).await.unwrap_err();
    match &err {
        JournalError::ResentEventDiffers { position, field, .. } => {
            assert_eq!((*position, field.as_str()), (18, "currency"), "{err}");
        }
        other => panic!("expected ResentEventDiffers, got {other}"),
    }
    assert_eq!(verified_last(&j).await, Some(35));
    // A gap is still refused as before.
    let err = append_text(&j, &events(37, 40)).await.unwrap_err();
    assert!(
        matches!(err, JournalError::PositionMismatch { expected: 36, .. }),
        "{err}"
    );
}

on_both!(bucket = "tm-faults", prefix = "j";
    resending_is_idempotent,
    lost_reply_on_manifest_is_own_write,
    lost_replies_on_events_and_probe,
    lost_reply_on_init_and_checkpoint,
    read_back_keeps_real_conflicts,
    unavailable_store_then_rerun,
    conformance_under_delays,
    conformance_read_back,
);
