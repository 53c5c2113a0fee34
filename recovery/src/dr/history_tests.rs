//! Tests of the history record and compare: real tables in a SQLite catalog, recorded before
//! and after a commit, and compare on hand-made records.

use tidemark_journal::spec::CompiledSpec;

use super::{FieldHistory, HistoryFileError, HistoryRecord, RefHistory, TableHistory, compare, load, record, save};
use crate::dr::test_support::{append, table_with};
use crate::ids::SeededIds;
use crate::table::create_or_load_table;
use crate::table::test_support::catalog_in;

fn diff_whats(diffs: &[super::HistoryDiff], table: &str) -> Vec<String> {
    diffs
        .iter()
        .filter(|d| d.table == table)
        .map(|d| d.what.clone())
        .collect()
}

#[tokio::test]
async fn a_commit_shows_as_row_and_snapshot_count_changes() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(11);
    let handle = catalog_in(dir.path()).await;
    let mut orders = table_with(&handle, "shop.orders", &ids, 1..=2).await;
    let empty = create_or_load_table(&handle, "a.b.empty", &CompiledSpec::orders())
        .await
        .unwrap();

    let before = record(&handle, None).await.unwrap();
    assert_eq!(before.format_version, 1);
    assert_eq!(before.catalog, "tidemark");
    let names: Vec<&str> = before.tables.iter().map(|t| t.table.as_str()).collect();
    assert_eq!(names, vec!["a.b.empty", "shop.orders"]);
    let o = &before.tables[1];
    assert_eq!(o.row_count, 20);
    assert_eq!(o.snapshot_count, 2);
    assert_eq!(o.current_snapshot_id, orders.metadata().current_snapshot_id());
    assert_eq!(o.metadata_location.as_deref(), orders.metadata_location());
    assert_eq!(o.table_uuid, orders.metadata().uuid().to_string());
    assert_eq!(o.refs.len(), 1);
    assert_eq!(o.refs[0].name, "main");
    assert_eq!(o.refs[0].kind, "branch");
    assert_eq!(Some(o.refs[0].snapshot_id), o.current_snapshot_id);
    let fields = orders.metadata().current_schema().as_struct().fields().len();
    assert_eq!(o.schema_fields.len(), fields);
    assert!(o.schema_fields.windows(2).all(|w| w[0].id < w[1].id));
    let e = &before.tables[0];
    assert_eq!((e.row_count, e.snapshot_count, e.current_snapshot_id), (0, 0, None));
    assert!(e.refs.is_empty());
    assert_eq!(
        empty.metadata().uuid().to_string(),
        e.table_uuid,
        "nested namespaces are recorded"
    );

    // A record equals itself, and a second record of the same state equals the first.
    assert!(compare(&before, &before).is_empty());
    assert!(compare(&before, &record(&handle, None).await.unwrap()).is_empty());
    let only = record(&handle, Some("shop")).await.unwrap();
    assert_eq!(only.tables.len(), 1);
    assert_eq!(only.namespace.as_deref(), Some("shop"));

    orders = append(&handle, &orders, &ids, 3).await;
    let after = record(&handle, None).await.unwrap();
    let diffs = compare(&before, &after);
    assert_eq!(
        diff_whats(&diffs, "shop.orders"),
        vec![
            "row count",
            "snapshot count",
            "current snapshot id",
            "ref main moved",
            "metadata location changed"
        ],
        "{diffs:#?}"
    );
    assert!(diff_whats(&diffs, "a.b.empty").is_empty());
    let rows = &diffs[0];
    assert_eq!((rows.a.as_deref(), rows.b.as_deref()), (Some("20"), Some("30")));
    assert!(!rows.informational);
    let snaps = &diffs[1];
    assert_eq!((snaps.a.as_deref(), snaps.b.as_deref()), (Some("2"), Some("3")));
    let loc = diffs.last().unwrap();
    assert!(loc.informational);
    assert_eq!(loc.b.as_deref(), orders.metadata_location());
    assert_eq!(diffs.iter().filter(|d| !d.informational).count(), 4);

    // Save and load round-trip.
    let path = dir.path().join("history.json");
    save(&after, &path).unwrap();
    assert_eq!(load(&path).unwrap(), after);
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    json["format_version"] = 2.into();
    std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    assert!(matches!(
        load(&path),
        Err(HistoryFileError::UnsupportedVersion { found: 2, .. })
    ));
}

fn table(name: &str) -> TableHistory {
    TableHistory {
        table: name.into(),
        table_uuid: "u1".into(),
        metadata_location: Some("file:///wh/m1".into()),
        current_snapshot_id: Some(7),
        row_count: 5,
        snapshot_count: 1,
        refs: vec![
            RefHistory {
                name: "main".into(),
                kind: "branch".into(),
                snapshot_id: 7,
            },
            RefHistory {
                name: "old".into(),
                kind: "tag".into(),
                snapshot_id: 7,
            },
        ],
        schema_fields: vec![
            FieldHistory {
                id: 1,
                name: "id".into(),
                field_type: "long".into(),
                required: true,
            },
            FieldHistory {
                id: 2,
                name: "v".into(),
                field_type: "string".into(),
                required: false,
            },
        ],
        format_version: Some(2),
        partition_spec: Some(Vec::new()),
        sort_order: Some(vec!["identity(1) ascending nulls-first".into()]),
        properties: Some([("write.format.default".to_string(), "parquet".to_string())].into()),
    }
}

fn rec(tables: Vec<TableHistory>) -> HistoryRecord {
    HistoryRecord {
        format_version: 1,
        recorded_at: "2026-11-01T00:00:00.000000Z".into(),
        catalog: "c".into(),
        namespace: None,
        tables,
        s3_requests: None,
    }
}

#[test]
fn compare_names_every_difference() {
    let a = rec(vec![table("s.gone"), table("s.t")]);
    let mut t = table("s.t");
    t.table_uuid = "u2".into();
    t.refs.remove(1);
    t.refs.push(RefHistory {
        name: "new".into(),
        kind: "tag".into(),
        snapshot_id: 7,
    });
    t.schema_fields[1].required = true;
    t.schema_fields.push(FieldHistory {
        id: 3,
        name: "w".into(),
        field_type: "int".into(),
        required: false,
    });
    t.schema_fields.remove(0);
    let b = rec(vec![t, table("s.added")]);
    let diffs = compare(&a, &b);
    let got: Vec<(&str, &str)> = diffs.iter().map(|d| (d.table.as_str(), d.what.as_str())).collect();
    assert_eq!(
        got,
        vec![
            ("s.added", "table missing in A"),
            ("s.gone", "table missing in B"),
            ("s.t", "table uuid changed"),
            ("s.t", "ref new added"),
            ("s.t", "ref old removed"),
            ("s.t", "schema field 1 removed"),
            ("s.t", "schema field 2 changed"),
            ("s.t", "schema field 3 added"),
        ]
    );
    let changed = &diffs[6];
    assert_eq!(changed.a.as_deref(), Some("v string optional"));
    assert_eq!(changed.b.as_deref(), Some("v string required"));
    assert!(diffs.iter().all(|d| !d.informational));
}

#[test]
fn compare_names_a_lost_partition_spec_sort_order_property_and_format_version() {
    let a = rec(vec![table("s.t")]);
    let mut t = table("s.t");
    t.format_version = Some(1);
    t.partition_spec = Some(vec!["day=day(8)".into()]);
    t.sort_order = Some(Vec::new());
    let props = t.properties.as_mut().unwrap();
    props.remove("write.format.default");
    props.insert("tidemark.recovery-id".into(), "rec-1".into());
    let b = rec(vec![t]);
    let diffs = compare(&a, &b);
    let got: Vec<(&str, bool)> = diffs.iter().map(|d| (d.what.as_str(), d.informational)).collect();
    assert_eq!(
        got,
        vec![
            ("format version", false),
            ("partition spec", false),
            ("sort order", false),
            ("property tidemark.recovery-id added", true),
            ("property write.format.default removed", false),
        ]
    );
    assert_eq!(diffs[1].a.as_deref(), Some("none"));
    assert_eq!(diffs[1].b.as_deref(), Some("day=day(8)"));
    // A record written before these were recorded compares only what it has.
    let mut old = table("s.t");
    (old.format_version, old.partition_spec, old.sort_order, old.properties) = (None, None, None, None);
    assert!(
        compare(&rec(vec![old]), &b)
            .iter()
            .all(|d| !d.what.starts_with("property"))
    );
}
