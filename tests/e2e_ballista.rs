//! `tidemark recover --engine …` end to end: the distributed engines pass the same checks as the
//! local one (validation, row count, resumption, the route flip), in standalone mode always and
//! on the sandbox's real cluster (`sandbox/ballista.sh start`, TIDEMARK_BALLISTA_URL) when it
//! runs; a missing cluster is exit 11.

use super::support::*;

const CLUSTER: i32 = 11;

/// A damaged table (order o-3 deleted by a bad job after checkpoint 40) and ten more events;
/// the journal and the warehouse under `root` (a scratch folder when `None`, or s3://…).
fn damaged(s: &Scratch, root: Option<&str>) -> (String, String, Vec<String>) {
    let (journal, warehouse) = match root {
        None => (journal_with(s, "journal", 40, 10), s.path_str("warehouse")),
        Some(r) => {
            let journal = format!("{r}/journal");
            s.run(&["journal", "init", "--journal", &journal]).ok();
            let input = s.write("first.ndjson", &events(1, 40));
            s.append_with(&journal, input.to_str().unwrap(), &["--batch-size", "10"])
                .ok();
            (journal, format!("{r}/warehouse"))
        }
    };
    let catalog = s.path_str("catalog.db");
    let at = vec![
        "--catalog".to_string(),
        catalog.clone(),
        "--warehouse".to_string(),
        warehouse,
    ];
    let at_ref: Vec<&str> = at.iter().map(String::as_str).collect();
    s.run(&[&["apply", "--journal", &journal, "--table", "shop.orders"][..], &at_ref].concat())
        .ok();
    s.run(
        &[
            &["fault", "delete"][..],
            &at_ref,
            &["--table", "shop.orders", "--where", "order_id = 'o-3'"],
        ]
        .concat(),
    )
    .ok();
    let more = s.write("more.ndjson", &events(41, 50));
    s.append(&journal, more.to_str().unwrap());
    (journal, catalog, at)
}

fn recover_args<'a>(journal: &'a str, at: &'a [String], into: &'a str, engine: &'a str) -> Vec<&'a str> {
    let mut v = vec!["recover", "--journal", journal];
    v.extend(at.iter().map(String::as_str));
    v.extend([
        "--into",
        into,
        "--source-table",
        "shop.orders",
        "--at-or-before",
        "40",
        "--recovery-id",
        into,
        "--engine",
        engine,
        "--json",
    ]);
    v
}

fn count(s: &Scratch, route: &str, sql: &str) -> String {
    s.query(route, "csv", sql).ok().stdout
}

/// Recovers locally and on `engine`; both validate, agree, resume, and flip.
fn same_as_local(engine: &str, root: Option<&str>) {
    let s = Scratch::new();
    let (journal, _, at) = damaged(&s, root);
    let local = s
        .run(&recover_args(&journal, &at, "shop.fixed_local", "local"))
        .ok()
        .json();
    let dist = s
        .run(&recover_args(&journal, &at, "shop.fixed_dist", engine))
        .ok()
        .json();
    assert_eq!(dist["validation"]["ok"], true, "{dist}");
    for k in ["snapshot_position", "h", "seed_rows"] {
        assert_eq!(dist[k], local[k], "{k}");
    }
    for k in ["keys_expected", "rows_found", "tombstones_expected"] {
        assert_eq!(dist["validation"][k], local["validation"][k], "{k}");
    }
    // Every key was also checked on the cluster, by the distributed validation.
    let d = &dist["validation"]["distributed"];
    assert_eq!(d["ok"], true, "{dist}");
    assert_eq!(d["keys_expected"], local["validation"]["keys_expected"], "{dist}");
    assert_eq!(d["rows_found"], local["validation"]["rows_found"], "{dist}");
    assert!(local["validation"].get("distributed").is_none(), "{local}");
    for k in ["events", "inserted", "updated", "unchanged"] {
        assert_eq!(dist["replay"][k], local["replay"][k], "{k}");
    }
    // Again: resumed, nothing redone; then flipped, and the deleted order is back.
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    let args = recover_args(&journal, &at, "shop.fixed_dist", engine);
    let again = s.run(&[&args[..], &["--route", &route]].concat()).ok().json();
    assert_eq!(again["replay_resumed"], true, "{again}");
    assert_eq!(again["route"]["applied_position"], 50);
    let q = count(&s, &route, "SELECT count(*) AS n FROM orders WHERE order_id = 'o-3'");
    assert!(q.contains("n\n1"), "the deleted order is back: {q}");
    // The next apply continues after H.
    let next = s
        .run(
            &[
                &["apply", "--journal", &journal, "--table", "shop.fixed_dist", "--json"][..],
                &at.iter().map(String::as_str).collect::<Vec<_>>(),
            ]
            .concat(),
        )
        .ok()
        .json();
    assert_eq!(next["started_after_position"], 50, "{next}");
}

#[test]
fn recover_on_ballista_standalone_matches_local() {
    same_as_local("ballista-standalone", None);
}

#[test]
fn recover_on_ballista_standalone_on_s3_matches_local() {
    if !s3_available() {
        return;
    }
    same_as_local(
        "ballista-standalone",
        Some(&format!("s3://tidemark/ballista-{}", std::process::id())),
    );
}

#[test]
fn recover_on_the_sandbox_ballista_cluster_matches_local() {
    let Ok(url) = std::env::var("TIDEMARK_BALLISTA_URL") else {
        eprintln!("cluster scenario skipped: start one with `eval \"$(bash sandbox/ballista.sh start)\"`");
        return;
    };
    same_as_local(&url, None);
}

/// The cluster's scheduler and executors reach the bucket through their own S3 stores
/// (`--s3-bucket s3://tidemark`, what `sandbox/test.sh` passes through
/// TIDEMARK_BALLISTA_S3_BUCKETS), built from the standard AWS environment.
#[test]
fn recover_on_the_sandbox_ballista_cluster_on_s3_matches_local() {
    let Ok(url) = std::env::var("TIDEMARK_BALLISTA_URL") else {
        eprintln!("cluster scenario skipped: start one with `eval \"$(bash sandbox/ballista.sh start)\"`");
        return;
    };
    if !s3_available() {
        return;
    }
    same_as_local(
        &url,
        Some(&format!("s3://tidemark/ballista-cluster-{}", std::process::id())),
    );
}

#[test]
fn an_unreachable_cluster_is_exit_11_and_creates_nothing() {
    let s = Scratch::new();
    let (journal, _, at) = damaged(&s, None);
    s.run(&recover_args(&journal, &at, "shop.nowhere", "ballista://127.0.0.1:9"))
        .fails(CLUSTER, &["127.0.0.1:9", "cannot be reached"]);
    s.run(&recover_args(&journal, &at, "shop.x", "spark://h:1"))
        .fails(2, &["spark://h:1"]);
}
