//! The `tidemark` binary on the catalogs beyond SQL, defined the way PyIceberg defines them
//! (`PYICEBERG_CATALOG__<NAME>__<KEY>` variables, given to every command of the scratch): the
//! Iceberg REST catalog of SeaweedFS (`--catalog sw`) and moto's S3 Tables (`--catalog st`),
//! both started by sandbox/test.sh. PyIceberg reads what tidemark committed through each, and
//! the drill runs its A–E story with its tables in each. TIDEMARK_SKIP_SEAWEEDFS=1 and
//! TIDEMARK_SKIP_S3TABLES=1 skip them.

use std::collections::BTreeMap;

use super::support::python::{PyIceberg, assert_lengths_are_sizes, new_codecs};
use super::support::*;
use super::{assert_same_rows, merge_events};

fn env(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: run the tests with `bash sandbox/test.sh` (or skip them)"))
}

fn skipped(var: &str) -> bool {
    let skip = std::env::var(var).is_ok_and(|v| v == "1");
    if skip {
        eprintln!("catalog scenario skipped ({var}=1)");
    }
    skip
}

/// `PYICEBERG_CATALOG__<NAME>__<KEY>` for each (key, value), keys written as PyIceberg spells
/// them (`s3.endpoint` becomes `S3__ENDPOINT`).
fn definition(name: &str, props: &[(&str, String)]) -> Vec<(String, String)> {
    props
        .iter()
        .map(|(k, v)| {
            let key = k.replace('.', "__").replace('-', "_").to_uppercase();
            (format!("PYICEBERG_CATALOG__{}__{key}", name.to_uppercase()), v.clone())
        })
        .collect()
}

fn s3_keys() -> Vec<(&'static str, String)> {
    vec![
        ("s3.access-key-id", env("AWS_ACCESS_KEY_ID")),
        ("s3.secret-access-key", env("AWS_SECRET_ACCESS_KEY")),
        ("s3.region", "us-east-1".to_string()),
    ]
}

/// SeaweedFS's REST catalog defined as `sw`, or `None` when skipped.
pub fn rest_definition() -> Option<Vec<(String, String)>> {
    if skipped("TIDEMARK_SKIP_SEAWEEDFS") {
        return None;
    }
    let mut props = vec![
        ("type", "rest".to_string()),
        ("uri", env("TIDEMARK_REST_URI")),
        ("warehouse", env("TIDEMARK_REST_WAREHOUSE")),
        ("credential", env("TIDEMARK_REST_CREDENTIAL")),
        ("s3.endpoint", env("TIDEMARK_SEAWEED_S3_ENDPOINT")),
        ("tidemark.register", "false".to_string()),
    ];
    props.extend(s3_keys());
    Some(definition("sw", &props))
}

/// moto's S3 Tables table bucket defined as `st`, or `None` when skipped.
pub fn s3tables_definition() -> Option<Vec<(String, String)>> {
    if skipped("TIDEMARK_SKIP_S3TABLES") {
        return None;
    }
    let endpoint = env("TIDEMARK_S3TABLES_ENDPOINT");
    let mut props = vec![
        ("type", "s3tables".to_string()),
        ("warehouse", env("TIDEMARK_S3TABLES_ARN")),
        ("s3tables.endpoint", endpoint.clone()),
        ("s3.endpoint", endpoint),
    ];
    props.extend(s3_keys());
    Some(definition("st", &props))
}

/// The PostgreSQL SQL catalog of sandbox/postgres.sh defined as `pg` (catalog name `pg`), with
/// `warehouse` as its warehouse, or `None` when TIDEMARK_SKIP_POSTGRES=1.
pub fn pg_definition(warehouse: &str) -> Option<Vec<(String, String)>> {
    if skipped("TIDEMARK_SKIP_POSTGRES") {
        return None;
    }
    let props = vec![
        ("type", "sql".to_string()),
        ("uri", env("TIDEMARK_TEST_PG_URI")),
        ("warehouse", warehouse.to_string()),
    ];
    Some(definition("pg", &props))
}

/// A namespace of this run (S3 Tables' naming rules: lowercase, digits, `_`).
pub fn ns(purpose: &str) -> String {
    format!("e2e_{purpose}_{}", std::process::id())
}

/// Applies a generated journal into `table` of the catalog `catalog` and deletes the rows with
/// `order_version > 3` (tidemark's own overwrite commit); returns the rows that should remain.
pub fn apply_and_fault(s: &Scratch, catalog: &str, table: &str) -> Vec<serde_json::Value> {
    let story = Story::new(s)
        .catalog(catalog)
        .table(table)
        .seed(11)
        .generated(150, 600, 200);
    let input = s.path_str("events.ndjson");
    let applied = story.apply(&["--json"]).json();
    assert_eq!(applied["applied_to_position"], 600, "{applied}");
    s.fault_delete(catalog, table, "order_version > 3");
    let mut state = BTreeMap::new();
    merge_events(&mut state, &std::fs::read_to_string(&input).unwrap());
    state.retain(|_, row| row["order_version"].as_i64().unwrap() <= 3);
    state.into_values().collect()
}

fn pyiceberg_reads(definition: Vec<(String, String)>, catalog: &str, tool_catalog: &str, purpose: &str) {
    let Some(py) = PyIceberg::on_defined(tool_catalog, definition.clone()) else {
        return;
    };
    let mut s = Scratch::new();
    s.env = definition;
    let table = format!("{}.orders", ns(purpose));
    let expected = apply_and_fault(&s, catalog, &table);
    assert!(expected.len() > 10, "the scenario keeps some rows");
    assert_same_rows(&py.read(&table), &expected);
    let snapshots = py.snapshots(&table);
    let last = snapshots.last().expect("snapshots");
    assert_eq!(last["operation"], "overwrite", "{snapshots:#?}");
    assert_eq!(last["summary"]["total-records"], expected.len().to_string(), "{last:#}");
    // The manifests and lists tidemark wrote on S3 are deflate (Java's default codec) with their
    // real sizes in the lists.
    let manifests = py.manifests(&table);
    assert_eq!(
        new_codecs(&manifests, 0).into_iter().collect::<Vec<_>>(),
        ["list deflate", "manifest deflate"],
        "{manifests:?}"
    );
    assert_lengths_are_sizes(&manifests);
}

#[test]
fn pyiceberg_reads_what_tidemark_committed_through_rest() {
    let Some(def) = rest_definition() else { return };
    pyiceberg_reads(def, "sw", "catalog:sw", "py_rest");
}

#[test]
fn pyiceberg_reads_what_tidemark_committed_through_s3tables() {
    let Some(def) = s3tables_definition() else { return };
    pyiceberg_reads(def, "st", "s3tables:st", "py_st");
}

/// `tidemark drill --catalog NAME`: the A–E story with the source and recovered tables in the
/// defined catalog; the route it leaves names that catalog, and a reader with the same
/// definition queries through it with nothing else given.
fn drill_in(definition: Vec<(String, String)>, catalog: &str) {
    let mut s = Scratch::new();
    s.env = definition;
    let work = s.path_str("drill");
    let r = s.drill_story(&["--catalog", catalog], 200, 1500).ok().json();
    assert_eq!(r["ok"], true, "{r}");
    let route = format!("{work}/route");
    let shown = s.run(&["route", "show", "--route", &route, "--json"]).ok().json();
    let routed = &shown[0]["route"];
    assert_eq!(routed["catalog"]["name"], catalog, "{routed}");
    let text = routed.to_string();
    assert!(!text.contains("secret") && !text.contains("credential"), "{text}");
    let q = s
        .query(&route, "csv", "SELECT count(*) AS n FROM orders WHERE order_id = 'C'")
        .ok();
    assert!(q.stdout.contains("n\n0"), "tombstones are not visible: {}", q.stdout);
}

#[test]
fn the_drill_in_a_rest_catalog() {
    let Some(def) = rest_definition() else { return };
    drill_in(def, "sw");
}

#[test]
fn the_drill_in_s3tables() {
    let Some(def) = s3tables_definition() else { return };
    drill_in(def, "st");
}
