//! Schema and partition evolution by another writer (PyIceberg) between tidemark's commits: a
//! dropped column leaves a gap in the field ids, which a recovered table keeps exactly; a spec
//! change leaves old files under spec 0 and new ones under spec 1, and apply and recover work
//! across it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::{assert_same_rows, merge_events};
use super::{Shared, ev};

/// A row PyIceberg appends (the orders columns, with `extra` set when given).
fn row(order: &str, currency: &str, extra: Option<&str>) -> String {
    let mut r = json!({
        "order_id": order, "order_version": 1, "customer_id": format!("c-{order}"), "status": "placed",
        "amount": "3.50", "currency": currency, "is_deleted": false,
        "event_time": "2026-11-02T08:00:00Z", "journal_position": 0,
    });
    if let Some(x) = extra {
        r["extra"] = json!(x);
    }
    format!("{r}\n")
}

/// The parts of PyIceberg's `describe` that make a drop-in replacement: field ids, schema id,
/// last column id, partition spec and sort order with their ids.
const DROP_IN_KEYS: [&str; 10] = [
    "fields",
    "identifier_field_ids",
    "schema_id",
    "last_column_id",
    "partition_spec",
    "spec_id",
    "last_partition_id",
    "sort_order",
    "sort_order_id",
    "format_version",
];

#[test]
fn a_recovered_table_keeps_the_field_ids_of_a_source_with_a_dropped_column() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=3).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    t.apply(&first);
    // PyIceberg adds note (id 10) and extra (id 11), then drops note: the ids have a gap.
    t.py("add-column", &["note"]);
    t.py("add-column", &["extra"]);
    t.py("drop-column", &["note"]);
    let rows = t.s.write("o5.jsonl", &row("o-5", "EUR", Some("kept")));
    t.py("append", &[rows.to_str().unwrap()]);
    t.apply(&ev(4, "o-1", 2, "paid", "EUR"));
    let source = t.py("describe", &[]);
    let extra = source["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "extra");
    assert_eq!(extra.unwrap()["id"], 11, "{source}");

    let r = t.recover("shop.recovered", None);
    assert_eq!(r["validation"]["ok"], true, "{r}");
    let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
    for key in DROP_IN_KEYS {
        assert_eq!(
            source[key], recovered[key],
            "{key}: source {source}\nrecovered {recovered}"
        );
    }
    // PyIceberg reads the recovered table by field id: the same rows, extra included.
    let found = t.py.read("shop.recovered");
    assert_same_rows(&found, &t.py.read("shop.orders"));
    let o5 = found.iter().find(|r| r["order_id"] == "o-5").unwrap();
    assert_eq!(o5["extra"], "kept", "{o5}");
}

#[test]
fn apply_and_recover_work_across_a_partition_spec_change_by_another_writer() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=4)
        .map(|i| {
            ev(
                i,
                &format!("o-{i}"),
                1,
                "placed",
                if i % 2 == 0 { "USD" } else { "EUR" },
            )
        })
        .collect();
    t.apply(&first);
    // PyIceberg partitions the table by currency (spec 1) and appends under it; tidemark's
    // files stay under spec 0.
    let spec = t.py("add-partition", &["currency:identity"]);
    assert_eq!(spec["spec_id"], 1, "{spec}");
    let rows =
        t.s.write("new.jsonl", &(row("o-7", "GBP", None) + &row("o-8", "EUR", None)));
    t.py("append", &[rows.to_str().unwrap()]);
    let mut state = BTreeMap::new();
    for r in t.py.read("shop.orders") {
        state.insert(r["order_id"].as_str().unwrap().to_string(), r);
    }

    // Updates of a key in a spec-0 file and of one in a spec-1 file, and a new key.
    let batch = ev(5, "o-1", 2, "paid", "EUR") + &ev(6, "o-8", 2, "paid", "CHF") + &ev(7, "o-9", 1, "placed", "USD");
    t.apply(&batch);
    merge_events(&mut state, &batch);
    let want: Vec<Value> = state.into_values().collect();
    let found = t.py.read("shop.orders");
    assert_same_rows(&found, &want);
    assert_eq!(t.last_summary()["total-records"], want.len().to_string());

    // Recovery from the newest checkpoint (files of both specs): the recovered table has the
    // source's current spec and the same rows.
    let r = t.recover("shop.recovered", None);
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &found);
    let source = t.py("describe", &[]);
    let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
    for key in ["fields", "partition_spec", "last_partition_id", "sort_order"] {
        assert_eq!(source[key], recovered[key], "{key}");
    }
    assert_eq!(recovered["partition_spec"][0]["transform"], "identity", "{recovered}");
}
