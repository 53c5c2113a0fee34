//! `recover` with the journal behind the seeded fault wrapper (`tidemark_journal::store::faulty`):
//! 503s on every kind of read and lost replies (retried into a `412`) on every conditional write.
//! Each run either completes with a validated table equal to an independent apply of the same
//! journal, or stops with an error that is not a conflict and leaves at most this recovery's own
//! table (which a re-run resumes or redoes); a plain re-run then completes with the right rows.

use tidemark_journal::generate;
use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};

use super::*;
use crate::apply::tests::{apply_all, table_rows};
use crate::recover::seed::PROP_RECOVERY_ID;

/// A SQLite catalog and warehouse in the new folder `dir`.
async fn catalog_at(dir: &std::path::Path) -> CatalogHandle {
    std::fs::create_dir_all(dir).unwrap();
    catalog_in(dir).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_through_faults_on_every_journal_call_then_a_clean_rerun() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("journal")).unwrap();
    let store = Arc::new(LocalStore::open(dir.path().join("journal")).unwrap());
    let j = Journal::init(store, orders_spec(), "j-faults".into(), &clock())
        .await
        .unwrap();
    let text = generate::ndjson(5, 30, 1, 160);
    let lines: Vec<String> = text.lines().map(|l| format!("{l}\n")).collect();
    let (first, rest) = (lines[..120].concat(), lines[120..].concat());
    append_text(&j, &first).await;
    let source = catalog_at(&dir.path().join("source")).await;
    apply_all(&j, &source, &SeededIds::new(1)).await;
    let metadata_location = table::load_table(&source, "shop.orders")
        .await
        .unwrap()
        .metadata_location()
        .unwrap()
        .to_string();
    // The events after the snapshot, which the recovery replays; the expected rows are an
    // independent apply of the whole journal.
    append_text(&j, &rest).await;
    let expected = catalog_at(&dir.path().join("expected")).await;
    apply_all(&j, &expected, &SeededIds::new(2)).await;
    let want = table_rows(&expected, "shop.orders").await;

    let (mut injected, mut stopped) = (0, 0);
    for seed in 1..=6u64 {
        let faulty = Arc::new(FaultyStore::new(
            j.store.clone(),
            seed,
            vec![
                Rule::new(Op::Put, Fault::LostReplyRetried).mode(ModeFilter::Conditional),
                Rule::new(Op::Get, Fault::Unavailable).probability(0.03),
                Rule::new(Op::Head, Fault::Unavailable).probability(0.1),
                Rule::new(Op::List, Fault::Unavailable).probability(0.1),
                Rule::new(Op::ListVersions, Fault::Unavailable).probability(0.1),
            ],
        ));
        let jf = Journal {
            store: faulty.clone(),
            ..j.clone()
        };
        let handle = catalog_at(&dir.path().join(format!("dr-{seed}"))).await;
        let opts = RecoverOptions {
            to: Some(160),
            ..RecoverOptions::new(
                format!("rec-faults-{seed}"),
                SnapshotSource::at(metadata_location.clone()),
                SnapshotChoice::Checkpoint { at_or_before: None },
                "shop.fixed",
            )
        };
        let ids = SeededIds::new(100 + seed);
        match recover(&jf, &handle, &opts, &clock(), &ids, &mut |_| {}).await {
            Ok((report, _)) => assert!(report.validation.ok, "seed {seed}: {:?}", report.validation),
            Err(e) => {
                stopped += 1;
                let message = e.to_string();
                let code = crate::exit::code_of(&anyhow::Error::new(e));
                assert_ne!(
                    code,
                    crate::exit::CONFLICT,
                    "seed {seed}: its own write is no conflict: {message}"
                );
                assert!(
                    message.contains("503"),
                    "seed {seed}: names the failed request: {message}"
                );
                // No half state: no table, or this recovery's own (resumed or redone below).
                if let Ok(t) = table::load_table(&handle, "shop.fixed").await {
                    let owner = t.metadata().properties().get(PROP_RECOVERY_ID).cloned();
                    assert_eq!(owner.as_deref(), Some(opts.recovery_id.as_str()), "seed {seed}");
                }
            }
        }
        injected += faulty.injected();
        let (report, _) = recover(&j, &handle, &opts, &clock(), &ids, &mut |_| {})
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: the clean re-run: {e}"));
        assert!(report.validation.ok, "seed {seed}: {:?}", report.validation);
        assert_eq!(table_rows(&handle, "shop.fixed").await, want, "seed {seed}");
    }
    assert!(
        injected > 0 && stopped > 0,
        "the faults must hit: {injected} injected, {stopped} stopped"
    );
}
