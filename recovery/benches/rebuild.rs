//! Catalog rebuild benchmark (not a test): a warehouse of TABLES tables (default 1,000), each
//! with 6 metadata files on its chain and one stray left by a commit that lost its race, is
//! rebuilt into an empty SQLite catalog; prints milliseconds per table.
//!
//! `cargo bench -p tidemark-recovery --bench rebuild [-- TABLES [s3://bucket/prefix]]`
//!
//! The tables are copies of one real table's metadata folder (the JSON with its location
//! rewritten), since a rebuild reads only metadata files. With an S3 URL the warehouse is
//! written there (the endpoint and credentials come from the AWS environment variables).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch};
use futures::{StreamExt, stream};
use tidemark_journal::spec::CompiledSpec;
use tidemark_journal::store::{self, PutMode};
use tidemark_recovery::benchdata::{order_columns, peak_rss_mb};
use tidemark_recovery::catalog::{CatalogConfig, open_catalog};
use tidemark_recovery::dr::rebuild::{rebuild, warehouse_base};
use tidemark_recovery::ids::{Ids, RandomIds};
use tidemark_recovery::table::{self, CommitStamp, TableError, arrow_schema, commit_overwrite, write_data_file};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let tables: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let s3 = args.get(1).filter(|a| a.starts_with("s3://")).cloned();
    let rt = tidemark_recovery::benchdata::runtime();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        // The template: 5 commits, then a commit based on version 3 that loses its race.
        let template = open_catalog(&CatalogConfig {
            uri: dir.path().join("template.db").display().to_string(),
            warehouse: dir.path().join("template").display().to_string(),
            name: "bench".into(),
        })
        .await
        .unwrap();
        let mut t = table::create_or_load_table(&template, "bench.template", &CompiledSpec::orders())
            .await
            .unwrap();
        let mut stale = t.clone();
        for n in 1..=5u64 {
            if n == 4 {
                stale = t.clone(); // two commits behind at the end: its file forks version 4
            }
            let keys: Vec<u64> = (n * 100..n * 100 + 10).collect();
            let mut cols = order_columns(&keys, &[1; 10], &[false; 10]);
            cols.push(Arc::new(Int64Array::from(vec![n as i64; 10])));
            let batch = RecordBatch::try_new(arrow_schema(&t).unwrap(), cols).unwrap();
            let files = write_data_file(&t, &[batch], RandomIds.uuid()).await.unwrap();
            #[allow(clippy::disallowed_methods)] // a benchmark reads the wall clock
            let stamp = CommitStamp { id: RandomIds.uuid(), at: chrono::Utc::now() };
            t = commit_overwrite(&template, &t, &[], files, HashMap::new(), stamp).await.unwrap();
        }
        let mut cols = order_columns(&[9], &[1], &[false]);
        cols.push(Arc::new(Int64Array::from(vec![9i64])));
        let batch = RecordBatch::try_new(arrow_schema(&stale).unwrap(), cols).unwrap();
        let files = write_data_file(&stale, &[batch], RandomIds.uuid()).await.unwrap();
        #[allow(clippy::disallowed_methods)]
        let stamp = CommitStamp { id: RandomIds.uuid(), at: chrono::Utc::now() };
        let lost = commit_overwrite(&template, &stale, &[], files, HashMap::new(), stamp).await;
        assert!(matches!(lost, Err(TableError::CommitConflict { .. })), "{lost:?}");
        let template_loc = t.metadata().location().to_string();
        let meta_dir = dir.path().join("template/bench/template/metadata");
        let mut metadata: Vec<(String, String)> = Vec::new();
        for e in std::fs::read_dir(&meta_dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if name.ends_with(".metadata.json") {
                metadata.push((name, std::fs::read_to_string(e.path()).unwrap()));
            }
        }

        // The warehouse: TABLES copies of the metadata folder.
        let warehouse = s3.clone().unwrap_or_else(|| dir.path().join("warehouse").display().to_string());
        let base = warehouse_base(&warehouse).unwrap();
        let wh = store::open_or_create(&warehouse).await.unwrap();
        let t0 = Instant::now();
        let mut puts: Vec<(String, String)> = Vec::new();
        for i in 0..tables {
            let loc = format!("{base}/bench/t{i:05}");
            for (name, json) in &metadata {
                puts.push((format!("bench/t{i:05}/metadata/{name}"), json.replace(&template_loc, &loc)));
            }
        }
        let n_files = puts.len();
        stream::iter(puts)
            .for_each_concurrent(16, |(key, body)| {
                let wh = wh.clone();
                async move {
                    wh.put(&key, body.into(), PutMode::Overwrite).await.unwrap();
                }
            })
            .await;
        let setup_s = t0.elapsed().as_secs_f64();

        let catalog = open_catalog(&CatalogConfig {
            uri: dir.path().join("rebuilt.db").display().to_string(),
            warehouse: warehouse.clone(),
            name: "bench".into(),
        })
        .await
        .unwrap();
        let t0 = Instant::now();
        let report = rebuild(&warehouse, &catalog, None, &HashMap::new()).await.unwrap();
        let total_ms = t0.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(report.totals.registered, tables, "{:?}", report.totals);
        assert_eq!(report.totals.strays, tables);
        let mut per: Vec<u64> = report.tables.iter().map(|t| t.ms).collect();
        per.sort_unstable();
        let pct = |p: f64| per[((per.len() as f64 - 1.0) * p).round() as usize];
        println!(
            "rebuild benchmark: {tables} tables, {} metadata files each ({n_files} in all; 1 stray per table) in {base} (setup {setup_s:.1}s)",
            metadata.len()
        );
        println!("total {total_ms:.0} ms  = {:.2} ms per table", total_ms / tables as f64);
        println!(
            "per table (read + choose + register): median {} ms, p90 {} ms, max {} ms; peak RSS {:.0} MB",
            pct(0.5),
            pct(0.9),
            pct(1.0),
            peak_rss_mb()
        );
    });
}
