//! Tables PyIceberg partitions with each kind of transform (day, hour, bucket, truncate; bucket
//! and truncate need PyIceberg's `pyiceberg-core` extra, which sandbox/pyiceberg.sh installs):
//! PyIceberg creates and writes the table, tidemark applies generated events (spanning several
//! days) into it, PyIceberg reads every row back, and a recovery is partitioned as its source.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::super::{assert_same_rows, merge_events};
use super::Shared;

#[test]
fn pyiceberg_partitioned_tables_of_every_transform_are_applied_and_recovered() {
    for spec in [
        "event_time:day",
        "event_time:hour",
        "order_id:bucket[4]",
        "status:truncate[2],currency:identity",
    ] {
        let Some(mut t) = Shared::new() else { return };
        let events = t.s.path_str("gen.ndjson");
        t.s.run(&[
            "gen", "events", "--orders", "40", "--events", "300", "--seed", "5", "--out", &events,
        ])
        .ok();
        let text = std::fs::read_to_string(&events).unwrap();
        let (first, rest): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["position"].as_u64().unwrap() <= 100
        });
        // PyIceberg writes the state after the first 100 events; the journal holds all 300.
        let mut state = BTreeMap::new();
        merge_events(&mut state, &first.join("\n"));
        let rows: String = state.values().map(|r| format!("{r}\n")).collect();
        let rows = t.s.write("rows.jsonl", &rows);
        t.py.run("create-and-write", "shop.orders", &[rows.to_str().unwrap(), spec])
            .ok();
        t.apply(&(first.join("\n") + "\n" + &rest.join("\n") + "\n"));

        merge_events(&mut state, &rest.join("\n"));
        let want: Vec<Value> = state.into_values().collect();
        let found = t.py.read("shop.orders");
        assert_same_rows(&found, &want);
        let files = t.py("files", &[]);
        let partitions: BTreeSet<String> = files
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["partition"].to_string())
            .collect();
        assert!(partitions.len() > 1, "{spec}: several partitions: {files}");

        let r = t.recover("shop.recovered", None);
        assert_eq!(r["validation"]["ok"], true, "{spec}: {r}");
        assert_same_rows(&t.py.read("shop.recovered"), &found);
        let source = t.py("describe", &[]);
        let recovered = t.py.run("describe", "shop.recovered", &[]).ok().json();
        assert_eq!(source["partition_spec"], recovered["partition_spec"], "{spec}");
    }
}
