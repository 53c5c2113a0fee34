//! The warm follower into every catalog kind but SQLite (issue 13, "every catalog kind"; SQLite is
//! `replica_warm`): moto's AWS S3 Tables (create, then UpdateTableMetadataLocation to copies in
//! the table's warehouse), SeaweedFS's Iceberg REST catalog (create, then snapshot commits) and
//! PostgreSQL (register, then compare-and-swap). Per
//! kind: strict follow with files missing, advance (by a follower stopped at its failpoint, then
//! resumed), someone else's commit as a conflict (the other table still advances), failover with
//! a route, the fenced follower, a write on the DR side, resync of the diverged old primary onto it, and
//! resync `--demote` of the DR catalog itself onto the old primary (its post-failover commits walked
//! back, their files kept and listed; REST: the table renamed aside and created again at the
//! common snapshot, a run stopped after the create finished by the next), then a table dropped
//! only in the DR catalog (REST: left missing by a resync stopped after its rename) restored by the
//! same resync (created again at the old primary's version; a run stopped after the create is
//! finished by the next), and the failback: the new primary followed into the demoted catalog,
//! advanced to its head, never onto the walked-over branch. And where the follower's state may
//! live.

use super::catalogs_remote::{ns, pg_definition, rest_definition, s3tables_definition};
use super::replica_warm::{base, followed, replicate};
use super::support::python::PyIceberg;
use super::support::*;

const CONFLICT: i32 = 5;

fn table<'a>(state: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    state["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == name)
        .unwrap_or_else(|| panic!("no {name} in {state}"))
}

/// The kind of DR catalog a story runs on, for what the test does to it behind tidemark's back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    S3Tables,
    Rest,
    /// A SQL catalog on PostgreSQL (`pg_definition`).
    Postgres,
}

/// Drops `table` from the DR catalog `dr` (of kind `kind`) behind tidemark's back, as an
/// operator's mistake would; `false` when the tool that drops it is skipped.
fn drop_table(s: &Scratch, dr: &str, kind: Kind, table: &str) -> bool {
    let tool = match kind {
        Kind::S3Tables => format!("s3tables:{dr}"),
        Kind::Rest => format!("catalog:{dr}"),
        Kind::Postgres => {
            // The venv has no PostgreSQL driver: the catalog row goes, as a drop takes it.
            let (ns, name) = table.rsplit_once('.').unwrap();
            let uri = std::env::var("TIDEMARK_TEST_PG_URI").unwrap();
            let sql = format!(
                "DELETE FROM iceberg_tables WHERE catalog_name = '{dr}' AND table_namespace = '{ns}' AND \
                 table_name = '{name}'"
            );
            let out = std::process::Command::new("psql")
                .args([uri.as_str(), "-v", "ON_ERROR_STOP=1", "-c", &sql])
                .output()
                .expect("run psql");
            assert!(
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("DELETE 1"),
                "psql: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return true;
        }
    };
    let Some(py) = PyIceberg::on_defined(&tool, s.env.clone()) else {
        return false;
    };
    py.run("drop", table, &[]).ok();
    true
}

/// The whole story into the DR catalog `dr` (a defined name in `s.env`, of kind `kind`), with
/// the primary and the replica under `root`.
fn follow_into(s: &Scratch, dr: &str, kind: Kind, root: &str, endpoint: Option<&str>, namespace: &str, home: &str) {
    let (primary_wh, replica) = (format!("{root}/primary"), format!("{root}/replica"));
    let (orders, other) = (format!("{namespace}.orders"), format!("{namespace}.other"));
    let story = Story::new(s)
        .catalog(s.path_str("primary.db"))
        .warehouse(&primary_wh)
        .generated(100, 500, 100);
    let (journal, primary) = (&story.journal, &story.catalog);
    let apply = |table: &str, until: &str| story.clone().table(table).apply(&["--until", until]);
    apply(&orders, "200");
    apply(&other, "200");
    replicate(&primary_wh, &replica, endpoint, true);
    apply(&orders, "300");
    // Metadata arrives before its data.
    assert!(replicate(&primary_wh, &replica, endpoint, false) > 0);

    let map = format!("{}={}", base(&primary_wh), base(&replica));
    let st = s.path_str("state");
    let follow_args = |holder: &'static str| {
        vec![
            "replica".to_string(),
            "follow".into(),
            "--warehouse".into(),
            replica.clone(),
            "--catalog".into(),
            dr.into(),
            "--namespace".into(),
            namespace.into(),
            "--prefix-map".into(),
            map.clone(),
            "--state".into(),
            st.clone(),
            "--holder".into(),
            holder.into(),
            "--once".into(),
            "--json".into(),
        ]
    };
    let follow = || {
        let args = follow_args("f1");
        s.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let record = |out: &str| s.history(dr, out, &["--namespace", namespace]);

    // Strict: the version with missing files is not followed; the one before is, and every row
    // of it reads (history record reads them all).
    let r = followed(follow());
    let t = table(&r, &orders);
    assert_eq!(t["status"], "missing_files", "{r}");
    assert_eq!(t["verified_position"], 200, "{t}");
    assert_eq!(t["latest_position"], 300);
    assert_eq!(table(&r, &other)["status"], "ok", "{r}");
    record("h1.json");

    // Advance once the files are there, by a follower that stops dead after moving the table and
    // before writing its state: the next run finds its own write and adopts it.
    replicate(&primary_wh, &replica, endpoint, true);
    let args = follow_args("f1");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    s.run_with(&[("TIDEMARK_FAILPOINT", "follow:after-table")], &args)
        .fails(86, &["failpoint"]);
    let r = follow().ok().json();
    let t = table(&r, &orders);
    assert_eq!(
        (&t["status"], &t["verified_position"]),
        (&"ok".into(), &300.into()),
        "{r}"
    );
    assert!(t["head_choice"].as_str().unwrap().contains("adopted"), "{t}");
    let first_registered = t["registered_metadata"].as_str().unwrap().to_string();
    // What the DR catalog points at is its own file, never the replica's or the primary's.
    assert!(first_registered.contains(home), "{first_registered}");

    // Someone else commits to the DR's `other`: a conflict, left alone; `orders` advances.
    s.fault_delete(dr, &other, "order_version % 2 = 0");
    let h_theirs = record("h2.json");
    apply(&orders, "400");
    apply(&other, "300");
    replicate(&primary_wh, &replica, endpoint, true);
    let r = followed(follow());
    let t = table(&r, &orders);
    assert_eq!(
        (&t["status"], &t["verified_position"]),
        (&"ok".into(), &400.into()),
        "{r}"
    );
    assert_ne!(t["registered_metadata"], first_registered.as_str());
    let o = table(&r, &other);
    assert_eq!(o["status"], "conflict", "{r}");
    assert!(o["reason"].as_str().unwrap().contains("someone else"), "{o}");
    assert_eq!(o["verified_position"], 200, "{o}");
    // The other table is as the other writer left it.
    let h_after = record("h3.json");
    let snap = |h: &serde_json::Value, name: &str| {
        h["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["table"] == name)
            .map(|x| x["current_snapshot_id"].clone())
    };
    assert_eq!(snap(&h_theirs, &other), snap(&h_after, &other), "{h_after}");
    // The DR table's snapshot is the primary's own (same id), on every kind.
    let hp = s.history(
        primary,
        "hp.json",
        &["--warehouse", &primary_wh, "--namespace", namespace],
    );
    assert_eq!(snap(&hp, &orders), snap(&h_after, &orders), "{h_after}");

    // Failover: the route readers use flips to the DR table; the follower is fenced.
    let route = s.path_str("route");
    s.flip(&route, primary, &orders, "400", "primary", &[]).ok();
    let p = s
        .failover([&replica, dr, &map, &st], &route, "fo-1", &["--namespace", namespace])
        .ok()
        .json();
    assert_eq!(p["routes"][0]["to_generation"], 2, "{p}");
    assert_eq!(table(&p, &orders)["positions_behind"], 0, "{p}");
    follow().fails(CONFLICT, &["fenced", "fo-1"]);

    // The DR side writes on through the route; the old primary gets a commit the DR side never
    // had. Resync walks it back and keeps what it walks over.
    s.run(&["apply", "--journal", journal, "--catalog", dr, "--route", &route])
        .ok();
    s.fault_delete_at(primary, &primary_wh, &orders, "order_version % 3 = 0");
    let resync = |dry: bool| {
        let dry: &[&str] = if dry { &["--dry-run"] } else { &[] };
        s.resync(primary, dr, &[&["--namespace", namespace, "--json"], dry].concat())
            .ok()
            .json()
    };
    let plan = resync(true);
    let t = table(&plan, &orders);
    assert_eq!(t["action"], "walked_back", "{plan}");
    assert!(
        t["kept_files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["what"] == "manifest list"),
        "{t}"
    );
    let first = resync(false);
    // The old primary's files this first resync walked over stay in its warehouse, and reach the
    // replica when the replication turns back towards it (below).
    let first_walked: Vec<String> = table(&first, &orders)["walked_over"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert!(!first_walked.is_empty(), "{first}");
    assert_eq!(table(&resync(false), &orders)["action"], "in_step");

    // The roles turn once more: the DR side's commits since the failover are abandoned and it is
    // demoted onto the resynced old primary: `resync --demote` of this catalog kind.
    let demote = |dry: bool| {
        let dry: &[&str] = if dry { &["--dry-run"] } else { &[] };
        s.resync(dr, primary, &[&["--namespace", namespace, "--json"], dry].concat())
            .ok()
            .json()
    };
    let before = record("h4.json");
    let plan = demote(true);
    let t = table(&plan, &orders);
    assert_eq!(t["action"], "walked_back", "{plan}");
    let kept = t["kept_files"].clone();
    assert!(kept.as_array().unwrap().iter().any(|f| f["what"] == "data file"), "{t}");
    assert!(!t["diverged_snapshots"].as_array().unwrap().is_empty(), "{t}");
    // The plan changed nothing.
    assert_eq!(snap(&record("h5.json"), &orders), snap(&before, &orders));
    // Another writer commits to the DR table between the resync's read and its move (S3 Tables:
    // the pointer moved with its version token; REST: the commit's requirements; SQL: the
    // compare-and-swap): refused (exit 5) naming the table, nothing of it moved; once that writer
    // stopped, a re-run walks back over its commit too and keeps its files.
    let args = Scratch::resync_args(dr, primary, &["--namespace", namespace, "--json"]);
    let mut theirs = None;
    let raced = s.run_paused("resync:before-move", &args, || {
        s.fault_delete(dr, &orders, "order_version % 5 = 1");
        theirs = snap(&record("h5b.json"), &orders);
    });
    let raced = raced.fails(CONFLICT, &[&orders, "another writer", "again"]);
    assert_eq!(table(&raced.json(), &orders)["action"], "conflict", "{}", raced.stdout);
    assert!(theirs.is_some() && theirs != snap(&before, &orders));
    assert_eq!(snap(&record("h5c.json"), &orders), theirs, "nothing moved");
    // REST: the table is renamed aside and created again at the common snapshot. Stopped dead
    // after the create (the aside holds the table, an empty one has its name): the re-run fills it.
    let aside_prefix = format!("{orders}__walked_");
    let names = |h: &serde_json::Value| -> Vec<String> {
        h["tables"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x["table"].as_str().map(str::to_string))
            .collect()
    };
    if kind == Kind::Rest {
        s.run_with(&[("TIDEMARK_FAILPOINT", "resync:after-create")], &args)
            .fails(86, &["failpoint"]);
        let h = record("h5d.json");
        assert!(names(&h).iter().any(|n| n.starts_with(&aside_prefix)), "{h}");
        assert!(names(&h).contains(&orders), "{h}");
    }
    let done = demote(false);
    let t = table(&done, &orders);
    assert_eq!(t["action"], "walked_back", "{done}");
    let (demote_walked, demote_diverged) = (t["walked_over"].clone(), t["diverged_snapshots"].clone());
    let (t_reason, t_record) = (t["reason"].clone(), t["record"].clone());
    let kept_aside = t["kept_aside"].clone();
    if kind == Kind::Rest {
        let reason = t_reason.as_str().unwrap();
        assert!(reason.contains("stopped before filling"), "{reason}");
        assert!(kept_aside["table"].as_str().unwrap().starts_with(&aside_prefix), "{t}");
    } else {
        assert!(kept_aside.is_null(), "{t}");
    }
    let done_kept = t["kept_files"].as_array().unwrap();
    assert!(kept.as_array().unwrap().iter().all(|f| done_kept.contains(f)), "{t}");
    assert!(
        done_kept.len() > kept.as_array().unwrap().len(),
        "the other writer's files are kept too: {t}"
    );
    let kept = t["kept_files"].clone();
    // Every file it walked over is still there (kept, never deleted): local ones and (REST)
    // those on SeaweedFS checked here.
    for f in kept.as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        if let Some(local) = path.strip_prefix("file://") {
            assert!(std::path::Path::new(local).exists(), "{f}");
        } else if kind == Kind::Rest {
            assert!(s3_exists(path, endpoint), "{f} was deleted");
        }
    }
    let after = record("h6.json");
    // REST: the aside holds the walked-over head (the other writer's commit), read whole.
    if kind == Kind::Rest {
        let aside = kept_aside["table"].as_str().unwrap();
        assert_eq!(snap(&after, aside), theirs, "{after}");
    }
    let hp2 = s.history(
        primary,
        "hp2.json",
        &["--warehouse", &primary_wh, "--namespace", namespace],
    );
    assert_ne!(snap(&after, &orders), snap(&before, &orders), "{after}");
    assert_eq!(snap(&after, &orders), snap(&hp2, &orders), "{after}");
    assert_eq!(table(&demote(false), &orders)["action"], "in_step");

    // A table deleted only on the demoted side, live on the primary, is restored there: created
    // again at the primary's version (planned first, the plan changing nothing). REST: the name
    // goes missing as a resync stopped dead after renaming a diverged table aside leaves it, and is
    // finished the same way (the aside reported).
    let gone = if kind == Kind::Rest {
        s.fault_delete(dr, &other, "order_version % 7 = 2");
        s.run_with(&[("TIDEMARK_FAILPOINT", "resync:after-rename")], &args)
            .fails(86, &["failpoint"]);
        true
    } else {
        drop_table(s, dr, kind, &other)
    };
    if gone {
        let plan = demote(true);
        let o = table(&plan, &other);
        assert_eq!(o["action"], "restored", "{plan}");
        assert!(o["demoted_pointer"].is_null(), "{o}");
        assert!(
            record("h7.json")["tables"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["table"] != other.as_str())
        );
        // Stopped dead between the create and the move (S3 Tables, REST; a SQL catalog registers
        // in one step): the re-run finishes the restore.
        if kind != Kind::Postgres {
            let args = Scratch::resync_args(dr, primary, &["--namespace", namespace]);
            s.run_with(&[("TIDEMARK_FAILPOINT", "publish:after-create")], &args)
                .fails(86, &["failpoint"]);
        }
        let done = demote(false);
        let o = table(&done, &other);
        assert_eq!(o["action"], "restored", "{done}");
        if kind != Kind::Postgres {
            assert!(o["reason"].as_str().unwrap().contains("a run before began"), "{o}");
        }
        assert_eq!(o["walked_back_to_snapshot"], snap(&hp2, &other).unwrap(), "{o}");
        if kind == Kind::Rest {
            let aside = o["kept_aside"]["table"].as_str().unwrap();
            assert!(aside.starts_with(&format!("{other}__walked_")), "{o}");
            assert!(!o["kept_files"].as_array().unwrap().is_empty(), "{o}");
            assert_eq!(table(&done, aside)["action"], "kept_aside", "{done}");
        }
        let restored = record("h8.json");
        assert_eq!(snap(&restored, &other), snap(&hp2, &other), "{restored}");
        // The restored table is at a version of the primary's: nothing more to do.
        let again = demote(false);
        assert_eq!(table(&again, &other)["action"], "in_step", "{again}");
        assert_eq!(table(&again, &orders)["action"], "in_step", "{again}");
    }

    // The walk back was recorded beside the walked-over metadata files, on every kind (REST: the
    // server's files on main's walked-over branch), before the pointer moved.
    let walked: Vec<String> = demote_walked
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert!(walked.iter().all(|w| w.ends_with(".metadata.json")), "{demote_walked}");
    let record_endpoint = match kind {
        Kind::S3Tables => std::env::var("TIDEMARK_S3TABLES_ENDPOINT").ok(),
        Kind::Rest => endpoint.map(str::to_string),
        Kind::Postgres => None,
    };
    // SeaweedFS's table bucket refuses any object name Iceberg does not use (403, on a read of a
    // missing key too): the REST walk back says so and goes on without a record.
    if kind == Kind::Rest {
        let reason = t_reason.as_str().unwrap();
        assert!(
            reason.contains("no resync record") && reason.contains("refuses"),
            "{reason}"
        );
        assert!(t_record.is_null(), "{t_record}");
    } else {
        // One record per walk, named by the walk, beside the file it started from; the report
        // names it.
        let record_at = t_record
            .as_str()
            .unwrap_or_else(|| panic!("no record in the report: {done}"));
        let (folder, name) = record_at.rsplit_once('/').unwrap();
        assert_eq!(Some(folder), walked[0].rsplit_once('/').map(|(f, _)| f), "{record_at}");
        assert!(name.starts_with("tidemark-resync-"), "{record_at}");
        let rec = read_record(record_at, record_endpoint.as_deref());
        assert_eq!(rec["format_version"], 2, "{rec}");
        assert!(rec["demoted_catalog"].as_str().unwrap().contains(dr), "{rec}");
        let recorded: Vec<&serde_json::Value> = rec["walks"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|w| w["walked_over"].as_array().unwrap())
            .collect();
        for w in &walked {
            assert!(
                recorded.iter().any(|r| r.as_str() == Some(w.as_str())),
                "{w} not recorded: {rec}"
            );
        }
    }

    // Failback into this catalog kind (issue 13): the new primary (the SQLite `primary`) commits
    // once more, its warehouse is replicated again and followed into the demoted catalog under a
    // new state (the old one is fenced). The walked-over branch of the demoted table (the
    // commits through the route and the other writer's) is longer than the new primary's one
    // commit since the fork; the table must advance from where the resync left it to the new
    // primary's head, never onto that branch.
    let diverged: Vec<i64> = demote_diverged
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_i64().unwrap())
        .collect();
    assert!(
        diverged.len() >= 2,
        "the walked-over branch is the longer one: {demote_diverged}"
    );
    // (The journal's checkpoint is at 500, from the DR side's writes: the new primary's commit is
    // one outside the journal.)
    s.fault_delete_at(primary, &primary_wh, &orders, "order_version % 13 = 4");
    replicate(&primary_wh, &replica, endpoint, true);
    let st_back = s.path_str("state-back");
    let follow_back = || {
        let mut args = follow_args("f-back");
        let at = args.iter().position(|a| a == "--state").unwrap();
        args[at + 1] = st_back.clone();
        s.run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let at_resync = snap(&record("h8b.json"), &orders).unwrap();
    let back = followed(follow_back());
    let t = table(&back, &orders);
    assert_eq!(table(&back, &other)["status"], "ok", "{back}");
    // A SQL DR catalog's commits land beside the replica's files, so there the walked-over files
    // are in the followed warehouse: strays, never the head (S3 Tables and REST keep theirs in
    // the table's own bucket, which the follower does not read).
    if kind == Kind::Postgres {
        assert_strays(t, walked.iter().map(String::as_str), &back);
    }
    // Every kind advances from where the resync left it to the new primary's head, never onto
    // the walked-over branch (REST: the resync created the table again at the common snapshot,
    // the walked-over one renamed aside, so the new primary's next snapshot is taken; PostgreSQL:
    // the old primary's own walked-over files are strays too, below).
    assert_eq!(
        (&t["status"], &t["verified_position"]),
        (&"ok".into(), &400.into()),
        "{back}"
    );
    let hp3 = s.history(
        primary,
        "hp3.json",
        &["--warehouse", &primary_wh, "--namespace", namespace],
    );
    let now = record("h9.json");
    let current = snap(&now, &orders).unwrap();
    assert_ne!(current, at_resync, "not advanced: {back}");
    assert_eq!(
        Some(&current),
        snap(&hp3, &orders).as_ref(),
        "not at the new primary's head: {now}"
    );
    assert!(
        !diverged.contains(&current.as_i64().unwrap()),
        "moved onto the walked-over branch: {now}"
    );
    let rows = |h: &serde_json::Value| {
        h["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["table"] == orders.as_str())
            .map(|x| x["row_count"].clone())
    };
    assert_eq!(rows(&now), rows(&hp3), "{now}");
    // The replica also holds the old primary's own walked-over files from the first resync of
    // this story (PostgreSQL: beside the demoted DR table's own record, in the same folder), and
    // one of them ends a chain as long as the new primary's head: the record of that walk came
    // with them (one record per walk, each under its own name, so a replication that never
    // overwrites a key brings it), and they are strays, never the head.
    assert_strays(t, first_walked.iter().map(String::as_str), &back);
    // In step: the next cycle moves nothing.
    let again = followed(follow_back());
    assert_eq!(table(&again, &orders)["verified_position"], 400, "{again}");
    assert_eq!(snap(&record("h10.json"), &orders), Some(current));
}

/// Whether the object at `path` (`s3://bucket/key`, through `endpoint`) is there.
fn s3_exists(path: &str, endpoint: Option<&str>) -> bool {
    with_object(path, endpoint, |store, name| async move {
        store.head(&name, None).await.is_ok()
    })
}

/// `f` of the store of the folder of `path` (`…/name`, a local path or `s3://…` through
/// `endpoint`) and `name`, on a runtime of its own.
fn with_object<T, F>(
    path: &str,
    endpoint: Option<&str>,
    f: impl FnOnce(std::sync::Arc<dyn tidemark_journal::store::ObjectStore>, String) -> F,
) -> T
where
    F: std::future::Future<Output = T>,
{
    let (folder, name) = path.rsplit_once('/').unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = super::replica_warm::open(folder, endpoint).await;
        f(store, name.to_string()).await
    })
}

/// The resync record at `location` (a local path or `s3://…` through `endpoint`), as JSON.
fn read_record(location: &str, endpoint: Option<&str>) -> serde_json::Value {
    with_object(location, endpoint, |store, name| async move {
        let got = store
            .get(&name, None)
            .await
            .unwrap_or_else(|e| panic!("no resync record at {location}: {e}"));
        serde_json::from_slice(&got.body).unwrap()
    })
}

#[test]
fn warm_replica_into_s3tables() {
    let Some(def) = s3tables_definition() else { return };
    let mut s = Scratch::new();
    s.env = def;
    let root = s.path_str("sites");
    // S3 Tables accepts metadata only inside the table's own bucket.
    follow_into(
        &s,
        "st",
        Kind::S3Tables,
        &root,
        None,
        &ns("warm_st"),
        "--table-s3/metadata/",
    );
}

#[test]
fn warm_replica_into_a_rest_catalog() {
    let (Some(mut s), Some(def)) = (Scratch::on_seaweedfs(), rest_definition()) else {
        return;
    };
    s.env.extend(def);
    let endpoint = seaweedfs_s3_endpoint();
    let root = format!("s3://tidemark/warm-rest-{}", std::process::id());
    // The REST server writes the metadata files, in its own warehouse.
    follow_into(
        &s,
        "sw",
        Kind::Rest,
        &root,
        endpoint.as_deref(),
        &ns("warm_rest"),
        "s3://warehouse/",
    );
}

/// The same story into a PostgreSQL SQL catalog (sandbox/postgres.sh): register and swap.
#[test]
fn warm_replica_into_postgresql() {
    let mut s = Scratch::new();
    let root = s.path_str("sites");
    let Some(def) = pg_definition(&base(&format!("{root}/replica"))) else {
        return;
    };
    s.env = def;
    // What a SQL DR catalog registers is the rewrite beside the replica's file.
    follow_into(&s, "pg", Kind::Postgres, &root, None, &ns("warm_pg"), "/sites/replica/");
}

/// The follower's lease and state live outside the replica warehouse: by default beside a SQLite
/// DR catalog (`<file>.follower`, where `replica status --catalog FILE` finds them); a `--state`
/// inside the replica or the `--prefix-map` target is refused (exit 2) unless
/// `--state-in-replica`; a catalog with no place beside it needs `--state`.
#[test]
fn the_follower_state_lives_outside_the_replica_warehouse() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 20, 10);
    let (primary_wh, replica) = (s.path_str("primary"), s.path_str("replica"));
    s.story(&journal, s.path_str("p.db"), "shop.orders")
        .warehouse(&primary_wh)
        .apply(&[]);
    replicate(&primary_wh, &replica, None, true);
    let map = format!("{}={}", base(&primary_wh), base(&replica));
    let dr = s.path_str("dr.db");
    let follow = |extra: &[&str]| {
        let mut args = vec![
            "replica",
            "follow",
            "--warehouse",
            &replica,
            "--catalog",
            &dr,
            "--prefix-map",
            &map,
            "--once",
        ];
        args.extend(extra);
        s.run(&args)
    };
    let inside = s.path_str("replica/.state");
    follow(&["--state", &inside]).fails(2, &["inside", "--state-in-replica"]);
    assert!(!s.path("replica/.state").exists() && !s.path("dr.db").exists());
    follow(&["--state", &inside, "--state-in-replica"]).ok();
    assert!(s.path("replica/.state/state.json").exists());

    // The default: beside the SQLite file.
    let dr2 = s.path_str("dr2.db");
    s.run(&[
        "replica",
        "follow",
        "--warehouse",
        &replica,
        "--catalog",
        &dr2,
        "--prefix-map",
        &map,
        "--once",
    ])
    .ok();
    assert!(s.path("dr2.db.follower/state.json").exists());
    let st = s.run(&["replica", "status", "--catalog", &dr2, "--json"]).ok().json();
    assert_eq!(st["tables"][0]["status"], "ok", "{st}");

    // A REST or S3 Tables DR catalog has no place beside it.
    if let Some(def) = s3tables_definition() {
        let mut s3 = Scratch::new();
        s3.env = def;
        s3.run(&[
            "replica",
            "follow",
            "--warehouse",
            &replica,
            "--catalog",
            "st",
            "--once",
        ])
        .fails(2, &["give --state"]);
    }
}
