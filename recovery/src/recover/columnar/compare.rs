//! The comparison's running verdict: counts and the first mismatches, shown as values.

use arrow::array::{Array, ArrayRef};
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN};
use tidemark_schemas::FORMAT_VERSION;

use super::sides::{Expect, Extra, SameValues, Side};
use crate::recover::validate::{FIRST_MISMATCHES, Mismatch, ValidationReport};

/// The comparison's running verdict.
pub(super) struct Compare<'a> {
    pub(super) spec: &'a CompiledSpec,
    pub(super) extra: &'a Extra,
    pub(super) t: &'a Side,
    pub(super) report: ValidationReport,
    pub(super) dups: Vec<Mismatch>,
    pub(super) keyed: Vec<Mismatch>,
    pub(super) extras: Vec<Mismatch>,
}

impl<'a> Compare<'a> {
    pub(super) fn new(spec: &'a CompiledSpec, extra: &'a Extra, t: &'a Side) -> Self {
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

    pub(super) fn source<'s>(&self, s: &'s Side, e: &'s Side, x: Expect) -> (&'s Side, u32) {
        match x {
            Expect::Snapshot(r) => (s, r),
            Expect::Event { e: r, .. } => (e, r),
        }
    }

    pub(super) fn push(list: &mut Vec<Mismatch>, m: Mismatch) {
        if list.len() < FIRST_MISMATCHES {
            list.push(m);
        }
    }

    pub(super) fn key(&self, side: &Side, r: u32) -> String {
        side.show(self.spec, self.spec.key_index, r).to_string()
    }

    pub(super) fn tombstone(&mut self, side: &Side, r: u32) {
        if side.flag(r) == Some(true) {
            self.report.tombstones_expected += 1;
        }
    }

    pub(super) fn missing(&mut self, side: &Side, r: u32) {
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

    pub(super) fn duplicates(&mut self, f: u32, rows: usize) {
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

    pub(super) fn extra_key(&mut self, f: u32) {
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

    /// Compares a key's expected row (`side`'s row `r`, whose payload `payload` compares with
    /// the table's; its outside columns from `extra_row`, the same as the table row's when
    /// `extra_same`) with the table's row `f`.
    pub(super) fn same(
        &mut self,
        side: &Side,
        r: u32,
        payload: &SameValues,
        extra_same: bool,
        extra_row: Option<(&Side, u32)>,
        f: u32,
    ) {
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
        if !payload.same(r, f) {
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
        if !extra_same {
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

    pub(super) fn finish(self) -> ValidationReport {
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
