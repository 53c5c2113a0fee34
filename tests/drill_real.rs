//! The weekly drill of a real table (`tidemark drill --source-table`, issue 32): the real
//! recovery into a scratch namespace, nothing of production written, nothing left behind.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{Scratch, events};

/// Every file under `root` with its bytes' sha256 and its modification time: what "exactly as it
/// was" means on a folder (a rewrite with the same bytes moves the time).
fn tree(root: &Path) -> BTreeMap<String, (String, std::time::SystemTime)> {
    use sha2::Digest;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                let modified = e.metadata().unwrap().modified().unwrap();
                out.insert(rel, (format!("{:x}", sha2::Sha256::digest(&bytes)), modified));
            }
        }
    }
    out
}

/// The SQLite catalog's table rows (`namespace.name` → metadata pointer), read with Python's
/// sqlite3, not through tidemark.
fn pointers(catalog: &str) -> BTreeMap<String, String> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys,json; c=sqlite3.connect(sys.argv[1]); \
             print(json.dumps({f'{n}.{t}': m for n,t,m in c.execute('SELECT table_namespace, table_name, metadata_location FROM iceberg_tables')}))",
            catalog,
        ])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

struct Production {
    s: Scratch,
    journal: String,
    catalog: String,
    /// `NAMESPACE.TABLE`.
    table: String,
    route: String,
    history: String,
    /// The drill's `--scratch` namespace.
    scratch: String,
}

/// A journal of 60 events in batches of 7 (batch 9 is 57..=60), applied into shop.orders with a
/// commit per batch, routed, then 13 more events not yet applied (batches 10–12: 61..=65,
/// 66..=70, 71..=73).
fn production() -> Production {
    let s = Scratch::new();
    let (journal, catalog) = (s.path_str("prod/journal"), s.path_str("prod/catalog.db"));
    let (route, history) = (s.path_str("prod/route"), s.path_str("drills"));
    Production {
        s,
        journal,
        catalog,
        table: "shop.orders".into(),
        route,
        history,
        scratch: "drills".into(),
    }
    .set_up(&["--batch-size", "5"])
}

impl Production {
    /// Writes the production: 60 events in batches of 7 applied with a commit per batch, the
    /// route flipped to the table at 60, then the events 61..=73 appended with `append`'s options.
    fn set_up(self, append: &[&str]) -> Self {
        crate::support::journal_at(&self.s, &self.journal, "first", 60, 7);
        self.s
            .story(&self.journal, &self.catalog, &self.table)
            .run("apply", &["--batches-per-commit", "1"])
            .ok();
        if !self.route.contains("://") {
            std::fs::create_dir_all(&self.route).unwrap();
        }
        crate::support::faults::flip(&self.s, &self.route, &self.catalog, &self.table, 60, &[]);
        let more = self.s.write("more.ndjson", &events(61, 73));
        self.s.append_with(&self.journal, more.to_str().unwrap(), append).ok();
        self
    }

    fn drill(&self, extra: &[&str]) -> crate::support::Run {
        self.drill_env(&[], extra)
    }

    fn drill_env(&self, env: &[(&str, &str)], extra: &[&str]) -> crate::support::Run {
        let args = [
            self.drill_without_record(&["--source-table", &self.table]),
            vec!["--route", &self.route, "--history", &self.history],
            extra.to_vec(),
        ]
        .concat();
        self.s.run_with(env, &args)
    }

    /// The arguments of a drill from `source` (its `--source-…` arguments) into the scratch
    /// namespace with `--json`, without a route or a history: [`Production::drill_env`] adds
    /// them, the drills the tests run by hand go without.
    fn drill_without_record<'a>(&'a self, source: &[&'a str]) -> Vec<&'a str> {
        let rest = [
            "--journal",
            &self.journal,
            "--catalog",
            &self.catalog,
            "--scratch",
            &self.scratch,
            "--json",
        ];
        [&["drill"][..], source, &rest[..]].concat()
    }

    /// Production as a reader and an auditor see it: every file of the journal, the route and
    /// the warehouse's `shop` namespace, and the catalog's pointers.
    fn state(
        &self,
    ) -> (
        BTreeMap<String, (String, std::time::SystemTime)>,
        BTreeMap<String, String>,
    ) {
        let mut files = tree(Path::new(&self.journal));
        files.extend(
            tree(Path::new(&self.route))
                .into_iter()
                .map(|(k, v)| (format!("route/{k}"), v)),
        );
        files.extend(
            tree(&self.s.path("prod/warehouse/shop"))
                .into_iter()
                .map(|(k, v)| (format!("warehouse/{k}"), v)),
        );
        let mut catalog = pointers(&self.catalog);
        // The scratch namespace is the drill's, not production's.
        catalog.retain(|t, _| !t.starts_with("drills."));
        (files, catalog)
    }

    /// Nothing of the drills' is left: no table in the scratch namespace, no file under its folder.
    fn assert_no_scratch_left(&self) {
        let scratch: Vec<_> = pointers(&self.catalog)
            .into_keys()
            .filter(|t| t.starts_with("drills."))
            .collect();
        assert!(scratch.is_empty(), "scratch tables left: {scratch:?}");
        let files = tree(&self.s.path("prod/warehouse/drills"));
        assert!(
            files.is_empty(),
            "scratch files left: {:?}",
            files.keys().collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_drill_of_the_real_table_changes_nothing_and_leaves_nothing() {
    let p = production();
    let before = p.state();
    let r = p.drill(&[]).ok().json();
    let rec = &r["record"];
    assert_eq!(rec["ok"], true, "{r:#}");
    assert_eq!(rec["verdict"], "pass");
    // The recovery a real one would run: from the newest trusted snapshot (position 60) to the
    // head (73), every key checked.
    assert_eq!(
        (rec["trusted_position"].as_u64(), rec["h"].as_u64()),
        (Some(60), Some(73))
    );
    assert_eq!(rec["rpo_positions"], 13);
    assert_eq!(rec["events_replayed"], 13);
    assert!(rec["rows"].as_u64().unwrap() > 0);
    assert!(rec["peak_memory_bytes"].as_u64().unwrap() > 0);
    let steps: Vec<&str> = rec["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    for step in [
        "scratch", "audit", "journal", "route", "seed", "replay", "validate", "cleanup",
    ] {
        assert!(steps.contains(&step), "step {step} in {steps:?}");
    }
    assert_eq!(r["route"]["generation"], 1);
    assert_eq!(r["route"]["table_name"], "shop.orders");
    let key = r["history_key"].as_str().unwrap();
    assert!(Path::new(&p.history).join(key).is_file(), "record {key}");
    // Production exactly as it was; no scratch table or file behind.
    assert_eq!(p.state(), before, "production changed");
    p.assert_no_scratch_left();
    // A second drill is a second record; the history shows both.
    p.drill(&[]).ok();
    let h =
        p.s.run(&["drill", "history", "--history", &p.history, "--json"])
            .ok()
            .json();
    assert_eq!(h["total"], 2);
    assert_eq!(p.state(), before, "production changed");
}

#[test]
fn a_drill_killed_in_any_step_is_cleaned_up_by_the_next() {
    let p = production();
    let before = p.state();
    for point in [
        "drill:after-scratch",
        "drill:after-audit",
        "recover:after-seed",
        "recover:after-replay",
        "recover:after-validate",
        "drill:before-cleanup",
        "drill:after-cleanup",
    ] {
        let killed = p.drill_env(&[("TIDEMARK_FAILPOINT", point)], &[]);
        assert_eq!(killed.code, 86, "{point}: {}", killed.stderr);
        let again = p.drill(&[]).ok().json();
        assert_eq!(again["record"]["ok"], true, "{point}: {again:#}");
        let left = again["leftovers_removed"].as_array().unwrap();
        let made_table = !matches!(
            point,
            "drill:after-scratch" | "drill:after-audit" | "drill:after-cleanup"
        );
        assert_eq!(left.len(), usize::from(made_table), "{point}: {again:#}");
        if made_table {
            assert!(
                left[0]["detail"].as_str().unwrap().contains("left by drill drill-"),
                "{point}: {left:?}"
            );
        }
        p.assert_no_scratch_left();
        assert_eq!(p.state(), before, "{point}: production changed");
    }
}

/// Without `--history` the drill keeps its audit's records in a temporary folder; a drill killed
/// before its cleanup leaves that folder, and the next drill removes it (never a running one's).
#[test]
fn a_killed_drill_without_history_leaves_no_audit_records_behind() {
    let p = production();
    let tmp = p.s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let tmp_s = tmp.to_str().unwrap();
    let args = p.drill_without_record(&["--source-table", "shop.orders"]);
    let ours = |tmp: &Path| -> Vec<String> {
        std::fs::read_dir(tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tidemark-drill-"))
            .collect()
    };
    let killed =
        p.s.run_with(&[("TMPDIR", tmp_s), ("TIDEMARK_FAILPOINT", "drill:after-audit")], &args);
    assert_eq!(killed.code, 86, "{}", killed.stderr);
    let left = ours(&tmp);
    assert_eq!(left.len(), 1, "the killed drill's audit records: {left:?}");
    let again = p.s.run_with(&[("TMPDIR", tmp_s)], &args).ok().json();
    assert_eq!(again["record"]["ok"], true, "{again:#}");
    assert_eq!(ours(&tmp), Vec::<String>::new(), "{again:#}");
    let scratch = &again["record"]["steps"][0];
    assert!(
        scratch["detail"].as_str().unwrap().contains(&left[0]),
        "the removed folder is named: {scratch}"
    );
    p.assert_no_scratch_left();
}

/// A trusted snapshot inside a journal batch (the applier stopped at 58; batch 9 is 57..=60):
/// the drill replays the rest of that batch, not only the batches after it.
#[test]
fn a_drill_from_a_snapshot_inside_a_batch_replays_the_rest_of_that_batch() {
    let s = Scratch::new();
    let journal = s.path_str("prod/journal");
    crate::support::journal_at(&s, &journal, "first", 60, 7);
    let catalog = s.path_str("prod/catalog.db");
    s.story(&journal, &catalog, "shop.orders")
        .run("apply", &["--until", "58"])
        .ok();
    let more = s.write("more.ndjson", &events(61, 73));
    s.append(&journal, more.to_str().unwrap());
    let r = s
        .story(&journal, &catalog, "shop.orders")
        .drill_table("drills", &["--json"])
        .ok()
        .json();
    let rec = &r["record"];
    assert_eq!(rec["ok"], true, "{r:#}");
    assert_eq!(
        (
            rec["trusted_position"].as_u64(),
            rec["h"].as_u64(),
            rec["events_replayed"].as_u64()
        ),
        (Some(58), Some(73), Some(15)),
        "{r:#}"
    );
    // Seven orders (o-0..o-6), each last written by one of the events 67..=73.
    assert_eq!(rec["rows"], 7, "{r:#}");
}

/// A killed drill's scratch table whose metadata files are gone: the next drill finds its
/// location by the catalog's pointer, deletes its files and drops its entry.
#[test]
fn a_leftover_whose_metadata_is_gone_is_removed_by_the_catalogs_pointer() {
    let p = production();
    let killed = p.drill_env(&[("TIDEMARK_FAILPOINT", "recover:after-replay")], &[]);
    assert_eq!(killed.code, 86, "{}", killed.stderr);
    let metadata = p.s.path("prod/warehouse/drills");
    let mut stack = vec![metadata];
    let mut removed = 0;
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(".metadata.json") {
                std::fs::remove_file(&path).unwrap();
                removed += 1;
            }
        }
    }
    assert!(removed > 0, "the killed drill's scratch table has metadata files");
    let again = p.drill(&[]).ok().json();
    assert_eq!(again["record"]["ok"], true, "{again:#}");
    let left = again["leftovers_removed"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{again:#}");
    let detail = left[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("unknown (its metadata could not be read)") && detail.contains("deleted its files under"),
        "{detail}"
    );
    p.assert_no_scratch_left();
}

#[test]
fn a_foreign_table_in_the_scratch_namespace_is_refused() {
    let p = production();
    // Another team's table in the namespace named as scratch.
    let other = p.s.write("other.ndjson", &events(1, 3));
    let j2 = p.s.path_str("other-journal");
    p.s.run(&["journal", "init", "--journal", &j2]).ok();
    p.s.append(&j2, other.to_str().unwrap());
    p.s.apply(&j2, &p.catalog, "drills.tidemark_drill_lookalike");
    let before = tree(&p.s.path("prod/warehouse/drills"));
    p.drill(&[])
        .fails(3, &["drills.tidemark_drill_lookalike", "not a tidemark drill table"]);
    assert_eq!(
        tree(&p.s.path("prod/warehouse/drills")),
        before,
        "the foreign table was touched"
    );
    // With a name that is not a drill's either.
    p.s.apply(&j2, &p.catalog, "drills.keep_me");
}

#[test]
fn a_drill_fails_naming_the_cause() {
    // A divergence in the table's history: someone deleted rows outside the journal.
    let p = production();
    p.s.fault_delete(&p.catalog, "shop.orders", "order_id = 'o-3'");
    let r = p.drill(&[]);
    assert_eq!(r.code, 12, "{}", r.stderr);
    let j = r.json();
    let failed: Vec<&str> = j["record"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert!(failed.iter().any(|c| c.contains("history")), "{failed:?}");
    // The rehearsal still ran from the trusted snapshot before the bad write, and passed there.
    assert_eq!(j["record"]["trusted_position"], 60, "{j:#}");
    assert!(
        j["record"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"].as_str().unwrap().contains("reference") && c["ok"] == true)
    );
    p.assert_no_scratch_left();

    // An RTO over budget.
    let p = production();
    let r = p.drill(&["--rto-budget", "1ms"]);
    assert_eq!(r.code, 13, "{}", r.stderr);
    assert!(r.stderr.contains("RTO"), "{}", r.stderr);
    p.assert_no_scratch_left();

    // A journal whose oldest events were deleted (a lifecycle rule on events/): the batches a
    // recovery from the trusted snapshot needs are gone.
    let p = production();
    let events_dir = Path::new(&p.journal).join("events");
    let mut objects: Vec<_> = std::fs::read_dir(&events_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    objects.sort();
    // Batches 1..=10 removed, every version (the local store keeps them under
    // .tidemark/versions/<key with / as %2F>): 61..=65 (batch 10) are needed after the trusted
    // position 60.
    for o in &objects[..10] {
        std::fs::remove_file(o).unwrap();
        let key = format!("events%2F{}", o.file_name().unwrap().to_str().unwrap());
        std::fs::remove_dir_all(Path::new(&p.journal).join(".tidemark/versions").join(key)).unwrap();
    }
    let r = p.drill(&[]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let j = r.json();
    assert!(
        j["record"]["verdict"]
            .as_str()
            .unwrap()
            .contains("journal holds every event"),
        "{j:#}"
    );
    assert_eq!(j["journal_oldest_held"], 66, "{j:#}");
    let journal_step = j["record"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "journal")
        .unwrap()
        .clone();
    assert!(
        journal_step["detail"].as_str().unwrap().contains("batch 10")
            && journal_step["detail"]
                .as_str()
                .unwrap()
                .contains("oldest position still held is 66"),
        "{journal_step}"
    );
    p.assert_no_scratch_left();
}

#[test]
fn a_drill_of_a_replica_missing_a_file_fails_naming_it() {
    let p = production();
    // The DR copy of the warehouse, one data file lost.
    let replica = p.s.path("replica");
    copy_dir(&p.s.path("prod/warehouse"), &replica.join("warehouse"));
    let metadata = format!(
        "file://{}",
        newest_metadata(&replica.join("warehouse/shop/orders/metadata"))
    );
    let data_dir = replica.join("warehouse/shop/orders/data");
    // The newest data file of production: the last commit wrote it, so the trusted snapshot
    // reads it (the copies' times are the copy's).
    let newest = std::fs::read_dir(p.s.path("prod/warehouse/shop/orders/data"))
        .unwrap()
        .map(|e| e.unwrap())
        .max_by_key(|e| e.metadata().unwrap().modified().unwrap())
        .unwrap()
        .file_name();
    let lost = data_dir.join(newest);
    std::fs::remove_file(&lost).unwrap();
    let prod_warehouse = format!("file://{}", p.s.path_str("prod/warehouse"));
    let map = format!("{prod_warehouse}=file://{}", replica.join("warehouse").display());
    let r =
        p.s.run(&p.drill_without_record(&["--source-metadata", &metadata, "--prefix-map", &map]));
    assert_ne!(r.code, 0, "{}", r.stdout);
    let name = lost.file_name().unwrap().to_str().unwrap();
    assert!(
        r.stderr.contains(name) || r.stdout.contains(name),
        "the missing file is named: {}\n{}",
        r.stderr,
        r.stdout
    );
    p.assert_no_scratch_left();
    // Without --history the drill says it wrote no record.
    let ok =
        p.s.story(&p.journal, &p.catalog, "shop.orders")
            .drill_table("drills", &[]);
    assert!(
        ok.stdout.contains("no --history: no record was written"),
        "{}",
        ok.stdout
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn newest_metadata(dir: &Path) -> String {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(".metadata.json"))
        .collect();
    files.sort();
    files.last().unwrap().display().to_string()
}

/// The drill of a real table on S3, with the table in a REST or S3 Tables catalog: every object
/// of the journal, the route and the table (each version id and ETag, read with boto3) and the
/// catalog's pointer (read with PyIceberg) are as they were, after a drill and after a drill
/// killed half-way and run again; nothing is left under the scratch tables' locations.
fn real_drill_on_s3(
    mut s: Scratch,
    definition: Vec<(String, String)>,
    catalog: &str,
    tool_catalog: &str,
    purpose: &str,
) {
    s.env.extend(definition.clone());
    let Some(py) = crate::support::python::PyIceberg::on_defined(tool_catalog, s.env.clone()) else {
        return;
    };
    let ns = crate::catalogs_remote::ns(purpose);
    let root = format!("s3://tidemark/{ns}");
    let p = Production {
        s,
        journal: format!("{root}/journal"),
        catalog: catalog.into(),
        table: format!("{ns}.orders"),
        route: format!("{root}/route"),
        history: format!("{root}/history"),
        scratch: format!("{ns}_drills"),
    }
    .set_up(&[]);
    let (journal, route, table) = (&p.journal, &p.route, &p.table);
    let production = || {
        py.run("objects", table, &[&format!("{journal}/"), &format!("{route}/")])
            .ok()
            .json()
    };
    let before = production();
    assert!(before["objects"].as_object().unwrap().len() > 20, "{before:#}");
    let drill = |env: &[(&str, &str)]| p.drill_env(env, &[]);
    let gone = |location: &str| {
        let listed = py.run("objects", table, &[location]).ok().json();
        let left: Vec<&String> = listed["objects"]
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(location))
            .collect();
        assert!(left.is_empty(), "scratch files left under {location}: {left:?}");
    };
    let r = drill(&[]).ok().json();
    assert_eq!(r["record"]["ok"], true, "{r:#}");
    assert_eq!(
        (r["record"]["trusted_position"].as_u64(), r["record"]["h"].as_u64()),
        (Some(60), Some(73))
    );
    assert_eq!(r["route"]["generation"], 1);
    gone(r["scratch_location"].as_str().unwrap());
    assert_eq!(production(), before, "production changed");
    // Killed after the replay, then run again: the leftover is named and removed.
    let killed = drill(&[("TIDEMARK_FAILPOINT", "recover:after-replay")]);
    assert_eq!(killed.code, 86, "{}", killed.stderr);
    let again = drill(&[]).ok().json();
    let left = again["leftovers_removed"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{again:#}");
    let leftover_location = left[0]["detail"].as_str().unwrap().split("under ").nth(1).unwrap();
    let leftover_location = leftover_location.split(' ').next().unwrap();
    gone(leftover_location);
    gone(again["scratch_location"].as_str().unwrap());
    assert_eq!(production(), before, "production changed");
    let h =
        p.s.run(&["drill", "history", "--history", &p.history, "--json"])
            .ok()
            .json();
    assert_eq!(h["total"], 2);
}

#[test]
fn a_drill_on_s3_with_a_rest_catalog_changes_nothing() {
    let Some(def) = crate::catalogs_remote::rest_definition() else {
        return;
    };
    let Some(s) = Scratch::on_seaweedfs() else { return };
    real_drill_on_s3(s, def, "sw", "catalog:sw", "real_drill_rest");
}

#[test]
fn a_drill_on_s3_with_s3tables_changes_nothing() {
    if !crate::support::s3_available() {
        return;
    }
    let Some(def) = crate::catalogs_remote::s3tables_definition() else {
        return;
    };
    real_drill_on_s3(Scratch::new(), def, "st", "s3tables:st", "real_drill_st");
}

/// The table pointers of the namespaces `prefix*` in the PostgreSQL catalog `pg`, read with
/// psql, not through tidemark.
fn pg_pointers(prefix: &str) -> BTreeMap<String, String> {
    let uri = std::env::var("TIDEMARK_TEST_PG_URI").unwrap();
    let out = std::process::Command::new("psql")
        .args([
            &uri,
            "-X",
            "-tA",
            "-F",
            "=",
            "-c",
            &format!(
                "SELECT table_namespace || '.' || table_name, metadata_location FROM iceberg_tables \
                 WHERE catalog_name = 'pg' AND table_namespace LIKE '{prefix}%' ORDER BY 1"
            ),
        ])
        .output()
        .expect("psql");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The drill of a real table in a PostgreSQL catalog (sandbox/postgres.sh): the journal, the
/// route and the warehouse's files byte for byte and time for time, and the catalog's rows, as
/// they were, after a drill and after a drill killed half-way and run again.
#[test]
fn a_drill_with_a_postgresql_catalog_changes_nothing() {
    let mut s = Scratch::new();
    let warehouse = s.path_str("prod/warehouse");
    let Some(def) = crate::catalogs_remote::pg_definition(&warehouse) else {
        return;
    };
    s.env.extend(def);
    let ns = crate::catalogs_remote::ns("real_drill_pg");
    let (journal, route, history) = (
        s.path_str("prod/journal"),
        s.path_str("prod/route"),
        s.path_str("drills"),
    );
    let p = Production {
        s,
        journal,
        catalog: "pg".into(),
        table: format!("{ns}.orders"),
        route,
        history,
        scratch: format!("{ns}_drills"),
    }
    .set_up(&[]);
    let state = || {
        (
            tree(Path::new(&p.journal)),
            tree(Path::new(&p.route)),
            tree(Path::new(&warehouse)),
            pg_pointers(&ns),
        )
    };
    let before = state();
    assert_eq!(before.3.len(), 1, "{:?}", before.3);
    let drill = |env: &[(&str, &str)]| p.drill_env(env, &[]);
    let r = drill(&[]).ok().json();
    assert_eq!(r["record"]["ok"], true, "{r:#}");
    assert_eq!(
        (r["record"]["trusted_position"].as_u64(), r["record"]["h"].as_u64()),
        (Some(60), Some(73))
    );
    assert_eq!(state(), before, "production changed, or the scratch table was left");
    let killed = drill(&[("TIDEMARK_FAILPOINT", "recover:after-replay")]);
    assert_eq!(killed.code, 86, "{}", killed.stderr);
    assert_ne!(state(), before, "the killed drill left its scratch table");
    let again = drill(&[]).ok().json();
    assert_eq!(again["leftovers_removed"].as_array().unwrap().len(), 1, "{again:#}");
    assert_eq!(state(), before, "production changed, or a scratch table was left");
}
