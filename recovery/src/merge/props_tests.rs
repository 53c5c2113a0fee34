//! Property test: random event streams (retries, reordering inside a batch, tombstones,
//! re-inserts after delete, conflicts) applied batch by batch through the DataFusion merge —
//! including its copy-on-write file bookkeeping — give exactly the state of the plain reference
//! fold, and every conflict is caught by both; the columnar validation
//! ([`crate::recover::columnar`]) of each unit passes the merge's result, refuses it with a row
//! dropped, and refuses the same units as conflicts.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use proptest::prelude::*;
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN, UTC};

use crate::merge::{self, FILE_COLUMN};
use crate::recover::columnar::{Extra, check};
use crate::reference::{self, Cell, RefState};
use crate::table::test_support::orders_table_fields;

/// One generated event before positions are assigned.
#[derive(Debug, Clone)]
struct Ev {
    key: u8,
    version: i64,
    status: u8,
    deleted: bool,
}

fn event_strategy() -> impl Strategy<Value = Ev> {
    // Few keys and versions so that retries and same-version events are frequent; the status
    // is mostly derived from (key, version) so that most same-version pairs are identical retries.
    (0u8..6, 1i64..6, 0u8..10, any::<bool>()).prop_map(|(key, version, noise, flip)| Ev {
        key,
        version,
        status: if noise == 0 {
            99
        } else {
            (key as i64 * 7 + version) as u8 % 3
        },
        deleted: flip && (key as i64 + version) % 2 == 0,
    })
}

fn table_schema() -> SchemaRef {
    let mut fields = orders_table_fields();
    fields.push(Field::new(POSITION_COLUMN, DataType::Int64, false));
    Arc::new(Schema::new(fields))
}

fn events_batch(events: &[(u64, Ev)]) -> RecordBatch {
    let spec = CompiledSpec::orders();
    let n = events.len();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(events.iter().map(|(p, _)| *p as i64))),
        Arc::new(StringArray::from_iter_values(
            events.iter().map(|(_, e)| format!("k{}", e.key)),
        )),
        Arc::new(Int64Array::from_iter_values(events.iter().map(|(_, e)| e.version))),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n("c-1", n))),
        Arc::new(StringArray::from_iter_values(
            events.iter().map(|(_, e)| format!("s{}", e.status)),
        )),
        Arc::new(
            Decimal128Array::from_iter_values(events.iter().map(|(_, e)| e.version as i128 * 100))
                .with_precision_and_scale(18, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n("EUR", n))),
        Arc::new(BooleanArray::from(
            events.iter().map(|(_, e)| e.deleted).collect::<Vec<_>>(),
        )),
        Arc::new(TimestampMicrosecondArray::from_iter_values(std::iter::repeat_n(0, n)).with_timezone(UTC)),
    ];
    RecordBatch::try_new(spec.event_schema.clone(), cols).unwrap()
}

/// The simulated table: data files by name.
type Files = BTreeMap<String, Vec<RecordBatch>>;

fn with_file_column(files: &Files, schema: &SchemaRef) -> Vec<RecordBatch> {
    let cur = merge::current_schema(schema);
    files
        .iter()
        .flat_map(|(name, batches)| {
            let cur = cur.clone();
            batches.iter().map(move |b| {
                let mut cols = b.columns().to_vec();
                cols.push(crate::table::read::file_column(name, b.num_rows()));
                RecordBatch::try_new(cur.clone(), cols).unwrap()
            })
        })
        .collect()
}

fn state_of(files: &Files) -> Result<BTreeMap<Cell, reference::RefRow>, String> {
    let spec = CompiledSpec::orders();
    let mut out = BTreeMap::new();
    for batches in files.values() {
        for row in reference::rows_of(&spec, batches) {
            let key = row.cells[spec.key_index].clone();
            if out.insert(key.clone(), row).is_some() {
                return Err(format!("key {key} is in the table twice"));
            }
        }
    }
    Ok(out)
}

async fn run(batches: Vec<Vec<Ev>>) -> Result<(), TestCaseError> {
    let spec = CompiledSpec::orders();
    let schema = table_schema();
    let mut files: Files = BTreeMap::new();
    let mut reference = RefState::new(spec.clone());
    let mut position = 0u64;
    for (n, batch) in batches.into_iter().enumerate() {
        let events: Vec<(u64, Ev)> = batch
            .into_iter()
            .map(|e| {
                position += 1;
                (position, e)
            })
            .collect();
        let eb = events_batch(&events);
        let before: Vec<RecordBatch> = files.values().flatten().cloned().collect();
        // The columnar check of this unit against the table rows `found`.
        let check_unit =
            |found: Vec<RecordBatch>| check(&spec, &Extra::default(), before.clone(), vec![eb.clone()], found);
        let columnar = check_unit(before.clone());
        let expected = reference.apply(&reference::rows_of(&spec, std::slice::from_ref(&eb)));
        let got = merge::merge(
            &spec,
            with_file_column(&files, &schema),
            merge::current_schema(&schema),
            vec![eb.clone()],
            schema.clone(),
        )
        .await;
        prop_assert_eq!(
            expected.is_err(),
            columnar.is_err(),
            "batch {}: the reference says {:?}, the columnar check {:?}",
            n,
            expected,
            columnar.as_ref().err().map(|e| e.to_string())
        );
        match (expected, got) {
            (Err(_), Err(e)) => prop_assert!(e.is_conflict(), "batch {n}: expected a conflict, got {e}"),
            (Err(c), Ok(_)) => {
                return Err(TestCaseError::fail(format!(
                    "batch {n}: reference found {c}, merge did not"
                )));
            }
            (Ok(()), Err(e)) => {
                return Err(TestCaseError::fail(format!(
                    "batch {n}: merge failed, reference did not: {e}"
                )));
            }
            (Ok(()), Ok(out)) => {
                for f in &out.files_to_rewrite {
                    prop_assert!(files.remove(f).is_some(), "rewrote a file that is not live: {f}");
                }
                let mut new_rows = out.kept_rows;
                new_rows.extend(out.upserts);
                if !new_rows.is_empty() {
                    files.insert(format!("file-{n:04}"), new_rows);
                }
            }
        }
        let table = state_of(&files).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&table, &reference.rows, "batch {}: table and reference differ", n);
        if columnar.is_ok() {
            // The columnar validation of this unit passes the merge's result…
            let after: Vec<RecordBatch> = files.values().flatten().cloned().collect();
            let verdict = check_unit(after.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(
                verdict.ok,
                "batch {}: columnar validation refused the merge: {:?}",
                n,
                verdict
            );
            // …and refuses it with any one row dropped.
            if let Some(first) = after.iter().position(|b| b.num_rows() > 0) {
                let mut dropped = after.clone();
                dropped[first] = dropped[first].slice(1, dropped[first].num_rows() - 1);
                let verdict = check_unit(dropped).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert!(
                    !verdict.ok && verdict.missing == 1,
                    "batch {}: a dropped row passed: {:?}",
                    n,
                    verdict
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn batch_by_batch_merge_equals_the_reference_fold(batches in prop::collection::vec(prop::collection::vec(event_strategy(), 1..12), 1..6)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(batches))?;
    }
}

#[tokio::test]
async fn a_conflict_names_key_version_and_both_positions() {
    let e = |key, version, status| Ev {
        key,
        version,
        status,
        deleted: false,
    };
    let spec = CompiledSpec::orders();
    let schema = table_schema();
    let eb = events_batch(&[(1, e(1, 1, 0)), (2, e(1, 1, 1))]);
    let err = merge::merge(&spec, vec![], merge::current_schema(&schema), vec![eb], schema.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string().split(':').next().unwrap(),
        "conflicting events for key k1 version 1"
    );
    assert!(err.to_string().contains("positions 1 and 2"), "{err}");
    // Against the table: the stored row of version 1 has another payload.
    let mut files = Files::new();
    let stored = events_batch(&[(1, e(2, 1, 0))]);
    let stored = RecordBatch::try_new(schema.clone(), {
        let mut c = stored.columns()[1..].to_vec();
        c.push(stored.column(0).clone());
        c
    })
    .unwrap();
    files.insert(FILE_COLUMN.to_string(), vec![stored]);
    let eb = events_batch(&[(5, e(2, 1, 2))]);
    let err = merge::merge(
        &spec,
        with_file_column(&files, &schema),
        merge::current_schema(&schema),
        vec![eb],
        schema,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            merge::MergeError::ConflictWithTable {
                table_position: 1,
                event_position: 5,
                version: 1,
                ..
            }
        ),
        "{err}"
    );
}
