//! Recovery benchmark (not a test): for a snapshot of N rows (default 1,000,000) and M journal
//! events after it (default 100,000), the times of journal verify, seed, replay, validate and the
//! whole recovery, and peak resident memory.
//!
//! `cargo bench -p tidemark-recovery --bench recover [-- ROWS EVENTS [ENGINE]]`, ENGINE as
//! `recover --engine` takes it (`local`, `ballista-standalone`, `ballista://127.0.0.1:PORT`: the
//! distributed recovery, issue 15; docs/performance.md "Ballista"; needs `--features
//! ballista-engine`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tidemark_journal::Journal;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::generate::Rng;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::verify::verify;
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_recovery::apply::PROP_LAST_POSITION;
use tidemark_recovery::benchdata::{commit_orders, order_id, peak_rss_mb};
use tidemark_recovery::catalog::{CatalogConfig, open_catalog};
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::recover::RecoverOptions;
#[cfg(feature = "ballista-engine")]
use tidemark_recovery::recover::engine::{self, Engine};
use tidemark_recovery::recover::snapshot::{SnapshotChoice, SnapshotSource};
use tidemark_recovery::table::{self};

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rows = args.first().copied().unwrap_or(1_000_000);
    let events = args.get(1).copied().unwrap_or(100_000);
    #[cfg(feature = "ballista-engine")]
    let engine: Engine = std::env::args()
        .skip(1)
        .find(|a| a.parse::<u64>().is_err() && !a.starts_with('-'))
        .unwrap_or_else(|| "local".into())
        .parse()
        .unwrap();
    #[cfg(not(feature = "ballista-engine"))]
    let engine = "local";
    let rt = tidemark_recovery::benchdata::runtime();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let jdir = dir.path().join("journal");
        std::fs::create_dir_all(&jdir).unwrap();
        let journal = Journal::init(Arc::new(LocalStore::open(&jdir).unwrap()), orders_spec(), "bench".into(), &SystemClock).await.unwrap();
        let cfg = CatalogConfig::in_folder(dir.path(), "bench");
        let handle = open_catalog(&cfg).await.unwrap();
        // The source snapshot: `rows` orders at version 1, holding journal position 0.
        let t0 = Instant::now();
        let src = table::create_or_load_table(&handle, "bench.orders", &journal.spec).await.unwrap();
        let summary = HashMap::from([(PROP_LAST_POSITION.to_string(), "0".to_string())]);
        #[allow(clippy::disallowed_methods)] // a benchmark reads the wall clock
        let src = commit_orders(&handle, &src, rows, |_| (1, false, 0), summary, &RandomIds, chrono::Utc::now()).await.unwrap();
        // The journal after it: mostly recent orders, some new, a few tombstones.
        let mut rng = Rng::new(7);
        let mut versions: HashMap<u64, i64> = HashMap::new();
        let mut text = String::with_capacity(events as usize * 220);
        for p in 1..=events {
            let id = match rng.below(100) {
                0..80 => rows - 1 - rng.below((rows / 10).max(1)),
                80..95 => rng.below(rows),
                _ => rows + p,
            };
            let v = versions.entry(id).or_insert(1);
            *v += 1;
            let deleted = rng.chance(5);
            text += &format!(
                r#"{{"position":{p},"order_id":"{}","order_version":{v},"customer_id":"c-1","status":"paid","amount":"{}.00","currency":"EUR","is_deleted":{deleted},"event_time":"2026-11-29T08:00:00Z"}}"#,
                order_id(id),
                p % 1000
            );
            text.push('\n');
        }
        let opts = AppendOptions { batch_size: 10_000, writer_id: "bench".into(), source_name: "bench".into() };
        append(&journal, text.as_bytes(), &opts, &SystemClock, &mut |_| {}).await.unwrap();
        let setup_s = t0.elapsed().as_secs_f64();

        let t = Instant::now();
        let chain = verify(&journal, &Default::default(), &mut |_| {}).await.unwrap();
        assert!(chain.report.ok);
        let verify_s = t.elapsed().as_secs_f64();
        let ropts = RecoverOptions {
            recovery_id: "bench".into(),
            source: SnapshotSource::at(src.metadata_location().unwrap()),
            choice: SnapshotChoice::SnapshotId(src.metadata().current_snapshot_id().unwrap()),
            to: Some(events),
            into: "bench.recovered".into(),
            partition_rows: None,
            validation_split: Default::default(),
            // The snapshot is generated, not applied from this journal: the recovery's audit
            // (issue 30) calls it a divergence; the benchmark starts from it on purpose.
            trust: tidemark_recovery::recover::audited::TrustOptions {
                accept_divergence: Some("the benchmark's generated snapshot".into()),
                ..Default::default()
            },
        };
        let t = Instant::now();
        #[cfg(feature = "ballista-engine")]
        let (report, _) = engine::recover(&journal, &handle, &ropts, &engine, &SystemClock, &RandomIds, &mut |_| {}).await.unwrap();
        #[cfg(not(feature = "ballista-engine"))]
        let (report, _) =
            tidemark_recovery::recover::recover(&journal, &handle, &ropts, &SystemClock, &RandomIds, &mut |_| {}).await.unwrap();
        let total_s = t.elapsed().as_secs_f64();
        assert!(report.validation.ok, "{:?}", report.validation);
        let ms = |name: &str| report.steps.iter().find(|s| s.step == name).map_or(0, |s| s.ms) as f64 / 1000.0;
        println!("recovery benchmark: {rows} snapshot rows, {events} events, engine {engine} (setup {setup_s:.1}s)");
        println!("{:<22} {:>9}", "step", "seconds");
        println!("{:<22} {:>9.2}", "journal verify", verify_s);
        println!("{:<22} {:>9.2}", "choose snapshot", ms("choose snapshot"));
        println!("{:<22} {:>9.2}", "seed", ms("seed"));
        println!("{:<22} {:>9.2}", "replay", ms("replay"));
        println!("{:<22} {:>9.2}", "validate", ms("validate"));
        println!("{:<22} {:>9.2}", "total recovery", total_s + verify_s);
        println!("peak RSS {:.0} MB; validated {} keys", peak_rss_mb(), report.validation.keys_expected);
    });
}
