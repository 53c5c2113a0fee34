//! Helpers for the end-to-end scenarios: a scratch folder per test and a way to run `tidemark`
//! in it and look at its exit code, stdout and stderr (after ripgrep's `tests/util.rs`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
pub mod faults;
pub mod python;
pub mod story;

pub use story::Story;

/// The workspace's root: the checkout the tests read their own source and pages from.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file below `dir` whose name ends in `.{ext}`, sorted; none when `dir` does not exist.
pub fn files_ending(dir: &Path, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, ext, out);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, ext, &mut out);
    out.sort();
    out
}

pub struct Scratch {
    pub dir: tempfile::TempDir,
    /// Environment variables set for every `tidemark` this scratch runs (e.g. another S3 server).
    pub env: Vec<(String, String)>,
}

/// What a command did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(Output { status, stdout, stderr }: Output) -> Self {
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
    /// Asserts success and returns self.
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
    /// Asserts the exit code and that stderr mentions every fragment.
    pub fn fails(self, code: i32, fragments: &[&str]) -> Self {
        assert_eq!(
            self.code, code,
            "exit code\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        for f in fragments {
            assert!(self.stderr.contains(f), "stderr should mention {f:?}: {}", self.stderr);
        }
        self
    }
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
            env: Vec::new(),
        }
    }

    /// A scratch for a scenario on the S3 server of sandbox/test.sh: `None` (after a skip line)
    /// when TIDEMARK_SKIP_S3=1; panics when the server should be there and is not.
    pub fn on_s3() -> Option<Self> {
        s3_available().then(Scratch::new)
    }

    /// A scratch whose commands reach SeaweedFS's S3 (sandbox/seaweedfs.sh) instead of the
    /// default S3 server: `None` (after a skip line) when TIDEMARK_SKIP_SEAWEEDFS=1. The
    /// environment's credentials are kept: the sandbox starts SeaweedFS with the same keys.
    pub fn on_seaweedfs() -> Option<Self> {
        let endpoint = seaweedfs_s3_endpoint()?;
        let mut s = Scratch::new();
        s.env = vec![
            ("AWS_ENDPOINT_URL".into(), endpoint.clone()),
            ("AWS_ENDPOINT_URL_S3".into(), endpoint),
        ];
        Some(s)
    }

    /// A scratch whose commands see its own `home` folder as HOME and PYICEBERG_HOME, so that
    /// the machine's own `.pyiceberg.yaml` is never read.
    pub fn with_home() -> Self {
        let mut s = Scratch::new();
        let home = s.path_str("home");
        std::fs::create_dir_all(&home).unwrap();
        s.env = vec![("HOME".into(), home.clone()), ("PYICEBERG_HOME".into(), home)];
        s
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn path_str(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(&[], args)
    }

    /// The report of `journal verify --journal JOURNAL --json`, which must succeed (the check
    /// after a scenario that the journal's chain is whole).
    pub fn verify_json(&self, journal: &str) -> serde_json::Value {
        self.run(&["journal", "verify", "--journal", journal, "--json"])
            .ok()
            .json()
    }

    /// The [`story::Story`] of `journal`, `catalog` and `table` on this scratch: its `run(VERB,
    /// EXTRA)` passes `VERB --journal J --catalog C --table T EXTRA…`.
    pub fn story(
        &self,
        journal: impl Into<String>,
        catalog: impl Into<String>,
        table: impl Into<String>,
    ) -> story::Story<'_> {
        story::Story::new(self).journal(journal).catalog(catalog).table(table)
    }

    /// [`Scratch::run`] with extra environment variables (after the scratch's own).
    pub fn run_with(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        self.run_in_with(self.dir.path(), env, args)
    }

    /// [`Scratch::run`] in another working folder.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        self.run_in_with(dir, &[], args)
    }

    fn run_in_with(&self, dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
        let mut cmd = tidemark();
        cmd.current_dir(dir).args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        output(cmd)
    }

    /// Runs `args` paused at the pause point `point` (`TIDEMARK_PAUSEPOINT`, see
    /// `tidemark_journal::failpoint::pause`), runs `meanwhile` there (another writer), then lets
    /// the command go on; when it ends without reaching the point, `meanwhile` is not run.
    pub fn run_paused(&self, point: &str, args: &[&str], meanwhile: impl FnOnce()) -> Run {
        let dir = tempfile::tempdir_in(self.dir.path()).unwrap();
        let mut cmd = tidemark();
        cmd.current_dir(self.dir.path())
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("TIDEMARK_PAUSEPOINT", point)
            .env("TIDEMARK_PAUSE_DIR", dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("run tidemark");
        let reached = dir.path().join("reached");
        while !reached.exists() {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if reached.exists() {
            meanwhile();
            std::fs::write(dir.path().join("resume"), "").unwrap();
        }
        child.wait_with_output().expect("run tidemark").into()
    }

    /// The synthetic A–E drill (`tidemark drill --work DIR PLACE… --orders N --events M --json`)
    /// in the scratch's `drill` folder, `place` saying where (`--store URL`, `--catalog C`); the
    /// run is not checked. The route it leaves is `drill/route`.
    pub fn drill_story(&self, place: &[&str], orders: u64, events: u64) -> Run {
        let work = self.path_str("drill");
        let (orders, events) = (orders.to_string(), events.to_string());
        let args = [
            &["drill", "--work", &work][..],
            place,
            &["--orders", &orders, "--events", &events, "--json"],
        ];
        self.run(&args.concat())
    }

    /// The synthetic drill (200 orders, 1,000 events) with its journal in the bucket folder
    /// `s3://tidemark/{name}-{pid}`: it passes and reports that location.
    pub fn drill_passes_in_bucket(&self, name: &str) {
        let store = format!("s3://tidemark/{name}-{}", std::process::id());
        let r = self.drill_story(&["--store", &store], 200, 1000).ok().json();
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["location"], store);
    }

    /// The steps most scenarios share, each required to succeed: `journal append`, `apply`,
    /// `fault delete` (the bad write).
    pub fn append(&self, journal: &str, input: &str) -> Run {
        self.append_with(journal, input, &[]).ok()
    }

    /// `journal append --journal J --input FILE EXTRA…` (`--batch-size`, `--json`, …), unchecked.
    pub fn append_with(&self, journal: &str, input: &str, extra: &[&str]) -> Run {
        self.run(&Self::append_args(journal, input, extra))
    }

    /// The arguments [`Scratch::append_with`] passes: `journal append --journal J --input FILE
    /// EXTRA…` (`--batch-size`, `--json`, …).
    pub fn append_args<'a>(journal: &'a str, input: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        [&["journal", "append", "--journal", journal, "--input", input], extra].concat()
    }

    /// `recover --journal J --catalog C --into INTO EXTRA…`, unchecked.
    pub fn recover(&self, journal: &str, catalog: &str, into: &str, extra: &[&str]) -> Run {
        let args = [
            &["recover", "--journal", journal, "--catalog", catalog, "--into", into],
            extra,
        ]
        .concat();
        self.run(&args)
    }

    /// `catalog rebuild --catalog C --warehouse W EXTRA…` (`--namespace`, `--json`), unchecked.
    pub fn rebuild(&self, catalog: &str, warehouse: &str, extra: &[&str]) -> Run {
        self.run(&Self::rebuild_args(catalog, warehouse, extra))
    }

    /// The arguments [`Scratch::rebuild`] passes.
    pub fn rebuild_args<'a>(catalog: &'a str, warehouse: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let args = ["catalog", "rebuild", "--catalog", catalog, "--warehouse", warehouse];
        [&args[..], extra].concat()
    }

    /// `history record --catalog C EXTRA…` (`--out`, `--warehouse`, `--namespace`, …), unchecked.
    pub fn record_history(&self, catalog: &str, extra: &[&str]) -> Run {
        self.run(&[&["history", "record", "--catalog", catalog], extra].concat())
    }

    /// `history record --catalog C EXTRA… --out OUT` (OUT in the scratch folder), which must
    /// succeed: the record it wrote.
    pub fn history(&self, catalog: &str, out: &str, extra: &[&str]) -> serde_json::Value {
        let path = self.path_str(out);
        self.record_history(catalog, &[extra, &["--out", &path]].concat()).ok();
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// The warm follower: `replica follow --warehouse W --catalog C --prefix-map M --state S
    /// EXTRA…` (`--once`, `--mode`, `--holder`, …), unchecked.
    pub fn follow(&self, warehouse: &str, catalog: &str, map: &str, state: &str, extra: &[&str]) -> Run {
        self.replica("follow", [warehouse, catalog, map, state], extra)
    }

    /// `replica VERB --warehouse W --catalog C --prefix-map M --state S EXTRA…`, unchecked.
    fn replica(&self, verb: &str, target: [&str; 4], extra: &[&str]) -> Run {
        self.run(&Self::replica_args(verb, target, extra))
    }

    /// The arguments of `replica VERB` (`follow`, `failover`) for the replica `warehouse`
    /// followed into `catalog` with `map` and the follower state `state`, then EXTRA…: for a
    /// caller that runs them otherwise (`run_with`, a `Command` it keeps).
    pub fn replica_args<'a>(
        verb: &'a str,
        [warehouse, catalog, map, state]: [&'a str; 4],
        extra: &[&'a str],
    ) -> Vec<&'a str> {
        let args = [
            "replica",
            verb,
            "--warehouse",
            warehouse,
            "--catalog",
            catalog,
            "--prefix-map",
            map,
            "--state",
            state,
        ];
        [&args[..], extra].concat()
    }

    /// A reader's `query --route R --format FORMAT SQL`, unchecked.
    pub fn query(&self, route: &str, format: &str, sql: &str) -> Run {
        self.run(&["query", "--route", route, "--format", format, sql])
    }

    pub fn apply(&self, journal: &str, catalog: &str, table: &str) -> Run {
        self.story(journal, catalog, table).apply(&[])
    }

    pub fn fault_delete(&self, catalog: &str, table: &str, predicate: &str) -> Run {
        Story::new(self).catalog(catalog).table(table).bad_delete(predicate)
    }

    /// [`Scratch::fault_delete`] on a catalog whose tables live in `warehouse`.
    pub fn fault_delete_at(&self, catalog: &str, warehouse: &str, table: &str, predicate: &str) -> Run {
        Story::new(self)
            .catalog(catalog)
            .warehouse(warehouse)
            .table(table)
            .bad_delete(predicate)
    }

    /// `route flip --route R --catalog C --table T --applied-position P --reason WHY EXTRA…`
    /// (`--warehouse`, `--expect-generation`, …), unchecked.
    pub fn flip(&self, route: &str, catalog: &str, table: &str, position: &str, reason: &str, extra: &[&str]) -> Run {
        self.run(&Self::flip_args(route, catalog, table, position, reason, extra))
    }

    /// The arguments [`Scratch::flip`] passes.
    pub fn flip_args<'a>(
        route: &'a str,
        catalog: &'a str,
        table: &'a str,
        position: &'a str,
        reason: &'a str,
        extra: &[&'a str],
    ) -> Vec<&'a str> {
        let args = [
            "route",
            "flip",
            "--route",
            route,
            "--catalog",
            catalog,
            "--table",
            table,
            "--applied-position",
            position,
            "--reason",
            reason,
        ];
        [&args[..], extra].concat()
    }

    /// `replica failover` of the follower `follow` names (`--warehouse`, `--catalog`,
    /// `--prefix-map`, `--state`: as [`Scratch::follow`]) through the route `route`, with
    /// `--failover-id ID --json EXTRA…`, unchecked.
    pub fn failover(&self, follow: [&str; 4], route: &str, id: &str, extra: &[&str]) -> Run {
        let args = ["--route", route, "--failover-id", id, "--json"];
        self.replica("failover", follow, &[&args[..], extra].concat())
    }

    /// `replica resync --demote OLD --primary NEW EXTRA…` (`--namespace`, `--json`,
    /// `--dry-run`), unchecked.
    pub fn resync(&self, demote: &str, primary: &str, extra: &[&str]) -> Run {
        self.run(&Self::resync_args(demote, primary, extra))
    }

    /// The arguments [`Scratch::resync`] passes: `replica resync --demote D --primary P EXTRA…`.
    pub fn resync_args<'a>(demote: &'a str, primary: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        [&["replica", "resync", "--demote", demote, "--primary", primary], extra].concat()
    }
}

/// Every file of `walked` (metadata locations a resync walked over) is among the `strays` of
/// `table`, a table of the follow report `report`: the follower never chose one as the head.
pub fn assert_strays<'a>(
    table: &serde_json::Value,
    walked: impl IntoIterator<Item = &'a str>,
    report: &serde_json::Value,
) {
    let strays = table["strays"].as_array().unwrap();
    for w in walked {
        let name = w.rsplit('/').next().unwrap();
        assert!(
            strays.iter().any(|x| x.as_str().unwrap().ends_with(name)),
            "{name} walked over but not a stray: {report}"
        );
    }
}

pub fn tidemark() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tidemark"))
}

pub fn run_in(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = tidemark();
    cmd.current_dir(dir).args(args);
    output(cmd)
}

fn output(mut cmd: Command) -> Run {
    cmd.output().expect("run tidemark").into()
}

/// An NDJSON order event line.
pub fn event(position: u64, order: &str, version: i64, deleted: bool) -> String {
    format!(
        r#"{{"position":{position},"order_id":"{order}","order_version":{version},"customer_id":"c-1","status":"paid","amount":"10.00","currency":"EUR","is_deleted":{deleted},"event_time":"2026-11-29T08:00:00Z"}}"#
    )
}

pub fn events(first: u64, last: u64) -> String {
    (first..=last)
        .map(|p| event(p, &format!("o-{}", p % 7), p as i64, false) + "\n")
        .collect()
}

/// `journal init` in `rel`, then `journal append` of [`events`] 1..=`last` in batches of `batch`;
/// returns the journal's path.
pub fn journal_with(s: &Scratch, rel: &str, last: u64, batch: u64) -> String {
    let journal = s.path_str(rel);
    journal_at(s, &journal, rel, last, batch);
    journal
}

/// [`journal_with`] at the journal URL `journal` (a folder or `s3://…`), the input written to
/// `<input>.ndjson` in the scratch folder.
pub fn journal_at(s: &Scratch, journal: &str, input: &str, last: u64, batch: u64) {
    s.run(&["journal", "init", "--journal", journal]).ok();
    let input = s.write(&format!("{input}.ndjson"), &events(1, last));
    s.append_with(journal, input.to_str().unwrap(), &["--batch-size", &batch.to_string()])
        .ok();
}

/// Is the S3 server of sandbox/test.sh there? Panics when it should be and is not.
pub fn s3_available() -> bool {
    if std::env::var("TIDEMARK_SKIP_S3").is_ok_and(|v| v == "1") {
        eprintln!("S3 scenario skipped (TIDEMARK_SKIP_S3=1)");
        return false;
    }
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "run the tests with `bash sandbox/test.sh` (or set TIDEMARK_SKIP_S3=1)"
    );
    true
}

/// SeaweedFS's S3 endpoint (`TIDEMARK_SEAWEED_S3_ENDPOINT`, from sandbox/seaweedfs.sh), or `None`
/// (after a skip line) when TIDEMARK_SKIP_SEAWEEDFS=1. Panics when it should be there and is not.
pub fn seaweedfs_s3_endpoint() -> Option<String> {
    if std::env::var("TIDEMARK_SKIP_SEAWEEDFS").is_ok_and(|v| v == "1") {
        eprintln!("SeaweedFS scenario skipped (TIDEMARK_SKIP_SEAWEEDFS=1)");
        return None;
    }
    Some(std::env::var("TIDEMARK_SEAWEED_S3_ENDPOINT").expect(
        "TIDEMARK_SEAWEED_S3_ENDPOINT is not set: run the tests with `bash sandbox/test.sh` \
         (or set TIDEMARK_SKIP_SEAWEEDFS=1)",
    ))
}
