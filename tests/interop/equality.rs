//! Equality deletes another writer commits (the tool's pyarrow file in a delete manifest of its
//! own, through PyIceberg's snapshot producer and catalog commit) while they still apply, under
//! `apply`, `fault delete` and `recover`. PyIceberg 0.12's scan refuses a table with equality
//! deletes, so these tables are read by the tool's own reader (`read-raw`: PyIceberg's manifest
//! reader, pyarrow, and the delete rules applied by the tool), itself checked against PyIceberg's
//! scan wherever that can read, and compared with the expected rows computed here.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::assert_same_rows;
use super::{Shared, by_key, ev, merge_reshaped, values};

/// The live files of `table` of one content kind (`live-files`).
fn live(t: &Shared, table: &str, content: &str) -> Vec<Value> {
    let files = t.py.run("live-files", table, &[]).ok().json();
    files
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["content"] == content)
        .cloned()
        .collect()
}

#[test]
fn equality_deletes_of_another_writer_hold_under_apply_fault_delete_and_recover() {
    let Some(mut t) = Shared::new() else { return };
    // Two data files: o-1..o-4, then o-5..o-8 (new keys only: a file of their own).
    let first: String = (1..=4).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    let second: String = (5..=8).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "USD")).collect();
    t.apply(&first);
    t.apply(&second);
    let mut state = BTreeMap::new();
    merge_reshaped(&mut state, &(first.clone() + &second), &[], &[]);
    // The tool's reader agrees with PyIceberg's scan where PyIceberg can read.
    assert_same_rows(&t.py.read_raw("shop.orders"), &t.py.read("shop.orders"));
    assert_same_rows(&t.py.read_raw("shop.orders"), &values(&state));

    // Another writer deletes o-2 and o-6 (one in each file) by equality on order_id.
    t.py("equality-delete", &["o-2", "o-6"]);
    let refused = t.py.run("read", "shop.orders", &[]);
    assert_ne!(
        refused.code, 0,
        "PyIceberg 0.12 reads equality deletes now: {refused:?}"
    );
    state.remove("o-2");
    state.remove("o-6");
    assert_same_rows(&t.py.read_raw("shop.orders"), &values(&state));
    let with_deletes = t.current_snapshot();
    let at_deletes = state.clone();

    // fault delete of o-3 rewrites the first file; the delete still applies to the second
    // (o-6 stays deleted) and is kept; tidemark's summary counts it.
    let r = t.fault_delete(&["--where", "order_id = 'o-3'", "--json"]).ok().json();
    assert_eq!(
        (r["rows_deleted"].as_u64(), r["files_rewritten"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    state.remove("o-3");
    assert_same_rows(&t.py.read_raw("shop.orders"), &values(&state));
    let eq = live(&t, "shop.orders", "equality-deletes");
    assert_eq!(eq.len(), 1, "the delete still applies to the second file: {eq:?}");
    let summary = t.last_summary();
    assert_eq!(summary["total-equality-deletes"], "2", "{summary}");
    assert_eq!(summary["total-records"], "6", "records in data files: {summary}");
    let files = t.py.run("live-files", "shop.orders", &[]).ok().json();
    let size: u64 = files
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["size"].as_u64().unwrap())
        .sum();
    assert_eq!(
        summary["total-files-size"],
        size.to_string(),
        "delete files counted: {summary}"
    );

    // apply: o-6 comes back as a new version (a file newer than the delete), o-5 is updated
    // (its file, still under the delete, is rewritten), o-9 is new.
    let batch = ev(9, "o-6", 2, "paid", "USD") + &ev(10, "o-5", 2, "paid", "USD") + &ev(11, "o-9", 1, "placed", "EUR");
    t.apply(&batch);
    merge_reshaped(&mut state, &batch, &[], &[]);
    assert_same_rows(&t.py.read_raw("shop.orders"), &values(&state));
    // Every file older than the delete is gone now: it is dropped, PyIceberg reads again.
    assert_eq!(live(&t, "shop.orders", "equality-deletes"), Vec::<Value>::new());
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));

    // Recovery from the snapshot with the live equality delete: o-2 and o-6 as the snapshot had
    // them (deleted), o-3 back (the fault is not in the journal), the journal after it replayed.
    let r = t.recover("shop.recovered", Some(with_deletes));
    assert_eq!(r["validation"]["ok"], true, "{r}");
    let mut want = at_deletes;
    merge_reshaped(&mut want, &batch, &[], &[]);
    assert_eq!(
        want.keys().map(String::as_str).collect::<Vec<_>>(),
        ["o-1", "o-3", "o-4", "o-5", "o-6", "o-7", "o-8", "o-9"]
    );
    let found = t.py.read_raw("shop.recovered");
    assert_same_rows(&found, &values(&want));
    assert_eq!(
        by_key(found)["o-6"]["order_version"],
        2,
        "o-6 is the journal's new version"
    );
}
