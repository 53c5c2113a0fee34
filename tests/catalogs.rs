//! End-to-end: choosing a catalog (`--catalog` forms, PyIceberg definitions, refusals), routes
//! that carry their catalog so readers need nothing else, and no secret anywhere.

use std::path::Path;

use crate::support::{Scratch, journal_with};

/// `query --route ROUTE` run in `dir` with nothing else given counts the 7 live orders of the
/// journal of 20 events (`journal_with(…, 20, 5)`).
fn assert_seven_orders(s: &Scratch, dir: &Path, route: &str) {
    let count = "SELECT count(*) AS n FROM orders";
    let q = s
        .run_in(dir, &["query", "--route", route, "--format", "csv", count])
        .ok();
    assert!(q.stdout.contains("n\n7"), "{}", q.stdout);
}

/// Issue 10, item 4: `recover --catalog sqlite:PATH … --route DIR`, then `query --route DIR`
/// with nothing else given, from another working folder; the route folder did not exist.
#[test]
fn query_through_a_route_written_with_a_sqlite_uri() {
    let s = Scratch::with_home();
    let journal = journal_with(&s, "journal", 20, 5);
    std::fs::create_dir_all(s.path("cat")).unwrap();
    let catalog = format!("sqlite:{}", s.path_str("cat/catalog.db"));
    let story = s.story(&journal, &catalog, "shop.orders");
    story.apply(&[]);
    let route = s.path_str("routes/main");
    let done = story.recover("shop.fixed", &["--route", &route, "--json"]).ok().json();
    let recorded = &done["route"]["catalog"];
    assert_eq!(recorded["kind"], "sqlite", "{recorded}");
    assert_eq!(recorded["uri"], s.path_str("cat/catalog.db"), "{recorded}");
    assert_eq!(recorded["name"], "tidemark");
    assert_eq!(recorded["warehouse"], format!("file://{}", s.path_str("cat/warehouse")));
    let elsewhere = s.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    assert_seven_orders(&s, &elsewhere, &route);
}

/// The fenced writer on a route alone (`apply --route DIR`, no `--catalog`) commits into the
/// route's table in the route's own catalog; a `--catalog` that is another catalog is refused,
/// and so is a route whose catalog is gone (nothing created in its place).
#[test]
fn the_fenced_writer_opens_the_routes_catalog() {
    let s = Scratch::with_home();
    std::fs::create_dir_all(s.path("cat")).unwrap();
    let journal = journal_with(&s, "journal", 20, 5);
    let catalog = s.path_str("cat/catalog.db");
    let route = s.path_str("routes/main");
    let story = s.story(&journal, &catalog, "shop.orders");
    story.apply(&[]);
    story.recover("shop.fixed", &["--route", &route]).ok();
    let more = s.write("more.ndjson", &crate::support::events(21, 30));
    s.append(&journal, more.to_str().unwrap());

    let elsewhere = s.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let run = |args: &[&str]| s.run_in(&elsewhere, args);
    let other = s.path_str("other.db");
    run(&["apply", "--journal", &journal, "--route", &route, "--catalog", &other])
        .fails(3, &["leave --catalog out", &catalog]);
    let r = run(&["apply", "--journal", &journal, "--route", &route, "--json"])
        .ok()
        .json();
    assert_eq!(r["table"], "shop.fixed", "{r}");
    assert_eq!(r["applied_to_position"], 30, "{r}");
    assert_seven_orders(&s, &elsewhere, &route);
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "the writer created files in its working folder"
    );

    std::fs::rename(s.path("cat/catalog.db"), s.path("cat/moved.db")).unwrap();
    run(&["apply", "--journal", &journal, "--route", &route]).fails(
        3,
        &[
            "cannot open the route's sqlite catalog tidemark",
            "does not exist",
            "--catalog",
        ],
    );
    assert!(
        !s.path("cat/catalog.db").exists(),
        "a new, empty catalog was created in place of the route's"
    );
}

/// A bare word is a defined catalog's name or refused (it used to become a new SQLite file);
/// defined catalogs come from `.pyiceberg.yaml` and `PYICEBERG_CATALOG__…` variables.
#[test]
fn a_catalog_is_chosen_by_name_the_pyiceberg_way() {
    let s = Scratch::with_home();
    let journal = journal_with(&s, "journal", 10, 5);
    let run = |env: &[(&str, &str)], args: &[&str]| s.run_with(env, args);
    let apply = |catalog: &str| {
        vec![
            "apply".to_string(),
            "--journal".into(),
            journal.clone(),
            "--catalog".into(),
            catalog.to_string(),
            "--table".into(),
            "shop.orders".into(),
            "--json".into(),
        ]
    };
    let args = apply("dr");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&[], &args).fails(3, &["neither a defined catalog", "no catalogs are defined"]);
    assert!(!s.path("dr").exists(), "a bare word created a SQLite file");

    s.write(
        "home/.pyiceberg.yaml",
        &format!(
            "catalog:\n  dr:\n    type: sql\n    uri: sqlite:///{}\n    warehouse: file://{}\n",
            s.path_str("dr-site/catalog.db"),
            s.path_str("dr-site/wh")
        ),
    );
    std::fs::create_dir_all(s.path("dr-site")).unwrap();
    let r = run(&[], &args).ok().json();
    assert_eq!(r["applied_to_position"], 10);
    assert!(s.path("dr-site/catalog.db").is_file());
    assert!(
        s.path("dr-site/wh/shop/orders").is_dir(),
        "the definition's warehouse was not used"
    );

    // A name defined only by environment variables; an unknown name lists the defined ones.
    std::fs::create_dir_all(s.path("env-site")).unwrap();
    let uri = format!("sqlite:///{}", s.path_str("env-site/c.db"));
    let env = [("PYICEBERG_CATALOG__ENV_SITE__URI", uri.as_str())];
    let args = apply("env-site");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&env, &args).ok();
    assert!(s.path("env-site/warehouse/shop/orders").is_dir());
    let args = apply("nope");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&env, &args).fails(3, &["defined catalogs: dr, env-site"]);
}

/// Issue 16, defect 1: an unknown scheme is refused (exit 3), and its password never echoed.
#[test]
fn an_unknown_scheme_is_refused_without_its_password() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 5, 5);
    let r = s
        .story(&journal, "mysql://u:mySECRETpw@h/db", "shop.orders")
        .run("apply", &[])
        .fails(3, &["mysql"]);
    assert!(
        !r.stderr.contains("mySECRETpw") && !r.stdout.contains("mySECRETpw"),
        "{}",
        r.stderr
    );
    assert!(!s.path("mysql:").exists());
}

/// The PostgreSQL URI with a password of its own (sandbox/postgres.sh), or `None` when the
/// PostgreSQL tests are skipped.
fn pg_secret_uri() -> Option<String> {
    if let Ok(uri) = std::env::var("TIDEMARK_TEST_PG_SECRET_URI")
        && !uri.trim().is_empty()
    {
        return Some(uri);
    }
    if std::env::var("TIDEMARK_SKIP_POSTGRES").as_deref() == Ok("1") {
        eprintln!("skipped: TIDEMARK_SKIP_POSTGRES=1");
        return None;
    }
    panic!(
        "TIDEMARK_TEST_PG_SECRET_URI is not set: run `bash sandbox/test.sh` or `eval \"$(bash sandbox/postgres.sh start)\"`"
    );
}

/// Every file under `dir`, recursively (the route folder keeps every version of route.json).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Issue 16, defect 1: with a PostgreSQL catalog given with its password, no command's output,
/// no message and no version of the route object holds the password; readers bring their own.
#[test]
fn no_secret_in_routes_reports_or_messages() {
    let Some(uri) = pg_secret_uri() else { return };
    let secret = uri
        .split_once("://")
        .and_then(|(_, r)| r.split_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, p)| p.to_string())
        .expect("the URI has a password");
    let s = Scratch::with_home();
    let journal = journal_with(&s, "journal", 20, 5);
    let warehouse = s.path_str("wh");
    let route = s.path_str("route");
    // A catalog name of its own, so that runs against one server do not meet.
    let name = format!("secret_{}", std::process::id());
    let mut outputs = Vec::new();
    let mut run = |env: &[(&str, &str)], args: &[&str], code: i32| {
        let r = s.run_with(env, args);
        assert_eq!(r.code, code, "{args:?}\nstdout: {}\nstderr: {}", r.stdout, r.stderr);
        outputs.push((args.join(" "), r.stdout.clone(), r.stderr.clone()));
        r
    };
    let cat = [
        "--catalog",
        uri.as_str(),
        "--warehouse",
        warehouse.as_str(),
        "--catalog-name",
        name.as_str(),
    ];
    fn with<'a>(head: &[&'a str], cat: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
        [head, cat, tail].concat()
    }
    run(
        &[],
        &with(
            &["apply", "--journal", &journal],
            &cat,
            &["--table", "shop.orders", "--json"],
        ),
        0,
    );
    run(
        &[],
        &with(
            &["fault", "delete"],
            &cat,
            &["--table", "shop.orders", "--where", "order_id = 'o-3'", "--json"],
        ),
        0,
    );
    run(
        &[],
        &with(
            &["recover", "--journal", &journal],
            &cat,
            &[
                "--into",
                "shop.fixed",
                "--source-table",
                "shop.orders",
                "--route",
                &route,
                "--json",
            ],
        ),
        0,
    );
    run(
        &[],
        &with(
            &["route", "flip", "--route", &route],
            &cat,
            &[
                "--table",
                "shop.fixed",
                "--applied-position",
                "20",
                "--reason",
                "again",
                "--json",
            ],
        ),
        0,
    );
    run(&[], &["route", "show", "--route", &route, "--json"], 0);
    run(&[], &with(&["catalog", "state"], &cat, &["--json"]), 0);
    run(
        &[],
        &with(&["history", "record"], &cat, &["--out", &s.path_str("history.json")]),
        0,
    );
    // A reader without credentials is refused (without the secret in the message); with its own
    // PGPASSWORD it reads.
    run(&[], &["query", "--route", &route, "SELECT count(*) FROM orders"], 1);
    let q = run(
        &[("PGPASSWORD", secret.as_str())],
        &[
            "query",
            "--route",
            &route,
            "--format",
            "csv",
            "SELECT count(*) AS n FROM orders",
        ],
        0,
    );
    assert!(q.stdout.contains("n\n7"), "{}", q.stdout);
    // A wrong password: refused, neither password echoed.
    let wrong = uri.replace(&secret, "wrongPW-0000");
    let r = run(
        &[],
        &[
            "apply",
            "--journal",
            &journal,
            "--catalog",
            &wrong,
            "--warehouse",
            &warehouse,
            "--table",
            "shop.orders",
        ],
        1,
    );
    assert!(!r.stderr.contains("wrongPW-0000"), "{}", r.stderr);

    for (cmd, stdout, stderr) in &outputs {
        assert!(!stdout.contains(&secret), "`{cmd}` printed the password: {stdout}");
        assert!(!stderr.contains(&secret), "`{cmd}` printed the password: {stderr}");
    }
    let files = files_under(Path::new(&route));
    assert!(files.len() >= 2, "the route folder keeps its versions: {files:?}");
    for f in files.iter().chain([s.path("history.json")].iter()) {
        let body = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        assert!(!body.contains(&secret), "{} holds the password", f.display());
    }
}

/// `tidemark drill --catalog FILE`: the A–E story with the source and recovered tables in one
/// given SQLite catalog, in a namespace of the drill's own.
#[test]
fn the_drill_in_a_given_sqlite_catalog() {
    let s = Scratch::new();
    let catalog = s.path_str("mine.db");
    let work = s.path_str("drill");
    let r = s.drill_story(&["--catalog", &catalog], 200, 1500).ok().json();
    assert_eq!(r["ok"], true, "{r}");
    assert!(s.path("mine.db").is_file());
    let shown = s
        .run(&["route", "show", "--route", &format!("{work}/route"), "--json"])
        .ok()
        .json();
    let routed = &shown[0]["route"];
    assert_eq!(routed["catalog"]["uri"], catalog, "{routed}");
    let table = routed["table_name"].as_str().unwrap();
    assert!(
        table.starts_with("drill_") && table.ends_with(".orders_recovered"),
        "{table}"
    );
}

/// A bearer token from SeaweedFS's OAuth2 endpoint for the sandbox's client credential.
fn rest_token(uri: &str, credential: &str) -> String {
    let (id, secret) = credential.split_once(':').expect("credential is id:secret");
    let out = std::process::Command::new("curl")
        .args(["-sf", "-d", "grant_type=client_credentials", "-d", "scope=catalog"])
        .args([
            "-d",
            &format!("client_id={id}"),
            "-d",
            &format!("client_secret={secret}"),
        ])
        .arg(format!("{uri}/v1/oauth/tokens"))
        .output()
        .expect("run curl");
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a token reply");
    reply["access_token"].as_str().expect("an access token").to_string()
}

/// Item 2 of issue 10 on the REST catalog: defined with a bearer token (a secret long and
/// distinct enough to grep for), no command's output or progress line, no file tidemark writes
/// (routes, reports, history, checkpoints) holds it; a wrong client secret is refused unechoed.
#[test]
fn no_rest_secret_in_routes_reports_or_messages() {
    let Some(mut def) = crate::catalogs_remote::rest_definition() else {
        return;
    };
    let credential = std::env::var("TIDEMARK_REST_CREDENTIAL").unwrap();
    let token = rest_token(&std::env::var("TIDEMARK_REST_URI").unwrap(), &credential);
    def.retain(|(k, _)| !k.ends_with("__CREDENTIAL"));
    def.push(("PYICEBERG_CATALOG__SW__TOKEN".into(), token.clone()));
    let mut s = Scratch::new();
    s.env = def;
    every_command_keeps(&s, "sw", &token);

    // A wrong client secret: refused (the server's 401), the secret not echoed.
    let wrong = "wrong-Client-Secret-5b2e";
    let (id, _) = credential.split_once(':').unwrap();
    s.env.retain(|(k, _)| !k.ends_with("__TOKEN"));
    s.env
        .push(("PYICEBERG_CATALOG__SW__CREDENTIAL".into(), format!("{id}:{wrong}")));
    let r = s.run(&["catalog", "state", "--catalog", "sw"]).fails(1, &["401"]);
    assert!(!r.stderr.contains(wrong) && !r.stdout.contains(wrong), "{}", r.stderr);
}

/// Runs every catalog command a user runs on `catalog` (defined in the scratch's environment)
/// in `s`, and checks that `secret` is in no output, no progress line and no file they wrote
/// (routes, reports, history, checkpoints).
fn every_command_keeps(s: &Scratch, catalog: &str, secret: &str) {
    let journal = journal_with(s, "journal", 20, 5);
    let ns = format!("e2e_secret_{catalog}_{}", std::process::id());
    let (orders, fixed) = (format!("{ns}.orders"), format!("{ns}.fixed"));
    let route = s.path_str("route");
    let mut outputs = Vec::new();
    let mut run = |args: &[&str]| {
        let r = s.run(args).ok();
        outputs.push((args.join(" "), r.stdout.clone(), r.stderr.clone()));
    };
    run(&["apply", "--journal", &journal, "--catalog", catalog, "--table", &orders]);
    run(&[
        "fault",
        "delete",
        "--catalog",
        catalog,
        "--table",
        &orders,
        "--where",
        "order_id = 'o-3'",
    ]);
    run(&[
        "recover",
        "--journal",
        &journal,
        "--catalog",
        catalog,
        "--into",
        &fixed,
        "--source-table",
        &orders,
        "--route",
        &route,
        "--json",
    ]);
    run(&["apply", "--journal", &journal, "--route", &route, "--json"]);
    run(&["route", "show", "--route", &route, "--json"]);
    run(&["query", "--route", &route, "SELECT count(*) FROM orders"]);
    run(&["catalog", "state", "--catalog", catalog, "--namespace", &ns, "--json"]);
    run(&[
        "history",
        "record",
        "--catalog",
        catalog,
        "--namespace",
        &ns,
        "--out",
        &s.path_str("history.json"),
    ]);
    let work = s.path_str("drill");
    run(&[
        "drill",
        "--work",
        &work,
        "--catalog",
        catalog,
        "--orders",
        "50",
        "--events",
        "300",
        "--json",
    ]);
    for (cmd, stdout, stderr) in &outputs {
        assert!(!stdout.contains(secret), "`{cmd}` printed the secret: {stdout}");
        assert!(!stderr.contains(secret), "`{cmd}` printed the secret: {stderr}");
    }
    let files = files_under(s.dir.path());
    assert!(files.iter().any(|f| f.starts_with(&route)), "no route files");
    for f in &files {
        let body = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        assert!(!body.contains(secret), "{} holds the secret", f.display());
    }
}

/// The same on S3 Tables with AWS keys of its own (moto takes any): the secret key is in no
/// output and no file.
#[test]
fn no_aws_secret_key_in_routes_reports_or_messages() {
    let Some(mut def) = crate::catalogs_remote::s3tables_definition() else {
        return;
    };
    let secret = "Aws-Secret-Never-Shown-0d41";
    def.retain(|(k, _)| !k.ends_with("__SECRET_ACCESS_KEY"));
    for key in ["S3__SECRET_ACCESS_KEY", "S3TABLES__SECRET_ACCESS_KEY"] {
        def.push((format!("PYICEBERG_CATALOG__ST__{key}"), secret.to_string()));
    }
    def.push(("PYICEBERG_CATALOG__ST__S3TABLES__ACCESS_KEY_ID".into(), "test".into()));
    def.push(("AWS_SECRET_ACCESS_KEY".into(), secret.to_string()));
    let mut s = Scratch::new();
    s.env = def;
    every_command_keeps(&s, "st", secret);
}
