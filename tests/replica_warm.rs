//! The warm DR replica end to end (issue 13), on a local folder and on SeaweedFS: a replica
//! filled object by object in a hostile order (metadata before the data it names, newest first)
//! while a writer commits; `replica follow` strict and eventual, `status`, two followers,
//! `failover` with a route, then `resync` of the old primary with a divergent commit.

use std::thread;

use tidemark_journal::store::{self, ObjectStore, PutMode};

use super::support::*;
use super::{NOT_FOUND, VERIFY_FAILED};

const CONFLICT: i32 = 5;
const NOT_RUNNING: i32 = 10;

/// A store at `url`; on S3 through `endpoint` (the scratch's server, not the test process's).
pub(crate) async fn open(url: &str, endpoint: Option<&str>) -> std::sync::Arc<dyn ObjectStore> {
    match (url.strip_prefix("s3://"), endpoint) {
        (Some(rest), Some(e)) => {
            let opts = store::s3::S3Options {
                endpoint: Some(e.to_string()),
                ..store::s3::S3Options::from_env()
            };
            std::sync::Arc::new(store::s3::S3Store::from_url(rest, opts).await.unwrap())
        }
        _ => store::open_or_create(url).await.unwrap(),
    }
}

/// Every resync record in the metadata folder of the table folder `table` (`shop/orders`) of
/// `store`, as JSON: one per walk (`tidemark-resync-<id>.json`).
pub(crate) async fn records(warehouse: &dyn ObjectStore, table: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for o in store::list_all(warehouse, &format!("{table}/metadata/")).await.unwrap() {
        if o.key.rsplit('/').next().unwrap().starts_with("tidemark-resync") {
            let got = warehouse.get(&o.key, None).await.unwrap();
            out.push(serde_json::from_slice(&got.body).unwrap());
        }
    }
    out
}

/// The hostile replication: every object of `from` that `to` lacks, metadata JSON first (newest
/// first), then manifests, then data, one object at a time; with `data`, false, the data files
/// are left behind (they arrive in a later pass).
pub(crate) fn replicate(from: &str, to: &str, endpoint: Option<&str>, data: bool) -> usize {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (src, dst) = (open(from, endpoint).await, open(to, endpoint).await);
        let have: std::collections::HashSet<String> = store::list_all(dst.as_ref(), "")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        let mut todo: Vec<String> = store::list_all(src.as_ref(), "")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .filter(|k| !have.contains(k) && (data || !k.contains("/data/")))
            .collect();
        let rank = |k: &str| match () {
            _ if k.ends_with(".metadata.json") => 0,
            _ if k.ends_with(".avro") => 1,
            _ => 2,
        };
        todo.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.cmp(a)));
        for k in &todo {
            let body = src.get(k, None).await.unwrap().body;
            dst.put(k, body, PutMode::Overwrite).await.unwrap();
        }
        todo.len()
    })
}

/// The state a `replica follow --once --json` printed, after checking its exit code (issue 13):
/// 0 when every table is OK, else 4 with every table that is not named on stderr with its
/// status, as `replica status` exits for it.
pub(crate) fn followed(run: Run) -> serde_json::Value {
    let state = run.json();
    let bad: Vec<String> = state["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["status"] != "ok")
        .map(|t| format!("{} {}", t["table"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    if bad.is_empty() {
        run.ok();
    } else {
        let fragments: Vec<&str> = bad.iter().map(String::as_str).collect();
        run.fails(VERIFY_FAILED, &fragments);
    }
    state
}

pub(crate) fn base(url: &str) -> String {
    if url.contains("://") {
        url.to_string()
    } else {
        format!("file://{url}")
    }
}

fn warm_replica(s: &Scratch, root: &str, endpoint: Option<&str>) {
    let (primary_wh, replica) = (format!("{root}/primary"), format!("{root}/replica"));
    let story = Story::new(s)
        .catalog(s.path_str("primary.db"))
        .warehouse(&primary_wh)
        .generated(100, 600, 100);
    let (journal, primary) = (&story.journal, &story.catalog);
    let apply = |until: &str| story.run("apply", &["--until", until]);
    apply("200").ok();
    replicate(&primary_wh, &replica, endpoint, true);
    apply("300").ok();
    // Metadata arrives before its data.
    assert!(replicate(&primary_wh, &replica, endpoint, false) > 0);

    let map = format!("{}={}", base(&primary_wh), base(&replica));
    let follow = |catalog: &str, state: &str, mode: &str, holder: &str| {
        let (dr, st) = (s.path_str(catalog), s.path_str(state));
        s.follow(
            &replica,
            &dr,
            &map,
            &st,
            &["--mode", mode, "--holder", holder, "--once", "--json"],
        )
    };
    // --once exits 4 while a table is not OK (here: missing files), as `replica status` does.
    let strict = follow("dr.db", "state", "strict", "f-strict")
        .fails(VERIFY_FAILED, &["not every table is OK", "shop.orders missing_files"])
        .json();
    let t = &strict["tables"][0];
    assert_eq!(t["status"], "missing_files", "{strict}");
    assert_eq!(t["verified_position"], 200, "{t}");
    assert_eq!(t["latest_position"], 300);
    assert!(t["missing_count"].as_u64().unwrap() > 0);
    let eventual = followed(follow("dr-ev.db", "state-ev", "eventual", "f-ev"));
    assert_eq!(eventual["tables"][0]["status"], "missing_files", "{eventual}");
    assert_eq!(eventual["tables"][0]["verified_position"], 300, "{eventual}");
    assert_eq!(eventual["tables"][0]["missing_count"], t["missing_count"]);

    // status: a table with missing files exits 4; the Prometheus file says the same.
    let prom = s.path_str("replica.prom");
    let st = s.path_str("state");
    let status = s
        .run(&["replica", "status", "--state", &st, "--prometheus", &prom, "--json"])
        .fails(VERIFY_FAILED, &["missing files"]);
    let r = status.json();
    assert_eq!(r["tables"][0]["positions_behind"], 100, "{r}");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("tidemark_replica_table_missing_files{"), "{text}");
    s.run(&["replica", "status", "--state", &s.path_str("nowhere")])
        .fails(NOT_FOUND, &[]);

    // The writer goes on while the replication copies in its hostile order; strict never
    // registers a version with a missing file (history record reads every row) and nothing
    // moves backwards.
    let mut last = 200;
    for until in ["400", "500"] {
        thread::scope(|scope| {
            let writer = scope.spawn(|| apply(until).ok());
            replicate(&primary_wh, &replica, endpoint, true);
            writer.join().unwrap();
        });
        replicate(&primary_wh, &replica, endpoint, false);
        let r = followed(follow("dr.db", "state", "strict", "f-strict"));
        let pos = r["tables"][0]["verified_position"].as_u64().unwrap();
        assert!(pos >= last, "moved backwards: {pos} < {last}: {r}");
        last = pos;
        s.record_history(&s.path_str("dr.db"), &["--out", &s.path_str("h.json")])
            .ok();
    }
    replicate(&primary_wh, &replica, endpoint, true);
    let r = follow("dr.db", "state", "strict", "f-strict").ok().json();
    assert_eq!(r["tables"][0]["status"], "ok", "{r}");
    assert_eq!(r["tables"][0]["verified_position"], 500);
    s.run(&["replica", "status", "--state", &st]).ok();

    // Two followers never run at once: the second refuses, naming the first.
    let dr = s.path_str("dr.db");
    let mut first = tidemark()
        .current_dir(s.path(""))
        .envs(s.env.clone())
        .args(Scratch::replica_args(
            "follow",
            [&replica, &dr, &map, &st],
            &["--holder", "f-long", "--interval", "1s", "--max-cycles", "4", "-q"],
        ))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lease = s.path("state/lease.json");
    for _ in 0..300 {
        let text = std::fs::read_to_string(&lease).unwrap_or_default();
        if text.contains("\"f-long\"") && text.contains("\"held\"") {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut second = None;
    for _ in 0..100 {
        let r = follow("dr.db", "state", "strict", "f-second");
        if r.code != 0 {
            second = Some(r);
            break;
        }
    }
    second
        .expect("the second follower was refused")
        .fails(CONFLICT, &["f-long"]);
    assert!(first.wait().unwrap().success());

    // Failover: the route readers use flips from the primary's table to the DR table.
    let route = s.path_str("route");
    s.flip(&route, primary, "shop.orders", "500", "primary", &[]).ok();
    let p = s.failover([&replica, &dr, &map, &st], &route, "fo-1", &[]).ok().json();
    assert_eq!(p["routes"][0]["to_generation"], 2, "{p}");
    assert_eq!(p["tables"][0]["positions_behind"], 0);
    s.run(&["replica", "status", "--state", &st])
        .fails(NOT_RUNNING, &["fenced"]);
    follow("dr.db", "state", "strict", "f-strict").fails(CONFLICT, &["fenced", "fo-1"]);

    // The DR side writes on through the route; the old primary comes back with a commit the DR
    // side never got (a direct write outside the journal).
    s.run(&["apply", "--journal", journal, "--catalog", &dr, "--route", &route])
        .ok();
    // Three divergent commits: the old primary's own branch since the fork is longer than the
    // new primary's (one commit), so a head chosen by the longest chain would be the old one's.
    for predicate in [
        "order_version % 2 = 0",
        "order_version % 7 = 1",
        "order_version % 11 = 3",
    ] {
        s.fault_delete_at(primary, &primary_wh, "shop.orders", predicate);
    }
    let plan = s.resync(primary, &dr, &["--dry-run", "--json"]).ok().json();
    let t = &plan["tables"][0];
    assert_eq!(t["action"], "walked_back", "{plan}");
    let kept = t["kept_files"].as_array().unwrap();
    assert!(kept.iter().any(|f| f["what"] == "manifest list"), "{t}");
    assert!(
        kept.iter()
            .any(|f| f["what"] == "data file" || f["what"] == "delete file"),
        "{t}"
    );
    let walked = s.resync(primary, &dr, &["--json"]).ok().json();
    let walked_over = walked["tables"][0]["walked_over"].as_array().unwrap().clone();
    assert_eq!(walked_over.len(), 3, "{walked}");
    let again = s.resync(primary, &dr, &["--json"]).ok().json();
    assert_eq!(again["tables"][0]["action"], "in_step", "{again}");
    // Replication reversed: the old primary follows the new one from where resync left it.
    replicate(&replica, &primary_wh, endpoint, true);
    let back_map = format!("{}={}", base(&replica), base(&primary_wh));
    let follow_back = || {
        s.follow(
            &primary_wh,
            primary,
            &back_map,
            &s.path_str("state-back"),
            &["--once", "--json"],
        )
    };
    // The reversed follow, which must verify the table up to position 600: its report.
    let follow_back_to_600 = || {
        let back = follow_back().ok().json();
        let t = &back["tables"][0];
        assert_eq!(
            (&t["status"], &t["verified_position"]),
            (&"ok".into(), &600.into()),
            "{back}"
        );
        back
    };
    let back = follow_back_to_600();
    let t = &back["tables"][0];
    // The defect's test (issue 13, found after h13c): the files the resync walked over stay in
    // the old primary's warehouse and their chain is the longer one; the reversed follow must
    // not choose them (nor move the table back to them): they are strays, with the reason.
    assert_strays(t, walked_over.iter().map(|w| w.as_str().unwrap()), &back);
    assert!(t["head_choice"].as_str().unwrap().contains("walked over"), "{back}");
    // Row for row as the new primary: the same current snapshot and row count.
    let record = |catalog: &str, wh: &str, out: &str| {
        let h = s.history(catalog, out, &["--warehouse", wh]);
        let t = &h["tables"][0];
        (t["current_snapshot_id"].clone(), t["row_count"].clone())
    };
    assert_eq!(
        record(primary, &primary_wh, "h-old.json"),
        record(&dr, &replica, "h-new.json"),
        "the old primary is not at the new primary's head"
    );
    // Every file walked over is still there.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let src = open(&primary_wh, endpoint).await;
        for f in kept {
            let path = f["path"].as_str().unwrap();
            let key = path.strip_prefix(&format!("{}/", base(&primary_wh))).unwrap();
            src.head(key, None)
                .await
                .unwrap_or_else(|e| panic!("{path} is gone: {e}"));
        }
        // The record the resync left beside them (schema resync-record), one for this walk.
        let recs = records(src.as_ref(), "shop/orders").await;
        assert_eq!(recs.len(), 1, "{recs:?}");
        let rec = &recs[0];
        assert_eq!(rec["format_version"], 2, "{rec}");
        assert_eq!(
            rec["walks"][0]["walked_over"],
            serde_json::Value::from(walked_over.clone()),
            "{rec}"
        );
    });

    // The old primary diverges again, and another writer commits to it between the resync's
    // read of its pointer and the swap: refused (exit 5) naming the table, nothing of it moved;
    // once that writer stopped, a re-run resyncs, keeping the other writer's files too.
    let fault = |predicate: &str| {
        s.fault_delete_at(primary, &primary_wh, "shop.orders", predicate);
    };
    fault("order_version % 3 = 0");
    let resync_args = ["replica", "resync", "--demote", primary, "--primary", &dr, "--json"];
    let plan = s.run(&[&resync_args[..], &["--dry-run"]].concat()).ok().json();
    let kept = plan["tables"][0]["kept_files"].as_array().unwrap().clone();
    let pointer = || {
        let out = s.path_str("hr.json");
        let args = [
            "history",
            "record",
            "--catalog",
            primary,
            "--warehouse",
            &primary_wh,
            "--out",
            &out,
        ];
        s.run(&args).ok();
        let h: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        h["tables"][0]["metadata_location"].clone()
    };
    let mut theirs = None;
    let raced = s.run_paused("resync:before-move", &resync_args, || {
        fault("order_version % 5 = 1");
        theirs = Some(pointer());
    });
    let raced = raced.fails(CONFLICT, &["shop.orders", "another writer", "again"]);
    assert_eq!(raced.json()["tables"][0]["action"], "conflict", "{}", raced.stdout);
    assert_eq!(Some(pointer()), theirs, "nothing moved");
    // The resync recorded what it walks over before its move, which lost: the reversed follow
    // holds the table (its pointer descends from a walked-over version) and says what to do.
    let held = follow_back().fails(VERIFY_FAILED, &["shop.orders held"]).json();
    let t = &held["tables"][0];
    assert_eq!(t["status"], "held", "{held}");
    assert!(t["reason"].as_str().unwrap().contains("replica resync again"), "{held}");
    assert_eq!(Some(pointer()), theirs, "nothing moved");
    let done = s.run(&resync_args).ok().json();
    let t = &done["tables"][0];
    assert_eq!(t["action"], "walked_back", "{done}");
    let done_kept = t["kept_files"].as_array().unwrap();
    assert!(kept.iter().all(|f| done_kept.contains(f)), "{t}");
    assert!(
        done_kept.len() > kept.len(),
        "the other writer's files are kept too: {t}"
    );
    assert_eq!(t["walked_over"].as_array().unwrap().len(), 2, "{t}");
    let again = s.run(&resync_args).ok().json();
    assert_eq!(again["tables"][0]["action"], "in_step", "{again}");
    // And the reversed follow goes on from the new primary's head.
    follow_back_to_600();

    // Two resyncs of the same table at once (issue 13): the old primary diverges again; resync A
    // stops just before writing its record, and meanwhile another writer commits once more and
    // resync B walks back over both commits and records them. Each walk has a record of its own
    // (two walks never share one; a race at one key is `dr::resync_record_write::tests`): A's
    // record is written beside B's, and its move loses (exit 5, nothing moved by it). No walk is
    // lost: every file B walked over, the last commit's included, is recorded, and the reversed
    // follow never takes one as its head.
    fault("order_version % 7 = 2");
    let mut b_walked = Vec::new();
    let raced = s.run_paused("resync:before-record", &resync_args, || {
        fault("order_version % 11 = 3");
        let b = s.run(&resync_args).ok().json();
        assert_eq!(b["tables"][0]["action"], "walked_back", "{b}");
        b_walked = b["tables"][0]["walked_over"].as_array().unwrap().clone();
    });
    let raced = raced.fails(CONFLICT, &["shop.orders", "again"]);
    assert_eq!(raced.json()["tables"][0]["action"], "conflict", "{}", raced.stdout);
    assert_eq!(b_walked.len(), 2, "{b_walked:?}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let recs = rt.block_on(async { records(open(&primary_wh, endpoint).await.as_ref(), "shop/orders").await });
    let recorded: Vec<&serde_json::Value> = recs
        .iter()
        .flat_map(|r| r["walks"].as_array().unwrap())
        .flat_map(|w| w["walked_over"].as_array().unwrap())
        .collect();
    for w in &b_walked {
        assert!(
            recorded.contains(&w),
            "{w} walked over but lost from the records: {recs:?}"
        );
    }
    let again = s.run(&resync_args).ok().json();
    assert_eq!(again["tables"][0]["action"], "in_step", "{again}");
    let back = follow_back_to_600();
    let t = &back["tables"][0];
    assert_strays(t, b_walked.iter().map(|w| w.as_str().unwrap()), &back);
}

#[test]
fn warm_replica_on_a_local_folder() {
    let s = Scratch::new();
    warm_replica(&s, &s.path_str("sites"), None);
}

#[test]
fn warm_replica_on_seaweedfs() {
    let Some(s) = Scratch::on_seaweedfs() else { return };
    let endpoint = seaweedfs_s3_endpoint();
    warm_replica(
        &s,
        &format!("s3://tidemark/warm-{}", std::process::id()),
        endpoint.as_deref(),
    );
}

fn failover_game_day(s: &Scratch, store: Option<&str>) {
    let work = s.path_str("gd");
    let mut args = vec!["gameday", "--scenario", "failover", "--work", &work, "--json", "-q"];
    if let Some(st) = store {
        args.extend(["--store", st]);
    }
    let r = s.run(&args).ok().json();
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["rpo_positions"], 100);
    assert!(r["rto_ms"].as_u64().is_some());
    assert_eq!(r["steps"].as_array().unwrap().len(), 8);
    // Two tables: the second (no route) is promoted at its own version, whole.
    assert!(
        r["steps"][3]["detail"]
            .as_str()
            .unwrap()
            .contains("shop.payments 100 positions behind"),
        "{r}"
    );
    assert!(
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"].as_str().unwrap().starts_with("the second table") && c["ok"] == true),
        "{r}"
    );
    let md = std::fs::read_to_string(s.path("gd/gameday-failover-report.md")).unwrap();
    assert!(md.contains("RTO") && md.contains("| 4 fail over"), "{md}");
}

#[test]
fn failover_game_day_on_the_embedded_default() {
    failover_game_day(&Scratch::new(), None);
}

#[test]
fn failover_game_day_on_seaweedfs() {
    let Some(s) = Scratch::on_seaweedfs() else { return };
    failover_game_day(&s, Some(&format!("s3://tidemark/gameday-fo-{}", std::process::id())));
}

/// The follower on the other SQL catalog kind: a PostgreSQL DR catalog (sandbox/postgres.sh).
#[test]
fn follow_into_a_postgresql_catalog() {
    let uri = match std::env::var("TIDEMARK_TEST_PG_URI") {
        Ok(u) if !u.trim().is_empty() => u,
        _ if std::env::var("TIDEMARK_SKIP_POSTGRES").as_deref() == Ok("1") => return,
        _ => panic!("TIDEMARK_TEST_PG_URI is not set: run `bash sandbox/test.sh` (or TIDEMARK_SKIP_POSTGRES=1)"),
    };
    let s = Scratch::new();
    let (primary_wh, replica) = (s.path_str("primary"), s.path_str("replica"));
    Story::new(&s)
        .catalog(s.path_str("p.db"))
        .warehouse(&primary_wh)
        .generated(50, 200, 100)
        .apply(&[]);
    replicate(&primary_wh, &replica, None, true);
    let name = format!(
        "tm_warm_{}_{}",
        std::process::id(),
        s.dir.path().file_name().unwrap().to_string_lossy()
    )
    .to_lowercase()
    .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "");
    let map = format!("{}={}", base(&primary_wh), base(&replica));
    let r = s
        .run(&[
            "replica",
            "follow",
            "--warehouse",
            &replica,
            "--catalog",
            &uri,
            "--catalog-name",
            &name,
            "--prefix-map",
            &map,
            "--state",
            &s.path_str("state"),
            "--once",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(r["tables"][0]["status"], "ok", "{r}");
    assert_eq!(r["tables"][0]["verified_position"], 200);
    s.record_history(
        &uri,
        &[
            "--catalog-name",
            &name,
            "--warehouse",
            &replica,
            "--out",
            &s.path_str("h.json"),
        ],
    )
    .ok();
}

/// A bad write replicated to the DR side (issue 30, item 6): `replica status --audit
/// TABLE=JOURNAL` audits the DR copy the follower registered against the journal, exits 12
/// naming the divergent snapshot, and its Prometheus file says which table diverged. Before
/// the bad write the same status is clean (exit 0, the gauge 0).
#[test]
fn replica_status_reports_a_bad_write_the_dr_copy_holds() {
    const DIVERGENCE: i32 = 12;
    let s = Scratch::new();
    let (primary_wh, replica) = (s.path_str("sites/primary"), s.path_str("sites/replica"));
    // One batch: `journal append`'s default batch size (10,000) holds the 300 events.
    let story = Story::new(&s)
        .catalog(s.path_str("primary.db"))
        .warehouse(&primary_wh)
        .generated(100, 300, 10_000);
    story.apply(&[]);
    let (journal, primary) = (&story.journal, &story.catalog);
    let (dr, st) = (s.path_str("dr.db"), s.path_str("state"));
    let map = format!("{}={}", base(&primary_wh), base(&replica));
    let follow = || {
        replicate(&primary_wh, &replica, None, true);
        followed(s.follow(&replica, &dr, &map, &st, &["--once", "--json"]))
    };
    let prom = s.path_str("replica.prom");
    let audit = format!("shop.orders={journal}");
    let status = || {
        s.run(&[
            "replica",
            "status",
            "--state",
            &st,
            "--audit",
            &audit,
            "--prometheus",
            &prom,
            "--json",
        ])
    };
    follow();
    let clean = status().ok().json();
    let a = &clean["tables"][0]["audit"];
    assert_eq!(a["verdict"], "trusted", "{clean:#}");
    assert_eq!(a["trusted"]["position"], 300, "{clean:#}");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("tidemark_replica_table_divergence{catalog=") && text.contains("table=\"shop.orders\"} 0"),
        "{text}"
    );

    // A bad delete on the primary, replicated and registered by the follower.
    let f = Story::new(&s)
        .catalog(primary)
        .warehouse(&primary_wh)
        .table("shop.orders")
        .bad_delete_json("order_version > 2");
    assert!(f["rows_deleted"].as_u64().unwrap() > 0, "{f}");
    follow();
    let bad = status().fails(DIVERGENCE, &["shop.orders", "divergence"]);
    let r = bad.json();
    let a = &r["tables"][0]["audit"];
    assert_eq!(a["verdict"], "divergence", "{r:#}");
    assert_eq!(
        a["first_divergence"]["counts"]["removed"], f["rows_deleted"],
        "every deleted row is counted: {r:#}"
    );
    assert_eq!(
        a["trusted"]["position"], 300,
        "the copy before the bad write stays trusted: {r:#}"
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("table=\"shop.orders\"} 1"), "{text}");
    // Incremental: the second audit resumed from the first one's records.
    assert!(a["resumed_from"].is_i64(), "{r:#}");
}
