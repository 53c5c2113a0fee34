//! 10% of every S3 request failing (503, 500, resets, lost replies, delays past the read
//! timeout; seeded, bounded) through
//! sandbox/fault_proxy.py: the crash tests' journey (`journal append`, `apply`, `recover
//! --route`, all on S3) and the commands tests/faults/s3.rs does not cover (`apply --json`,
//! `fault delete`, `history record` and `compare`, `catalog backup` and `restore`, `catalog
//! rebuild`, `replica follow` and `failover`, both game days), and every route write's reply
//! lost. Each completes with the
//! result it has without faults, reports its retries where tidemark's own S3 client made
//! requests, and takes no lost reply for a conflict.

use super::super::support::faults::*;
use super::super::support::*;

/// A journal of 60 events (batches of 20) applied a batch a commit (with `env`) into `shop.orders` of `catalog`,
/// its files in a warehouse of its own on S3 named after `name`; returns the journal and the
/// warehouse.
fn applied_on_s3(s: &Scratch, env: &[(&str, &str)], name: &str, catalog: &str) -> (String, String) {
    let journal = journal_with(s, &format!("{name}-journal"), 60, 20);
    let warehouse = unique(name);
    // A commit per batch, as the fault tests were made for (the default groups the three).
    let story = s.story(&journal, catalog, "shop.orders").warehouse(&warehouse);
    s.run_with(env, &story.args("apply", &["--batches-per-commit", "1"]))
        .ok();
    (journal, warehouse)
}

/// `fault delete` of orders o-1 and o-4 from shop.orders with `env`, which must succeed: its
/// `--json` report (the bad write of the tests that delete through faults).
fn bad_delete(s: &Scratch, env: &[(&str, &str)], catalog: &str, warehouse: &str) -> serde_json::Value {
    fault_delete_in(s, env, catalog, warehouse, "shop.orders", "order_id IN ('o-1', 'o-4')")
        .ok()
        .json()
}

/// The retries a report counts in `s3_requests` (0 when it has none).
fn retried(report: &serde_json::Value) -> u64 {
    report["s3_requests"]["retried"].as_u64().unwrap_or(0)
}

/// The crash tests' journey on S3 with every request of every step through the faults: the
/// journal verifies to 600, the route was flipped once, and the recovered table equals the
/// independent fold.
#[test]
fn the_journey_through_10_percent_faults() {
    if !s3_available() {
        return;
    }
    let here = Scratch::new();
    let proxy = Proxy::mixed(&here, 67, 60);
    journey(67, true, &mut |s, args| {
        s.run_with(&proxy.env(), args).ok();
        0
    });
    assert!(proxy.faults() > 0, "no fault was injected");
}

/// Every route write's reply lost (the route object written, the reply replaced by a 500) until
/// the client gives up: the first route write, a flip, and the flip at the end of `recover`
/// are each read back and found to be their own (they exited 5, "another controller flipped
/// first", before); the route's generations are 1, 2, 3 — no flip doubled.
#[test]
fn lost_replies_on_every_route_write_on_s3() {
    let Some(s) = Scratch::on_s3() else { return };
    let journal = journal_with(&s, "journal", 30, 10);
    let catalog = s.path_str("catalog.db");
    s.apply(&journal, &catalog, "shop.orders");
    let proxy = Faults::every("lost")
        .methods("PUT")
        .paths("route.json")
        .max(40)
        .start(&s);
    let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str()), ("AWS_MAX_ATTEMPTS", "2")];
    let route = unique("lost-route");
    for (position, generation_after) in [("30", 1), ("30", 2)] {
        let args = Scratch::flip_args(&route, &catalog, "shop.orders", position, "test", &[]);
        s.run_with(&env, &args).ok();
        assert_eq!(generation(&s, &route).0, generation_after);
    }
    let recover = recover_args(&journal, &catalog, "30", "rec-lost", &route);
    let recovered = s.run_with(&env, &recover).ok().json();
    assert_eq!(recovered["route"]["generation"], 3, "{recovered}");
    assert!(proxy.faults() >= 6, "faults injected: {}", proxy.faults());
    assert_eq!(generation(&s, &route), (3, "shop.fixed".into()));
}

/// `apply --json` with the journal on S3 through the faults applies what an apply without them
/// applies (the same merge counts, commits and position), and its report counts the retries of
/// the journal's reads and checkpoint writes; a lost reply on a checkpoint (create-only) is read
/// back, not taken for another applier's. A re-run finds nothing to do.
#[test]
fn apply_through_10_percent_faults_reports_its_retries() {
    let Some(s) = Scratch::on_s3() else { return };
    let journal = unique("apply-journal");
    journal_at(&s, &journal, "in", 80, 10);
    let proxy = Proxy::mixed(&s, 61, 40);
    let apply = |env: &[(&str, &str)], name: &str| {
        let (catalog, warehouse) = (s.path_str(&format!("{name}.db")), unique(name));
        let story = s.story(&journal, &catalog, "shop.orders").warehouse(&warehouse);
        let args = story.args("apply", &["--json"]);
        let first = s.run_with(env, &args).ok().json();
        let again = s.run_with(env, &args).ok().json();
        assert_eq!(again["commits"], 0, "{again}");
        first
    };
    let plain = apply(&[], "apply-plain");
    let faulty = apply(&proxy.env(), "apply-faulty");
    for key in ["applied_to_position", "commits", "checkpoints_written", "merge"] {
        assert_eq!(faulty[key], plain[key], "{key}: {faulty}\n{plain}");
    }
    assert_eq!(plain["s3_requests"]["retried"], 0, "{plain}");
    assert!(proxy.faults() > 0 && retried(&faulty) > 0, "{faulty}");
}

/// `apply`, `fault delete` and `history record` through the faults give the result they give
/// without: the same rows deleted and files rewritten, the same table contents; a record taken through
/// the faults compares equal to one taken without (`history compare`, also run with the faults).
#[test]
fn fault_delete_and_history_through_10_percent_faults() {
    let Some(s) = Scratch::on_s3() else { return };
    let proxy = Proxy::mixed(&s, 41, 60);
    let mut results = Vec::new();
    for (name, env) in [("plain", &[][..]), ("faulty", &proxy.env()[..])] {
        let catalog = s.path_str(&format!("{name}.db"));
        let (_, warehouse) = applied_on_s3(&s, env, &format!("fd-{name}"), &catalog);
        let deleted = bad_delete(&s, env, &catalog, &warehouse);
        let through = s.path_str(&format!("{name}-through.json"));
        let recorded = record(&s, env, &catalog, &warehouse, &through);
        let direct = s.path_str(&format!("{name}-direct.json"));
        record(&s, &[], &catalog, &warehouse, &direct);
        s.run_with(env, &["history", "compare", &through, &direct]).ok();
        results.push((
            (deleted["rows_deleted"].clone(), deleted["files_rewritten"].clone()),
            contents(&recorded),
        ));
    }
    assert!(proxy.faults() > 0, "no fault was injected");
    assert_eq!(results[0], results[1], "with and without faults");
    assert!(results[0].0.0.as_u64().unwrap() > 0, "{:?}", results[0]);
}

/// `catalog backup` to S3 and `catalog restore` from it into an empty catalog, both through the
/// faults: the restore is applied and the restored catalog holds what the source catalog holds
/// (the same history record contents).
#[test]
fn backup_and_restore_through_10_percent_faults() {
    let Some(s) = Scratch::on_s3() else { return };
    let catalog = s.path_str("catalog.db");
    let (_, warehouse) = applied_on_s3(&s, &[], "backup", &catalog);
    let proxy = Proxy::mixed(&s, 47, 60);
    let backups = unique("backups");
    let id = backup_with(&s, &proxy.env(), &catalog, &warehouse, &backups);
    std::fs::create_dir_all(s.path("new")).unwrap();
    let new = s.path_str("new/catalog.db");
    let done = restore_into_empty(&s, &proxy.env(), &new, &warehouse, &backups, &id);
    assert_eq!(done["applied"], true, "{done}");
    assert!(proxy.faults() > 0, "no fault was injected");
    let source = record(&s, &[], &catalog, &warehouse, &s.path_str("source.json"));
    let restored = record(&s, &[], &new, &warehouse, &s.path_str("restored.json"));
    assert_eq!(contents(&source), contents(&restored), "the restored catalog");
}

/// `catalog rebuild` through the faults registers what a rebuild without them registers (the
/// same head metadata file for every table; `history compare` of the two catalogs finds no
/// difference), counts its retries, and a re-run through the faults finds every table already
/// registered: its own registration is never taken for another's.
#[test]
fn catalog_rebuild_through_10_percent_faults() {
    let Some(s) = Scratch::on_s3() else { return };
    let catalog = s.path_str("catalog.db");
    let (journal, warehouse) = applied_on_s3(&s, &[], "rebuild", &catalog);
    apply_in(&s, &journal, &catalog, &warehouse, "shop.orders_copy");
    let proxy = Proxy::mixed(&s, 43, 60);
    let rebuild = |env: &[(&str, &str)], rel: &str| {
        let dr = s.path_str(rel);
        let r = s
            .run_with(env, &Scratch::rebuild_args(&dr, &warehouse, &["--json"]))
            .ok()
            .json();
        (dr, r)
    };
    let heads = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        let tables = r["tables"].as_array().unwrap();
        tables.iter().map(|t| t["metadata_file"].clone()).collect()
    };
    let (plain_dr, plain) = rebuild(&[], "plain.db");
    let (faulty_dr, faulty) = rebuild(&proxy.env(), "faulty.db");
    assert_eq!(faulty["totals"]["registered"], 2, "{faulty}");
    assert_eq!(heads(&faulty), heads(&plain), "{faulty}\n{plain}");
    let again = rebuild(&proxy.env(), "faulty.db").1;
    assert_eq!(again["totals"]["already_registered"], 2, "{again}");
    assert_eq!(again["totals"]["conflicts"], 0, "{again}");
    assert!(proxy.faults() > 0, "no fault was injected");
    assert!(retried(&faulty) + retried(&again) > 0, "{faulty}\n{again}");
    let (a, b) = (s.path_str("plain.json"), s.path_str("faulty.json"));
    record(&s, &[], &plain_dr, &warehouse, &a);
    record(&s, &[], &faulty_dr, &warehouse, &b);
    s.run(&["history", "compare", &a, &b]).ok();
}

/// `replica follow` and `replica failover` with the lease, the follower's state, the promotion
/// and the route all on S3 behind the faults: the follower verifies what a follower without
/// faults verifies, the failover flips the route exactly once (generation 1 → 2, to the DR
/// table) and a re-run of the same failover is refused, naming its promotion, flipping nothing.
#[test]
fn replica_follow_and_failover_through_10_percent_faults() {
    let Some(s) = Scratch::on_s3() else { return };
    let primary = s.path_str("primary.db");
    let (_, warehouse) = applied_on_s3(&s, &[], "follow-primary", &primary);
    let replica = unique("follow-replica");
    s.run(&["replica", "copy", "--from", &warehouse, "--to", &replica]).ok();
    let map = format!("{warehouse}={replica}");
    let follow = |env: &[(&str, &str)], catalog: &str, state: &str| {
        let (st, dr) = (unique(state), s.path_str(catalog));
        let target = [replica.as_str(), &dr, &map, &st];
        let args = Scratch::replica_args("follow", target, &["--holder", "f-1", "--once", "--json"]);
        let t = s.run_with(env, &args).ok().json()["tables"][0].clone();
        (
            catalog.to_string(),
            st,
            (t["status"].clone(), t["verified_position"].clone()),
        )
    };
    let (_, _, plain) = follow(&[], "plain.db", "state-plain");
    let proxy = Proxy::mixed(&s, 47, 60);
    let (dr, state, faulty) = follow(&proxy.env(), "dr.db", "state-faulty");
    assert_eq!(plain, ("ok".into(), 60.into()));
    assert_eq!(faulty, plain, "with and without faults");

    let route = unique("follow-route");
    flip(&s, &route, &primary, "shop.orders", 60, &["--warehouse", &warehouse]);
    let dr = s.path_str(&dr);
    let failover = Scratch::replica_args(
        "failover",
        [&replica, &dr, &map, &state],
        &["--route", &route, "--failover-id", "fo-faults", "--json"],
    );
    let p = s.run_with(&proxy.env(), &failover).ok().json();
    assert_eq!(p["routes"][0]["to_generation"], 2, "{p}");
    assert_eq!(p["tables"][0]["positions_behind"], 0, "{p}");
    // A completed failover is recorded (its own promotion write, whatever its reply, is read
    // back); the same one again reports that record and flips nothing.
    let again = s.run_with(&proxy.env(), &failover).ok().json();
    assert_eq!(again["already_recorded"], true, "{again}");
    assert_eq!(again["routes"], p["routes"], "{again}");
    assert!(proxy.faults() > 0, "no fault was injected");
    drop(proxy);
    assert_eq!(generation(&s, &route).0, 2, "one flip, however many replies were lost");
}

/// Both game days on S3 through the faults (a proxy of its own each) pass as they do without:
/// the region scenario (two tables; the same tables fail validation after the wrong-order copy)
/// and the failover scenario (RPO 100 positions); each report counts its retries.
#[test]
fn gameday_through_10_percent_faults() {
    let Some(s) = Scratch::on_s3() else { return };
    let region = |env: &[(&str, &str)], name: &str| {
        let (work, store) = (s.path_str(name), unique(name));
        s.run_with(
            env,
            &[
                "gameday",
                "--work",
                &work,
                "--store",
                &store,
                "--tables",
                "2",
                "--commits",
                "2",
                "--rows-per-commit",
                "10",
                "--json",
                "-q",
            ],
        )
        .ok()
        .json()
    };
    let failed = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        let runs = r["runs"].as_array().unwrap();
        runs.iter().map(|run| run["failed_validation"].clone()).collect()
    };
    let plain = region(&[], "gd-plain");
    // A fault costs the table files' client (iceberg-rust's FileIO) a second or more of backoff:
    // the bounds keep the run short.
    let proxy = Proxy::mixed(&s, 53, 12);
    let faulty = region(&proxy.env(), "gd-faulty");
    assert_eq!(faulty["ok"], true, "{faulty}");
    assert_eq!(failed(&faulty), failed(&plain), "{faulty}\n{plain}");
    assert!(proxy.faults() > 0 && retried(&faulty) > 0, "{faulty}");

    let proxy = Proxy::mixed(&s, 59, 12);
    let (work, store) = (s.path_str("gd-failover"), unique("gd-failover"));
    let fo = s
        .run_with(
            &proxy.env(),
            &[
                "gameday",
                "--scenario",
                "failover",
                "--work",
                &work,
                "--store",
                &store,
                "--json",
                "-q",
            ],
        )
        .ok()
        .json();
    assert_eq!(fo["ok"], true, "{fo}");
    assert_eq!(fo["rpo_positions"], 100, "{fo}");
    assert!(proxy.faults() > 0 && retried(&fo) > 0, "{fo}");
}

/// The table files (metadata, manifests, data, read and written through iceberg-rust's FileIO)
/// are counted in `s3_requests`: `apply --json` of a local journal into a warehouse on S3
/// counts at least the four writes of each commit (data file, manifest, manifest list,
/// metadata), where tidemark's own client alone made almost none; `fault delete` through the
/// faults, which touches only the catalog and the table files, reports requests and the
/// retries of the table-file client (it reported no `s3_requests` before).
#[test]
fn table_file_requests_and_retries_are_counted() {
    let Some(s) = Scratch::on_s3() else { return };
    let journal = journal_with(&s, "journal", 60, 20);
    let catalog = s.path_str("catalog.db");
    let warehouse = unique("counted");
    let applied = s
        .story(&journal, &catalog, "shop.orders")
        .warehouse(&warehouse)
        .apply(&["--json"])
        .json();
    let commits = applied["commits"].as_u64().unwrap();
    assert!(commits > 0, "{applied}");
    let requests = applied["s3_requests"]["requests"].as_u64().unwrap_or(0);
    assert!(requests >= 4 * commits, "{applied}");
    // Half of the requests fail (503 or 500), at most 6: `fault delete` makes about a dozen
    // requests, so some are retried whatever order concurrent requests arrive in.
    let proxy = Faults::share("0.5", "503,500").max(6).seed(71).start(&s);
    let deleted = bad_delete(&s, &proxy.env(), &catalog, &warehouse);
    assert!(deleted["rows_deleted"].as_u64().unwrap() > 0, "{deleted}");
    assert!(
        deleted["s3_requests"]["requests"].as_u64().unwrap_or(0) > 0,
        "{deleted}"
    );
    assert!(
        proxy.faults() > 0 && retried(&deleted) > 0,
        "faults {}: {deleted}",
        proxy.faults()
    );
}
