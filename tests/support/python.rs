//! PyIceberg for the interoperability scenarios: the Python of the venv that
//! `sandbox/pyiceberg.sh` makes (TIDEMARK_PYTHON, exported by `sandbox/test.sh`) running
//! `sandbox/interop/pyiceberg_tool.py` on a scratch folder's catalog.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Run;

/// The tool the scenarios run (see its docstring for the commands and output formats).
pub const TOOL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sandbox/interop/pyiceberg_tool.py");

/// The Python that has PyIceberg, or `None` (after a skip line) when TIDEMARK_SKIP_PYICEBERG=1.
/// Panics when it is not set, with the way to set it.
pub fn pyiceberg_python() -> Option<PathBuf> {
    if std::env::var("TIDEMARK_SKIP_PYICEBERG").is_ok_and(|v| v == "1") {
        eprintln!("PyIceberg scenario skipped (TIDEMARK_SKIP_PYICEBERG=1)");
        return None;
    }
    let python = std::env::var("TIDEMARK_PYTHON").unwrap_or_else(|_| {
        panic!(
            "TIDEMARK_PYTHON is not set: run the tests with `bash sandbox/test.sh` (or \
             `eval \"$(bash sandbox/pyiceberg.sh)\"` first), or set TIDEMARK_SKIP_PYICEBERG=1"
        )
    });
    Some(PathBuf::from(python))
}

/// `pyiceberg_tool.py` on one catalog: a SQLite file and warehouse (a folder or on S3), or a defined catalog
/// (`catalog:NAME`, `s3tables:NAME`; see the tool's doc) with the definition in `env`.
pub struct PyIceberg {
    pub python: PathBuf,
    pub catalog: String,
    pub warehouse: String,
    /// Environment variables for the tool (e.g. `PYICEBERG_CATALOG__NAME__KEY` definitions).
    pub env: Vec<(String, String)>,
}

impl PyIceberg {
    /// `None` when the scenario is skipped (see [`pyiceberg_python`]).
    pub fn new(catalog: &Path, warehouse: &Path) -> Option<Self> {
        Some(PyIceberg {
            python: pyiceberg_python()?,
            catalog: catalog.display().to_string(),
            warehouse: warehouse.display().to_string(),
            env: Vec::new(),
        })
    }

    /// On a SQLite catalog whose warehouse is on S3 (`s3://bucket/prefix`, the server and keys of
    /// the environment). `None` when the scenario is skipped.
    pub fn with_s3_warehouse(catalog: &Path, warehouse: &str) -> Option<Self> {
        Some(PyIceberg {
            python: pyiceberg_python()?,
            catalog: catalog.display().to_string(),
            warehouse: warehouse.to_string(),
            env: Vec::new(),
        })
    }

    /// On the catalog the tool names `catalog` (`catalog:NAME` or `s3tables:NAME`), defined by
    /// the `PYICEBERG_CATALOG__…` variables in `env`. `None` when the scenario is skipped.
    pub fn on_defined(catalog: &str, env: Vec<(String, String)>) -> Option<Self> {
        Some(PyIceberg {
            python: pyiceberg_python()?,
            catalog: catalog.to_string(),
            warehouse: "-".to_string(),
            env,
        })
    }

    /// Runs `pyiceberg_tool.py COMMAND CATALOG WAREHOUSE TABLE EXTRA…`.
    pub fn run(&self, command: &str, table: &str, extra: &[&str]) -> Run {
        Command::new(&self.python)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .arg(TOOL)
            .args([command, &self.catalog, &self.warehouse, table])
            .args(extra)
            .output()
            .unwrap_or_else(|e| panic!("run {} {TOOL}: {e}", self.python.display()))
            .into()
    }

    /// The table's rows as PyIceberg reads them, sorted by order_id.
    pub fn read(&self, table: &str) -> Vec<serde_json::Value> {
        self.rows("read", table)
    }

    /// The table's rows as the tool's own reader reads them (`read-raw`: PyIceberg's metadata,
    /// pyarrow, and the delete rules applied by the tool, equality deletes included), sorted by
    /// order_id.
    pub fn read_raw(&self, table: &str) -> Vec<serde_json::Value> {
        self.rows("read-raw", table)
    }

    fn rows(&self, command: &str, table: &str) -> Vec<serde_json::Value> {
        let run = self.run(command, table, &[]).ok();
        run.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("row is not JSON ({e}): {l}")))
            .collect()
    }

    /// The table's snapshots, oldest first (by sequence number): snapshot_id,
    /// parent_snapshot_id, sequence_number, timestamp_ms, operation, summary.
    pub fn snapshots(&self, table: &str) -> Vec<serde_json::Value> {
        match self.run("snapshots", table, &[]).ok().json() {
            serde_json::Value::Array(a) => a,
            other => panic!("snapshots is not a JSON array: {other}"),
        }
    }

    /// Every snapshot's manifest list and manifests, oldest first (the tool's `manifests`: the
    /// `avro.codec` of each file's header, its real size and, for manifests, the
    /// `manifest_length` its list gives).
    pub fn manifests(&self, table: &str) -> Vec<serde_json::Value> {
        match self.run("manifests", table, &[]).ok().json() {
            serde_json::Value::Array(a) => a,
            other => panic!("manifests is not a JSON array: {other}"),
        }
    }

    /// Creates the namespace and the orders table and appends the rows of a JSON-lines file.
    pub fn create_and_write(&self, table: &str, rows: &Path) -> serde_json::Value {
        self.run("create-and-write", table, &[rows.to_str().unwrap()])
            .ok()
            .json()
    }
}

/// Every `manifest_length` in `snapshots` (of [`PyIceberg::manifests`]) is its manifest's real
/// size.
pub fn assert_lengths_are_sizes(snapshots: &[serde_json::Value]) {
    for s in snapshots {
        for m in s["manifests"].as_array().unwrap() {
            assert_eq!(m["manifest_length"], m["size"], "snapshot {}: {m}", s["snapshot_id"]);
        }
    }
}

/// The codecs of what the snapshots after the first `before` of `snapshots` wrote: each list
/// (`list <codec>`) and each manifest no earlier snapshot listed (`manifest <codec>`).
pub fn new_codecs(snapshots: &[serde_json::Value], before: usize) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut codecs = std::collections::BTreeSet::new();
    for (n, s) in snapshots.iter().enumerate() {
        if n >= before {
            codecs.insert(format!("list {}", s["list"]["codec"].as_str().unwrap()));
        }
        for m in s["manifests"].as_array().unwrap() {
            if seen.insert(m["path"].as_str().unwrap().to_string()) && n >= before {
                codecs.insert(format!("manifest {}", m["codec"].as_str().unwrap()));
            }
        }
    }
    codecs
}
