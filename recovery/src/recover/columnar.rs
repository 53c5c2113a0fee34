//! The validation's check, columnar: the merge rules implemented a second time over Arrow
//! arrays and sorted key runs, sharing no code with the DataFusion plan it checks
//! ([`crate::merge`]) nor with the row-by-row fold of [`crate::reference`].
//!
//! Each side (the trusted snapshot's rows, the events, the recovered table's rows) is cast to
//! the journal's column types and encoded with Arrow's row format: one byte string for the key,
//! one for the payload (every spec column but key and version, the delete flag included) and
//! one for the columns outside the spec. Equal bytes are equal values (doubles compare by their
//! bits, as the reference does; a null differs from every value). The three sides are sorted by
//! key bytes and walked together, one key at a time:
//!
//! * events of one key and version are one event when their payloads are equal (the lowest
//!   position represents them) and a conflict when they differ; an event whose version equals
//!   the snapshot row's but whose payload differs is a conflict too (either fails the check,
//!   as it fails the fold);
//! * the expected row of a key is its highest-version event when that is newer than the
//!   snapshot's row (keeping the snapshot row's columns outside the spec, nulls for a new key),
//!   else the snapshot's row;
//! * the table's rows of that key must be exactly one, with the same version, delete flag,
//!   payload, outside columns and journal position.
//!
//! Only a mismatch is turned into displayed values (with [`crate::reference::cell`]).

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, new_empty_array, new_null_array};
use arrow::compute::{cast, concat};
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{Row, RowConverter, Rows, SortField};
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN};
use tidemark_schemas::FORMAT_VERSION;

use super::RecoverError;
use super::validate::{FIRST_MISMATCHES, Mismatch, ValidationReport};
use crate::reference::{Cell, RefConflict, cell};

/// The columns outside the spec that both sides carry: names and the snapshot's types.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    pub names: Vec<String>,
    pub types: Vec<DataType>,
}

impl Extra {
    /// The columns of `schema` outside the spec, with their types.
    pub fn of(spec: &CompiledSpec, schema: &arrow::datatypes::Schema) -> Result<Extra, RecoverError> {
        let names = crate::reference::extra_columns(spec, schema);
        let types = names
            .iter()
            .map(|n| schema.field_with_name(n).map(|f| f.data_type().clone()))
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(format!("column outside the spec: {e}")))?;
        Ok(Extra { names, types })
    }
}

fn invalid(message: String) -> RecoverError {
    RecoverError::Validation { message }
}

/// The row encoders, shared by the three sides so that their bytes compare.
struct Codec {
    key: RowConverter,
    payload: RowConverter,
    extra: Option<RowConverter>,
    /// The journal's type of each spec column, in spec order.
    types: Vec<DataType>,
    payload_cols: Vec<usize>,
}

impl Codec {
    fn new(spec: &CompiledSpec, extra: &Extra) -> Result<Codec, RecoverError> {
        let types: Vec<DataType> = spec
            .spec
            .columns
            .iter()
            .map(|c| {
                spec.event_schema
                    .field_with_name(&c.name)
                    .map(|f| f.data_type().clone())
                    .map_err(|e| invalid(format!("the journal's event schema: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let payload_cols: Vec<usize> = (0..types.len())
            .filter(|&i| i != spec.key_index && i != spec.version_index)
            .collect();
        let conv = |ts: Vec<DataType>| {
            RowConverter::new(ts.into_iter().map(SortField::new).collect())
                .map_err(|e| invalid(format!("row encoder: {e}")))
        };
        Ok(Codec {
            key: conv(vec![types[spec.key_index].clone()])?,
            payload: conv(payload_cols.iter().map(|&i| types[i].clone()).collect())?,
            extra: if extra.names.is_empty() {
                None
            } else {
                Some(conv(extra.types.clone())?)
            },
            types,
            payload_cols,
        })
    }
}

/// One side's rows as columns and their encodings.
struct Side {
    cols: Vec<ArrayRef>,
    position: Int64Array,
    version: Int64Array,
    deleted: BooleanArray,
    key: Rows,
    payload: Rows,
    extra_cols: Vec<ArrayRef>,
    extra: Option<Rows>,
}

/// `name` of every batch, cast to `to`, as one array.
fn column(batches: &[RecordBatch], name: &str, to: &DataType, side: &str) -> Result<ArrayRef, RecoverError> {
    let parts: Vec<ArrayRef> = batches
        .iter()
        .map(|b| {
            let c = b
                .column_by_name(name)
                .ok_or_else(|| invalid(format!("the {side}'s rows lack column {name}")))?;
            cast(c, to).map_err(|e| invalid(format!("the {side}'s column {name} as {to}: {e}")))
        })
        .collect::<Result<_, _>>()?;
    if parts.is_empty() {
        return Ok(new_empty_array(to));
    }
    let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
    concat(&refs).map_err(|e| invalid(format!("the {side}'s column {name}: {e}")))
}

impl Side {
    fn new(
        name: &'static str,
        spec: &CompiledSpec,
        codec: &Codec,
        extra: Option<&Extra>,
        batches: &[RecordBatch],
    ) -> Result<Side, RecoverError> {
        let cols: Vec<ArrayRef> = spec
            .spec
            .columns
            .iter()
            .zip(&codec.types)
            .map(|(c, t)| column(batches, &c.name, t, name))
            .collect::<Result<_, _>>()?;
        let position = column(batches, POSITION_COLUMN, &DataType::Int64, name)?
            .as_primitive::<Int64Type>()
            .clone();
        let version = cast(&cols[spec.version_index], &DataType::Int64)
            .map_err(|e| invalid(format!("the {name}'s version column: {e}")))?
            .as_primitive::<Int64Type>()
            .clone();
        let deleted = cols[spec.delete_index]
            .as_boolean_opt()
            .ok_or_else(|| invalid(format!("the {name}'s delete flag is not boolean")))?
            .clone();
        let enc = |c: &RowConverter, a: &[ArrayRef]| {
            c.convert_columns(a)
                .map_err(|e| invalid(format!("encode the {name}'s rows: {e}")))
        };
        let key = enc(&codec.key, &[cols[spec.key_index].clone()])?;
        let payload_arrays: Vec<ArrayRef> = codec.payload_cols.iter().map(|&i| cols[i].clone()).collect();
        let payload = enc(&codec.payload, &payload_arrays)?;
        let (extra_cols, extra) = match (extra, &codec.extra) {
            (Some(x), Some(conv)) => {
                let cols: Vec<ArrayRef> = x
                    .names
                    .iter()
                    .zip(&x.types)
                    .map(|(n, t)| column(batches, n, t, name))
                    .collect::<Result<_, _>>()?;
                let rows = enc(conv, &cols)?;
                (cols, Some(rows))
            }
            _ => (Vec::new(), None),
        };
        Ok(Side {
            cols,
            position,
            version,
            deleted,
            key,
            payload,
            extra_cols,
            extra,
        })
    }

    fn len(&self) -> usize {
        self.position.len()
    }

    /// Row indices sorted by key bytes, ties in input order.
    fn by_key(&self) -> Vec<u32> {
        let mut ix: Vec<u32> = (0..self.len() as u32).collect();
        ix.sort_by(|&a, &b| self.key.row(a as usize).cmp(&self.key.row(b as usize)));
        ix
    }

    fn key_row(&self, i: u32) -> Row<'_> {
        self.key.row(i as usize)
    }

    fn show(&self, spec: &CompiledSpec, col: usize, i: u32) -> Cell {
        cell(self.cols[col].as_ref(), spec.types[col], i as usize)
    }

    fn flag(&self, i: u32) -> Option<bool> {
        (!self.deleted.is_null(i as usize)).then(|| self.deleted.value(i as usize))
    }
}

/// Where a key's expected row comes from.
#[derive(Clone, Copy)]
enum Expect {
    Snapshot(u32),
    /// The winning event; its outside columns from the snapshot's row of the key, if any.
    Event {
        e: u32,
        extra_from: Option<u32>,
    },
}

/// The expected rows in key order, or the conflict that stops the fold.
fn fold(spec: &CompiledSpec, s: &Side, e: &Side) -> Result<Vec<Expect>, RecoverError> {
    let snap = s.by_key();
    for w in snap.windows(2) {
        if s.key_row(w[0]) == s.key_row(w[1]) {
            return Err(invalid(format!(
                "the trusted snapshot: the seed holds key {} twice (positions {} and more)",
                s.show(spec, spec.key_index, w[0]),
                s.position.value(w[0] as usize)
            )));
        }
    }
    // Events by key, then highest version, then lowest position (the representative of retries).
    let mut ev: Vec<u32> = (0..e.len() as u32).collect();
    ev.sort_by(|&a, &b| {
        e.key_row(a)
            .cmp(&e.key_row(b))
            .then_with(|| e.version.value(b as usize).cmp(&e.version.value(a as usize)))
            .then_with(|| e.position.value(a as usize).cmp(&e.position.value(b as usize)))
    });
    let (mut in_unit, mut against) = (Vec::<RefConflict>::new(), Vec::<RefConflict>::new());
    let mut out = Vec::with_capacity(snap.len() + ev.len() / 4);
    let (mut i, mut j) = (0usize, 0usize);
    while i < snap.len() || j < ev.len() {
        let order = match (snap.get(i), ev.get(j)) {
            (Some(&a), Some(&b)) => s.key_row(a).cmp(&e.key_row(b)),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        if order == std::cmp::Ordering::Less {
            out.push(Expect::Snapshot(snap[i]));
            i += 1;
            continue;
        }
        let row = (order == std::cmp::Ordering::Equal).then(|| snap[i]);
        let start = j;
        while j < ev.len() && e.key_row(ev[j]) == e.key_row(ev[start]) {
            j += 1;
        }
        let group = &ev[start..j];
        // Each version's run: the first is the representative, the rest must be retries of it.
        let mut r = 0;
        while r < group.len() {
            let rep = group[r];
            let version = e.version.value(rep as usize);
            let mut n = r + 1;
            while n < group.len() && e.version.value(group[n] as usize) == version {
                if e.payload.row(group[n] as usize) != e.payload.row(rep as usize) {
                    in_unit.push(RefConflict::InUnit {
                        key: e.show(spec, spec.key_index, rep).to_string(),
                        version,
                        first: e.position.value(rep as usize) as u64,
                        second: e.position.value(group[n] as usize) as u64,
                    });
                }
                n += 1;
            }
            if let Some(sr) = row
                && s.version.value(sr as usize) == version
                && s.payload.row(sr as usize) != e.payload.row(rep as usize)
            {
                against.push(RefConflict::AgainstState {
                    key: e.show(spec, spec.key_index, rep).to_string(),
                    version,
                    table_position: s.position.value(sr as usize) as u64,
                    event_position: e.position.value(rep as usize) as u64,
                });
            }
            r = n;
        }
        let winner = group[0];
        out.push(match row {
            Some(sr) if e.version.value(winner as usize) <= s.version.value(sr as usize) => Expect::Snapshot(sr),
            _ => Expect::Event {
                e: winner,
                extra_from: row,
            },
        });
        if row.is_some() {
            i += 1;
        }
    }
    let first = |v: Vec<RefConflict>, at: fn(&RefConflict) -> u64| v.into_iter().min_by_key(at);
    let conflict = first(in_unit, |c| match c {
        RefConflict::InUnit { second, .. } => *second,
        RefConflict::AgainstState { event_position, .. } => *event_position,
    })
    .or_else(|| {
        first(against, |c| match c {
            RefConflict::InUnit { second, .. } => *second,
            RefConflict::AgainstState { event_position, .. } => *event_position,
        })
    });
    match conflict {
        Some(c) => Err(invalid(format!("the reference fold refused the events: {c}"))),
        None => Ok(out),
    }
}

/// Checks `table` (the recovered table's live rows) against the fold of `snapshot` (the trusted
/// snapshot's live rows) with `events` (the verified events, one unit), key by key and column by
/// column. `extra` names the columns outside the spec, which both row sides carry.
pub fn check(
    spec: &CompiledSpec,
    extra: &Extra,
    snapshot: &[RecordBatch],
    events: &[RecordBatch],
    table: &[RecordBatch],
) -> Result<ValidationReport, RecoverError> {
    let codec = Codec::new(spec, extra)?;
    let s = Side::new("snapshot", spec, &codec, Some(extra), snapshot)?;
    let e = Side::new("events", spec, &codec, None, events)?;
    let t = Side::new("recovered table", spec, &codec, Some(extra), table)?;
    let expected = fold(spec, &s, &e)?;
    let null_extra = match &codec.extra {
        Some(conv) => {
            let nulls: Vec<ArrayRef> = extra.types.iter().map(|t| new_null_array(t, 1)).collect();
            Some(
                conv.convert_columns(&nulls)
                    .map_err(|err| invalid(format!("encode nulls: {err}")))?,
            )
        }
        None => None,
    };
    let mut c = Compare::new(spec, extra, &t);
    c.report.keys_expected = expected.len() as u64;
    let found = t.by_key();
    let (mut i, mut j) = (0usize, 0usize);
    let key_of = |x: Expect| match x {
        Expect::Snapshot(r) => s.key_row(r),
        Expect::Event { e: r, .. } => e.key_row(r),
    };
    while i < expected.len() || j < found.len() {
        let order = match (expected.get(i), found.get(j)) {
            (Some(&x), Some(&f)) => key_of(x).cmp(&t.key_row(f)),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        // The table's rows of this key (one, or duplicates).
        let run = |j: usize| {
            let mut n = j + 1;
            while n < found.len() && t.key_row(found[n]) == t.key_row(found[j]) {
                n += 1;
            }
            n
        };
        match order {
            std::cmp::Ordering::Less => {
                let (side, r) = c.source(&s, &e, expected[i]);
                c.missing(side, r);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let n = run(j);
                c.duplicates(found[j], n - j);
                c.extra_key(found[j]);
                j = n;
            }
            std::cmp::Ordering::Equal => {
                let n = run(j);
                c.duplicates(found[j], n - j);
                let x = expected[i];
                let (side, r) = c.source(&s, &e, x);
                let want_extra = match x {
                    Expect::Snapshot(r) => s.extra.as_ref().map(|rows| rows.row(r as usize)),
                    Expect::Event {
                        extra_from: Some(r), ..
                    } => s.extra.as_ref().map(|rows| rows.row(r as usize)),
                    Expect::Event { extra_from: None, .. } => null_extra.as_ref().map(|rows| rows.row(0)),
                };
                c.same(side, r, want_extra, extra_side(x, &s), found[j]);
                i += 1;
                j = n;
            }
        }
    }
    Ok(c.finish())
}

/// Which side's outside columns a key's expected row shows (for a mismatch's text).
fn extra_side(x: Expect, s: &Side) -> Option<(&Side, u32)> {
    match x {
        Expect::Snapshot(r)
        | Expect::Event {
            extra_from: Some(r), ..
        } => Some((s, r)),
        Expect::Event { extra_from: None, .. } => None,
    }
}

/// The comparison's running verdict.
struct Compare<'a> {
    spec: &'a CompiledSpec,
    extra: &'a Extra,
    t: &'a Side,
    report: ValidationReport,
    dups: Vec<Mismatch>,
    keyed: Vec<Mismatch>,
    extras: Vec<Mismatch>,
}

impl<'a> Compare<'a> {
    fn new(spec: &'a CompiledSpec, extra: &'a Extra, t: &'a Side) -> Self {
        Compare {
            spec,
            extra,
            t,
            report: ValidationReport {
                format_version: FORMAT_VERSION,
                rows_found: t.len() as u64,
                ..Default::default()
            },
            dups: Vec::new(),
            keyed: Vec::new(),
            extras: Vec::new(),
        }
    }

    fn source<'s>(&self, s: &'s Side, e: &'s Side, x: Expect) -> (&'s Side, u32) {
        match x {
            Expect::Snapshot(r) => (s, r),
            Expect::Event { e: r, .. } => (e, r),
        }
    }

    fn push(list: &mut Vec<Mismatch>, m: Mismatch) {
        if list.len() < FIRST_MISMATCHES {
            list.push(m);
        }
    }

    fn key(&self, side: &Side, r: u32) -> String {
        side.show(self.spec, self.spec.key_index, r).to_string()
    }

    fn tombstone(&mut self, side: &Side, r: u32) {
        if side.flag(r) == Some(true) {
            self.report.tombstones_expected += 1;
        }
    }

    fn missing(&mut self, side: &Side, r: u32) {
        self.tombstone(side, r);
        self.report.missing += 1;
        let m = Mismatch {
            key: self.key(side, r),
            kind: "missing".into(),
            column: None,
            expected: Some(format!("version {}", side.show(self.spec, self.spec.version_index, r))),
            found: None,
        };
        Self::push(&mut self.keyed, m);
    }

    fn duplicates(&mut self, f: u32, rows: usize) {
        if rows > 1 {
            self.report.duplicate_keys += 1;
            let m = Mismatch {
                key: self.key(self.t, f),
                kind: "duplicate".into(),
                column: None,
                expected: Some("1 row".into()),
                found: Some("2 or more rows".into()),
            };
            Self::push(&mut self.dups, m);
        }
    }

    fn extra_key(&mut self, f: u32) {
        self.report.extra += 1;
        let m = Mismatch {
            key: self.key(self.t, f),
            kind: "extra".into(),
            column: None,
            expected: None,
            found: Some(format!(
                "version {}",
                self.t.show(self.spec, self.spec.version_index, f)
            )),
        };
        Self::push(&mut self.extras, m);
    }

    /// Compares a key's expected row (`side`'s row `r`, outside columns `want_extra` from
    /// `extra_row`) with the table's row `f`.
    fn same(&mut self, side: &Side, r: u32, want_extra: Option<Row<'_>>, extra_row: Option<(&Side, u32)>, f: u32) {
        self.tombstone(side, r);
        let (spec, t) = (self.spec, self.t);
        let mismatch = |kind: &str, column: String, expected: String, found: String| Mismatch {
            key: side.show(spec, spec.key_index, r).to_string(),
            kind: kind.into(),
            column: Some(column),
            expected: Some(expected),
            found: Some(found),
        };
        let (v, d) = (spec.version_index, spec.delete_index);
        if side.version.is_null(r as usize) != t.version.is_null(f as usize)
            || side.version.value(r as usize) != t.version.value(f as usize)
        {
            self.report.version_mismatches += 1;
            let m = mismatch(
                "version",
                spec.spec.version_column.clone(),
                side.show(spec, v, r).to_string(),
                t.show(spec, v, f).to_string(),
            );
            return Self::push(&mut self.keyed, m);
        }
        if side.flag(r) != t.flag(f) {
            self.report.delete_flag_mismatches += 1;
            let m = mismatch(
                "delete_flag",
                spec.spec.delete_column.clone(),
                side.show(spec, d, r).to_string(),
                t.show(spec, d, f).to_string(),
            );
            return Self::push(&mut self.keyed, m);
        }
        if side.payload.row(r as usize) != t.payload.row(f as usize) {
            self.report.value_mismatches += 1;
            let col = (0..spec.types.len())
                .find(|&i| side.show(spec, i, r) != t.show(spec, i, f))
                .unwrap_or(spec.key_index);
            let m = mismatch(
                "value",
                spec.spec.columns[col].name.clone(),
                side.show(spec, col, r).to_string(),
                t.show(spec, col, f).to_string(),
            );
            return Self::push(&mut self.keyed, m);
        }
        let found_extra = t.extra.as_ref().map(|rows| rows.row(f as usize));
        if want_extra != found_extra {
            self.report.value_mismatches += 1;
            let text = |c: Option<&ArrayRef>, row: u32| match c {
                Some(a) if !a.is_null(row as usize) => {
                    arrow::util::display::array_value_to_string(a, row as usize).unwrap_or_default()
                }
                _ => "null".to_string(),
            };
            let col = (0..self.extra.names.len())
                .find(|&i| {
                    let want = extra_row.map_or("null".to_string(), |(x, xr)| text(x.extra_cols.get(i), xr));
                    want != text(t.extra_cols.get(i), f)
                })
                .unwrap_or(0);
            let want = extra_row.map_or("null".to_string(), |(x, xr)| text(x.extra_cols.get(col), xr));
            let m = mismatch(
                "value",
                self.extra.names.get(col).cloned().unwrap_or_default(),
                want,
                text(t.extra_cols.get(col), f),
            );
            return Self::push(&mut self.keyed, m);
        }
        if side.position.value(r as usize) != t.position.value(f as usize) {
            self.report.value_mismatches += 1;
            let m = mismatch(
                "value",
                POSITION_COLUMN.into(),
                side.position.value(r as usize).to_string(),
                t.position.value(f as usize).to_string(),
            );
            Self::push(&mut self.keyed, m);
        }
    }

    fn finish(self) -> ValidationReport {
        let mut r = self.report;
        r.first_mismatches = self
            .dups
            .into_iter()
            .chain(self.keyed)
            .chain(self.extras)
            .take(FIRST_MISMATCHES)
            .collect();
        r.ok = r.missing
            + r.extra
            + r.version_mismatches
            + r.delete_flag_mismatches
            + r.value_mismatches
            + r.duplicate_keys
            == 0;
        r
    }
}
