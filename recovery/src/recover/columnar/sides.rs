//! Each side's rows as columns cast to the journal's types, and their row encodings; where a
//! key's expected row comes from ([`Expect`]).

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, new_empty_array};
use arrow::compute::{cast, concat};
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

/// The row encoders, shared by the three sides so that their bytes compare.
pub(super) struct Codec {
    pub(super) key: RowConverter,
    pub(super) payload: RowConverter,
    pub(super) extra: Option<RowConverter>,
    /// The journal's type of each spec column, in spec order.
    pub(super) types: Vec<DataType>,
    pub(super) payload_cols: Vec<usize>,
}

impl Codec {
    pub(super) fn new(spec: &CompiledSpec, extra: &Extra) -> Result<Codec, RecoverError> {
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
pub(super) struct Side {
    pub(super) cols: Vec<ArrayRef>,
    pub(super) position: Int64Array,
    pub(super) version: Int64Array,
    pub(super) deleted: BooleanArray,
    pub(super) key: Rows,
    pub(super) payload: Rows,
    pub(super) extra_cols: Vec<ArrayRef>,
    pub(super) extra: Option<Rows>,
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
    pub(super) fn new(
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
