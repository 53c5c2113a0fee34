//! The audit on a table PyIceberg also writes (issue 30): every kind of foreign commit classified
//! right — a same-rows rewrite, a column added and filled outside the spec, a property, a tag and
//! an expiry are neutral (or make no snapshot); PyIceberg's copy-on-write delete, a merge-on-read
//! position delete, an equality delete, an appended key and a changed row are divergences with
//! their counts and keys — the applier stops at a divergence (exit 12) and goes on once the
//! operator accepts it; an applier of another engine that follows the documented protocol is
//! audited as one; and the default recovery after a bad delete equals the whole journal's fold.
//! Each scenario runs on the embedded default and, in `on_s3`, `on_rest` and `on_s3tables`, on a
//! SQLite catalog over an S3 warehouse, SeaweedFS's REST catalog and moto's S3 Tables
//! (`places.rs`).

use serde_json::{Value, json};

use super::super::assert_same_rows;
use super::places::Place;
use super::{Shared, ev};

/// Runs `scenario` on the table at `place` (nothing when that place is skipped).
fn on(place: Place, purpose: &str, scenario: fn(Shared)) {
    if let Some(t) = Shared::at(place, purpose) {
        scenario(t);
    }
}

#[test]
fn every_kind_of_foreign_commit_is_classified() {
    on(Place::Local, "", classify_every_kind);
}

#[test]
fn another_engines_applier_that_follows_the_protocol_is_audited_as_one() {
    on(Place::Local, "", audit_another_applier);
}

#[test]
fn the_default_recovery_after_a_bad_delete_equals_the_whole_journal() {
    on(Place::Local, "", recover_after_a_bad_delete);
}

/// The scenarios on a remote place, as tests of the module `$module`.
macro_rules! on_place {
    ($module:ident, $place:expr) => {
        mod $module {
            use super::*;

            #[test]
            fn every_kind_of_foreign_commit_is_classified() {
                on($place, "audit_kinds", classify_every_kind);
            }

            #[test]
            fn another_engines_applier_that_follows_the_protocol_is_audited_as_one() {
                on($place, "audit_applier", audit_another_applier);
            }

            #[test]
            fn the_default_recovery_after_a_bad_delete_equals_the_whole_journal() {
                on($place, "audit_recover", recover_after_a_bad_delete);
            }
        }
    };
}

on_place!(on_s3, Place::S3);
on_place!(on_rest, Place::Rest);
on_place!(on_s3tables, Place::S3Tables);

impl Shared {
    /// `tidemark audit --json` of the table (no records: every snapshot each time).
    fn audit(&self) -> (i32, Value) {
        let r = self.story().run("audit", &["--no-records", "--json"]);
        assert!(r.code == 0 || r.code == 12, "audit failed: {}", r.stderr);
        (r.code, r.json())
    }

    /// Journals `ndjson`, then `tidemark apply`, which stops at a divergence (the default).
    fn apply_strict(&mut self, ndjson: &str) -> super::super::support::Run {
        self.journal_events(ndjson);
        self.run_apply(&[])
    }
}

fn last(audit: &Value) -> &Value {
    audit["timeline"].as_array().unwrap().last().unwrap()
}

/// A row of the table as PyIceberg appends it.
fn row(order: &str, version: i64, status: &str, position: u64) -> String {
    json!({
        "order_id": order, "order_version": version, "customer_id": format!("c-{order}"),
        "status": status, "amount": format!("{version}.25"), "currency": "EUR", "is_deleted": false,
        "event_time": "2026-11-01T10:00:00.000000Z", "journal_position": position,
    })
    .to_string()
        + "\n"
}

fn classify_every_kind(mut t: Shared) {
    let first: String = (1..=8).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    t.apply(&first);
    t.apply(&ev(9, "o-1", 2, "paid", "EUR"));
    let (code, a) = t.audit();
    assert_eq!(code, 0, "{a}");
    assert_eq!(a["timeline"].as_array().unwrap().len(), 2);

    // Neutral: a rewrite of the same rows; a column added and filled; a property and a tag.
    t.py("rewrite-same", &[]);
    let (code, a) = t.audit();
    assert_eq!(
        (code, &last(&a)["verdict"], &last(&a)["kind"]),
        (0, &json!("neutral"), &json!("other")),
        "{a}"
    );
    t.py("add-column", &["note"]);
    t.py("fill-column", &["note", "gift"]);
    let (code, a) = t.audit();
    assert_eq!((code, &last(&a)["verdict"]), (0, &json!("neutral")), "{a}");
    let before = a["timeline"].as_array().unwrap().len();
    t.py("set-property", &["owner", "data-platform"]);
    t.py("tag", &["before-the-cleanup"]);
    let (code, a) = t.audit();
    assert_eq!((code, a["timeline"].as_array().unwrap().len()), (0, before), "{a}");
    // Neutral commits never stop the applier.
    let r = t.apply_strict(&ev(10, "o-2", 2, "paid", "EUR")).ok().json();
    assert_eq!(r["applied_to_position"], 10, "{r}");

    // Expiry: the oldest retained snapshot's parent is gone; it is certified against the
    // journal's fold from position 1.
    t.py("expire-oldest", &["1"]);
    let (code, a) = t.audit();
    assert_eq!(code, 0, "{a}");
    let first = &a["timeline"][0];
    assert_eq!(first["verdict"], "certified", "{a}");
    assert!(a["start"].as_str().unwrap().contains("certified"), "{a}");

    // Divergences, each found with its counts and key, each stopping the applier until
    // accepted.
    let cases: Vec<(&str, Vec<String>, [u64; 3], &str)> = vec![
        ("delete", vec!["o-3".into()], [1, 0, 0], "removed o-3"),
        ("position-delete", vec!["o-4".into()], [1, 0, 0], "removed o-4"),
        ("equality-delete", vec!["o-5".into()], [1, 0, 0], "removed o-5"),
        (
            "append",
            vec![
                t.s.write("new.jsonl", &row("o-99", 1, "placed", 0))
                    .display()
                    .to_string(),
            ],
            [0, 0, 1],
            "added o-99",
        ),
        (
            "overwrite",
            vec![
                t.s.write("changed.jsonl", &row("o-6", 1, "lost", 6))
                    .display()
                    .to_string(),
            ],
            [0, 1, 0],
            "changed o-6",
        ),
    ];
    let mut position = 10;
    for (command, args, [removed, changed, added], key) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        t.py(command, &args);
        let (code, a) = t.audit();
        assert_eq!(code, 12, "{command}: {a}");
        let d = &a["first_divergence"];
        assert_eq!(
            (&d["counts"]["removed"], &d["counts"]["changed"], &d["counts"]["added"]),
            (&json!(removed), &json!(changed), &json!(added)),
            "{command}: {a}"
        );
        assert!(
            d["sample_keys"].as_array().unwrap().contains(&json!(key)),
            "{command}: {a}"
        );
        assert_eq!(d["position"], position, "{command}: {a}");
        position += 1;
        t.apply_strict(&ev(position, "o-7", position as i64, "paid", "EUR"))
            .fails(12, &["--on-divergence continue", &d["snapshot_id"].to_string()]);
        // Accepted: recorded in the applier's commit, which closes it.
        t.run_apply(&["--on-divergence", "continue", "--reason", "the operator accepts it"])
            .ok();
        let (code, a) = t.audit();
        assert_eq!(code, 0, "{command} accepted: {a}");
        let accepted = a["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["snapshot_id"] == d["snapshot_id"])
            .unwrap();
        assert_eq!(accepted["verdict"], "accepted", "{command}: {a}");
    }
}

fn audit_another_applier(mut t: Shared) {
    t.apply(
        &((1..=4)
            .map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR"))
            .collect::<String>()),
    );
    // Positions 5..=6 journaled; PyIceberg applies them, with the protocol's summary.
    let more = ev(5, "o-1", 2, "paid", "EUR") + &ev(6, "o-5", 1, "placed", "EUR");
    let input = t.s.write("more.ndjson", &more);
    t.s.append(&t.journal, input.to_str().unwrap());
    t.events.push_str(&more);
    let status =
        t.s.run(&["journal", "status", "--journal", &t.journal, "--json"])
            .ok()
            .json();
    let journal_id = status["journal_id"].as_str().unwrap().to_string();
    let props = json!({
        "tidemark.journal-id": journal_id,
        "tidemark.first-position": "5",
        "tidemark.last-position": "6",
        "engine-name": "pyiceberg-applier",
    })
    .to_string();
    let rows = t.s.write(
        "applied.jsonl",
        &(row("o-1", 2, "paid", 5) + &row("o-5", 1, "placed", 6)),
    );
    t.py("applier-overwrite", &[rows.to_str().unwrap(), &props]);
    let (code, a) = t.audit();
    assert_eq!(code, 0, "{a}");
    let e = last(&a);
    assert_eq!(
        (&e["kind"], &e["verdict"], &e["position"]),
        (&json!("applier"), &json!("applied"), &json!(6)),
        "{a}"
    );
    assert!(e["writer"].as_str().unwrap().contains("pyiceberg-applier"), "{a}");
    // tidemark's applier goes on after it.
    let r = t.apply_strict(&ev(7, "o-2", 2, "paid", "EUR")).ok().json();
    assert_eq!(
        (&r["started_after_position"], &r["applied_to_position"]),
        (&json!(6), &json!(7)),
        "{r}"
    );
    assert_same_rows(&t.py.read(&t.table), &t.expected(&[]));
    // Its positions must follow: a commit claiming 9..=9 after 7 is a gap.
    let gap = json!({"tidemark.journal-id": journal_id, "tidemark.first-position": "9", "tidemark.last-position": "9"})
        .to_string();
    let rows = t.s.write("gap.jsonl", &row("o-6", 1, "placed", 9));
    t.py("applier-append", &[rows.to_str().unwrap(), &gap]);
    let (code, a) = t.audit();
    assert_eq!(code, 12, "{a}");
    assert!(
        a["first_divergence"]["detail"]
            .as_str()
            .unwrap()
            .contains("8..=8 were never applied"),
        "{a}"
    );
}

fn recover_after_a_bad_delete(mut t: Shared) {
    let first: String = (1..=10).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    t.apply(&first);
    // PyIceberg's cleanup job deletes live orders; the applier refuses to build on it.
    t.py("delete", &["o-2", "o-3", "o-4"]);
    let more = ev(11, "o-1", 2, "paid", "EUR") + &ev(12, "o-11", 1, "placed", "EUR");
    t.apply_strict(&more).fails(12, &["3 keys removed"]);
    // The default recovery (no snapshot option) starts from the snapshot before the delete.
    let r = t
        .story()
        .recover(&t.ident("recovered"), &["--reference", "journal", "--json"])
        .ok()
        .json();
    assert_eq!(r["validation"]["ok"], true, "{r}");
    assert_eq!(r["journal_reference"]["ok"], true, "{r}");
    assert_eq!(r["snapshot_position"], 10, "{r}");
    assert_eq!(r["audit"]["first_divergence"]["counts"]["removed"], 3, "{r}");
    assert_same_rows(&t.py.read(&t.ident("recovered")), &t.expected(&[]));
    // Naming the damaged snapshot is refused, naming the divergence; accepted, it is recorded.
    let damaged = t.current_snapshot().to_string();
    let args = |into: &str| {
        vec![
            "recover".to_string(),
            "--journal".into(),
            t.journal.clone(),
            "--catalog".into(),
            t.catalog.clone(),
            "--source-table".into(),
            t.table.clone(),
            "--into".into(),
            t.ident(into),
            "--snapshot-id".into(),
            damaged.clone(),
        ]
    };
    let a = args("refused");
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    t.s.run(&a)
        .fails(12, &["is not trusted", "3 keys removed", "--accept-divergence"]);
    let mut b = args("accepted");
    b.extend([
        "--accept-divergence".into(),
        "the cleanup was wanted".into(),
        "--json".into(),
    ]);
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let r = t.s.run(&b).ok().json();
    assert_eq!(
        r["audit"]["source_verdict"], "divergence accepted: the cleanup was wanted",
        "{r}"
    );
}
