//! The suite's audit figures (issue 30), on the drill section's table (the applier's own, `ROWS`
//! orders at position `ROWS`, `EVENTS` more events journaled in a hundred batches):
//!
//! 1. the applier commits the hundred batches one a commit (merge-on-read, as a table taking
//!    small commits is kept): a history of about a hundred commits;
//! 2. `tidemark audit`, the first audit of that history (records written under the journal);
//! 3. a foreign commit that rewrites about 1% of the table (`tidemark fault delete` of the
//!    orders in the first 1% of keys, outside the journal: a divergence);
//! 4. `tidemark audit` again: incremental, it resumes from the records and reads only the files
//!    the foreign commit touched; it exits 12 naming the divergence;
//! 5. DuckDB reading the same files (every column of the data and delete files the foreign
//!    commit added or removed), the floor for any diff of that commit.
//!
//! Each command runs as users run it (the `tidemark` binary of this build, its own process).

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

use super::drill_runs::tidemark;

/// The audit section on the drill section's dataset in `dir`.
pub fn orchestrate(
    dir: &Path,
    rows: u64,
    python: Option<&str>,
    child: &dyn Fn(&Path, &str, &[&str]) -> Value,
) -> Value {
    let s = |p: &str| dir.join(p).display().to_string();
    let (journal, catalog, warehouse) = (s("journal"), s("catalog.db"), s("warehouse"));
    let at = ["--catalog", catalog.as_str(), "--warehouse", warehouse.as_str()];
    let table = ["--table", super::TABLE, "--json"];
    eprintln!("suite: audit: the applier commits the events, a batch a commit");
    let applied = tidemark(
        &[
            &["apply", "--journal", &journal][..],
            &at,
            &table,
            &["--batches-per-commit", "1", "--merge-mode", "merge-on-read"],
        ]
        .concat(),
    );
    assert_eq!(applied["exit"], 0, "{applied:#}");
    let audit = || tidemark(&[&["audit", "--journal", &journal][..], &at, &table].concat());
    eprintln!("suite: audit: the first audit of the history");
    let first = audit();
    assert_eq!(first["exit"], 0, "{first:#}");
    eprintln!("suite: audit: a foreign commit rewriting about 1% of the table");
    let bound = tidemark_recovery::benchdata::order_id(rows / 100);
    let filter = format!("order_id < '{bound}'");
    let foreign = tidemark(&[&["fault", "delete"][..], &at, &table, &["--where", &filter]].concat());
    assert_eq!(foreign["exit"], 0, "{foreign:#}");
    eprintln!("suite: audit: the incremental audit");
    let incremental = audit();
    assert_eq!(
        incremental["exit"], 12,
        "the foreign delete is a divergence: {incremental:#}"
    );
    let touched = child(dir, "touched", &[]);
    let duck = duckdb_reads(python, dir, &touched);
    let ratio = incremental["seconds"]
        .as_f64()
        .zip(duck["seconds"].as_f64())
        .map(|(a, d)| a / d);
    json!({
        "history_commits": applied["output"]["commits"],
        "apply": applied, "first_audit": first, "foreign_commit": foreign,
        "incremental_audit": incremental, "touched_files": touched, "duckdb_read_touched": duck,
        "incremental_audit_vs_duckdb_read_time": ratio,
    })
}

/// `__step touched DIR`: the data and delete files the table's current snapshot added or
/// removed against its parent (what a diff of that commit has to read).
pub async fn touched_step(dir: &Path) -> Value {
    use tidemark_recovery::table::files::snapshot_files;
    let handle = tidemark_recovery::catalog::open_catalog(&tidemark_recovery::catalog::CatalogConfig::in_folder(
        dir, "tidemark",
    ))
    .await
    .unwrap();
    let t = tidemark_recovery::table::load_table(&handle, super::TABLE)
        .await
        .unwrap();
    let meta = t.metadata();
    let current = meta.current_snapshot().unwrap();
    let parent = meta.snapshot_by_id(current.parent_snapshot_id().unwrap()).unwrap();
    let files = |list: String| {
        let io = t.file_io().clone();
        async move {
            let f = snapshot_files(&io, super::TABLE, &list, &|p: &str| p.to_string())
                .await
                .unwrap();
            let paths = |v: &[_]| -> HashSet<(String, u64)> {
                v.iter()
                    .map(|l: &tidemark_recovery::table::files::LiveFile| {
                        (l.file.file_path().to_string(), l.file.file_size_in_bytes())
                    })
                    .collect()
            };
            (paths(&f.data), paths(&f.deletes))
        }
    };
    let (now_data, now_deletes) = files(current.manifest_list().to_string()).await;
    let (then_data, then_deletes) = files(parent.manifest_list().to_string()).await;
    let diff = |a: &HashSet<(String, u64)>, b: &HashSet<(String, u64)>| -> Vec<(String, u64)> {
        let mut v: Vec<_> = a.symmetric_difference(b).cloned().collect();
        v.sort();
        v
    };
    let (data, deletes) = (diff(&now_data, &then_data), diff(&now_deletes, &then_deletes));
    let path = |v: &[(String, u64)]| -> Vec<String> {
        v.iter()
            .map(|(p, _)| p.trim_start_matches("file://").to_string())
            .collect()
    };
    json!({
        "data_files": path(&data), "delete_files": path(&deletes),
        "bytes": data.iter().chain(&deletes).map(|(_, n)| n).sum::<u64>(),
        "table_data_files": now_data.len(),
    })
}

/// DuckDB reading every column of `touched`'s files (`$TIDEMARK_BENCH_PYTHON`).
fn duckdb_reads(python: Option<&str>, dir: &Path, touched: &Value) -> Value {
    let Some(py) = python else {
        return json!({"skipped": "TIDEMARK_BENCH_PYTHON is not set (run sandbox/bench.sh)"});
    };
    let list = dir.join("touched.json");
    std::fs::write(&list, serde_json::to_vec(touched).unwrap()).unwrap();
    let script = r#"
import duckdb, json, sys, time
t = json.load(open(sys.argv[1]))
start = time.perf_counter()
con = duckdb.connect()
rows = 0
for files in (t["data_files"], t["delete_files"]):
    if files:
        q = "SELECT count(*), max(COLUMNS(*)) FROM read_parquet(?)"
        rows += con.execute(q, [files]).fetchone()[0]
print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows,
                  "query": "SELECT count(*), max(COLUMNS(*)) FROM read_parquet(<files>)"}))
"#;
    let t = Instant::now();
    let out = Command::new(py).args(["-c", script]).arg(&list).output().unwrap();
    if !out.status.success() {
        return json!({"failed": String::from_utf8_lossy(&out.stderr), "wall_s": t.elapsed().as_secs_f64()});
    }
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| json!({"failed": e.to_string()}))
}
