//! The columnar validation is independent of the merge it checks: on the real DataFusion merge's
//! output it passes, and each kind of broken merge (that output altered the way a faulty merge
//! would leave it: a lost tombstone, an older version winning, a dropped key, a changed payload,
//! a duplicate, a stray key, a lost outside column, the wrong position) is caught as its own
//! kind of mismatch. Conflicts are refused by both.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN, UTC};

use super::columnar::{Extra, check};
use super::validate::ValidationReport;
use crate::merge;
use crate::table::test_support::orders_table_fields;

/// One row: key, version, status, deleted, position and the outside column `note` (table rows
/// only).
#[derive(Debug, Clone, PartialEq)]
struct R {
    key: String,
    version: i64,
    status: String,
    deleted: bool,
    position: i64,
    note: Option<String>,
}

fn r(key: &str, version: i64, status: &str, deleted: bool, position: i64) -> R {
    R {
        key: key.into(),
        version,
        status: status.into(),
        deleted,
        position,
        note: None,
    }
}

/// The table's columns: the spec's, a column another writer added, `journal_position`.
fn table_schema() -> SchemaRef {
    let mut fields = orders_table_fields();
    fields.push(Field::new("note", DataType::Utf8, true));
    fields.push(Field::new(POSITION_COLUMN, DataType::Int64, false));
    Arc::new(Schema::new(fields))
}

fn spec_columns(rows: &[R]) -> Vec<ArrayRef> {
    let n = rows.len();
    vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.key.clone()))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.version))),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n("c-1", n))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.status.clone()))),
        Arc::new(
            Decimal128Array::from_iter_values(rows.iter().map(|r| r.version as i128 * 100))
                .with_precision_and_scale(18, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n("EUR", n))),
        Arc::new(BooleanArray::from(rows.iter().map(|r| r.deleted).collect::<Vec<_>>())),
        Arc::new(TimestampMicrosecondArray::from_iter_values(std::iter::repeat_n(0, n)).with_timezone(UTC)),
    ]
}

fn events(rows: &[R]) -> RecordBatch {
    let mut cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.position)))];
    cols.extend(spec_columns(rows));
    RecordBatch::try_new(CompiledSpec::orders().event_schema.clone(), cols).unwrap()
}

fn table(rows: &[R]) -> RecordBatch {
    let mut cols = spec_columns(rows);
    cols.push(Arc::new(StringArray::from(
        rows.iter().map(|r| r.note.clone()).collect::<Vec<_>>(),
    )));
    cols.push(Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.position))));
    RecordBatch::try_new(table_schema(), cols).unwrap()
}

fn rows_of(batches: &[RecordBatch]) -> Vec<R> {
    let mut out = Vec::new();
    for b in batches {
        let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (key, status, note) = (s("order_id"), s("status"), s("note"));
        let long = |n: &str| b.column_by_name(n).unwrap().as_primitive::<Int64Type>().clone();
        let (version, position) = (long("order_version"), long(POSITION_COLUMN));
        let deleted = b.column_by_name("is_deleted").unwrap().as_boolean().clone();
        for i in 0..b.num_rows() {
            out.push(R {
                key: key.value(i).into(),
                version: version.value(i),
                status: status.value(i).into(),
                deleted: deleted.value(i),
                position: position.value(i),
                note: (!note.is_null(i)).then(|| note.value(i).to_string()),
            });
        }
    }
    out
}

/// The snapshot: k0..k7 at version 1 (k5 a tombstone), each with a note.
fn snapshot() -> Vec<R> {
    (0..8)
        .map(|i| R {
            note: Some(format!("note {i}")),
            ..r(&format!("k{i}"), 1, "placed", i == 5, i + 1)
        })
        .collect()
}

/// One unit of events with every rule in it.
fn unit() -> Vec<R> {
    vec![
        r("k1", 2, "paid", false, 20),
        r("k1", 2, "paid", false, 21),   // an identical retry: position 20 stays
        r("k2", 3, "placed", true, 22),  // a tombstone
        r("k3", 1, "placed", false, 23), // the snapshot's own version: nothing changes
        r("k4", 0, "old", false, 24),    // older than the snapshot: nothing changes
        r("k5", 2, "back", false, 25),   // re-inserted after its tombstone
        r("k9", 2, "newer", false, 27),  // a new key, two versions in the unit
        r("k9", 1, "new", false, 26),
    ]
}

/// The real merge (DataFusion) of `unit` into the snapshot, as the table it leaves.
async fn merged(snap: &[R], unit: &[R]) -> Result<Vec<R>, merge::MergeError> {
    let schema = table_schema();
    let current = table(snap);
    let mut cols = current.columns().to_vec();
    cols.push(crate::table::read::file_column("f0", snap.len()));
    let current = RecordBatch::try_new(merge::current_schema(&schema), cols).unwrap();
    let out = merge::merge(
        &CompiledSpec::orders(),
        vec![current],
        merge::current_schema(&schema),
        vec![events(unit)],
        schema,
    )
    .await?;
    let mut rows = if out.files_to_rewrite.is_empty() {
        snap.to_vec()
    } else {
        rows_of(&out.kept_rows)
    };
    rows.extend(rows_of(&out.upserts));
    Ok(rows)
}

fn validate(snap: &[R], unit: &[R], found: &[R]) -> ValidationReport {
    let spec = CompiledSpec::orders();
    let extra = Extra::of(&spec, &table_schema()).unwrap();
    check(&spec, &extra, vec![table(snap)], vec![events(unit)], vec![table(found)]).unwrap()
}

fn at<'a>(rows: &'a mut [R], key: &str) -> &'a mut R {
    rows.iter_mut().find(|r| r.key == key).unwrap()
}

#[tokio::test]
async fn the_real_merge_passes_and_every_kind_of_broken_merge_is_caught() {
    let (snap, unit) = (snapshot(), unit());
    let good = merged(&snap, &unit).await.unwrap();
    let ok = validate(&snap, &unit, &good);
    assert!(ok.ok, "{ok:?}");
    assert_eq!((ok.keys_expected, ok.rows_found, ok.tombstones_expected), (9, 9, 1));

    type Break = fn(&mut Vec<R>);
    let breaks: Vec<(&str, Break, &str, &str, Option<&str>)> = vec![
        (
            "lost tombstone (written live)",
            |t| at(t, "k2").deleted = false,
            "delete_flag",
            "k2",
            Some("is_deleted"),
        ),
        (
            "lost tombstone (not applied)",
            |t| *at(t, "k2") = snapshot()[2].clone(),
            "version",
            "k2",
            Some("order_version"),
        ),
        (
            "older event wins",
            |t| {
                let n = at(t, "k4").note.clone();
                *at(t, "k4") = R {
                    note: n,
                    ..r("k4", 0, "old", false, 24)
                };
            },
            "version",
            "k4",
            Some("order_version"),
        ),
        (
            "older event of the unit wins",
            |t| *at(t, "k9") = r("k9", 1, "new", false, 26),
            "version",
            "k9",
            Some("order_version"),
        ),
        (
            "re-insert lost",
            |t| *at(t, "k5") = snapshot()[5].clone(),
            "version",
            "k5",
            Some("order_version"),
        ),
        ("dropped key", |t| t.retain(|r| r.key != "k9"), "missing", "k9", None),
        (
            "changed payload",
            |t| at(t, "k1").status = "shipped".into(),
            "value",
            "k1",
            Some("status"),
        ),
        (
            "duplicate key",
            |t| {
                let d = at(t, "k1").clone();
                t.push(d);
            },
            "duplicate",
            "k1",
            None,
        ),
        (
            "stray key",
            |t| t.push(r("k8", 1, "placed", false, 99)),
            "extra",
            "k8",
            None,
        ),
        (
            "outside column lost",
            |t| at(t, "k1").note = None,
            "value",
            "k1",
            Some("note"),
        ),
        (
            "outside column invented",
            |t| at(t, "k9").note = Some("x".into()),
            "value",
            "k9",
            Some("note"),
        ),
        (
            "retry's position kept",
            |t| at(t, "k1").position = 21,
            "value",
            "k1",
            Some(POSITION_COLUMN),
        ),
    ];
    for (what, broken, kind, key, column) in breaks {
        let mut t = good.clone();
        broken(&mut t);
        let v = validate(&snap, &unit, &t);
        assert!(!v.ok, "{what}: not caught");
        let counted = match kind {
            "delete_flag" => v.delete_flag_mismatches,
            "version" => v.version_mismatches,
            "missing" => v.missing,
            "value" => v.value_mismatches,
            "duplicate" => v.duplicate_keys,
            "extra" => v.extra,
            _ => unreachable!(),
        };
        let total = v.missing
            + v.extra
            + v.version_mismatches
            + v.delete_flag_mismatches
            + v.value_mismatches
            + v.duplicate_keys;
        assert_eq!((counted, total), (1, 1), "{what}: {v:?}");
        let m = &v.first_mismatches[0];
        assert_eq!(
            (m.kind.as_str(), m.key.as_str(), m.column.as_deref()),
            (kind, key, column),
            "{what}"
        );
    }
}

#[tokio::test]
async fn conflicts_are_refused_by_the_merge_and_by_the_check() {
    let snap = snapshot();
    let mut in_unit = unit();
    in_unit.push(r("k1", 2, "lost", false, 30));
    let mut against = unit();
    against.push(r("k6", 1, "other", false, 31));
    for (unit, want) in [
        (in_unit, "conflicting events for key k1 version 2: positions 20 and 30"),
        (
            against,
            "event at position 31 for key k6 version 1 differs from the table's row of that version (position 7)",
        ),
    ] {
        let merge_err = merged(&snap, &unit).await.unwrap_err();
        assert!(merge_err.is_conflict(), "{merge_err}");
        let spec = CompiledSpec::orders();
        let extra = Extra::of(&spec, &table_schema()).unwrap();
        let err = check(
            &spec,
            &extra,
            vec![table(&snap)],
            vec![events(&unit)],
            vec![table(&snap)],
        )
        .unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
}

#[test]
fn a_snapshot_holding_a_key_twice_is_refused() {
    let mut snap = snapshot();
    snap.push(r("k3", 1, "placed", false, 40));
    let spec = CompiledSpec::orders();
    let extra = Extra::of(&spec, &table_schema()).unwrap();
    let err = check(&spec, &extra, vec![table(&snap)], vec![], vec![table(&snap)]).unwrap_err();
    assert!(err.to_string().contains("holds key k3 twice"), "{err}");
}
