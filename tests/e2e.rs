//! End-to-end scenarios: the `tidemark` binary as an operator runs it, on a local folder and on
//! the real S3-protocol server that `sandbox/test.sh` starts.

#[cfg(feature = "ballista-engine")]
#[path = "e2e_ballista.rs"]
mod ballista;
mod catalogs;
mod catalogs_commands;
mod catalogs_remote;
mod docs_links;
mod drill_real;
mod faults;
mod house_plan;
mod interop;
mod replica_catalogs;
mod replica_warm;
mod seaweedfs;
mod support;

use support::*;

const BAD_INPUT: i32 = 3;
const VERIFY_FAILED: i32 = 4;
const CAPABILITY: i32 = 6;
const NOT_FOUND: i32 = 7;

fn journal_round_trip(s: &Scratch, journal: &str) {
    s.run(&["journal", "init", "--journal", journal, "--journal-id", "j-e2e"])
        .ok();
    let input = s.write("in.ndjson", &events(1, 25));
    let append = s
        .append_with(journal, input.to_str().unwrap(), &["--batch-size", "10", "--json"])
        .ok();
    let r = append.json();
    assert_eq!(
        (r["events"].as_u64(), r["batches"].as_u64(), r["last_position"].as_u64()),
        (Some(25), Some(3), Some(25))
    );
    assert!(
        append.stderr.contains("append: 3/3 batches"),
        "progress on stderr: {}",
        append.stderr
    );
    let verify = s.verify_json(journal);
    assert_eq!(verify["ok"], true);
    assert_eq!(verify["verified_last_position"], 25);
    let status = s
        .run(&["journal", "status", "--journal", journal, "--json"])
        .ok()
        .json();
    assert_eq!(
        (status["head_sequence"].as_u64(), status["events"].as_u64()),
        (Some(3), Some(25))
    );
    let human = s.run(&["journal", "verify", "--journal", journal, "--to", "12"]).ok();
    assert!(human.stdout.contains("verified positions 1..=20"), "{}", human.stdout);
    s.run(&["journal", "verify", "--journal", journal, "--to", "26"])
        .fails(VERIFY_FAILED, &["boundary", "26", "1..=25"]);
}

#[test]
fn journal_init_append_verify_status_on_a_folder() {
    let s = Scratch::new();
    journal_round_trip(&s, &s.path_str("journal"));
}

#[test]
fn journal_on_s3() {
    let Some(s) = Scratch::on_s3() else { return };
    let journal = format!("s3://tidemark/e2e-{}", std::process::id());
    journal_round_trip(&s, &journal);
}

#[test]
fn bad_input_is_refused_with_line_and_exit_code() {
    let s = Scratch::new();
    let journal = s.path_str("j");
    s.run(&["journal", "init", "--journal", &journal]).ok();
    let input = s.write(
        "bad.ndjson",
        &format!("{}\n{{\"position\": 2,\n", event(1, "o-1", 1, false)),
    );
    s.append_with(&journal, input.to_str().unwrap(), &[])
        .fails(BAD_INPUT, &["bad.ndjson:2: malformed JSON"]);
    let gap = s.write("gap.ndjson", &format!("{}\n", event(3, "o-1", 1, false)));
    s.append_with(&journal, gap.to_str().unwrap(), &[])
        .fails(BAD_INPUT, &["gap.ndjson:1: position 3", "expected position 1"]);
    let status = s
        .run(&["journal", "status", "--journal", &journal, "--json"])
        .ok()
        .json();
    assert_eq!(status["events"], 0, "nothing of the refused input was written");
}

#[test]
fn missing_journal_is_a_clear_not_found() {
    let s = Scratch::new();
    let journal = s.path_str("nowhere");
    s.run(&["journal", "verify", "--journal", &journal])
        .fails(NOT_FOUND, &["nowhere"]);
    std::fs::create_dir_all(s.path("empty")).unwrap();
    s.run(&["journal", "status", "--journal", &s.path_str("empty")])
        .fails(NOT_FOUND, &["journal.json", "tidemark journal init"]);
}

#[test]
fn tampered_object_fails_verification() {
    let s = Scratch::new();
    let journal = journal_with(&s, "j", 30, 10);
    // Flip one byte of the second batch's stored version.
    let versions = s.path("j/.tidemark/versions");
    let dir = std::fs::read_dir(&versions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("events%2F00000000000000000002")
        })
        .expect("second event object");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[50] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let run = s
        .run(&["journal", "verify", "--journal", &journal, "--json"])
        .fails(VERIFY_FAILED, &["checksum_mismatch", "events/00000000000000000002-"]);
    let r = run.json();
    assert_eq!(r["verified_last_position"], 10);
    assert_eq!(r["first_break"]["sequence"], 2);
}

#[test]
fn store_check_on_a_folder_passes_every_capability() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("store")).unwrap();
    let r = s.run(&["store", "check", &s.path_str("store"), "--json"]).ok().json();
    assert_eq!(r["ok"], true);
    assert_eq!(r["capabilities"].as_array().unwrap().len(), 6);
    let human = s.run(&["store", "check", &s.path_str("store")]).ok();
    assert!(
        human.stdout.contains("create-only in a versioned bucket"),
        "{}",
        human.stdout
    );
}

#[test]
fn store_check_on_s3_and_an_unversioned_bucket() {
    let Some(s) = Scratch::on_s3() else { return };
    let r = s.run(&["store", "check", "s3://tidemark/check", "--json"]).ok().json();
    assert_eq!(r["ok"], true, "{r}");
    // A bucket without versioning fails the check and journal writes refuse it, naming the capability.
    let run = s
        .run(&["store", "check", "s3://tidemark-unversioned/check", "--json"])
        .fails(CAPABILITY, &["versioning"]);
    assert_eq!(run.json()["ok"], false);
    // A key of this run (the scratch folder's random name): the init is create-only, so a fixed
    // key failed the second run on the same server.
    let run_id = s.dir.path().file_name().unwrap().to_string_lossy().to_string();
    let journal = format!("s3://tidemark-unversioned/j-{}-{run_id}", std::process::id());
    s.run(&["journal", "init", "--journal", &journal]).ok();
    let input = s.write("in.ndjson", &events(1, 3));
    s.append_with(&journal, input.to_str().unwrap(), &[])
        .fails(CAPABILITY, &["versioning", "tidemark store check"]);
    s.run(&["journal", "status", "--journal", "s3://no-such-bucket-tm/j"])
        .fails(NOT_FOUND, &["no-such-bucket-tm"]);
}

#[test]
fn refused_s3_credentials_exit_with_access_denied() {
    if !s3_available() {
        return;
    }
    const ACCESS_DENIED: i32 = 8;
    let endpoint = std::env::var("TIDEMARK_S3_AUTH_ENDPOINT").expect(
        "TIDEMARK_S3_AUTH_ENDPOINT is not set: run the tests with `bash sandbox/test.sh` (or set TIDEMARK_SKIP_S3=1)",
    );
    let s = Scratch::new();
    // The sandbox credentials (test/test) against a server that checks them and knows none.
    let out = support::tidemark()
        .current_dir(s.dir.path())
        .env("AWS_ENDPOINT_URL", &endpoint)
        .env_remove("AWS_ENDPOINT_URL_S3")
        .args(["journal", "status", "--journal", "s3://tidemark/x"])
        .output()
        .expect("run tidemark");
    Run::from(out).fails(
        ACCESS_DENIED,
        &["s3://tidemark/x", "check the credentials", "InvalidAccessKeyId"],
    );
}

/// The finding (issue 34): `query` on a route that is not the newest decision of its own history
/// (an older version put back) or that is not a valid route exited 1, where `route flip` exits 4.
/// Readers exit 4 too, naming what to do.
#[test]
fn query_on_a_rolled_back_or_invalid_route_exits_4() {
    let s = Scratch::new();
    let journal = s.path_str("journal");
    let catalog = applied(&s, &journal, None, 500).catalog;
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    for _ in 0..2 {
        support::faults::flip(&s, &route, &catalog, "shop.orders", 500, &[]);
    }
    let query = ["query", "--route", route.as_str(), "SELECT count(*) FROM orders"];
    s.run(&query).ok();
    let flip = Scratch::flip_args(&route, &catalog, "shop.orders", "500", "test", &[]);

    // Generation 1 put back as the current version (a restore from version history).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let put = |bytes: Option<bytes::Bytes>| {
        rt.block_on(async {
            use tidemark_journal::store::PutMode;
            let store = tidemark_journal::store::open(&route).await.unwrap();
            let body = match bytes {
                Some(b) => b,
                None => {
                    let versions = store.list_versions("route.json").await.unwrap();
                    let first = versions.last().unwrap();
                    store.get("route.json", Some(&first.version_id)).await.unwrap().body
                }
            };
            store.put("route.json", body, PutMode::Overwrite).await.unwrap();
        })
    };
    put(None);
    s.run(&flip).fails(VERIFY_FAILED, &["not the newest decision"]);
    s.run(&query).fails(
        VERIFY_FAILED,
        &["not the newest decision", "put the newest version back"],
    );

    // Not a route at all.
    put(Some(bytes::Bytes::from_static(b"{\"not\": \"a route\"}")));
    s.run(&["route", "show", "--route", &route])
        .fails(VERIFY_FAILED, &["is not a valid route"]);
    s.run(&query).fails(VERIFY_FAILED, &["is not a valid route"]);
}

/// Generated events (200 orders) in a new journal at `journal`, applied with a commit per batch
/// into `shop.orders` of the SQLite catalog `catalog.db` (its warehouse at `warehouse`).
fn applied<'s>(s: &'s Scratch, journal: &str, warehouse: Option<&str>, events: u64) -> Story<'s> {
    let mut story = Story::new(s).journal(journal);
    if let Some(w) = warehouse {
        story = story.warehouse(w);
    }
    let story = story.generated(200, events, 250);
    // A commit per batch: the scenarios below need a history of several snapshots (the default
    // would commit the batches waiting at once).
    let r = story.apply(&["--json", "--batches-per-commit", "1"]).json();
    assert_eq!(r["applied_to_position"], events);
    assert_eq!(r["commits"], events / 250);
    story
}

#[test]
fn apply_then_fault_delete_on_a_folder() {
    let s = Scratch::new();
    let story = applied(&s, &s.path_str("journal"), None, 1000);
    // Nothing new: a second apply commits nothing.
    let again = story.apply(&["--json"]).json();
    assert_eq!(again["commits"], 0);
    let f = story.bad_delete_json("order_version > 2");
    assert!(f["rows_deleted"].as_u64().unwrap() > 0, "{f}");
    // The fault is outside the journal: the applier finds it (the audit of what other writers
    // committed since its own last commit) and commits nothing on top of it (issue 30).
    story.run("apply", &["--json"]).fails(
        12,
        &["tidemark fault delete", "keys removed", "--on-divergence continue"],
    );
    // Accepted, it does not re-apply what it already applied.
    let after = story
        .apply(&[
            "--on-divergence",
            "continue",
            "--reason",
            "the test accepts the fault",
            "--json",
        ])
        .json();
    assert_eq!(after["commits"], 0);
    story
        .run_on_table(&["fault", "delete"], &["--where", "no_such_column = 1"])
        .fails(3, &["no_such_column"]);
    story.clone().table("shop.nothing_here").apply_until(10);
}

/// `table compact` of a merge-on-read table on the embedded default: its progress on stderr (a
/// last line once every file is written, before the commit), its result on stdout, every delete
/// file dropped; `-q` prints no progress, and a second run has nothing to do.
#[test]
fn table_compact_shows_its_progress_and_drops_every_delete_file() {
    let s = Scratch::new();
    let story = Story::new(&s).generated(200, 1000, 250);
    story.apply(&[
        "--merge-mode",
        "merge-on-read",
        "--batches-per-commit",
        "1",
        "--compact-at",
        "0",
    ]);
    let c = story.run_on_table(&["table", "compact"], &["--json"]).ok();
    let r = c.json();
    assert!(r["delete_files_before"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["delete_files_after"], 0, "{r}");
    let n = r["data_files_rewritten"].as_u64().unwrap();
    let last = format!(
        "compact: read {n} of {n} files, wrote {} rows (of at most {}); committing",
        r["rows_read"],
        r["rows_read"].as_u64().unwrap() + r["rows_dropped"].as_u64().unwrap()
    );
    assert!(c.stderr.contains(&last), "{last:?} not in {}", c.stderr);
    let again = story.run_on_table(&["table", "compact"], &["-q"]).ok();
    assert!(again.stdout.contains("nothing to compact"), "{}", again.stdout);
    assert!(!again.stderr.contains("compact:"), "{}", again.stderr);
}

#[test]
fn apply_refuses_a_broken_chain_and_a_missing_catalog_folder() {
    let s = Scratch::new();
    let story = Story::new(&s).journaled(20, 5);
    std::fs::remove_file(s.path("journal/manifests/00000000000000000002.json")).unwrap();
    std::fs::remove_dir_all(s.path("journal/.tidemark/versions/manifests%2F00000000000000000002.json")).unwrap();
    story
        .run("apply", &[])
        .fails(4, &["gap", "manifests/00000000000000000002.json"]);
    story
        .clone()
        .catalog("/nonexistent/dir/catalog.db")
        .run("apply", &[])
        .fails(1, &["/nonexistent/dir"]);
}

#[test]
fn apply_into_an_s3_warehouse() {
    let Some(s) = Scratch::on_s3() else { return };
    let journal = format!("s3://tidemark/apply-{}/journal", std::process::id());
    let warehouse = format!("s3://tidemark/apply-{}/warehouse", std::process::id());
    let f = applied(&s, &journal, Some(&warehouse), 500).bad_delete_json("is_deleted");
    assert_eq!(f["format_version"], 1);
}

// Interoperability with another Iceberg implementation: PyIceberg (sandbox/pyiceberg.sh) reads
// what tidemark wrote, and tidemark applies into a table PyIceberg created, on one SQLite catalog.

/// An order row as `pyiceberg_tool.py read` prints it (and as `create-and-write` takes it).
fn order_row(e: &serde_json::Value, journal_position: u64) -> serde_json::Value {
    serde_json::json!({
        "order_id": e["order_id"],
        "order_version": e["order_version"],
        "customer_id": e["customer_id"],
        "status": e["status"],
        "amount": e["amount"],
        "currency": e["currency"],
        "is_deleted": e["is_deleted"],
        "event_time": e["event_time"],
        "journal_position": journal_position,
    })
}

/// The merge rules, independently of tidemark: in position order, a new key is inserted, a
/// higher version replaces the row (a tombstone stays as a row with is_deleted true), an older
/// or equal version changes nothing.
fn merge_events(state: &mut std::collections::BTreeMap<String, serde_json::Value>, ndjson: &str) {
    merge_reshaped(state, ndjson, &[], &[]);
}

/// The merge rules over a table another writer reshaped: `state` (rows by key, as PyIceberg read
/// them) after the events of `ndjson`, each new row under the table's current column names
/// (`renames`: spec name → current name), with the columns outside the spec (`extra`) carried
/// from the row it replaces, null for a new key.
fn merge_reshaped(
    state: &mut std::collections::BTreeMap<String, serde_json::Value>,
    ndjson: &str,
    renames: &[(&str, &str)],
    extra: &[&str],
) {
    let mut events: Vec<serde_json::Value> = ndjson
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    events.sort_by_key(|e| e["position"].as_u64().unwrap());
    for e in events {
        let key = e["order_id"].as_str().unwrap().to_string();
        let old = state.get(&key);
        if old.is_some_and(|r| r["order_version"].as_i64() >= e["order_version"].as_i64()) {
            continue;
        }
        let mut row = order_row(&e, e["position"].as_u64().unwrap());
        for (from, to) in renames {
            let v = row.as_object_mut().unwrap().remove(*from).unwrap();
            row[*to] = v;
        }
        for x in extra {
            row[*x] = old.map_or(serde_json::Value::Null, |r| r[*x].clone());
        }
        state.insert(key, row);
    }
}

/// Every column of every row, with the first difference named.
fn assert_same_rows(found: &[serde_json::Value], expected: &[serde_json::Value]) {
    for (i, (f, e)) in found.iter().zip(expected).enumerate() {
        assert_eq!(f, e, "row {i} differs (PyIceberg read left, expected right)");
    }
    assert_eq!(
        found.len(),
        expected.len(),
        "row count (PyIceberg read left, expected right)"
    );
}

#[test]
fn pyiceberg_reads_what_tidemark_wrote() {
    let s = Scratch::new();
    let Some(py) = support::python::PyIceberg::new(&s.path("catalog.db"), &s.path("warehouse")) else {
        return;
    };
    let story = Story::new(&s).seed(7).generated(300, 2000, 500);
    let (catalog, input) = (story.catalog.clone(), s.path_str("events.ndjson"));
    let applied = story.apply(&["--json"]).json();
    assert_eq!(applied["applied_to_position"], 2000, "{applied}");
    // A copy-on-write overwrite made by tidemark's own commit code, outside the journal.
    s.fault_delete(&catalog, "shop.orders", "order_version > 3");

    let mut state = std::collections::BTreeMap::new();
    merge_events(&mut state, &std::fs::read_to_string(&input).unwrap());
    state.retain(|_, row| row["order_version"].as_i64().unwrap() <= 3);
    let expected: Vec<_> = state.into_values().collect();
    assert!(expected.len() > 10, "the scenario keeps some rows: {}", expected.len());
    assert!(
        expected.iter().any(|r| r["is_deleted"] == true),
        "the scenario keeps a tombstone"
    );

    let found = py.read("shop.orders");
    assert_same_rows(&found, &expected);

    let snapshots = py.snapshots("shop.orders");
    let operations: Vec<_> = snapshots.iter().map(|s| s["operation"].as_str().unwrap()).collect();
    assert_eq!(operations.first(), Some(&"append"), "{snapshots:#?}");
    assert_eq!(operations.last(), Some(&"overwrite"), "{snapshots:#?}");
    let last = snapshots.last().unwrap();
    assert_eq!(
        last["summary"]["tidemark.fault"], "delete where order_version > 3",
        "{last:#}"
    );
    assert_eq!(last["summary"]["total-records"], expected.len().to_string(), "{last:#}");
    // The applier's commits carry the journal positions they applied.
    let applied_to = snapshots
        .iter()
        .filter_map(|s| s["summary"]["tidemark.last-position"].as_str())
        .next_back();
    assert_eq!(applied_to, Some("2000"), "{snapshots:#?}");
}

#[test]
fn tidemark_applies_into_a_table_pyiceberg_created() {
    let s = Scratch::new();
    let Some(py) = support::python::PyIceberg::new(&s.path("catalog.db"), &s.path("warehouse")) else {
        return;
    };
    let journal = s.path_str("journal");
    let catalog = s.path_str("catalog.db");
    let row = |order: &str, version: i64, status: &str, amount: &str, deleted: bool, time: &str| {
        serde_json::json!({
            "order_id": order,
            "order_version": version,
            "customer_id": format!("c-{order}"),
            "status": status,
            "amount": amount,
            "currency": "EUR",
            "is_deleted": deleted,
            "event_time": time,
        })
    };
    // Rows written by PyIceberg before tidemark: no journal position (0).
    let existing = [
        // Newer than the journal's event for it: stays.
        row("o-a", 5, "shipped", "12.50", false, "2026-01-01T00:00:00.000000Z"),
        // The journal has the same version with the same payload: stays, position 0.
        row("o-b", 2, "paid", "0.07", false, "2026-01-01T00:00:01.000000Z"),
        // Older than the journal's events: replaced by the newest.
        row("o-c", 1, "placed", "100.00", false, "2026-01-01T00:00:02.000000Z"),
        // Replaced by a tombstone.
        row("o-d", 1, "placed", "-3.10", false, "2026-01-01T00:00:03.123456Z"),
        // Not in the journal: stays.
        row("o-e", 3, "delivered", "999999.99", false, "2026-01-01T00:00:04.000000Z"),
    ];
    let mut state = std::collections::BTreeMap::new();
    let mut rows_jsonl = String::new();
    for r in &existing {
        let r = order_row(r, 0);
        rows_jsonl.push_str(&format!("{r}\n"));
        state.insert(r["order_id"].as_str().unwrap().to_string(), r);
    }
    let rows = s.write("existing.jsonl", &rows_jsonl);
    let created = py.create_and_write("shop.orders", &rows);
    assert_eq!(created["rows"], existing.len(), "{created}");
    assert_eq!(py.read("shop.orders").len(), existing.len());

    let events = [
        row("o-a", 3, "paid", "1.00", false, "2026-02-01T00:00:00.000000Z"),
        row("o-b", 2, "paid", "0.07", false, "2026-01-01T00:00:01.000000Z"),
        row("o-c", 2, "paid", "101.00", false, "2026-02-01T00:00:02.000000Z"),
        row("o-f", 1, "placed", "5.00", false, "2026-02-01T00:00:03.000000Z"),
        row("o-c", 4, "shipped", "102.00", false, "2026-02-01T00:00:04.000000Z"),
        // Older than the version before it: changes nothing.
        row("o-c", 3, "packed", "103.00", false, "2026-02-01T00:00:05.000000Z"),
        row("o-d", 2, "placed", "-3.10", true, "2026-02-01T00:00:06.000000Z"),
        row("o-f", 2, "paid", "6.00", false, "2026-02-01T00:00:07.000000Z"),
        row("o-g", 1, "placed", "7.77", false, "2026-02-01T00:00:08.000000Z"),
    ];
    let ndjson: String = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut e = e.clone();
            e["position"] = serde_json::json!(i + 1);
            format!("{e}\n")
        })
        .collect();
    let input = s.write("events.ndjson", &ndjson);
    merge_events(&mut state, &ndjson);
    let expected: Vec<_> = state.into_values().collect();

    s.run(&["journal", "init", "--journal", &journal]).ok();
    s.append_with(&journal, input.to_str().unwrap(), &["--batch-size", "4"])
        .ok();
    let applied = s
        .story(&journal, &catalog, "shop.orders")
        .run("apply", &["--batches-per-commit", "1", "--json"])
        .ok()
        .json();
    assert_eq!(applied["applied_to_position"], events.len(), "{applied}");
    // Counted per batch of 4 (a commit each): [o-a keep, o-b keep, o-c 2 update, o-f insert], [o-c 4 update (3 is
    // older), o-d tombstone update, o-f 2 update], [o-g insert].
    assert_eq!(
        (
            applied["merge"]["inserted"].as_u64(),
            applied["merge"]["updated"].as_u64(),
            applied["merge"]["unchanged"].as_u64(),
            applied["merge"]["tombstones_written"].as_u64(),
        ),
        (Some(2), Some(4), Some(2), Some(1)),
        "{applied}"
    );

    let found = py.read("shop.orders");
    assert_same_rows(&found, &expected);
    let operations: Vec<_> = py
        .snapshots("shop.orders")
        .iter()
        .map(|s| s["operation"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(operations.first().map(String::as_str), Some("append"), "{operations:?}");
}

#[test]
fn a_to_e_story_drill_on_a_folder() {
    let s = Scratch::new();
    let work = s.path_str("drill");
    let report = s.path_str("drill.md");
    let r = s
        .run(&[
            "drill", "--work", &work, "--orders", "300", "--events", "2000", "--report", &report, "--json",
        ])
        .ok()
        .json();
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["checks"].as_array().unwrap().len() >= 9);
    assert!(
        r["rto_ms"].as_u64().is_some() && r["rpo_positions"].as_u64().unwrap() > 0,
        "{r}"
    );
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(md.contains("RTO") && md.contains("| order C | ok |"), "{md}");
    // The route it left behind: generation 2 on the recovered table; a stale flip is refused.
    let route = format!("{work}/route");
    let shown = s.run(&["route", "show", "--route", &route, "--json"]).ok().json();
    assert_eq!(shown[0]["route"]["generation"], 2);
    assert_eq!(shown[1]["route"]["generation"], 1);
    let catalog = format!("{work}/dr/catalog.db");
    s.flip(
        &route,
        &catalog,
        "shop.orders_recovered",
        "1",
        "stale",
        &["--expect-generation", "1"],
    )
    .fails(5, &["generation 2, not 1"]);
    let q = s
        .query(
            &route,
            "json",
            "SELECT order_id, is_deleted FROM orders_with_tombstones WHERE order_id IN ('A','C') ORDER BY order_id",
        )
        .ok();
    let rows: serde_json::Value = serde_json::from_str(&q.stdout).unwrap();
    assert_eq!(
        rows,
        serde_json::json!([{"order_id": "A", "is_deleted": false}, {"order_id": "C", "is_deleted": true}])
    );
    let visible = s
        .query(&route, "csv", "SELECT count(*) AS n FROM orders WHERE order_id = 'C'")
        .ok();
    assert!(
        visible.stdout.contains("n\n0"),
        "tombstones are not visible: {}",
        visible.stdout
    );
}

#[test]
fn a_to_e_story_drill_on_s3() {
    let Some(s) = Scratch::on_s3() else { return };
    s.drill_passes_in_bucket("drill");
}

#[test]
fn a_lost_catalog_is_rebuilt_from_the_warehouse() {
    let s = Scratch::new();
    let journal = s.path_str("journal");
    let catalog = applied(&s, &journal, None, 1000).catalog;
    let warehouse = s.path_str("warehouse");
    std::fs::remove_file(&catalog).unwrap();
    let rebuilt = s.path_str("rebuilt/catalog.db");
    std::fs::create_dir_all(s.path("rebuilt")).unwrap();
    let r = s.rebuild(&rebuilt, &warehouse, &["--json"]).ok().json();
    assert_eq!(r["totals"]["registered"], 1, "{r}");
    assert_eq!(r["tables"][0]["table"], "shop.orders");
    // The rebuilt pointer is the true head: the applier finds every position applied.
    let again = s
        .story(&journal, &rebuilt, "shop.orders")
        .warehouse(&warehouse)
        .apply(&["--json"])
        .json();
    assert_eq!(
        (again["started_after_position"].as_u64(), again["commits"].as_u64()),
        (Some(1000), Some(0))
    );
}

#[test]
fn history_compare_names_a_change_and_replica_check_finds_missing_files() {
    let s = Scratch::new();
    let journal = s.path_str("journal");
    let catalog = applied(&s, &journal, None, 1000).catalog;
    let (a, b) = (s.path_str("a.json"), s.path_str("b.json"));
    s.record_history(&catalog, &["--out", &a]).ok();
    s.run(&["history", "compare", &a, &a]).ok();
    let same = s.run(&["history", "compare", &a, &a, "--json"]).ok().json();
    assert_eq!(
        (&same["same"], &same["differences"]),
        (&true.into(), &serde_json::json!([])),
        "{same}"
    );
    s.fault_delete(&catalog, "shop.orders", "order_version = 1");
    s.record_history(&catalog, &["--out", &b]).ok();
    // People get one line per difference; --json one versioned object (schema
    // history-comparison) naming both records.
    let human = s.run(&["history", "compare", &a, &b]).fails(4, &["differences"]);
    assert!(
        human
            .stdout
            .lines()
            .any(|l| l.starts_with("shop.orders") && l.contains("row count")),
        "{}",
        human.stdout
    );
    let diff = s
        .run(&["history", "compare", &a, &b, "--json"])
        .fails(4, &["differences"])
        .json();
    assert_eq!(diff["format_version"], 1, "{diff}");
    assert_eq!(
        (diff["a"].as_str(), diff["b"].as_str()),
        (Some(a.as_str()), Some(b.as_str()))
    );
    assert_eq!(diff["same"], false, "{diff}");
    let whats: Vec<String> = diff["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["what"].as_str().unwrap().to_string())
        .collect();
    assert!(
        whats.contains(&"row count".to_string()) && whats.contains(&"snapshot count".to_string()),
        "{whats:?}"
    );
    // A complete replica is current; without its data files the check names what is missing.
    let warehouse = s.path_str("warehouse");
    s.run(&["replica", "check", "--warehouse", &warehouse]).ok();
    std::fs::remove_dir_all(s.path("warehouse/shop/orders/data")).unwrap();
    let r = s
        .run(&["replica", "check", "--warehouse", &warehouse, "--json"])
        .fails(4, &["behind or inconsistent"]);
    let t = &r.json()["tables"][0];
    assert!(t["newest_missing_count"].as_u64().unwrap() >= 1, "{t}");
}

#[test]
fn recover_from_the_cli_dry_run_then_flip() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 40, 10);
    let catalog = s.path_str("catalog.db");
    s.apply(&journal, &catalog, "shop.orders");
    s.fault_delete(&catalog, "shop.orders", "order_id = 'o-3'");
    let more = s.write("more.ndjson", &events(41, 50));
    s.append(&journal, more.to_str().unwrap());
    let story = s.story(&journal, &catalog, "shop.orders");
    let common = ["--at-or-before", "40", "--recovery-id", "rec-e2e", "--json"];
    let dry = story
        .recover("shop.fixed", &[&common[..], &["--dry-run"]].concat())
        .ok()
        .json();
    assert_eq!(dry["validation"]["ok"], true, "{dry}");
    assert_eq!(
        (dry["snapshot_position"].as_u64(), dry["h"].as_u64()),
        (Some(40), Some(50))
    );
    assert!(dry["route"].is_null());
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    let done = story
        .recover(
            "shop.fixed",
            &[&common[..], &["--route", &route, "--reason", "e2e"]].concat(),
        )
        .ok()
        .json();
    assert_eq!(
        (done["seed_resumed"].as_bool(), done["replay_resumed"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(done["route"]["generation"], 1);
    assert_eq!(done["route"]["applied_position"], 50);
    let q = s
        .query(&route, "csv", "SELECT count(*) AS n FROM orders WHERE order_id = 'o-3'")
        .ok();
    assert!(q.stdout.contains("n\n1"), "the deleted order is back: {}", q.stdout);
    // H past the verified range is refused with the range (exit 3), and nothing is flipped.
    story
        .recover("shop.other", &["--to", "99"])
        .fails(3, &["H = 99", "41..=50"]);
}

/// Deletes every object under `url` (a folder or s3://bucket/prefix): the lost region.
fn wipe(url: &str) {
    if let Some(path) = url.strip_prefix("file://").or((!url.contains("://")).then_some(url)) {
        std::fs::remove_dir_all(path).unwrap();
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = tidemark_journal::store::open(url).await.unwrap();
        tidemark_journal::store::delete_all(store.as_ref(), "").await.unwrap();
        assert!(
            tidemark_journal::store::list_all(store.as_ref(), "")
                .await
                .unwrap()
                .is_empty()
        );
    });
}

/// The region-loss story with every DR command, under `root` (a folder or s3://bucket/prefix):
/// apply into the source warehouse; record history; back up the catalog; copy the tables to a
/// replica (consistent order); a bad write, then a restore of the backup that is refused
/// over the moved catalog until --allow-replace; the source region is lost; the replica's
/// metadata is rewritten to its own prefix, a new catalog is rebuilt from it, and history,
/// replica check and the applier agree that nothing is missing.
fn region_loss(s: &Scratch, root: &str) {
    let journal = s.path_str("journal");
    let (src, dst, backups) = (format!("{root}/src"), format!("{root}/dst"), format!("{root}/backups"));
    let catalog = applied(s, &journal, Some(&src), 1000).catalog;
    let record_a = s.path_str("a.json");
    // A command against the source catalog and warehouse.
    let on_src = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend(["--catalog", &catalog, "--warehouse", &src]);
        s.run(&v)
    };
    on_src(&["history", "record", "--out", &record_a]).ok();

    // Backup: content-derived id, idempotent.
    let backup = ["catalog", "backup", "--to", &backups, "--json"];
    let b1 = on_src(&backup).ok().json();
    let b2 = on_src(&backup).ok().json();
    assert_eq!(b1["id"], b2["id"]);
    assert_eq!(
        (b1["already_stored"].as_bool(), b2["already_stored"].as_bool()),
        (Some(false), Some(true))
    );
    let id = b1["id"].as_str().unwrap().to_string();
    let state = s.path_str("state.json");
    on_src(&["catalog", "state", "--out", &state]).ok();

    // The consistent copy, twice: the second writes nothing.
    let copy = vec!["replica", "copy", "--from", &src, "--to", &dst, "--json"];
    let c1 = s.run(&copy).ok().json();
    assert!(c1["copied"].as_u64().unwrap() > 8, "{c1}");
    let c2 = s.run(&copy).ok().json();
    assert_eq!(
        (c2["copied"].as_u64(), c2["skipped"].as_u64()),
        (Some(0), c1["copied"].as_u64())
    );
    let map = format!("{}={}", absolute(&src), absolute(&dst));
    s.run(&["replica", "check", "--warehouse", &dst, "--prefix-map", &map])
        .ok();

    // A bad write moves the catalog; the restore is refused over it, then forced.
    on_src(&[
        "fault",
        "delete",
        "--table",
        "shop.orders",
        "--where",
        "order_version = 1",
    ])
    .ok();
    let restore = [
        "catalog", "restore", "--from", &backups, "--id", &id, "--expect", &state, "--json",
    ];
    let refused = on_src(&restore).fails(5, &["moved"]).json();
    assert_eq!(refused["applied"], false);
    assert_eq!(refused["tables"][0]["action"], "conflict");
    let mut forced = restore.to_vec();
    forced.push("--allow-replace");
    let done = on_src(&forced).ok().json();
    assert_eq!(done["tables"][0]["action"], "replace", "{done}");
    let record_r = s.path_str("restored.json");
    on_src(&["history", "record", "--out", &record_r]).ok();
    s.run(&["history", "compare", &record_a, &record_r]).ok();

    // The source region is lost. The replica is rewritten to its own prefix and rebuilt into a
    // new catalog.
    wipe(&src);
    let check = s
        .run(&["replica", "check", "--warehouse", &dst, "--json"])
        .fails(4, &["behind or inconsistent"])
        .json();
    let head = check["tables"][0]["newest_metadata"].as_str().unwrap().to_string();
    let rw = s
        .run(&[
            "table",
            "rewrite-paths",
            "--metadata",
            &head,
            "--from-prefix",
            &absolute(&src),
            "--to-prefix",
            &absolute(&dst),
            "--json",
        ])
        .ok()
        .json();
    assert!(rw["paths_rewritten"].as_u64().unwrap() > 0, "{rw}");
    s.run(&["replica", "check", "--warehouse", &dst]).ok();
    let dr = s.path_str("dr/catalog.db");
    std::fs::create_dir_all(s.path("dr")).unwrap();
    let r = s
        .run(&["catalog", "rebuild", "--catalog", &dr, "--warehouse", &dst, "--json"])
        .ok()
        .json();
    assert_eq!(r["totals"]["registered"], 1, "{r}");
    assert_eq!(r["tables"][0]["metadata_file"], rw["new_metadata"]);
    let record_b = s.path_str("b.json");
    s.record_history(&dr, &["--warehouse", &dst, "--out", &record_b]).ok();
    s.run(&["history", "compare", &record_a, &record_b]).ok();
    // The applier reads the rebuilt table from the replica: every position is applied.
    let again = s
        .story(&journal, &dr, "shop.orders")
        .warehouse(&dst)
        .apply(&["--json"])
        .json();
    assert_eq!(
        (again["started_after_position"].as_u64(), again["commits"].as_u64()),
        (Some(1000), Some(0))
    );
}

/// A warehouse as table locations spell it.
fn absolute(url: &str) -> String {
    if url.contains("://") {
        url.to_string()
    } else {
        format!("file://{url}")
    }
}

#[test]
fn region_loss_with_every_dr_command_on_a_folder() {
    let s = Scratch::new();
    region_loss(&s, &s.path_str("region"));
}

#[test]
fn region_loss_with_every_dr_command_on_s3() {
    let Some(s) = Scratch::on_s3() else { return };
    region_loss(&s, &format!("s3://tidemark/region-{}", std::process::id()));
}

fn gameday(s: &Scratch, store: Option<&str>) {
    let work = s.path_str("gameday");
    let mut args = vec![
        "gameday",
        "--work",
        &work,
        "--tables",
        "3",
        "--commits",
        "3",
        "--rows-per-commit",
        "25",
        "--json",
    ];
    if let Some(st) = store {
        args.extend(["--store", st]);
    }
    // Twice in the same place: the second run starts from a clean scratch namespace.
    for _ in 0..2 {
        let r = s.run(&args).ok().json();
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["runs"][0]["failed_validation"].as_array().unwrap().len(), 0, "{r}");
        assert_eq!(
            r["runs"][1]["failed_validation"],
            serde_json::json!(["gameday.t00", "gameday.t01"])
        );
        assert!(
            r["runs"][0]["tables"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["validated"] == true)
        );
    }
    let md = std::fs::read_to_string(s.path("gameday/gameday-report.md")).unwrap();
    assert!(
        md.contains("step 6 catches every table the wrong-order copy broke"),
        "{md}"
    );
}

#[test]
fn gameday_on_a_folder() {
    gameday(&Scratch::new(), None);
}

#[test]
fn gameday_on_s3() {
    if !s3_available() {
        return;
    }
    gameday(
        &Scratch::new(),
        Some(&format!("s3://tidemark/gameday-{}", std::process::id())),
    );
}
