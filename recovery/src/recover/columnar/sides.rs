//! Each side's rows as columns cast to the journal's types, and their keys' row encodings; the
//! equality of two sides' values ([`SameValues`]); where a key's expected row comes from
//! ([`Expect`]).

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, DynComparator, Int64Array, RecordBatch, make_comparator, new_empty_array,
};
use arrow::compute::{SortOptions, cast, concat};
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{Row, RowConverter, Rows, SortField};
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN};

use crate::recover::RecoverError;
use crate::reference::{Cell, cell};

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

pub(super) fn invalid(message: String) -> RecoverError {
    RecoverError::Validation { message }
}

/// The key's row encoder, shared by the three sides so that their bytes compare, and the
/// journal's column types the sides are cast to.
pub(super) struct Codec {
    pub(super) key: RowConverter,
    /// The journal's type of each spec column, in spec order.
    pub(super) types: Vec<DataType>,
    /// The payload: every spec column but the key and the version (the delete flag included).
    pub(super) payload_cols: Vec<usize>,
}

impl Codec {
    pub(super) fn new(spec: &CompiledSpec) -> Result<Codec, RecoverError> {
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
        Ok(Codec {
            key: RowConverter::new(vec![SortField::new(types[spec.key_index].clone())])
                .map_err(|e| invalid(format!("row encoder: {e}")))?,
            types,
            payload_cols,
        })
    }
}

/// One side's rows as columns, and their keys' encodings.
pub(super) struct Side {
    pub(super) cols: Vec<ArrayRef>,
    pub(super) position: Int64Array,
    pub(super) version: Int64Array,
    pub(super) deleted: BooleanArray,
    pub(super) key: Rows,
    /// The payload's columns ([`Codec::payload_cols`] of `cols`).
    pub(super) payload: Vec<ArrayRef>,
    /// The columns outside the spec (none for the events).
    pub(super) extra_cols: Vec<ArrayRef>,
}

/// `name` of every batch, cast to `to`, as one array.
pub(super) fn column(batches: &[RecordBatch], name: &str, to: &DataType, side: &str) -> Result<ArrayRef, RecoverError> {
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
    /// `batches` are taken, and dropped once their columns are copied into one array each,
    /// before the keys are encoded.
    pub(super) fn new(
        name: &'static str,
        spec: &CompiledSpec,
        codec: &Codec,
        extra: Option<&Extra>,
        batches: Vec<RecordBatch>,
    ) -> Result<Side, RecoverError> {
        let cols: Vec<ArrayRef> = spec
            .spec
            .columns
            .iter()
            .zip(&codec.types)
            .map(|(c, t)| column(&batches, &c.name, t, name))
            .collect::<Result<_, _>>()?;
        let position = column(&batches, POSITION_COLUMN, &DataType::Int64, name)?
            .as_primitive::<Int64Type>()
            .clone();
        let extra_cols: Vec<ArrayRef> = match extra {
            Some(x) => x
                .names
                .iter()
                .zip(&x.types)
                .map(|(n, t)| column(&batches, n, t, name))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        drop(batches);
        let version = cast(&cols[spec.version_index], &DataType::Int64)
            .map_err(|e| invalid(format!("the {name}'s version column: {e}")))?
            .as_primitive::<Int64Type>()
            .clone();
        let deleted = cols[spec.delete_index]
            .as_boolean_opt()
            .ok_or_else(|| invalid(format!("the {name}'s delete flag is not boolean")))?
            .clone();
        let key = codec
            .key
            .convert_columns(&[cols[spec.key_index].clone()])
            .map_err(|e| invalid(format!("encode the {name}'s keys: {e}")))?;
        let payload = codec.payload_cols.iter().map(|&i| cols[i].clone()).collect();
        Ok(Side {
            cols,
            position,
            version,
            deleted,
            key,
            payload,
            extra_cols,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.position.len()
    }

    /// Row indices sorted by key bytes, ties in input order.
    pub(super) fn by_key(&self) -> Vec<u32> {
        let mut ix: Vec<u32> = (0..self.len() as u32).collect();
        ix.sort_by(|&a, &b| self.key.row(a as usize).cmp(&self.key.row(b as usize)));
        ix
    }

    pub(super) fn key_row(&self, i: u32) -> Row<'_> {
        self.key.row(i as usize)
    }

    pub(super) fn show(&self, spec: &CompiledSpec, col: usize, i: u32) -> Cell {
        cell(self.cols[col].as_ref(), spec.types[col], i as usize)
    }

    pub(super) fn flag(&self, i: u32) -> Option<bool> {
        (!self.deleted.is_null(i as usize)).then(|| self.deleted.value(i as usize))
    }
}

/// The equality of two sides' rows over some of their columns (the payload, or the columns
/// outside the spec), column by column: equal values are equal, a double by its bits
/// (`f64::total_cmp`, as the reference compares them), and a null equals a null and differs from
/// every value. Compared in place: row encodings of the payload held each side's rows a second
/// time (two thirds of the memory a validation touched first, `perf record -e page-faults`).
pub(super) struct SameValues(Vec<DynComparator>);

impl SameValues {
    /// `left` and `right`: the same columns of two sides, cast to the same types.
    pub(super) fn new(left: &[ArrayRef], right: &[ArrayRef], what: &str) -> Result<SameValues, RecoverError> {
        left.iter()
            .zip(right)
            .map(|(l, r)| {
                make_comparator(l.as_ref(), r.as_ref(), SortOptions::default())
                    .map_err(|e| invalid(format!("compare the {what}: {e}")))
            })
            .collect::<Result<_, _>>()
            .map(SameValues)
    }

    /// Whether row `l` of the left side and row `r` of the right hold the same values.
    pub(super) fn same(&self, l: u32, r: u32) -> bool {
        self.0.iter().all(|c| c(l as usize, r as usize).is_eq())
    }
}

/// Where a key's expected row comes from.
#[derive(Clone, Copy)]
pub(super) enum Expect {
    Snapshot(u32),
    /// The winning event; its outside columns from the snapshot's row of the key, if any.
    Event {
        e: u32,
        extra_from: Option<u32>,
    },
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, StringArray, StructArray};
    use arrow::datatypes::{Field, Fields};

    use super::*;

    /// Values compare as the row encodings they replace did: a double by its bits (`0.0` and
    /// `-0.0` differ, a NaN equals the same NaN), a null equals a null and differs from every
    /// value, and a row is the same only when every column is.
    #[test]
    fn values_are_the_same_when_every_column_is_bit_for_bit_nulls_alike() {
        let doubles = |v: Vec<Option<f64>>| Arc::new(Float64Array::from(v)) as ArrayRef;
        let strings = |v: Vec<Option<&str>>| Arc::new(StringArray::from(v)) as ArrayRef;
        let left = [
            doubles(vec![Some(0.0), Some(f64::NAN), None, Some(1.5), Some(2.0)]),
            strings(vec![Some("a"), Some("b"), None, None, Some("e")]),
        ];
        let right = [
            doubles(vec![Some(-0.0), Some(f64::NAN), None, None, Some(2.0)]),
            strings(vec![Some("a"), Some("b"), None, None, Some("E")]),
        ];
        let same = SameValues::new(&left, &right, "test").unwrap();
        assert_eq!(
            (0..5).map(|i| same.same(i, i)).collect::<Vec<_>>(),
            [false, true, true, false, false]
        );
        // Across rows, and in both directions.
        assert!(!same.same(0, 4) && !same.same(4, 0));
        let back = SameValues::new(&right, &left, "test").unwrap();
        assert!(back.same(1, 1) && !back.same(3, 3));
        // No columns: every row is the same.
        assert!(SameValues::new(&[], &[], "test").unwrap().same(0, 7));
        // Nested columns (another engine's outside columns) compare too.
        let fields = Fields::from(vec![Field::new("x", DataType::Float64, true)]);
        let nested =
            |v: Vec<Option<f64>>| Arc::new(StructArray::new(fields.clone(), vec![doubles(v)], None)) as ArrayRef;
        let same = SameValues::new(
            &[nested(vec![Some(1.0), None])],
            &[nested(vec![Some(1.0), Some(0.0)])],
            "test",
        )
        .unwrap();
        assert!(same.same(0, 0) && !same.same(1, 1));
        // Columns of different types cannot be compared: an error naming what was compared.
        let e = SameValues::new(&[doubles(vec![Some(1.0)])], &[strings(vec![Some("1")])], "the values")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("the values"), "{e}");
    }
}
