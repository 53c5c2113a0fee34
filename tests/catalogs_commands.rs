//! Issue 10, item 3, command by command on the catalogs beyond SQL (SeaweedFS's Iceberg REST
//! catalog `sw`, moto's S3 Tables `st`; defined as in `catalogs_remote`): what each can do
//! works, and what it cannot is refused before anything changes, naming what the catalog lacks
//! and what to do instead. docs/catalogs.md's "What each catalog can do" table points at these tests.

use std::collections::BTreeMap;

use super::catalogs_remote::{apply_and_fault, ns, rest_definition, s3tables_definition};
use super::merge_events;
use super::support::*;

/// The table pointers of `namespace` in `catalog` (`catalog state --json`).
fn pointers(s: &Scratch, catalog: &str, namespace: &str) -> serde_json::Value {
    s.run(&[
        "catalog",
        "state",
        "--catalog",
        catalog,
        "--namespace",
        namespace,
        "--json",
    ])
    .ok()
    .json()["tables"]
        .clone()
}

/// The orders the journal of [`apply_and_fault`] leaves visible (tombstones excluded).
fn live_orders(s: &Scratch) -> usize {
    let mut state = BTreeMap::new();
    merge_events(&mut state, &std::fs::read_to_string(s.path("events.ndjson")).unwrap());
    state.values().filter(|r| r["is_deleted"] == false).count()
}

/// `history record` / `compare`, `catalog state`, the refusals of `catalog rebuild`, and
/// `recover` with the source and the target in different catalogs, on `catalog`.
fn commands_on(definition: Vec<(String, String)>, catalog: &str, purpose: &str) {
    let mut s = Scratch::new();
    s.env = definition;
    let namespace = ns(purpose);
    let table = format!("{namespace}.orders");
    apply_and_fault(&s, catalog, &table);
    let journal = s.path_str("journal");

    // history record / compare: a commit between two records is a difference (exit 4).
    let (h1, h2) = (s.path_str("h1.json"), s.path_str("h2.json"));
    let record = |out: &str| {
        s.record_history(catalog, &["--namespace", &namespace, "--out", out])
            .ok()
    };
    record(&h1);
    s.run(&["history", "compare", &h1, &h1]).ok();
    s.fault_delete(catalog, &table, "order_version = 3");
    record(&h2);
    let diff = s
        .run(&["history", "compare", &h1, &h2])
        .fails(4, &["differences between"]);
    assert!(diff.stdout.contains("current snapshot id"), "{}", diff.stdout);

    // catalog state names the table's pointer; a rebuild (it registers) is refused, unchanged.
    let before = pointers(&s, catalog, &namespace);
    assert!(
        before[&table].as_str().is_some_and(|p| p.ends_with(".metadata.json")),
        "{before}"
    );
    s.rebuild(catalog, "s3://tidemark/elsewhere", &["--namespace", &namespace])
        .fails(
            6,
            &[
                "lacks registering an existing metadata file",
                "Nothing was changed",
                "--source-metadata",
            ],
        );
    assert_eq!(
        pointers(&s, catalog, &namespace),
        before,
        "the refused rebuild changed the catalog"
    );

    // recover: the trusted snapshot in a SQLite catalog, the recovered table here, and back.
    let local = s.path_str("local/catalog.db");
    std::fs::create_dir_all(s.path("local")).unwrap();
    s.apply(&journal, &local, "l.orders");
    let route = s.path_str("route");
    let into = format!("{namespace}.fixed");
    s.recover(
        &journal,
        catalog,
        &into,
        &[
            "--source-catalog",
            &local,
            "--source-table",
            "l.orders",
            "--route",
            &route,
        ],
    )
    .ok();
    let q = s.query(&route, "csv", "SELECT count(*) AS n FROM orders").ok();
    assert!(q.stdout.contains(&format!("n\n{}", live_orders(&s))), "{}", q.stdout);
    let from_file = format!("{namespace}.from_file");
    let metadata = s.run(&["catalog", "state", "--catalog", &local, "--json"]).ok().json()["tables"]["l.orders"]
        .as_str()
        .unwrap()
        .to_string();
    s.recover(&journal, catalog, &from_file, &["--source-metadata", &metadata])
        .ok();
    // The snapshot's files are read with this catalog's S3 settings, not the environment's.
    s.recover(
        &journal,
        &local,
        "l.back",
        &["--source-catalog", catalog, "--source-table", &table],
    )
    .ok();
}

#[test]
fn every_command_on_a_rest_catalog() {
    let Some(def) = rest_definition() else { return };
    commands_on(def, "sw", "cmd_rest");
}

#[test]
fn every_command_on_s3tables() {
    let Some(def) = s3tables_definition() else { return };
    commands_on(def, "st", "cmd_st");
}

/// `catalog backup` reads every table's files under the catalog's warehouse location: on a REST
/// catalog whose warehouse is given as a location it works (and `replica check` reads the same
/// warehouse); its `restore` needs a pointer swap, which REST lacks: refused, unchanged.
#[test]
fn backup_and_restore_on_a_rest_catalog() {
    let Some(def) = rest_definition() else { return };
    let mut s = Scratch::new();
    s.env = def;
    let namespace = ns("bk_rest");
    let table = format!("{namespace}.orders");
    apply_and_fault(&s, "sw", &table);
    // As a name, the warehouse is no location to read the files under.
    s.run(&[
        "catalog",
        "backup",
        "--catalog",
        "sw",
        "--namespace",
        &namespace,
        "--to",
        &s.path_str("bk"),
    ])
    .fails(6, &["is a name", "--warehouse s3://"]);
    let bucket = std::env::var("TIDEMARK_REST_WAREHOUSE").unwrap();
    let location = format!("s3://{bucket}");
    // The files are on SeaweedFS's S3, which the S3 store reaches through the environment.
    let seaweed = [(
        "AWS_ENDPOINT_URL",
        std::env::var("TIDEMARK_SEAWEED_S3_ENDPOINT").unwrap(),
    )];
    let seaweed: Vec<(&str, &str)> = seaweed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let on = ["--catalog", "sw", "--warehouse", location.as_str()];
    let backup = s
        .run_with(
            &seaweed,
            &[
                &["catalog", "backup"],
                &on[..],
                &["--namespace", &namespace, "--to", &s.path_str("bk"), "--json"],
            ]
            .concat(),
        )
        .ok()
        .json();
    let id = backup["id"].as_str().expect("a backup id").to_string();
    let check = s
        .run_with(&seaweed, &["replica", "check", "--warehouse", &location, "--json"])
        .ok()
        .json();
    assert!(check.to_string().contains(&table), "{check}");
    // A DR copy of the table (`replica copy` to a folder), and the recovered table created in
    // the REST catalog from the copy's metadata file, read through a prefix map.
    let dr = s.path_str("dr");
    std::fs::create_dir_all(&dr).unwrap();
    let copied = s
        .run_with(
            &seaweed,
            &[
                "replica", "copy", "--from", &location, "--to", &dr, "--tables", &table, "--json",
            ],
        )
        .ok()
        .json();
    let head = copied["tables"][0]["head"].as_str().expect("a head").to_string();
    s.recover(
        &s.path_str("journal"),
        "sw",
        &format!("{namespace}.from_dr"),
        &[
            "--source-metadata",
            &format!("{location}/{head}"),
            "--prefix-map",
            &format!("{location}=file://{dr}"),
        ],
    )
    .ok();

    s.fault_delete("sw", &table, "order_version = 2");
    let state = s.path_str("state.json");
    s.run(
        &[
            &["catalog", "state"],
            &on[..],
            &["--namespace", &namespace, "--out", &state],
        ]
        .concat(),
    )
    .ok();
    let before = pointers(&s, "sw", &namespace);
    s.run_with(
        &seaweed,
        &[
            &["catalog", "restore"],
            &on[..],
            &["--from", &s.path_str("bk"), "--id", &id, "--expect", &state],
        ]
        .concat(),
    )
    .fails(6, &["swapping the metadata pointer", "Nothing was changed"]);
    assert_eq!(
        pointers(&s, "sw", &namespace),
        before,
        "the refused restore changed the catalog"
    );
}

/// S3 Tables keeps each table in a bucket of its own: no warehouse location for `catalog
/// backup` / `restore`, refused before anything is read, saying what to keep instead.
#[test]
fn backup_and_restore_on_s3tables_are_refused() {
    let Some(def) = s3tables_definition() else { return };
    let mut s = Scratch::new();
    s.env = def;
    let namespace = ns("bk_st");
    apply_and_fault(&s, "st", &format!("{namespace}.orders"));
    let before = pointers(&s, "st", &namespace);
    s.run(&[
        "catalog",
        "backup",
        "--catalog",
        "st",
        "--namespace",
        &namespace,
        "--to",
        &s.path_str("bk"),
    ])
    .fails(6, &["a bucket of its own", "catalog state --out"]);
    assert!(!s.path("bk").exists(), "the refused backup wrote something");
    // A backup of a SQL catalog cannot be restored into S3 Tables either.
    let local = s.path_str("local.db");
    s.apply(&s.path_str("journal"), &local, "l.orders");
    let id = s
        .run(&[
            "catalog",
            "backup",
            "--catalog",
            &local,
            "--to",
            &s.path_str("bk"),
            "--json",
        ])
        .ok()
        .json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.run(&[
        "catalog",
        "restore",
        "--catalog",
        "st",
        "--from",
        &s.path_str("bk"),
        "--id",
        &id,
        "--expect",
        "empty",
    ])
    .fails(6, &["a bucket of its own", "Nothing was changed"]);
    assert_eq!(pointers(&s, "st", &namespace), before);
}

/// Issue 10's precedence of S3 settings for a REST catalog: the definition's own, then what
/// the server vends (SeaweedFS gives each table's `s3.endpoint` with it), then the environment.
/// With no `s3.endpoint` in the definition and `AWS_ENDPOINT_URL` aimed at another S3 server
/// (moto), every command writes and reads where the server says; an `s3.endpoint` the
/// definition gives beats the server's.
#[test]
fn a_rest_servers_vended_endpoint_beats_the_environment() {
    let Some(mut def) = rest_definition() else { return };
    let elsewhere = std::env::var("AWS_ENDPOINT_URL").expect("moto's endpoint (sandbox/test.sh)");
    def.retain(|(k, _)| !k.ends_with("__S3__ENDPOINT"));
    def.push(("AWS_ENDPOINT_URL".into(), elsewhere.clone()));
    let mut s = Scratch::new();
    s.env = def.clone();
    let namespace = ns("vended");
    let table = format!("{namespace}.orders");
    let expected = apply_and_fault(&s, "sw", &table);
    let route = s.path_str("route");
    s.recover(
        &s.path_str("journal"),
        "sw",
        &format!("{namespace}.fixed"),
        &["--source-table", &table, "--route", &route],
    )
    .ok();
    let q = s.query(&route, "csv", "SELECT count(*) AS n FROM orders").ok();
    assert!(q.stdout.contains(&format!("n\n{}", live_orders(&s))), "{}", q.stdout);
    assert!(expected.len() > 10);
    let r = s.drill_story(&["--catalog", "sw"], 50, 300).ok().json();
    assert_eq!(r["ok"], true, "{r}");

    // The definition's endpoint is used although the server vends another (here: a wrong one).
    s.env
        .push(("PYICEBERG_CATALOG__SW__S3__ENDPOINT".into(), elsewhere.clone()));
    let journal = s.path_str("journal");
    let r = s.story(&journal, "sw", format!("{namespace}.other")).run("apply", &[]);
    assert_ne!(r.code, 0, "the definition's endpoint was not used: {}", r.stdout);
    let port = elsewhere.rsplit(':').next().unwrap();
    assert!(r.stderr.contains(port), "{}", r.stderr);
}

/// A route written with the S3 Tables ARN form (`--catalog arn:aws:s3tables:…`, no
/// definition) records the ARN; `query --route` opens the table bucket from it with nothing
/// else given (the AWS chain: here `AWS_ENDPOINT_URL` at moto's S3 Tables for both APIs).
#[test]
fn query_through_a_route_written_with_an_s3tables_arn() {
    if s3tables_definition().is_none() {
        return;
    }
    let mut s = Scratch::new();
    s.env = vec![(
        "AWS_ENDPOINT_URL".into(),
        std::env::var("TIDEMARK_S3TABLES_ENDPOINT").unwrap(),
    )];
    let arn = std::env::var("TIDEMARK_S3TABLES_ARN").unwrap();
    let namespace = ns("arn");
    let table = format!("{namespace}.orders");
    apply_and_fault(&s, &arn, &table);
    let route = s.path_str("route");
    s.recover(
        &s.path_str("journal"),
        &arn,
        &format!("{namespace}.fixed"),
        &["--source-table", &table, "--route", &route],
    )
    .ok();
    let shown = s.run(&["route", "show", "--route", &route, "--json"]).ok().json();
    assert_eq!(shown[0]["route"]["catalog"]["uri"], arn.as_str(), "{shown}");
    let q = s.query(&route, "csv", "SELECT count(*) AS n FROM orders").ok();
    assert!(q.stdout.contains(&format!("n\n{}", live_orders(&s))), "{}", q.stdout);
}

/// The game day's small run (2 tables, 3 commits) with `extra` options; in `s`'s `work` folder.
fn gameday(s: &Scratch, env: &[(&str, &str)], extra: &[&str]) -> Run {
    let work = s.path_str("work");
    let args = [
        &[
            "gameday",
            "--work",
            work.as_str(),
            "--tables",
            "2",
            "--commits",
            "3",
            "--rows-per-commit",
            "10",
            "--json",
        ][..],
        extra,
    ]
    .concat();
    s.run_with(env, &args)
}

/// The namespaces of `catalog` (`catalog state --json` over all of them).
fn has_gameday_namespace(s: &Scratch, catalog: &str) -> bool {
    let state = s.run(&["catalog", "state", "--catalog", catalog, "--json"]).ok().json();
    state["tables"].to_string().contains("gameday.")
}

/// `gameday --catalog FILE`: the source tables in the scratch namespace `gameday` of the user's
/// SQLite catalog, rebuilt in a scratch one; the user's other tables untouched, the namespace
/// dropped at the end.
#[test]
fn gameday_with_a_sqlite_catalog() {
    let s = Scratch::new();
    let local = s.path_str("user.db");
    apply_and_fault(&s, &local, "shop.orders");
    let before = pointers(&s, &local, "shop");
    let report = gameday(&s, &[], &["--catalog", &local]).ok().json();
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        report.to_string().contains("is dropped from the user's catalogs"),
        "{report}"
    );
    assert_eq!(pointers(&s, &local, "shop"), before);
    assert!(!has_gameday_namespace(&s, &local));
    // A namespace `gameday` that exists may hold someone's tables: refused, untouched.
    s.apply(&s.path_str("journal"), &local, "gameday.theirs");
    let theirs = pointers(&s, &local, "gameday");
    // The failover scenario runs on scratch catalogs of its own: the options are refused.
    gameday(&s, &[], &["--scenario", "failover", "--catalog", &local]).fails(3, &["region scenario"]);
    gameday(&s, &[], &["--catalog", &local]).fails(3, &["namespace `gameday` exists", "drop it"]);
    assert_eq!(pointers(&s, &local, "gameday"), theirs);
}

/// `gameday --catalog postgres://…`: the SQL path on a server (sandbox/postgres.sh), the files
/// in the game day's scratch warehouse, rebuilt in a scratch SQLite catalog; the scratch
/// namespace is dropped at the end. (Other tests share the database, so only the namespace is
/// checked, not the whole catalog.)
#[test]
fn gameday_with_a_postgres_catalog() {
    let uri = match std::env::var("TIDEMARK_TEST_PG_URI") {
        Ok(u) if !u.trim().is_empty() => u,
        _ if std::env::var("TIDEMARK_SKIP_POSTGRES").as_deref() == Ok("1") => return,
        _ => panic!("TIDEMARK_TEST_PG_URI is not set: run `bash sandbox/test.sh` (or TIDEMARK_SKIP_POSTGRES=1)"),
    };
    let s = Scratch::new();
    let report = gameday(&s, &[], &["--catalog", &uri]).ok().json();
    assert_eq!(report["ok"], true, "{report}");
    assert!(
        report.to_string().contains("is dropped from the user's catalogs"),
        "{report}"
    );
    // `catalog state` on PostgreSQL needs a warehouse (it lists, it does not write there).
    let wh = s.path_str("wh");
    let state = s
        .run(&["catalog", "state", "--catalog", &uri, "--warehouse", &wh, "--json"])
        .ok()
        .json();
    assert!(!state["tables"].to_string().contains("gameday."), "{state}");
}

/// `gameday --catalog sw`: the source tables in SeaweedFS's REST catalog, the DR copy of its
/// warehouse in a folder, rebuilt in a scratch SQLite catalog; the namespace is dropped after.
/// `--dr-catalog sw` is refused before anything is made: SeaweedFS cannot register.
#[test]
fn gameday_with_a_rest_catalog() {
    let Some(def) = rest_definition() else { return };
    let mut s = Scratch::new();
    s.env = def;
    let endpoint = std::env::var("TIDEMARK_SEAWEED_S3_ENDPOINT").unwrap();
    let seaweed = [("AWS_ENDPOINT_URL", endpoint.as_str())];
    gameday(&s, &seaweed, &["--dr-catalog", "sw"]).fails(6, &["registering an existing metadata file"]);
    assert!(!s.path("work/catalogs").exists(), "the refused game day made catalogs");
    // A game day that fails part-way (the warehouse's S3 is not where AWS_ENDPOINT_URL points:
    // the copy fails after the tables were built) drops its scratch namespace all the same.
    gameday(&s, &[], &["--catalog", "sw"]).fails(1, &["replicate", "scratch namespace was dropped"]);
    assert!(!has_gameday_namespace(&s, "sw"));
    let report = gameday(&s, &seaweed, &["--catalog", "sw"]).ok().json();
    assert_eq!(report["ok"], true, "{report}");
    let steps = report["steps"].to_string();
    assert!(steps.contains("no longer used (a simulated loss)"), "{steps}");
    assert!(!has_gameday_namespace(&s, "sw"));
}

/// S3 Tables takes part in no game day: as the source there is no warehouse to copy (a bucket
/// per table), as the DR catalog it cannot register; both refused before anything is made.
#[test]
fn gameday_with_s3tables_is_refused() {
    let Some(def) = s3tables_definition() else { return };
    let mut s = Scratch::new();
    s.env = def;
    gameday(&s, &[], &["--catalog", "st"]).fails(6, &["a table bucket of its own", "tidemark drill --catalog"]);
    gameday(&s, &[], &["--dr-catalog", "st"]).fails(6, &["registering an existing metadata file"]);
    assert!(!s.path("work/catalogs").exists(), "the refused game day made catalogs");
}
