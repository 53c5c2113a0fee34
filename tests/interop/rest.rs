//! The REST id path through a whole `recover`: a source table in SeaweedFS's Iceberg REST
//! catalog (`sw`, as `catalogs_remote` defines it) whose schema PyIceberg changes through the
//! catalog's own commit endpoint (two added columns, one dropped: a gap in the field ids, the
//! other renamed), recovered into the same catalog. REST cannot swap a metadata pointer, so the ids are
//! set by a metadata-only commit after the create (`recovery/src/table/like.rs`): the recovered
//! table keeps every field id, the identifier field, `last-column-id`, the partition spec's and
//! sort order's fields, and PyIceberg reads the same rows from it.

use serde_json::Value;

use super::super::assert_same_rows;
use super::super::catalogs_remote::{ns, rest_definition};
use super::super::support::python::{PyIceberg, assert_lengths_are_sizes, new_codecs};
use super::super::support::{Scratch, Story};
use super::{by_key, ev, merge_reshaped};

#[test]
fn a_rest_recovery_keeps_the_field_ids_of_a_source_with_a_dropped_and_a_renamed_column() {
    let Some(def) = rest_definition() else { return };
    let Some(py) = PyIceberg::on_defined("catalog:sw", def.clone()) else {
        return;
    };
    let mut s = Scratch::new();
    s.env = def;
    let namespace = ns("ids_rest");
    let (source, into) = (format!("{namespace}.orders"), format!("{namespace}.recovered"));
    let story = Story::new(&s).catalog("sw").table(&source).init();
    let append_apply = |name: &str, text: &str| {
        let input = s.write(name, text);
        s.append(&story.journal, input.to_str().unwrap());
        // PyIceberg's rows are accepted (the story mixes writers on purpose).
        story.apply(&[
            "--on-divergence",
            "continue",
            "--reason",
            "PyIceberg writes this table too",
        ]);
    };
    let first: String = (1..=4).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    append_apply("first.ndjson", &first);

    // PyIceberg, through the REST catalog: note (id 10) and extra (id 11) added, note dropped,
    // extra renamed to remark; a row appended with remark set.
    let tool = |command: &str, extra: &[&str]| py.run(command, &source, extra).ok().json();
    tool("add-column", &["note"]);
    tool("add-column", &["extra"]);
    tool("drop-column", &["note"]);
    tool("rename", &["extra", "remark"]);
    let row = serde_json::json!({
        "order_id": "o-5", "order_version": 1, "customer_id": "c-o-5", "status": "placed", "amount": "5.00",
        "currency": "EUR", "is_deleted": false, "event_time": "2026-11-01T10:00:00.000000Z",
        "journal_position": 0, "remark": "kept",
    });
    let rows = s.write("o5.jsonl", &format!("{row}\n"));
    tool("append", &[rows.to_str().unwrap()]);
    let mut state = by_key(py.read(&source));
    assert_eq!(state["o-5"]["remark"], "kept", "{:?}", state["o-5"]);

    // tidemark's next commit through REST: o-1 updated, o-5 updated (remark carried).
    let batch = ev(5, "o-1", 2, "paid", "EUR") + &ev(6, "o-5", 2, "paid", "EUR");
    append_apply("second.ndjson", &batch);
    merge_reshaped(&mut state, &batch, &[], &["remark"]);
    let found = py.read(&source);
    assert_same_rows(&found, &state.values().cloned().collect::<Vec<_>>());
    let described = tool("describe", &[]);
    let ids: Vec<(Value, Value)> = described["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["id"].clone(), f["name"].clone()))
        .collect();
    assert!(ids.contains(&(11.into(), "remark".into())), "{described}");
    assert!(!ids.iter().any(|(id, _)| *id == 10), "note's id is a gap: {described}");

    // recover through REST, source and target in the same catalog.
    let r = story.recover(&into, &["--json"]).ok().json();
    assert_eq!(r["validation"]["ok"], true, "{r}");
    let recovered = py.run("describe", &into, &[]).ok().json();
    // The ids; on REST the schema and spec ids are the catalog's next ones (docs/recovery.md, step 3).
    for key in [
        "fields",
        "identifier_field_ids",
        "last_column_id",
        "partition_spec",
        "last_partition_id",
        "sort_order",
        "format_version",
    ] {
        assert_eq!(
            described[key], recovered[key],
            "{key}: source {described}\nrecovered {recovered}"
        );
    }
    assert_same_rows(&py.read(&into), &found);
    // On SeaweedFS's S3: tidemark's manifests and lists (the source's commits, the recovery's
    // seed) are deflate, as PyIceberg's own, and every list gives its manifests' real sizes.
    for table in [&source, &into] {
        let manifests = py.manifests(table);
        assert_eq!(
            new_codecs(&manifests, 0).into_iter().collect::<Vec<_>>(),
            ["list deflate", "manifest deflate"],
            "{table}: {manifests:?}"
        );
        assert_lengths_are_sizes(&manifests);
    }
}
