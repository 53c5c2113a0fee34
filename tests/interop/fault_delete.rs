//! `fault delete` on a table another writer (PyIceberg, through its own commit path) reshapes
//! between tidemark's commits: an added column, a rename of a spec column (a fault while it is
//! renamed; renamed back before tidemark's next apply, which maps the journal's columns by their
//! current names), a dropped column (a gap in the field ids);
//! a partition spec change with files and position deletes under both specs. Each step is
//! checked row by row against PyIceberg's reading of the table, and the recovery from the
//! snapshot before the faults brings every faulted row back.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::super::assert_same_rows;
use super::{Shared, by_key, ev, merge_reshaped, values};

/// A row PyIceberg appends, in the table's current column names (`status_as`: the name of
/// field 4 now; `extra`: more columns).
fn row(order: &str, currency: &str, status_as: &str, extra: &[(&str, &str)]) -> String {
    let mut r = json!({
        "order_id": order, "order_version": 1, "customer_id": format!("c-{order}"),
        "amount": "7.50", "currency": currency, "is_deleted": false,
        "event_time": "2026-11-02T08:00:00.000000Z", "journal_position": 0,
    });
    r[status_as] = json!("placed");
    for (k, v) in extra {
        r[*k] = json!(v);
    }
    format!("{r}\n")
}

#[test]
fn fault_delete_across_a_schema_change_by_another_writer() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=6)
        .map(|i| ev(i, &format!("o-{i}"), 1, &format!("st-{i}"), "EUR"))
        .collect();
    t.apply(&first);

    // PyIceberg adds note and appends a row with one; tidemark updates o-1 (rewriting the first
    // file, note carried as null): the snapshot the recovery starts from.
    t.py("add-column", &["note"]);
    let rows = t.s.write("o7.jsonl", &row("o-7", "USD", "status", &[("note", "gift")]));
    t.py("append", &[rows.to_str().unwrap()]);
    let mut state = by_key(t.py.read("shop.orders"));
    assert_eq!(state["o-7"]["note"], "gift");
    let batch = ev(7, "o-1", 2, "paid", "EUR");
    t.apply(&batch);
    merge_reshaped(&mut state, &batch, &[], &["note"]);
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
    let before_faults = t.current_snapshot();
    let at_before = state.clone();

    // PyIceberg renames status (field 4) to state; the bad write selects by the renamed and the
    // added column: o-3 in tidemark's file, o-7 in PyIceberg's.
    t.py("rename", &["status", "state"]);
    let renamed = |state: &BTreeMap<String, Value>, from: &str, to: &str| -> BTreeMap<String, Value> {
        state
            .iter()
            .map(|(k, r)| {
                let mut r = r.clone();
                let o = r.as_object_mut().unwrap();
                let v = o.remove(from).unwrap();
                o.insert(to.into(), v);
                (k.clone(), r)
            })
            .collect()
    };
    let r = t
        .fault_delete(&["--where", "state = 'st-3' OR note = 'gift'", "--json"])
        .ok()
        .json();
    assert_eq!(r["rows_deleted"], 2, "{r}");
    state.remove("o-3");
    state.remove("o-7");
    assert_same_rows(&t.py.read("shop.orders"), &values(&renamed(&state, "status", "state")));

    // A rename back, note dropped (its id is not reused: a gap), extra added; a second fault by
    // the new column's absence and the key, then tidemark's next apply (extra carried as null).
    t.py("rename", &["state", "status"]);
    t.py("drop-column", &["note"]);
    t.py("add-column", &["extra"]);
    for r in state.values_mut() {
        let o = r.as_object_mut().unwrap();
        o.remove("note");
        o.insert("extra".into(), Value::Null);
    }
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
    t.s.fault_delete(&t.catalog, "shop.orders", "extra IS NULL AND customer_id = 'c-o-5'");
    state.remove("o-5");
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
    let batch = ev(8, "o-2", 2, "shipped", "EUR") + &ev(9, "o-8", 1, "placed", "CHF");
    t.apply(&batch);
    merge_reshaped(&mut state, &batch, &[], &["extra"]);
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));

    // Recovery from the snapshot before the faults: its schema (note, no extra), every faulted
    // row back, the journal after it replayed.
    let r = t.recover("shop.recovered", Some(before_faults));
    assert_eq!(r["validation"]["ok"], true, "{r}");
    let mut want = at_before;
    merge_reshaped(&mut want, &batch, &[], &["note"]);
    assert_same_rows(&t.py.read("shop.recovered"), &values(&want));
}

#[test]
fn fault_delete_across_a_partition_spec_change_by_another_writer() {
    let Some(mut t) = Shared::new() else { return };
    let currency = |i: u64| if i.is_multiple_of(2) { "USD" } else { "EUR" };
    let first: String = (1..=6)
        .map(|i| ev(i, &format!("o-{i}"), 1, "placed", currency(i)))
        .collect();
    t.apply(&first);

    // PyIceberg partitions by currency (spec 1) and appends three rows under it, then deletes
    // o-2 (a spec-0 file) and o-8 (the spec-1 EUR file) by position: one delete file per data
    // file, each with its file's spec and partition.
    let spec = t.py("add-partition", &["currency:identity"]);
    assert_eq!(spec["spec_id"], 1, "{spec}");
    let rows = t.s.write(
        "new.jsonl",
        &(row("o-7", "GBP", "status", &[]) + &row("o-8", "EUR", "status", &[]) + &row("o-9", "EUR", "status", &[])),
    );
    t.py("append", &[rows.to_str().unwrap()]);
    let del = t.py("position-delete", &["o-2", "o-8"]);
    assert_eq!(del["delete_files"].as_array().map(Vec::len), Some(2), "{del}");
    let mut state = by_key(t.py.read("shop.orders"));
    assert_eq!(
        state.keys().map(String::as_str).collect::<Vec<_>>(),
        ["o-1", "o-3", "o-4", "o-5", "o-6", "o-7", "o-9"]
    );
    let with_deletes = t.current_snapshot();
    let at_deletes = state.clone();

    // The bad write hits both specs: o-3 beside the position-deleted o-2 (spec 0), o-9 beside
    // the position-deleted o-8 (spec 1). Neither deleted row comes back; both delete files are
    // spent (their files rewritten) and dropped.
    let r = t
        .fault_delete(&["--where", "order_id IN ('o-3', 'o-9')", "--json"])
        .ok()
        .json();
    assert_eq!(
        (r["rows_deleted"].as_u64(), r["files_rewritten"].as_u64()),
        (Some(2), Some(2)),
        "{r}"
    );
    state.remove("o-3");
    state.remove("o-9");
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
    let summary = t.last_summary();
    assert_eq!(summary["total-delete-files"], "0", "{summary}");
    assert_eq!(summary["total-records"], state.len().to_string(), "{summary}");

    // A fault by partition column after the change, then tidemark's next apply: an update that
    // moves o-1 to another partition, one within a partition, a new key.
    t.s.fault_delete(&t.catalog, "shop.orders", "currency = 'GBP'");
    state.remove("o-7");
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
    let batch = ev(7, "o-1", 2, "paid", "CHF") + &ev(8, "o-4", 2, "paid", "USD") + &ev(9, "o-10", 1, "placed", "EUR");
    t.apply(&batch);
    merge_reshaped(&mut state, &batch, &[], &[]);
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));

    // Recovery from the snapshot with both specs' position deletes: the deleted rows stay
    // deleted, the faulted rows are back, the journal after it is replayed, partitioned as the
    // source.
    let r = t.recover("shop.recovered", Some(with_deletes));
    assert_eq!(r["validation"]["ok"], true, "{r}");
    let mut want = at_deletes;
    merge_reshaped(&mut want, &batch, &[], &[]);
    assert_same_rows(&t.py.read("shop.recovered"), &values(&want));
    let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
    assert_eq!(recovered["partition_spec"][0]["transform"], "identity", "{recovered}");
}
