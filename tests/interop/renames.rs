//! A spec column another writer renamed (PyIceberg's `rename_column`, a schema commit between
//! tidemark's): the journal still names it `status`; tidemark finds the field id `status` had
//! in the table's schema history and reads and writes that field under its new name `state`.
//! apply, fault delete and recover (from a snapshot of the renamed schema, replaying events
//! after it) are checked row by row against PyIceberg's reading.

use super::super::assert_same_rows;
use super::{Shared, by_key, ev, merge_reshaped, values};

#[test]
fn a_spec_column_another_writer_renamed_is_written_by_its_field_id() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=4)
        .map(|i| ev(i, &format!("o-{i}"), 1, &format!("st-{i}"), "EUR"))
        .collect();
    t.apply(&first);
    t.py("rename", &["status", "state"]);
    let mut state = by_key(t.py.read("shop.orders"));
    assert_eq!(state["o-1"]["state"], "st-1", "{:?}", state["o-1"]);

    // An update that rewrites the file and a new key: the journal's status goes into state.
    let a = ev(5, "o-1", 2, "paid", "EUR") + &ev(6, "o-5", 1, "placed", "USD");
    t.apply(&a);
    merge_reshaped(&mut state, &a, &[("status", "state")], &[]);
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
    let renamed_snapshot = t.current_snapshot();
    let described = t.py("describe", &[]);
    assert!(
        described["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == 4 && f["name"] == "state"),
        "{described}"
    );

    let b = ev(7, "o-2", 2, "shipped", "EUR") + &ev(8, "o-6", 1, "placed", "EUR");
    t.apply(&b);
    merge_reshaped(&mut state, &b, &[("status", "state")], &[]);
    let after_b = t.py.read("shop.orders");
    assert_same_rows(&after_b, &values(&state));

    // A recovery from the snapshot of the renamed schema replays b into the recovered table
    // (which has the source's schema: state, field id 4) and validates it.
    let r = t.recover("shop.recovered", Some(renamed_snapshot));
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_same_rows(&t.py.read("shop.recovered"), &after_b);
    let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
    assert_eq!(recovered["fields"], described["fields"]);

    // fault delete works on the renamed table as before.
    t.s.fault_delete(&t.catalog, "shop.orders", "order_id = 'o-3'");
    state.remove("o-3");
    assert_same_rows(&t.py.read("shop.orders"), &values(&state));
}
