//! Helpers of the fault scenarios (tests/faults/): the fault-injecting S3 proxy, unique S3
//! prefixes, the set-up steps the scenarios share (apply into a given warehouse, a catalog
//! backup), and running a command until it completes while killing it at seeded random moments.

use super::{Run, Scratch, events, journal_with, tidemark};

/// What the fault proxy does to the requests it forwards (a builder; [`Faults::start`] starts
/// the proxy): which faults, to every matching request or a share of them, narrowed by method
/// and path, bounded by a count, seeded. Options left out keep the proxy's defaults.
pub struct Faults {
    args: Vec<String>,
}

impl Faults {
    /// `--rate 1 --faults KINDS`: every matching request gets one of `kinds` (`lost`, `503`, …).
    pub fn every(kinds: &str) -> Faults {
        Faults::share("1", kinds)
    }

    /// `--rate RATE --faults KINDS`.
    pub fn share(rate: &str, kinds: &str) -> Faults {
        Faults {
            args: ["--rate", rate, "--faults", kinds].map(String::from).to_vec(),
        }
    }

    fn with(mut self, option: &str, value: impl ToString) -> Faults {
        self.args.extend([option.to_string(), value.to_string()]);
        self
    }

    /// `--methods M` (`PUT`, `GET`, …).
    pub fn methods(self, methods: &str) -> Faults {
        self.with("--methods", methods)
    }

    /// `--path-regex RE`: only requests whose path matches.
    pub fn paths(self, regex: &str) -> Faults {
        self.with("--path-regex", regex)
    }

    /// `--max-faults N`.
    pub fn max(self, n: u64) -> Faults {
        self.with("--max-faults", n)
    }

    /// `--seed N`.
    pub fn seed(self, n: u64) -> Faults {
        self.with("--seed", n)
    }

    /// `--delay SECONDS` of the `delay` fault.
    pub fn delay(self, seconds: u64) -> Faults {
        self.with("--delay", seconds)
    }

    pub fn start(self, s: &Scratch) -> Proxy {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Proxy::start(s, &args)
    }
}

/// `sandbox/fault_proxy.py` in front of the S3 server of `sandbox/test.sh`, stopped on drop.
pub struct Proxy {
    child: std::process::Child,
    pub endpoint: String,
    stats: std::path::PathBuf,
}

impl Proxy {
    /// Starts the proxy with these arguments (`--seed`, `--rate`, `--faults`, …).
    pub fn start(s: &Scratch, args: &[&str]) -> Proxy {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let upstream = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../sandbox/fault_proxy.py");
        // Files of their own for each proxy (a test may run two).
        let name = |ext: &str| s.path(&format!("proxy-{}-{n}.{ext}", std::process::id()));
        let (port_file, stats, log) = (name("port"), name("stats"), name("log"));
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .args(["--port", "0", "--upstream", &upstream])
            .arg("--port-file")
            .arg(&port_file)
            .arg("--stats")
            .arg(&stats)
            .args(args)
            .stderr(std::fs::File::create(&log).expect("the proxy's log"))
            .spawn()
            .expect("start the fault proxy");
        // Generous: on a loaded machine the interpreter alone can take seconds to start.
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(60) {
            if let Ok(port) = std::fs::read_to_string(&port_file)
                && !port.trim().is_empty()
            {
                return Proxy {
                    child,
                    endpoint: format!("http://127.0.0.1:{}", port.trim()),
                    stats,
                };
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the fault proxy did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// The fault mix: 10% of every request a 503, a 500, a reset, a lost reply or a 2 s
    /// delay before the request is forwarded (past the 1 s read timeout of [`Proxy::env`]),
    /// seeded by `seed`, at most `max_faults` in all.
    pub fn mixed(s: &Scratch, seed: u64, max_faults: u32) -> Proxy {
        Faults::share("0.1", "503,500,reset,lost,delay")
            .delay(2)
            .max(max_faults.into())
            .seed(seed)
            .start(s)
    }

    /// The environment that sends a command's S3 requests (tidemark's client and the table
    /// files' FileIO alike) through the proxy.
    /// tidemark's client gives up on a reply after 1 s, so the proxy's 2 s delays are delays
    /// past the read timeout (retried, while the delayed request still reaches the server late);
    /// the table files' FileIO waits them out (its own timeout is longer).
    pub fn env(&self) -> [(&str, &str); 2] {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("TIDEMARK_S3_READ_TIMEOUT", "1"),
        ]
    }

    pub fn faults(&self) -> u64 {
        self.count("faults")
    }

    /// Requests the proxy received (faulted or forwarded); written with every fault, so exact
    /// when every request is faulted (`--rate 1`).
    pub fn requests(&self) -> u64 {
        self.count("requests")
    }

    fn count(&self, what: &str) -> u64 {
        std::fs::read_to_string(&self.stats)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v[what].as_u64())
            .unwrap_or(0)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An S3 prefix of its own for `name` in this test process.
pub fn unique(name: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("s3://tidemark/faults-{name}-{}-{n}", std::process::id())
}

/// Runs `args` until it completes, killing it (SIGKILL) after a seeded random time on each try but
/// the last; returns how many runs were killed before one completed.
pub fn until_complete(s: &Scratch, rng: &mut u64, max_wait_ms: u64, args: &[&str]) -> u32 {
    const TRIES: u32 = 12;
    for attempt in 0..TRIES {
        let mut child = tidemark()
            .current_dir(s.dir.path())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run tidemark");
        if attempt + 1 < TRIES {
            let wait = std::time::Duration::from_millis(next(rng) % max_wait_ms);
            let started = std::time::Instant::now();
            while started.elapsed() < wait {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap(); // SIGKILL: no cleanup, as a crash
                child.wait().unwrap();
                continue;
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{args:?} failed after {attempt} kills: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return attempt;
    }
    unreachable!()
}

/// SplitMix64: the seeded random sequence of the crash tests.
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generation and table of the current route at `route`.
pub fn generation(s: &Scratch, route: &str) -> (u64, String) {
    let shown = s.run(&["route", "show", "--route", route, "--json"]).ok().json();
    let current = &shown[0]["route"];
    (
        current["generation"].as_u64().unwrap(),
        current["table_name"].as_str().unwrap().to_string(),
    )
}

/// `apply` of `journal` into `table` of `catalog`, the table files in `warehouse`; must succeed.
pub fn apply_in(s: &Scratch, journal: &str, catalog: &str, warehouse: &str, table: &str) -> Run {
    s.story(journal, catalog, table).warehouse(warehouse).apply(&[])
}

/// A journal of `last` events in batches of `batch` (`journal` in the scratch folder), applied
/// into `shop.orders` of the SQLite catalog `catalog.db`, its table files under a fresh S3
/// prefix named after `name`: (journal, catalog, warehouse).
pub fn applied_to_s3(s: &Scratch, last: u64, batch: u64, name: &str) -> (String, String, String) {
    let journal = journal_with(s, "journal", last, batch);
    let catalog = s.path_str("catalog.db");
    let warehouse = unique(name);
    apply_in(s, &journal, &catalog, &warehouse, "shop.orders");
    (journal, catalog, warehouse)
}

/// `catalog backup` of `catalog` (tables in `warehouse`) to `to`; returns the backup's id.
pub fn backup(s: &Scratch, catalog: &str, warehouse: &str, to: &str) -> String {
    backup_with(s, &[], catalog, warehouse, to)
}

/// [`backup`] with extra environment variables (e.g. [`Proxy::env`]).
pub fn backup_with(s: &Scratch, env: &[(&str, &str)], catalog: &str, warehouse: &str, to: &str) -> String {
    let b = s
        .run_with(
            env,
            &[
                "catalog",
                "backup",
                "--catalog",
                catalog,
                "--warehouse",
                warehouse,
                "--to",
                to,
                "--json",
            ],
        )
        .ok()
        .json();
    b["id"].as_str().unwrap().to_string()
}

/// `catalog restore --expect empty --json` of backup `id` from `from` into `catalog` (its
/// warehouse `warehouse`), which must succeed: what it printed.
pub fn restore_into_empty(
    s: &Scratch,
    env: &[(&str, &str)],
    catalog: &str,
    warehouse: &str,
    from: &str,
    id: &str,
) -> serde_json::Value {
    let args = [
        "catalog",
        "restore",
        "--catalog",
        catalog,
        "--warehouse",
        warehouse,
        "--from",
        from,
        "--id",
        id,
    ];
    s.run_with(env, &[&args[..], &["--expect", "empty", "--json"]].concat())
        .ok()
        .json()
}

/// What a `history record` says of each table's contents, without what differs between two
/// equal runs (table uuids, metadata locations, snapshot ids, the time): table, rows, snapshots,
/// refs by name and kind, schema.
pub fn contents(record: &serde_json::Value) -> Vec<serde_json::Value> {
    record["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let refs: Vec<_> = t["refs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r["name"].clone(), r["kind"].clone()))
                .collect();
            serde_json::json!([
                t["table"],
                t["row_count"],
                t["snapshot_count"],
                refs,
                t["schema_fields"]
            ])
        })
        .collect()
}

/// `history record --json` of `catalog` (tables in `warehouse`) into the file `out`, run with
/// `env`; must succeed. Returns the printed record (with the run's `s3_requests`).
pub fn record(s: &Scratch, env: &[(&str, &str)], catalog: &str, warehouse: &str, out: &str) -> serde_json::Value {
    s.run_with(
        env,
        &[
            "history",
            "record",
            "--catalog",
            catalog,
            "--warehouse",
            warehouse,
            "--out",
            out,
            "--json",
        ],
    )
    .ok()
    .json()
}

/// `route flip` of `route` to `table` of `catalog` (with `extra` options, e.g. `--warehouse`)
/// at `position`; must succeed.
pub fn flip(s: &Scratch, route: &str, catalog: &str, table: &str, position: u64, extra: &[&str]) -> Run {
    s.flip(route, catalog, table, &position.to_string(), "test", extra).ok()
}

/// `fault delete --json` of the rows of `table` matching `predicate`, the table files in
/// `warehouse`, run with `env` (the caller checks the outcome).
pub fn fault_delete_in(
    s: &Scratch,
    env: &[(&str, &str)],
    catalog: &str,
    warehouse: &str,
    table: &str,
    predicate: &str,
) -> Run {
    s.run_with(
        env,
        &[
            "fault",
            "delete",
            "--catalog",
            catalog,
            "--warehouse",
            warehouse,
            "--table",
            table,
            "--where",
            predicate,
            "--json",
        ],
    )
}

/// The scenario of the crash and fault tests, on a local folder or (`s3`) on S3 (journal,
/// warehouse and route): `journal append`, `apply` and `recover --route`, each run by `step`
/// (which returns how many runs it killed, or 0), then the journal verified, the route's
/// generation (1: flipped once) and the recovered table checked against an independent fold of
/// the events; returns the sum of `step`'s counts.
pub fn journey(seed: u64, s3: bool, step: &mut dyn FnMut(&Scratch, &[&str]) -> u32) -> u32 {
    let s = Scratch::new();
    let (journal, warehouse) = if s3 {
        (unique("kill-journal"), unique("kill-wh"))
    } else {
        (s.path_str("journal"), String::new())
    };
    // `--warehouse` on S3; the catalog's default warehouse beside it on a local folder.
    let wh: Vec<&str> = if s3 { vec!["--warehouse", &warehouse] } else { vec![] };
    s.run(&["journal", "init", "--journal", &journal]).ok();
    let all = events(1, 600);
    let input = s.write("in.ndjson", &all);
    let input = input.to_str().unwrap();
    let catalog = s.path_str("catalog.db");
    let mut story = s.story(&journal, &catalog, "shop.orders");
    if s3 {
        story = story.warehouse(&warehouse);
    }
    let mut kills = 0;
    kills += step(&s, &Scratch::append_args(&journal, input, &["--batch-size", "50"]));
    kills += step(&s, &story.args("apply", &["--batches-per-commit", "2"]));
    story.bad_delete("order_id = 'o-3'");
    let route = if s3 { unique("kill-route") } else { s.path_str("route") };
    if !s3 {
        std::fs::create_dir_all(&route).unwrap();
    }
    kills += step(
        &s,
        &[
            &recover_args(&journal, &catalog, "600", "rec-crash", &route)[..],
            &wh[..],
        ]
        .concat(),
    );
    eprintln!("seed {seed} (s3: {s3}): {kills} runs killed before completion");
    let v = s.verify_json(&journal);
    assert_eq!(
        (v["ok"].as_bool(), v["verified_last_position"].as_u64()),
        (Some(true), Some(600)),
        "{v}"
    );
    assert_eq!(generation(&s, &route), (1, "shop.fixed".into()));
    let rows = s.query(&route, "json", "SELECT order_id, order_version, is_deleted, journal_position FROM orders_with_tombstones ORDER BY order_id")
        .ok();
    let found: Vec<serde_json::Value> = serde_json::from_str(&rows.stdout).unwrap();
    let mut state = std::collections::BTreeMap::new();
    crate::merge_events(&mut state, &all);
    let expected: Vec<serde_json::Value> = state
        .values()
        .map(|r| {
            serde_json::json!({
                "order_id": r["order_id"], "order_version": r["order_version"],
                "is_deleted": r["is_deleted"], "journal_position": r["journal_position"],
            })
        })
        .collect();
    assert_eq!(found, expected, "seed {seed}");
    kills
}

/// The arguments of `recover --json` of `shop.orders` of `catalog` into `shop.fixed` at or
/// before `position`, as recovery `id`, flipping `route`.
pub fn recover_args<'a>(
    journal: &'a str,
    catalog: &'a str,
    position: &'a str,
    id: &'a str,
    route: &'a str,
) -> [&'a str; 16] {
    [
        "recover",
        "--journal",
        journal,
        "--catalog",
        catalog,
        "--into",
        "shop.fixed",
        "--source-table",
        "shop.orders",
        "--at-or-before",
        position,
        "--recovery-id",
        id,
        "--route",
        route,
        "--json",
    ]
}

/// Every file under `dir` whose name ends with `suffix` (`.parquet`, `.metadata.json`), with
/// its size, in path order.
pub fn files_ending(dir: &std::path::Path, suffix: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push((p.display().to_string(), e.metadata().unwrap().len()));
            }
        }
    }
    out.sort();
    out
}
