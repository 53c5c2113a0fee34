//! Journal benchmark (not a test): append and verify throughput for a journal of N events
//! (default 1,000,000) on a local folder, with `sha256sum` over the same event-object bytes beside
//! `verify` for scale. Run: `cargo bench -p tidemark-journal --bench journal [-- EVENTS [BATCH]]`.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use tidemark_journal::Journal;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::generate;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::local::LocalStore;
use tidemark_journal::verify::{VerifyOptions, verify};
use tidemark_journal::writer::{AppendOptions, append};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let events: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let batch: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();

    let t = Instant::now();
    let text = generate::ndjson(42, events / 4, 1, events);
    let gen_s = t.elapsed().as_secs_f64();

    rt.block_on(async {
        let store = Arc::new(LocalStore::open(dir.path()).unwrap());
        let j = Journal::init(store, orders_spec(), "bench".into(), &SystemClock).await.unwrap();
        let opts = AppendOptions { batch_size: batch, writer_id: "bench".into(), source_name: "generated".into() };
        let t = Instant::now();
        let report = append(&j, text.as_bytes(), &opts, &SystemClock, &mut |_| {}).await.unwrap();
        let append_s = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let chain = verify(&j, &VerifyOptions::default(), &mut |_| {}).await.unwrap();
        let verify_s = t.elapsed().as_secs_f64();
        assert!(chain.report.ok, "{:?}", chain.report.first_break);
        let bytes = chain.report.verified_bytes as f64;

        let files: Vec<String> = chain
            .manifests
            .iter()
            .map(|m| dir.path().join(&m.manifest.object_key).display().to_string())
            .collect();
        let t = Instant::now();
        let status = Command::new("sha256sum").args(&files).stdout(std::process::Stdio::null()).status().unwrap();
        let sha_s = t.elapsed().as_secs_f64();
        assert!(status.success());

        let mb = bytes / 1e6;
        println!("journal benchmark: {events} events, batch {batch}, {} batches, {mb:.1} MB of event objects, {:.1} MB NDJSON input", report.batches, text.len() as f64 / 1e6);
        println!("{:<28} {:>10} {:>14}", "step", "seconds", "throughput");
        println!("{:<28} {:>10.2} {:>10.0} ev/s", "generate NDJSON", gen_s, events as f64 / gen_s);
        println!("{:<28} {:>10.2} {:>10.0} ev/s", "journal append", append_s, events as f64 / append_s);
        println!("{:<28} {:>10.2} {:>9.1} MB/s", "journal verify", verify_s, mb / verify_s);
        println!("{:<28} {:>10.2} {:>9.1} MB/s", "sha256sum (same bytes)", sha_s, mb / sha_s);
        println!("verify / sha256sum throughput: {:.2}", (mb / verify_s) / (mb / sha_s));
    });
}
