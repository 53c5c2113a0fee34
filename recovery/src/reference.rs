//! The independent reference: a plain, single-threaded fold of the merge rules over rows held in
//! ordinary maps — no DataFusion, no SQL, no shared code with the merge plan beyond reading Arrow
//! arrays. Validation compares the recovered table against it key by key, and the property tests
//! compare the DataFusion merge against it.
//!
//! The rules, for one *unit* of events (a batch, or the whole recovery range):
//! 1. Events with the same key and version and identical payload are one event (a retry; the
//!    lowest position is kept). Same key and version with a different payload is a conflict.
//! 2. Per key, the event with the highest version wins.
//! 3. Against the state: a newer version replaces the row; an older or equal version changes
//!    nothing; an equal version with a different payload is a conflict. New keys are inserted.
//! 4. A delete is a tombstone row (delete flag set, version kept), never a removed row.
//!
//! A unit with any conflict changes nothing.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{
    Array, AsArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::DataType;
use tidemark_journal::spec::{ColumnType, CompiledSpec, POSITION_COLUMN};

/// One value, compared exactly (doubles by their bits).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cell {
    Null,
    Str(String),
    Long(i64),
    Int(i32),
    Double(u64),
    Bool(bool),
    Date(i32),
    Ts(i64),
    Dec(i128),
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Null => write!(f, "null"),
            Cell::Str(s) => write!(f, "{s}"),
            Cell::Long(v) => write!(f, "{v}"),
            Cell::Int(v) => write!(f, "{v}"),
            Cell::Double(b) => write!(f, "{}", f64::from_bits(*b)),
            Cell::Bool(v) => write!(f, "{v}"),
            Cell::Date(v) => write!(f, "date {v}"),
            Cell::Ts(v) => write!(f, "{}", tidemark_journal::codec::format_timestamp_micros(*v)),
            Cell::Dec(v) => write!(f, "{v} (unscaled)"),
        }
    }
}

/// A row: the spec's columns in order, and the journal position that produced it; `extra` holds
/// the table's columns outside the spec (another writer added them), in table order, each as its
/// display text. Events have none: a replaced row keeps its extra values, a new key gets nulls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefRow {
    pub cells: Vec<Cell>,
    pub position: u64,
    pub extra: Vec<Cell>,
}

/// Why a unit could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefConflict {
    #[error(
        "conflicting events for key {key} version {version}: positions {first} and {second} carry different payloads"
    )]
    InUnit {
        key: String,
        version: i64,
        first: u64,
        second: u64,
    },
    #[error(
        "event at position {event_position} for key {key} version {version} differs from the table's row of that version (position {table_position})"
    )]
    AgainstState {
        key: String,
        version: i64,
        table_position: u64,
        event_position: u64,
    },
}

/// Reads cell `row` of `array` as the spec type `t`.
pub fn cell(array: &dyn Array, t: ColumnType, row: usize) -> Cell {
    if array.is_null(row) {
        return Cell::Null;
    }
    match t {
        ColumnType::String => Cell::Str(string_at(array, row)),
        ColumnType::Long => Cell::Long(array.as_any().downcast_ref::<Int64Array>().expect("long").value(row)),
        ColumnType::Int => Cell::Int(array.as_any().downcast_ref::<Int32Array>().expect("int").value(row)),
        ColumnType::Double => Cell::Double(
            array
                .as_any()
                .downcast_ref::<Float64Array>()
                .expect("double")
                .value(row)
                .to_bits(),
        ),
        ColumnType::Boolean => Cell::Bool(
            array
                .as_any()
                .downcast_ref::<BooleanArray>()
                .expect("boolean")
                .value(row),
        ),
        ColumnType::Date => Cell::Date(array.as_any().downcast_ref::<Date32Array>().expect("date").value(row)),
        ColumnType::TimestampTz => Cell::Ts(
            array
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("timestamp")
                .value(row),
        ),
        ColumnType::Decimal { .. } => Cell::Dec(
            array
                .as_any()
                .downcast_ref::<Decimal128Array>()
                .expect("decimal")
                .value(row),
        ),
    }
}

fn string_at(array: &dyn Array, row: usize) -> String {
    match array.data_type() {
        DataType::Utf8 => array
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("utf8")
            .value(row)
            .to_string(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).to_string(),
        DataType::Utf8View => array.as_string_view().value(row).to_string(),
        other => panic!("string column has type {other}"),
    }
}

/// The columns of `schema` outside the spec (and other than `journal_position` and the merge's
/// file column), in schema order.
pub fn extra_columns(spec: &CompiledSpec, schema: &arrow::datatypes::Schema) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .filter(|n| {
            n != POSITION_COLUMN && n != crate::merge::FILE_COLUMN && !spec.spec.columns.iter().any(|c| &c.name == n)
        })
        .collect()
}

/// Rows of batches that have the spec's columns (by name) and `journal_position`, with any
/// other column as [`RefRow::extra`].
pub fn rows_of(spec: &CompiledSpec, batches: &[RecordBatch]) -> Vec<RefRow> {
    let mut out = Vec::new();
    for b in batches {
        let schema = b.schema();
        let extra: Vec<usize> = extra_columns(spec, &schema)
            .iter()
            .map(|n| schema.index_of(n).expect("a column of the schema"))
            .collect();
        let idx: Vec<usize> = spec
            .spec
            .columns
            .iter()
            .map(|c| {
                schema
                    .index_of(&c.name)
                    .unwrap_or_else(|_| panic!("batch lacks column {}", c.name))
            })
            .collect();
        let pos = b.column(schema.index_of(POSITION_COLUMN).expect("batch lacks journal_position"));
        let pos = pos
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("journal_position is long");
        for r in 0..b.num_rows() {
            let cells = idx
                .iter()
                .zip(&spec.types)
                .map(|(&i, &t)| cell(b.column(i).as_ref(), t, r))
                .collect();
            let extra = extra
                .iter()
                .map(|&i| {
                    let col = b.column(i);
                    if col.is_null(r) {
                        Cell::Null
                    } else {
                        Cell::Str(arrow::util::display::array_value_to_string(col, r).unwrap_or_default())
                    }
                })
                .collect();
            out.push(RefRow {
                cells,
                position: pos.value(r) as u64,
                extra,
            });
        }
    }
    out
}

/// The reference state: one row per key.
#[derive(Debug, Clone)]
pub struct RefState {
    pub spec: CompiledSpec,
    pub rows: BTreeMap<Cell, RefRow>,
    /// How many columns outside the spec the rows carry (a new key gets that many nulls).
    pub extra: usize,
}

impl RefState {
    pub fn new(spec: CompiledSpec) -> Self {
        RefState {
            spec,
            rows: BTreeMap::new(),
            extra: 0,
        }
    }

    /// Seeds the state from table rows. Duplicate keys in the seed are reported, not merged.
    pub fn seeded(spec: CompiledSpec, rows: Vec<RefRow>) -> Result<Self, String> {
        let mut state = RefState::new(spec);
        state.extra = rows.first().map_or(0, |r| r.extra.len());
        for row in rows {
            let key = row.cells[state.spec.key_index].clone();
            if let Some(prev) = state.rows.insert(key.clone(), row) {
                return Err(format!(
                    "the seed holds key {key} twice (positions {} and more)",
                    prev.position
                ));
            }
        }
        Ok(state)
    }

    fn version(&self, row: &RefRow) -> i64 {
        match &row.cells[self.spec.version_index] {
            Cell::Long(v) => *v,
            Cell::Int(v) => i64::from(*v),
            other => panic!("version cell {other:?}"),
        }
    }

    /// The payload: every column but key and version (the delete flag included).
    fn same_payload(&self, a: &RefRow, b: &RefRow) -> bool {
        let (k, v) = (self.spec.key_index, self.spec.version_index);
        a.cells
            .iter()
            .zip(&b.cells)
            .enumerate()
            .all(|(i, (x, y))| i == k || i == v || x == y)
    }

    /// Applies one unit of events (any order). All or nothing.
    pub fn apply(&mut self, events: &[RefRow]) -> Result<(), RefConflict> {
        let k = self.spec.key_index;
        // 1. One event per (key, version); the lowest position represents identical retries.
        let mut sorted: Vec<&RefRow> = events.iter().collect();
        sorted.sort_by_key(|e| e.position);
        let mut unique: HashMap<(Cell, i64), &RefRow> = HashMap::new();
        for e in sorted {
            let id = (e.cells[k].clone(), self.version(e));
            match unique.get(&id) {
                Some(first) if !self.same_payload(first, e) => {
                    return Err(RefConflict::InUnit {
                        key: id.0.to_string(),
                        version: id.1,
                        first: first.position,
                        second: e.position,
                    });
                }
                Some(_) => {}
                None => {
                    unique.insert(id, e);
                }
            }
        }
        // 3 (conflicts first, so that a conflicting unit changes nothing).
        let mut conflicts: Vec<RefConflict> = Vec::new();
        for ((key, version), e) in &unique {
            if let Some(cur) = self.rows.get(key)
                && self.version(cur) == *version
                && !self.same_payload(cur, e)
            {
                conflicts.push(RefConflict::AgainstState {
                    key: key.to_string(),
                    version: *version,
                    table_position: cur.position,
                    event_position: e.position,
                });
            }
        }
        if let Some(c) = conflicts.into_iter().min_by_key(|c| match c {
            RefConflict::AgainstState { event_position, .. } => *event_position,
            RefConflict::InUnit { second, .. } => *second,
        }) {
            return Err(c);
        }
        // 2. Highest version per key.
        let mut best: HashMap<&Cell, &RefRow> = HashMap::new();
        for ((key, version), e) in &unique {
            match best.get(key) {
                Some(b) if self.version(b) >= *version => {}
                _ => {
                    best.insert(key, e);
                }
            }
        }
        // 3. Newer replaces; older or equal changes nothing; new keys are inserted.
        for (key, e) in best {
            let newer = match self.rows.get(key) {
                Some(cur) => self.version(e) > self.version(cur),
                None => true,
            };
            if newer {
                let mut row = (*e).clone();
                row.extra = match self.rows.get(key) {
                    Some(cur) => cur.extra.clone(),
                    None => vec![Cell::Null; self.extra],
                };
                self.rows.insert(key.clone(), row);
            }
        }
        Ok(())
    }
}

/// The reference fold of a whole journal, one unit per journal batch (one manifest), as the
/// applier applies it. For tests and audits; `Err` names the manifest or the conflict.
pub async fn fold_journal(journal: &tidemark_journal::Journal) -> Result<RefState, String> {
    let mut state = RefState::new(journal.spec.clone());
    for seq in journal.manifest_sequences().await.map_err(|e| e.to_string())? {
        let m = journal
            .read_manifest(seq, None)
            .await
            .map_err(|e| e.to_string())?
            .manifest;
        let body = journal
            .store
            .get(&m.object_key, Some(&m.object_version_id))
            .await
            .map_err(|e| e.to_string())?
            .body;
        let batches =
            tidemark_journal::codec::decode_parquet(&journal.spec, &m.object_key, body).map_err(|e| e.to_string())?;
        state
            .apply(&rows_of(&journal.spec, &batches))
            .map_err(|c| format!("manifest {seq}: {c}"))?;
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, version: i64, status: &str, deleted: bool, position: u64) -> RefRow {
        let cells = vec![
            Cell::Str(key.into()),
            Cell::Long(version),
            Cell::Str("c".into()),
            Cell::Str(status.into()),
            Cell::Dec(100),
            Cell::Str("EUR".into()),
            Cell::Bool(deleted),
            Cell::Ts(0),
        ];
        RefRow {
            cells,
            position,
            extra: Vec::new(),
        }
    }

    #[test]
    fn newest_version_wins_in_any_order_and_retries_are_one_event() {
        let mut a = RefState::new(CompiledSpec::orders());
        let events = vec![
            row("k", 2, "paid", false, 2),
            row("k", 1, "placed", false, 1),
            row("k", 2, "paid", false, 3),
        ];
        a.apply(&events).unwrap();
        let mut reversed = events.clone();
        reversed.reverse();
        let mut b = RefState::new(CompiledSpec::orders());
        b.apply(&reversed).unwrap();
        assert_eq!(a.rows, b.rows);
        let r = &a.rows[&Cell::Str("k".into())];
        assert_eq!((r.cells[3].clone(), r.position), (Cell::Str("paid".into()), 2));
    }

    #[test]
    fn tombstones_stay_and_older_events_do_not_resurrect() {
        let mut s = RefState::new(CompiledSpec::orders());
        s.apply(&[row("k", 1, "placed", false, 1)]).unwrap();
        s.apply(&[row("k", 2, "placed", true, 2)]).unwrap();
        s.apply(&[row("k", 1, "placed", false, 1)]).unwrap();
        let r = &s.rows[&Cell::Str("k".into())];
        assert_eq!(
            (r.cells[6].clone(), r.cells[1].clone()),
            (Cell::Bool(true), Cell::Long(2))
        );
        s.apply(&[row("k", 3, "placed", false, 3)]).unwrap();
        assert_eq!(
            s.rows[&Cell::Str("k".into())].cells[6],
            Cell::Bool(false),
            "a newer version re-inserts"
        );
    }

    #[test]
    fn conflicts_change_nothing() {
        let mut s = RefState::new(CompiledSpec::orders());
        s.apply(&[row("k", 1, "placed", false, 1)]).unwrap();
        let before = s.rows.clone();
        let err = s
            .apply(&[row("j", 1, "placed", false, 2), row("j", 1, "paid", false, 3)])
            .unwrap_err();
        assert_eq!(
            err,
            RefConflict::InUnit {
                key: "j".into(),
                version: 1,
                first: 2,
                second: 3
            }
        );
        let err = s
            .apply(&[row("x", 5, "new", false, 4), row("k", 1, "paid", false, 5)])
            .unwrap_err();
        assert!(
            matches!(
                err,
                RefConflict::AgainstState {
                    table_position: 1,
                    event_position: 5,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(s.rows, before);
    }
}
