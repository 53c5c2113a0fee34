//! Tables that another engine also writes (issue 11): PyIceberg (sandbox/pyiceberg.sh) deletes
//! rows with merge-on-read delete files, renames columns, adds columns, appends rows, and tidemark
//! applies, faults and recovers between its commits. Every check reads the table back through
//! PyIceberg, row by row, against the merge rules computed here independently.

use std::collections::BTreeMap;

use serde_json::{Value, json};

mod audit;
mod defects;
mod drill;
mod equality;
mod evolution;
mod fault_delete;
mod manifests;
mod places;
mod renames;
mod rest;
mod transforms;

use super::support::python::PyIceberg;
use super::support::*;
use super::{assert_same_rows, merge_events, merge_reshaped};

/// An orders event with the columns that tell a swap apart (status and currency differ).
fn ev(position: u64, order: &str, version: i64, status: &str, currency: &str) -> String {
    json!({
        "position": position,
        "order_id": order,
        "order_version": version,
        "customer_id": format!("c-{order}"),
        "status": status,
        "amount": format!("{version}.25"),
        "currency": currency,
        "is_deleted": false,
        "event_time": "2026-11-01T10:00:00.000000Z",
    })
    .to_string()
        + "\n"
}

/// Rows by order_id (as PyIceberg reads them).
fn by_key(rows: Vec<Value>) -> BTreeMap<String, Value> {
    rows.into_iter()
        .map(|r| (r["order_id"].as_str().unwrap().to_string(), r))
        .collect()
}

/// The rows of `state`, in key order.
fn values(state: &BTreeMap<String, Value>) -> Vec<Value> {
    state.values().cloned().collect()
}

/// One table, one journal, one catalog in a scratch folder, and PyIceberg on that catalog. The
/// embedded default ([`Shared::new`]: shop.orders in a SQLite catalog and a warehouse in the
/// scratch), or another place ([`Shared::at`], `places.rs`).
struct Shared {
    s: Scratch,
    py: PyIceberg,
    journal: String,
    /// The `--catalog` argument.
    catalog: String,
    /// The table's namespace: `shop`, or one of this run on a catalog the runs share.
    ns: String,
    /// `namespace.orders`.
    table: String,
    events: String,
}

impl Shared {
    /// o-1..o-3 applied; then the other writer adds the column `note`, sets the table
    /// properties `props`, and appends the row o-5 (version 1) with a note, "gift wrap".
    fn noted_row_o5(&mut self, props: &[(&str, &str)]) {
        let first: String = (1..=3).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
        self.apply(&first);
        self.py("add-column", &["note"]);
        for (k, v) in props {
            self.py("set-property", &[k, v]);
        }
        let row = json!({
            "order_id": "o-5", "order_version": 1, "customer_id": "c-o-5", "status": "placed", "amount": "5.00",
            "currency": "EUR", "is_deleted": false, "event_time": "2026-11-01T10:00:00Z", "journal_position": 0,
            "note": "gift wrap",
        });
        let rows = self.s.write("o5.jsonl", &format!("{row}\n"));
        self.py("append", &[rows.to_str().unwrap()]);
    }

    fn new() -> Option<Shared> {
        let s = Scratch::new();
        let py = PyIceberg::new(&s.path("catalog.db"), &s.path("warehouse"))?;
        let journal = s.path_str("journal");
        let catalog = s.path_str("catalog.db");
        Some(Shared::open(s, py, journal, catalog, "shop".into()))
    }

    /// A journal created at `journal`, and no table yet (the first apply creates `ns`.orders).
    fn open(s: Scratch, py: PyIceberg, journal: String, catalog: String, ns: String) -> Shared {
        s.run(&["journal", "init", "--journal", &journal]).ok();
        Shared {
            s,
            py,
            journal,
            catalog,
            table: format!("{ns}.orders"),
            ns,
            events: String::new(),
        }
    }

    /// Another table of the same namespace (`recovered` is `ns.recovered`).
    fn ident(&self, name: &str) -> String {
        format!("{}.{name}", self.ns)
    }

    /// Appends events to the journal and applies everything to the table.
    fn apply(&mut self, ndjson: &str) -> Value {
        self.apply_with(ndjson, &[])
    }

    /// [`Shared::apply`] with more `tidemark apply` options.
    fn apply_with(&mut self, ndjson: &str, extra: &[&str]) -> Value {
        self.journal_events(ndjson);
        let mut args = extra.to_vec();
        // These stories mix other writers' rows with tidemark's on purpose: the applier accepts
        // them (`--on-divergence continue`, recorded in its commit); `audit.rs` tests the stop.
        if !extra.contains(&"--on-divergence") {
            args.extend([
                "--on-divergence",
                "continue",
                "--reason",
                "interop: another engine writes this table too",
            ]);
        }
        self.run_apply(&args).ok().json()
    }

    /// Appends `ndjson` to the journal (and to the events the expected state is folded from).
    fn journal_events(&mut self, ndjson: &str) {
        let n = self.events.lines().count();
        let input = self.s.write(&format!("events-{n}.ndjson"), ndjson);
        self.s.append(&self.journal, input.to_str().unwrap());
        self.events.push_str(ndjson);
    }

    /// `tidemark apply --json` of what the journal holds into the table, with `extra` options.
    fn run_apply(&self, extra: &[&str]) -> Run {
        self.story().run("apply", &[&["--json"], extra].concat())
    }

    /// The scenario of this journal, catalog and table ([`Story`]).
    fn story(&self) -> Story<'_> {
        self.s.story(&self.journal, &self.catalog, &self.table)
    }

    /// `tidemark fault delete --catalog C --table T EXTRA…`, unchecked.
    fn fault_delete(&self, extra: &[&str]) -> Run {
        self.story().run_on_table(&["fault", "delete"], extra)
    }

    /// The journal's state by the merge rules, without the keys `gone`.
    fn expected(&self, gone: &[&str]) -> Vec<Value> {
        let mut state = BTreeMap::new();
        merge_events(&mut state, &self.events);
        state.retain(|k, _| !gone.contains(&k.as_str()));
        state.into_values().collect()
    }

    fn py(&self, command: &str, extra: &[&str]) -> Value {
        self.py.run(command, &self.table, extra).ok().json()
    }

    fn current_snapshot(&self) -> i64 {
        let snaps = self.py.snapshots(&self.table);
        snaps.last().unwrap()["snapshot_id"].as_i64().unwrap()
    }

    fn last_summary(&self) -> Value {
        self.py.snapshots(&self.table).last().unwrap()["summary"].clone()
    }

    /// `tidemark recover` of the table (at `snapshot`, or its newest checkpoint) into `into`.
    fn recover(&self, into: &str, snapshot: Option<i64>) -> Value {
        let id = snapshot.map(|s| s.to_string());
        let mut args = vec!["--json"];
        if let Some(id) = &id {
            // A snapshot these stories name may hold another engine's writes (a divergence the
            // applier had not accepted yet): recovered from as chosen.
            args.extend([
                "--snapshot-id",
                id,
                "--accept-divergence",
                "interop: the snapshot holds another engine's writes",
            ]);
        }
        self.story().recover(into, &args).ok().json()
    }
}

#[test]
fn rows_another_engine_deleted_by_merge_on_read_stay_deleted() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=8).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    t.apply(&first);

    // Another engine deletes o-2 and o-3 with a position delete file.
    let del = t.py("position-delete", &["o-2", "o-3"]);
    assert_eq!(del["rows"], 2, "{del}");
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-2", "o-3"]));

    // An update of o-1 rewrites the one data file, which also holds o-2 and o-3.
    t.apply(&ev(9, "o-1", 2, "paid", "EUR"));
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-2", "o-3"]));
    let summary = t.last_summary();
    assert_eq!(
        summary["total-delete-files"], "0",
        "spent delete files are dropped: {summary}"
    );
    assert_eq!(summary["total-records"], "6", "{summary}");

    // fault delete of o-5, whose neighbour o-6 another engine has just deleted by position.
    t.py("position-delete", &["o-6"]);
    let with_deletes = t.current_snapshot();
    t.s.fault_delete(&t.catalog, "shop.orders", "order_id = 'o-5'");
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-2", "o-3", "o-5", "o-6"]));

    // An equality delete of o-7 (PyIceberg cannot read those), then an update that rewrites the
    // file: o-7 must not come back in a file newer than the delete, and the spent delete is
    // dropped, so PyIceberg can read the table again.
    t.py("equality-delete", &["o-7"]);
    t.apply(&ev(10, "o-1", 3, "shipped", "EUR"));
    assert_same_rows(
        &t.py.read("shop.orders"),
        &t.expected(&["o-2", "o-3", "o-5", "o-6", "o-7"]),
    );
    assert_eq!(t.last_summary()["total-delete-files"], "0");

    // Recovery from the snapshot that still had position deletes: the deleted rows stay
    // deleted, the journal after the snapshot's position (9) is replayed, validation passes.
    let r = t.recover("shop.recovered", Some(with_deletes));
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &t.expected(&["o-2", "o-3", "o-6"]));
}

#[test]
fn columns_are_matched_by_field_id_after_renames() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=4)
        .map(|i| ev(i, &format!("o-{i}"), 1, &format!("st-{i}"), &format!("cur-{i}")))
        .collect();
    t.apply(&first);

    // Another writer swaps the names of status and currency: each column keeps its field id
    // (and its values); the names now say the other thing.
    t.py("rename", &["status", "tmp"]);
    t.py("rename", &["currency", "status"]);
    t.py("rename", &["tmp", "currency"]);
    let swap = |mut rows: Vec<Value>| {
        for r in &mut rows {
            let (s, c) = (r["status"].clone(), r["currency"].clone());
            r["status"] = c;
            r["currency"] = s;
        }
        rows
    };
    let before = t.py.read("shop.orders");
    assert_same_rows(&before, &swap(t.expected(&[])));

    // A tidemark commit that rewrites the file keeps every kept row's values in their columns.
    t.apply(&ev(5, "o-1", 2, "paid", "USD"));
    let mut want = swap(t.expected(&["o-1"]));
    let mut state = BTreeMap::new();
    merge_events(&mut state, &ev(5, "o-1", 2, "paid", "USD"));
    want.extend(state.into_values());
    want.sort_by(|a, b| a["order_id"].as_str().cmp(&b["order_id"].as_str()));
    assert_same_rows(&t.py.read("shop.orders"), &want);

    // A rename and a rename back, with a file written in between under the other name.
    t.py("rename", &["customer_id", "cust"]);
    let row = json!({
        "order_id": "o-9", "order_version": 1, "cust": "c-o-9", "status": "EUR", "amount": "9.00",
        "currency": "placed", "is_deleted": false, "event_time": "2026-11-01T10:00:00Z", "journal_position": 0,
    });
    let rows = t.s.write("o9.jsonl", &format!("{row}\n"));
    t.py("append", &[rows.to_str().unwrap()]);
    t.py("rename", &["cust", "customer_id"]);
    let reread = t.py.read("shop.orders");
    assert_eq!(reread.len(), 5);
    assert_eq!(reread[4]["customer_id"], "c-o-9", "{:?}", reread[4]);
    // tidemark reads PyIceberg's file by field id: an update of o-9 and a recovery both work.
    t.apply(&ev(6, "o-9", 2, "paid", "USD"));
    let after = t.py.read("shop.orders");
    assert_eq!(after[4]["order_version"], 2, "{:?}", after[4]);
    assert_eq!(after[4]["customer_id"], "c-o-9");
    assert_same_rows(&after[..4], &reread[..4]);
    let r = t.recover("shop.recovered", None);
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &after);
}

#[test]
fn a_column_another_writer_added_is_carried_and_recovered() {
    let Some(mut t) = Shared::new() else { return };
    t.noted_row_o5(&[("owner", "team-orders")]);

    // The journal updates o-5 (its note is carried forward) and inserts o-6 (note null).
    t.apply(&(ev(4, "o-5", 2, "paid", "EUR") + &ev(5, "o-6", 1, "placed", "EUR")));
    let found = t.py.read("shop.orders");
    let mut want = t.expected(&[]);
    for r in &mut want {
        r["note"] = if r["order_id"] == "o-5" {
            json!("gift wrap")
        } else {
            Value::Null
        };
    }
    assert_same_rows(&found, &want);

    // The recovered table is a drop-in replacement: the same columns (note included), sort
    // order, partition spec and properties, and the same rows; validation covers note.
    let r = t.recover("shop.recovered", None);
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &found);
    let source = t.py("describe", &[]);
    let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
    for key in [
        "fields",
        "identifier_field_ids",
        "partition_spec",
        "sort_order",
        "format_version",
    ] {
        assert_eq!(source[key], recovered[key], "{key}");
    }
    assert_eq!(recovered["properties"]["owner"], "team-orders", "{recovered}");
    assert!(
        recovered["properties"]["tidemark.recovery-id"].is_string(),
        "{recovered}"
    );
}

#[test]
fn a_partitioned_table_is_applied_per_partition_and_recovered_partitioned() {
    let Some(mut t) = Shared::new() else { return };
    // PyIceberg creates the table partitioned by currency and writes two partitions.
    let rows: String = [("o-1", "EUR"), ("o-2", "USD"), ("o-3", "EUR")]
        .iter()
        .map(|(k, c)| {
            let row = json!({
                "order_id": k, "order_version": 1, "customer_id": format!("c-{k}"), "status": "placed",
                "amount": "1.25", "currency": c, "is_deleted": false,
                "event_time": "2026-11-01T10:00:00.000000Z", "journal_position": 0,
            });
            format!("{row}\n")
        })
        .collect();
    let rows = t.s.write("rows.jsonl", &rows);
    t.py.run(
        "create-and-write",
        "shop.orders",
        &[rows.to_str().unwrap(), "currency:identity"],
    )
    .ok();
    let mut prior = BTreeMap::new();
    for r in t.py.read("shop.orders") {
        prior.insert(r["order_id"].as_str().unwrap().to_string(), r);
    }
    // An update within a partition, one that moves o-3 to another partition, a new key in a
    // third partition.
    t.apply(&(ev(1, "o-1", 2, "paid", "EUR") + &ev(2, "o-3", 2, "paid", "GBP") + &ev(3, "o-4", 1, "placed", "CHF")));
    let mut state = prior;
    merge_events(&mut state, &t.events);
    let want: Vec<Value> = state.into_values().collect();
    let found = t.py.read("shop.orders");
    assert_same_rows(&found, &want);
    let summary = t.last_summary();
    assert_eq!(summary["total-records"], "4", "{summary}");

    // The recovered table is partitioned as its source, with the same rows.
    let r = t.recover("shop.recovered", None);
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &found);
    let source = t.py("describe", &[]);
    let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
    assert_eq!(source["partition_spec"], recovered["partition_spec"]);
    assert_eq!(recovered["partition_spec"][0]["transform"], "identity", "{recovered}");
}

#[test]
fn merge_on_read_applies_read_by_pyiceberg_compacted_and_recovered() {
    let Some(mut t) = Shared::new() else { return };
    let mor = ["--merge-mode", "merge-on-read", "--compact-at", "0"];
    let first: String = (1..=8).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    t.apply_with(&first, &mor);
    // Updates and a tombstone: new files plus tidemark's position deletes, no file rewritten.
    let mut second = ev(9, "o-1", 2, "paid", "EUR") + &ev(10, "o-4", 2, "paid", "USD");
    second.push_str(
        &(json!({"position": 11, "order_id": "o-6", "order_version": 2, "customer_id": "c-o-6",
            "status": "cancelled", "amount": "2.25", "currency": "EUR", "is_deleted": true,
            "event_time": "2026-11-01T10:00:00.000000Z"})
        .to_string()
            + "\n"),
    );
    let r = t.apply_with(&second, &mor);
    assert_eq!(r["merge_mode"], "merge-on-read", "{r}");
    assert_eq!(r["writes"]["position_deletes_written"], 3, "{r}");
    let summary = t.last_summary();
    assert_eq!(summary["deleted-data-files"], "0", "{summary}");
    assert_eq!(summary["total-position-deletes"], "3", "{summary}");
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&[]));
    let with_deletes = t.current_snapshot();

    // Another engine's position delete beside tidemark's, then more merge-on-read.
    t.py("position-delete", &["o-2"]);
    t.apply_with(&ev(12, "o-3", 2, "paid", "EUR"), &mor);
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-2"]));

    // Compaction: every delete file dropped, the same rows for PyIceberg.
    let c =
        t.s.run(&[
            "table",
            "compact",
            "--catalog",
            &t.catalog,
            "--table",
            "shop.orders",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(c["delete_files_after"], 0, "{c}");
    assert_eq!(t.last_summary()["total-delete-files"], "0");
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-2"]));

    // Recovery from the merge-on-read snapshot validates; PyIceberg reads the result.
    let r = t.recover("shop.recovered", Some(with_deletes));
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &t.expected(&[]));
}
