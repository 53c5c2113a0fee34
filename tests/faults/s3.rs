//! Faults on S3 (the moto server of sandbox/test.sh, through sandbox/fault_proxy.py): lost
//! replies on manifest writes, errors that name the request, stalls that time out, `replica copy`
//! through errors and a crash, and refused credentials.

use super::super::support::faults::*;
use super::super::support::*;

/// The findings on S3: a lost reply on every manifest write (the server wrote, the client saw a
/// 500, then its retry met its own manifest as 412) made `journal append` exit 5 ("another writer
/// appended … first"), and three in a row exit 1 with a dump of SDK internals. Through the proxy
/// every append completes, a re-send is a no-op, and the journal verifies.
#[test]
fn lost_replies_on_every_manifest_write_on_s3() {
    if !s3_available() {
        return;
    }
    let s = Scratch::new();
    let proxy = Proxy::start(
        &s,
        &[
            "--seed",
            "5",
            "--rate",
            "1",
            "--faults",
            "lost",
            "--methods",
            "PUT",
            "--path-regex",
            "manifests/|journal.json|_probe/",
            "--max-faults",
            "40",
        ],
    );
    let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str()), ("AWS_MAX_ATTEMPTS", "3")];
    let journal = unique("manifests");
    run_env(&s, &env, &["journal", "init", "--journal", &journal]).ok();
    let input = s.write("in.ndjson", &events(1, 60));
    let input = input.to_str().unwrap();
    let append = [
        "journal",
        "append",
        "--journal",
        &journal,
        "--input",
        input,
        "--batch-size",
        "20",
        "--json",
    ];
    let first = run_env(&s, &env, &append).ok().json();
    assert_eq!(first["last_position"], 60, "{first}");
    assert!(first["s3_requests"]["retried"].as_u64().unwrap() > 0, "{first}");
    let again = run_env(&s, &env, &append).ok().json();
    assert_eq!(
        (again["already_present"].as_u64(), again["events"].as_u64()),
        (Some(60), Some(0))
    );
    assert!(proxy.faults() >= 6, "faults injected: {}", proxy.faults());
    drop(proxy);
    let v = s
        .run(&["journal", "verify", "--journal", &journal, "--json"])
        .ok()
        .json();
    assert_eq!(
        (v["ok"].as_bool(), v["verified_last_position"].as_u64()),
        (Some(true), Some(60))
    );
}

/// After the last attempt the error names the operation, the key and the status, never a dump
/// of SDK internals; a stalled GET gives up after the read timeout and is retried (issue 16,
/// defect 4: it waited as long as the server did).
#[test]
fn s3_errors_name_the_request_and_stalls_time_out() {
    if !s3_available() {
        return;
    }
    let s = Scratch::new();
    let journal = unique("errors");
    journal_at(&s, &journal, "in", 30, 10);
    {
        let proxy = Proxy::start(
            &s,
            &[
                "--rate",
                "1",
                "--faults",
                "503",
                "--methods",
                "GET",
                "--path-regex",
                "manifests/",
                "--max-faults",
                "1000",
            ],
        );
        let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str()), ("AWS_MAX_ATTEMPTS", "2")];
        let run = run_env(&s, &env, &["journal", "verify", "--journal", &journal]);
        let run = run.fails(
            1,
            &[
                "get of manifests/",
                "HTTP 503 SlowDown",
                "Please reduce your request rate",
            ],
        );
        assert!(!run.stderr.contains("Extensions"), "{}", run.stderr);
        // An invalid setting is refused, naming it.
        let env = [
            ("AWS_ENDPOINT_URL", proxy.endpoint.as_str()),
            ("AWS_MAX_ATTEMPTS", "many"),
        ];
        run_env(&s, &env, &["journal", "verify", "--journal", &journal]).fails(3, &["AWS_MAX_ATTEMPTS"]);
    }
    for fault in ["delay", "stall"] {
        let proxy = Proxy::start(
            &s,
            &[
                "--rate",
                "1",
                "--faults",
                fault,
                "--delay",
                "60",
                "--methods",
                "GET",
                "--path-regex",
                "manifests/",
                "--max-faults",
                "2",
            ],
        );
        let env = [
            ("AWS_ENDPOINT_URL", proxy.endpoint.as_str()),
            ("TIDEMARK_S3_READ_TIMEOUT", "1"),
            ("TIDEMARK_S3_ATTEMPT_TIMEOUT", "3"),
        ];
        let started = std::time::Instant::now();
        let v = run_env(&s, &env, &["journal", "verify", "--journal", &journal, "--json"])
            .ok()
            .json();
        let took = started.elapsed();
        assert_eq!(v["verified_last_position"], 30, "{fault}: {v}");
        assert!(
            took < std::time::Duration::from_secs(30),
            "{fault}: verify took {took:?}"
        );
        assert_eq!(proxy.faults(), 2, "{fault}");
    }
}

/// The findings on S3: `replica copy` with 10% 503 SlowDown failed ("some tables were not
/// copied"), and after a kill mid-copy every re-run failed the same way. Through the proxy (503s,
/// 500s, resets and lost replies on 10% of all requests) the copy completes, a crash mid-copy is
/// resumed by a plain re-run, and the replica checks complete.
#[test]
fn replica_copy_on_s3_through_errors_and_a_crash() {
    if !s3_available() {
        return;
    }
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 120, 20);
    let catalog = s.path_str("catalog.db");
    let warehouse = unique("wh");
    apply_in(&s, &journal, &catalog, &warehouse, "shop.orders");
    let replica = unique("replica");
    let proxy = Proxy::mixed(&s, 17, 400);
    let env = proxy.env();
    let copy = ["replica", "copy", "--from", &warehouse, "--to", &replica, "--json"];
    let crash = [
        ("AWS_ENDPOINT_URL", proxy.endpoint.as_str()),
        ("TIDEMARK_FAILPOINT", "copy:after-object:4"),
    ];
    assert_eq!(run_env(&s, &crash, &copy).code, 86);
    let done = run_env(&s, &env, &copy).ok().json();
    assert_eq!(done["tables"][0]["error"], serde_json::Value::Null, "{done}");
    assert!(done["skipped"].as_u64().unwrap() >= 4, "{done}");
    assert!(done["s3_requests"]["retried"].as_u64().unwrap() > 0, "{done}");
    assert!(proxy.faults() > 0);
    let again = run_env(&s, &env, &copy).ok().json();
    assert_eq!(again["copied"], 0, "{again}");
    drop(proxy);
    let check = s
        .run(&[
            "replica",
            "check",
            "--warehouse",
            &replica,
            "--prefix-map",
            &format!("{warehouse}={replica}"),
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(check["tables"][0]["newest_missing_count"], 0, "{check}");
    assert_eq!(check["tables"][0]["behind_commits"], 0, "{check}");
}

/// The finding: with credentials refused, `fault delete` and `route flip` exited 1 ("Unexpected
/// => Failure in doing io operation … PermissionDenied") where every other command exits 8.
#[test]
fn refused_credentials_exit_8_in_fault_delete_and_route_flip() {
    if !s3_available() {
        return;
    }
    let auth = std::env::var("TIDEMARK_S3_AUTH_ENDPOINT").expect("TIDEMARK_S3_AUTH_ENDPOINT (sandbox/test.sh)");
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 20, 10);
    let catalog = s.path_str("catalog.db");
    let warehouse = unique("creds");
    apply_in(&s, &journal, &catalog, &warehouse, "shop.orders");
    let env = [("AWS_ENDPOINT_URL", auth.as_str())];
    fault_delete_in(&s, &env, &catalog, &warehouse, "shop.orders", "order_id = 'o-1'")
        .fails(8, &["access to the warehouse refused", "check the credentials"]);
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    run_env(
        &s,
        &env,
        &[
            "route",
            "flip",
            "--route",
            &route,
            "--catalog",
            &catalog,
            "--warehouse",
            &warehouse,
            "--table",
            "shop.orders",
            "--applied-position",
            "20",
            "--reason",
            "test",
        ],
    )
    .fails(8, &["access to the warehouse refused", "check the credentials"]);
}

/// `catalog restore --json` on S3 reports the S3 requests it made (as every command that talks
/// to S3 does); a local restore leaves `s3_requests` out.
#[test]
fn catalog_restore_on_s3_reports_its_requests() {
    if !s3_available() {
        return;
    }
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 30, 10);
    let catalog = s.path_str("catalog.db");
    let warehouse = unique("restore-wh");
    apply_in(&s, &journal, &catalog, &warehouse, "shop.orders");
    let backups = unique("backups");
    let id = backup(&s, &catalog, &warehouse, &backups);
    std::fs::create_dir_all(s.path("new")).unwrap();
    let new = s.path_str("new/catalog.db");
    let done = s
        .run(&[
            "catalog",
            "restore",
            "--catalog",
            &new,
            "--warehouse",
            &warehouse,
            "--from",
            &backups,
            "--id",
            &id,
            "--expect",
            "empty",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(done["applied"], true, "{done}");
    let counts = &done["s3_requests"];
    assert!(
        counts["requests"].as_u64().unwrap() >= 2,
        "the backup and the metadata file: {done}"
    );
    assert_eq!(counts["failed"], 0, "{done}");

    // On a local folder there are no S3 requests to report.
    let local = Scratch::new();
    let journal = journal_with(&local, "journal", 10, 10);
    let catalog = local.path_str("catalog.db");
    let warehouse = local.path_str("warehouse");
    apply_in(&local, &journal, &catalog, &warehouse, "shop.orders");
    let id = backup(&local, &catalog, &warehouse, &local.path_str("backups"));
    std::fs::create_dir_all(local.path("new")).unwrap();
    let new = local.path_str("new/catalog.db");
    let done = local
        .run(&[
            "catalog",
            "restore",
            "--catalog",
            &new,
            "--warehouse",
            &warehouse,
            "--from",
            &local.path_str("backups"),
            "--id",
            &id,
            "--expect",
            "empty",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(done["applied"], true, "{done}");
    assert!(done.get("s3_requests").is_none(), "{done}");
}
