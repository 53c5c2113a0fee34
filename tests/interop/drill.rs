//! The drill of a real table (issue 32) on a table PyIceberg also writes: its neutral commits
//! between tidemark's leave the drill passing from the newest applier commit, its delete makes
//! the drill fail with a divergence (exit 12) while still rehearsing from the snapshot before it,
//! and PyIceberg reads the production table the same before and after every drill.

use serde_json::Value;

use super::{Shared, ev};

impl Shared {
    /// `tidemark drill --source-table TABLE --scratch drills --json`.
    fn drill(&self) -> (i32, Value) {
        let r = self.story().drill_table("drills", &["--json"]);
        assert!(r.code == 0 || r.code == 12, "drill failed: {}\n{}", r.stderr, r.stdout);
        (r.code, r.json())
    }
}

#[test]
fn the_drill_rehearses_a_table_pyiceberg_also_writes() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=8).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    t.apply(&first);
    t.py("rewrite-same", &[]);
    t.apply(&ev(9, "o-1", 2, "paid", "EUR"));
    t.py("set-property", &["owner", "orders-team"]);
    let before = t.py.read("shop.orders");
    let snapshots = t.py.snapshots("shop.orders");

    let (code, d) = t.drill();
    assert_eq!(code, 0, "{d:#}");
    assert_eq!(d["record"]["trusted_position"], 9, "{d:#}");
    assert_eq!(d["record"]["rows"], 8);
    assert_eq!(t.py.read("shop.orders"), before, "PyIceberg reads production as it was");
    assert_eq!(t.py.snapshots("shop.orders"), snapshots, "no commit on production");

    // PyIceberg deletes rows outside the journal: the drill names the divergence and rehearses
    // from the snapshot before it.
    t.py("delete", &["o-3"]);
    let after_delete = t.py.read("shop.orders");
    let (code, d) = t.drill();
    assert_eq!(code, 12, "{d:#}");
    let audit = d["record"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"].as_str().unwrap().contains("history"))
        .unwrap()
        .clone();
    assert_eq!(audit["ok"], false, "{audit}");
    assert!(audit["detail"].as_str().unwrap().contains("o-3"), "{audit}");
    assert_eq!(d["record"]["trusted_position"], 9);
    assert_eq!(d["record"]["rows"], 8, "the rehearsal recovered the deleted row too");
    assert_eq!(t.py.read("shop.orders"), after_delete);
}
