//! Step 5: validate the recovered table against an independent reference: the plain fold of
//! [`crate::reference`] over the trusted snapshot's rows (read from the snapshot's own files, not
//! from the seeded table) and the verified events up to H. Every key is compared: missing, extra,
//! different values, different version, different delete flag, duplicate keys. Equal counts prove
//! nothing, so counts are only reported beside the per-key verdict.

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::RecordBatch;
use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::spec::CompiledSpec;
use tidemark_schemas::FORMAT_VERSION;

use super::RecoverError;
use super::snapshot::TrustedSnapshot;
use crate::reference::{Cell, RefRow, RefState, rows_of};
use crate::table::read::{read_files, read_paths};
use crate::table::{arrow_schema, live_data_files};

/// How many mismatches the report lists.
pub const FIRST_MISMATCHES: usize = 20;

#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Mismatch {
    pub key: String,
    /// `missing`, `extra`, `version`, `delete_flag`, `value`, `duplicate`.
    pub kind: String,
    pub column: Option<String>,
    pub expected: Option<String>,
    pub found: Option<String>,
}

#[derive(Debug, Clone, Serialize, Default, schemars::JsonSchema)]
pub struct ValidationReport {
    pub format_version: u32,
    pub ok: bool,
    pub keys_expected: u64,
    pub rows_found: u64,
    pub tombstones_expected: u64,
    pub missing: u64,
    pub extra: u64,
    pub version_mismatches: u64,
    pub delete_flag_mismatches: u64,
    pub value_mismatches: u64,
    pub duplicate_keys: u64,
    pub first_mismatches: Vec<Mismatch>,
}

/// Compares table rows with the expected state, key by key.
pub fn compare(spec: &CompiledSpec, expected: &BTreeMap<Cell, RefRow>, found_rows: Vec<RefRow>) -> ValidationReport {
    let mut r = ValidationReport {
        format_version: FORMAT_VERSION,
        keys_expected: expected.len() as u64,
        rows_found: found_rows.len() as u64,
        ..Default::default()
    };
    let (k, v, d) = (spec.key_index, spec.version_index, spec.delete_index);
    r.tombstones_expected = expected.values().filter(|row| row.cells[d] == Cell::Bool(true)).count() as u64;
    let mut found: BTreeMap<Cell, RefRow> = BTreeMap::new();
    let push = |r: &mut ValidationReport, m: Mismatch| {
        if r.first_mismatches.len() < FIRST_MISMATCHES {
            r.first_mismatches.push(m);
        }
    };
    let mut dups = BTreeSet::new();
    for row in found_rows {
        let key = row.cells[k].clone();
        if found.contains_key(&key) {
            if dups.insert(key.clone()) {
                r.duplicate_keys += 1;
                push(
                    &mut r,
                    Mismatch {
                        key: key.to_string(),
                        kind: "duplicate".into(),
                        column: None,
                        expected: Some("1 row".into()),
                        found: Some("2 or more rows".into()),
                    },
                );
            }
            continue;
        }
        found.insert(key, row);
    }
    for (key, want) in expected {
        let Some(got) = found.get(key) else {
            r.missing += 1;
            push(
                &mut r,
                Mismatch {
                    key: key.to_string(),
                    kind: "missing".into(),
                    column: None,
                    expected: Some(format!("version {}", want.cells[v])),
                    found: None,
                },
            );
            continue;
        };
        if got.cells[v] != want.cells[v] {
            r.version_mismatches += 1;
            push(
                &mut r,
                Mismatch {
                    key: key.to_string(),
                    kind: "version".into(),
                    column: Some(spec.spec.version_column.clone()),
                    expected: Some(want.cells[v].to_string()),
                    found: Some(got.cells[v].to_string()),
                },
            );
            continue;
        }
        if got.cells[d] != want.cells[d] {
            r.delete_flag_mismatches += 1;
            push(
                &mut r,
                Mismatch {
                    key: key.to_string(),
                    kind: "delete_flag".into(),
                    column: Some(spec.spec.delete_column.clone()),
                    expected: Some(want.cells[d].to_string()),
                    found: Some(got.cells[d].to_string()),
                },
            );
            continue;
        }
        let diff = want.cells.iter().zip(&got.cells).position(|(a, b)| a != b);
        if let Some(i) = diff {
            r.value_mismatches += 1;
            push(
                &mut r,
                Mismatch {
                    key: key.to_string(),
                    kind: "value".into(),
                    column: Some(spec.spec.columns[i].name.clone()),
                    expected: Some(want.cells[i].to_string()),
                    found: Some(got.cells[i].to_string()),
                },
            );
        } else if got.position != want.position {
            r.value_mismatches += 1;
            push(
                &mut r,
                Mismatch {
                    key: key.to_string(),
                    kind: "value".into(),
                    column: Some(tidemark_journal::spec::POSITION_COLUMN.into()),
                    expected: Some(want.position.to_string()),
                    found: Some(got.position.to_string()),
                },
            );
        }
    }
    for key in found.keys().filter(|k| !expected.contains_key(*k)) {
        r.extra += 1;
        push(
            &mut r,
            Mismatch {
                key: key.to_string(),
                kind: "extra".into(),
                column: None,
                expected: None,
                found: Some(format!("version {}", found[key].cells[v])),
            },
        );
    }
    r.ok =
        r.missing + r.extra + r.version_mismatches + r.delete_flag_mismatches + r.value_mismatches + r.duplicate_keys
            == 0;
    r
}

/// The reference state: snapshot rows folded with the events as one unit.
pub async fn reference_state(
    spec: &CompiledSpec,
    snap: &TrustedSnapshot,
    table_schema: &arrow_schema::SchemaRef,
    events: &[RecordBatch],
) -> Result<BTreeMap<Cell, RefRow>, RecoverError> {
    let paths: Vec<&str> = snap.data_files.iter().map(String::as_str).collect();
    let seed = read_paths(&snap.file_io, &snap.metadata_location, &paths, table_schema, None).await?;
    let mut state = RefState::seeded(spec.clone(), rows_of(spec, &seed)).map_err(|m| RecoverError::Validation {
        message: format!("the trusted snapshot: {m}"),
    })?;
    state
        .apply(&rows_of(spec, events))
        .map_err(|c| RecoverError::Validation {
            message: format!("the reference fold refused the events: {c}"),
        })?;
    Ok(state.rows)
}

/// Every row of the table's current snapshot.
pub async fn table_rows(spec: &CompiledSpec, table: &Table) -> Result<Vec<RefRow>, RecoverError> {
    let schema = arrow_schema(table)?;
    let files = live_data_files(table).await?;
    let batches = read_files(table, &files.iter().collect::<Vec<_>>(), &schema, None).await?;
    Ok(rows_of(spec, &batches))
}
