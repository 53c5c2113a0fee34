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
    let Some(s) = Scratch::on_s3() else { return };
    let proxy = Faults::every("lost")
        .methods("PUT")
        .paths("manifests/|journal.json|_probe/")
        .max(40)
        .seed(5)
        .start(&s);
    let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str()), ("AWS_MAX_ATTEMPTS", "3")];
    let journal = unique("manifests");
    s.run_with(&env, &["journal", "init", "--journal", &journal]).ok();
    let input = s.write("in.ndjson", &events(1, 60));
    let input = input.to_str().unwrap();
    let append = Scratch::append_args(&journal, input, &["--batch-size", "20", "--json"]);
    let first = s.run_with(&env, &append).ok().json();
    assert_eq!(first["last_position"], 60, "{first}");
    assert!(first["s3_requests"]["retried"].as_u64().unwrap() > 0, "{first}");
    let again = s.run_with(&env, &append).ok().json();
    assert_eq!(
        (again["already_present"].as_u64(), again["events"].as_u64()),
        (Some(60), Some(0))
    );
    assert!(proxy.faults() >= 6, "faults injected: {}", proxy.faults());
    drop(proxy);
    let v = s.verify_json(&journal);
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
    let Some(s) = Scratch::on_s3() else { return };
    let journal = unique("errors");
    journal_at(&s, &journal, "in", 30, 10);
    {
        let proxy = Faults::every("503")
            .methods("GET")
            .paths("manifests/")
            .max(1000)
            .start(&s);
        let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str()), ("AWS_MAX_ATTEMPTS", "2")];
        let run = s.run_with(&env, &["journal", "verify", "--journal", &journal]);
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
        s.run_with(&env, &["journal", "verify", "--journal", &journal])
            .fails(3, &["AWS_MAX_ATTEMPTS"]);
    }
    for fault in ["delay", "stall"] {
        let proxy = Faults::every(fault)
            .methods("GET")
            .paths("manifests/")
            .delay(60)
            .max(2)
            .start(&s);
        let env = [
            ("AWS_ENDPOINT_URL", proxy.endpoint.as_str()),
            ("TIDEMARK_S3_READ_TIMEOUT", "1"),
            ("TIDEMARK_S3_ATTEMPT_TIMEOUT", "3"),
        ];
        let started = std::time::Instant::now();
        let v = s
            .run_with(&env, &["journal", "verify", "--journal", &journal, "--json"])
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

/// The finding (issue 34): a server that stops answering a read (no reply to any attempt) failed
/// only after 8 attempts of the 30 s read timeout, over four minutes, for lack of an operation
/// timeout. With the default settings the read now ends at the default operation timeout, and the
/// error names the object and the timeout that ran out.
#[test]
fn a_stalled_read_ends_at_the_default_operation_timeout() {
    let Some(s) = Scratch::on_s3() else { return };
    let journal = unique("stalled");
    s.run(&["journal", "init", "--journal", &journal]).ok();
    let proxy = Faults::every("delay")
        .methods("GET")
        .paths("journal.json")
        .delay(600)
        .max(1000)
        .start(&s);
    // Only the endpoint: every timeout at its default.
    let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str())];
    s.run_with(&env, &["journal", "status", "--journal", &journal]).fails(
        1,
        &[
            "get of journal.json",
            "operation timeout (all attempts including retries) occurred after 60s",
            "TIDEMARK_S3_",
        ],
    );
}

/// The findings on S3: `replica copy` with 10% 503 SlowDown failed ("some tables were not
/// copied"), and after a kill mid-copy every re-run failed the same way. Through the proxy (503s,
/// 500s, resets and lost replies on 10% of all requests) the copy completes, a crash mid-copy is
/// resumed by a plain re-run, and the replica checks complete.
#[test]
fn replica_copy_on_s3_through_errors_and_a_crash() {
    let Some(s) = Scratch::on_s3() else { return };
    let (_, _, warehouse) = applied_to_s3(&s, 120, 20, "wh");
    let replica = unique("replica");
    let proxy = Proxy::mixed(&s, 17, 400);
    let env = proxy.env();
    let copy = ["replica", "copy", "--from", &warehouse, "--to", &replica, "--json"];
    let crash = [
        ("AWS_ENDPOINT_URL", proxy.endpoint.as_str()),
        ("TIDEMARK_FAILPOINT", "copy:after-object:4"),
    ];
    assert_eq!(s.run_with(&crash, &copy).code, 86);
    let done = s.run_with(&env, &copy).ok().json();
    assert_eq!(done["tables"][0]["error"], serde_json::Value::Null, "{done}");
    assert!(done["skipped"].as_u64().unwrap() >= 4, "{done}");
    assert!(done["s3_requests"]["retried"].as_u64().unwrap() > 0, "{done}");
    assert!(proxy.faults() > 0);
    let again = s.run_with(&env, &copy).ok().json();
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
    let (_, catalog, warehouse) = applied_to_s3(&s, 20, 10, "creds");
    let env = [("AWS_ENDPOINT_URL", auth.as_str())];
    fault_delete_in(&s, &env, &catalog, &warehouse, "shop.orders", "order_id = 'o-1'")
        .fails(8, &["access to the warehouse refused", "check the credentials"]);
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    let flip = Scratch::flip_args(
        &route,
        &catalog,
        "shop.orders",
        "20",
        "test",
        &["--warehouse", &warehouse],
    );
    s.run_with(&env, &flip)
        .fails(8, &["access to the warehouse refused", "check the credentials"]);
}

/// The finding (issue 34): a bad `AWS_SESSION_TOKEN` (S3's HTTP 400 `InvalidToken`) exited 1 in
/// every command that reaches S3, and refused credentials (403) exited 1 in `query --route` and
/// 4 in `catalog backup`. Through a proxy that answers every request with the refusal, each
/// command exits 8 naming the code, after exactly one request: the refusal is not retried (by
/// tidemark's S3 client or the table files' client) and nothing else is tried after it.
#[test]
fn refused_or_invalid_credentials_exit_8_everywhere_without_retries() {
    let Some(s) = Scratch::on_s3() else { return };
    let (journal, warehouse, route) = (unique("cred-journal"), unique("cred-wh"), unique("cred-route"));
    journal_at(&s, &journal, "in", 20, 10);
    let catalog = s.path_str("catalog.db");
    apply_in(&s, &journal, &catalog, &warehouse, "shop.orders");
    flip(&s, &route, &catalog, "shop.orders", 20, &["--warehouse", &warehouse]);
    let backups = unique("cred-backups");
    let drill_store = unique("cred-drill");
    let work = s.path_str("drill-work");
    // The table's metadata file, for the drill of a replica (`--source-metadata`).
    let shown = s.run(&["route", "show", "--route", &route, "--json"]).ok().json();
    let metadata = shown[0]["route"]["metadata_location"]
        .as_str()
        .unwrap_or_else(|| panic!("no metadata location in {shown}"))
        .to_string();
    let drill_real = |source: &'static str, table: &str| -> Vec<String> {
        [
            "drill",
            source,
            table,
            "--journal",
            &journal,
            "--catalog",
            &catalog,
            "--warehouse",
            &warehouse,
            "--scratch",
            "drills",
        ]
        .map(String::from)
        .to_vec()
    };
    let drill_table = drill_real("--source-table", "shop.orders");
    let story = s.story(&journal, &catalog, "shop.orders").warehouse(&warehouse);
    let backup_args = [
        "catalog",
        "backup",
        "--catalog",
        &catalog,
        "--warehouse",
        &warehouse,
        "--to",
        &backups,
    ];
    let drill_replica = drill_real("--source-metadata", &metadata);
    let commands: Vec<Vec<&str>> = vec![
        vec!["journal", "status", "--journal", &journal],
        story.args("apply", &[]),
        story.recover_args(
            "shop.fixed",
            &["--at-or-before", "20", "--recovery-id", "cred", "--route", &route],
        ),
        vec!["route", "show", "--route", &route],
        vec!["query", "--route", &route, "SELECT count(*) FROM orders"],
        backup_args.to_vec(),
        vec![
            "fault",
            "delete",
            "--catalog",
            &catalog,
            "--warehouse",
            &warehouse,
            "--table",
            "shop.orders",
            "--where",
            "order_id = 'o-1'",
        ],
        drill_table.iter().map(String::as_str).collect(),
        drill_replica.iter().map(String::as_str).collect(),
        // The synthetic drill on an S3 store.
        vec![
            "drill",
            "--store",
            &drill_store,
            "--work",
            &work,
            "--orders",
            "20",
            "--events",
            "50",
        ],
    ];
    for (fault, code) in [("token", "InvalidToken"), ("403", "AccessDenied")] {
        let proxy = Faults::every(fault).max(100000).start(&s);
        let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str())];
        for args in &commands {
            let before = proxy.requests();
            s.run_with(&env, args).fails(8, &[code, "check the credentials"]);
            assert_eq!(
                proxy.requests() - before,
                1,
                "{fault}: `{}` made more than the one refused request",
                args[..2].join(" ")
            );
        }
        // A table file refused while the route was read: the query's table-file client.
        let proxy = Faults::every(fault).paths("cred-wh").max(100000).start(&s);
        let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str())];
        s.run_with(&env, &["query", "--route", &route, "SELECT count(*) FROM orders"])
            .fails(8, &["access to the warehouse refused", code]);
        assert_eq!(proxy.faults(), 1, "{fault}: the table-file client retried the refusal");
        // The drill of a real table whose files are refused (the journal is read): its audit's
        // read of the table metadata, reported as the drill's failed step.
        for args in [&drill_table, &drill_replica] {
            let before = proxy.faults();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            s.run_with(&env, &args).fails(8, &[code, "check the credentials"]);
            assert_eq!(
                proxy.faults() - before,
                1,
                "{fault}: `{}` retried the refusal",
                args[..3].join(" ")
            );
        }
        // `catalog backup` checks that every file the table references exists: a data file
        // refused is refused credentials, not a missing file. A HEAD's reply has no body: a 400
        // is read again (one GET) to learn its code.
        let proxy = Faults::every(fault).paths("cred-wh.*/data/").max(100000).start(&s);
        let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str())];
        let backup = s
            .run_with(&env, &backup_args)
            .fails(8, &["check the credentials", "/data/"]);
        assert!(!backup.stderr.contains("missing"), "{fault}: {}", backup.stderr);
        assert!(proxy.faults() <= 2, "{fault}: {} refused requests", proxy.faults());
        // `recover` checks that the snapshot's data files exist (a HEAD each) before it seeds:
        // the same refusal, learned by the table files' storage for every caller of `exists`
        // (before: exit 1, "check data file …" with no code).
        let before = proxy.faults();
        let id = format!("cred-data-{fault}");
        let args = story.recover_args("shop.fixed_data", &["--at-or-before", "20", "--recovery-id", &id]);
        let recover = s.run_with(&env, &args).fails(8, &["check the credentials", "/data/"]);
        assert!(!recover.stderr.contains("missing"), "{fault}: {}", recover.stderr);
        if fault == "token" {
            // The code a HEAD's reply could not carry, learned by the one-byte read.
            assert!(recover.stderr.contains(code), "{}", recover.stderr);
        }
        assert!(
            proxy.faults() - before <= 2,
            "{fault}: {} refused requests",
            proxy.faults() - before
        );
    }
}

/// The finding (issue 34): `replica check` and the warm follower kept a refused credential as a
/// table's error text and exited 4 ("behind or inconsistent", a table "failed"), as for a
/// replica that lacks files. The replica's table files refused (the listing answered): both
/// exit 8, the follower's table standing is `refused`, and `replica status` agrees.
#[test]
fn refused_credentials_exit_8_in_replica_check_and_the_follower() {
    let Some(s) = Scratch::on_s3() else { return };
    let (journal, warehouse) = (unique("cred-replica-journal"), unique("cred-replica-wh"));
    journal_at(&s, &journal, "in", 20, 10);
    apply_in(&s, &journal, &s.path_str("catalog.db"), &warehouse, "shop.orders");
    let (dr, state) = (s.path_str("dr.db"), s.path_str("follower-state"));
    for (fault, code) in [("token", "InvalidToken"), ("403", "AccessDenied")] {
        // Every request on the table files' metadata and data refused; the listing answers.
        let proxy = Faults::every(fault).paths("shop/orders/.+").max(100000).start(&s);
        let env = [("AWS_ENDPOINT_URL", proxy.endpoint.as_str())];
        let check = s
            .run_with(&env, &["replica", "check", "--warehouse", &warehouse, "--json"])
            .fails(8, &["refused the credentials for shop.orders", "check the credentials"]);
        assert_eq!(
            check.json()["tables"][0]["access_denied"],
            true,
            "{fault}: {}",
            check.stdout
        );
        let follow = s
            .run_with(
                &env,
                &[
                    "replica",
                    "follow",
                    "--warehouse",
                    &warehouse,
                    "--catalog",
                    &dr,
                    "--state",
                    &state,
                    "--once",
                    "--json",
                ],
            )
            .fails(8, &["shop.orders"]);
        let t = &follow.json()["tables"][0];
        assert_eq!(t["status"], "refused", "{fault}: {}", follow.stdout);
        assert!(
            t["reason"].as_str().unwrap().contains("check the credentials"),
            "{fault}: {t}"
        );
        if fault == "token" {
            assert!(
                check.stderr.contains(code) || check.stdout.contains(code),
                "{}",
                check.stdout
            );
        }
        drop(proxy);
        // `replica status` reads the follower's state (a local file): the same code.
        s.run(&["replica", "status", "--state", &state, "--json"]).fails(8, &[]);
    }
}

/// `catalog restore --json` on S3 reports the S3 requests it made (as every command that talks
/// to S3 does); a local restore leaves `s3_requests` out.
#[test]
fn catalog_restore_on_s3_reports_its_requests() {
    let Some(s) = Scratch::on_s3() else { return };
    let (_, catalog, warehouse) = applied_to_s3(&s, 30, 10, "restore-wh");
    let backups = unique("backups");
    let id = backup(&s, &catalog, &warehouse, &backups);
    std::fs::create_dir_all(s.path("new")).unwrap();
    let new = s.path_str("new/catalog.db");
    let done = restore_into_empty(&s, &[], &new, &warehouse, &backups, &id);
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
    let done = restore_into_empty(&local, &[], &new, &warehouse, &local.path_str("backups"), &id);
    assert_eq!(done["applied"], true, "{done}");
    assert!(done.get("s3_requests").is_none(), "{done}");
}
