//! Table specs: the default orders spec, validation, the Arrow schema of event objects, and the
//! spec digest that every manifest repeats.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use tidemark_schemas::{ColumnSpec, FORMAT_VERSION, TableSpec};

use crate::error::{JournalError, Result};

/// The column that records the journal position of an event (in event objects and tables).
pub const POSITION_COLUMN: &str = "journal_position";
/// Iceberg's arrow mapping of `timestamptz` uses this zone name.
pub const UTC: &str = "+00:00";

/// A column type of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    String,
    Long,
    Int,
    Double,
    Boolean,
    Date,
    TimestampTz,
    Decimal { precision: u8, scale: i8 },
}

impl ColumnType {
    pub fn parse(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        Ok(match t.as_str() {
            "string" => ColumnType::String,
            "long" => ColumnType::Long,
            "int" => ColumnType::Int,
            "double" => ColumnType::Double,
            "boolean" => ColumnType::Boolean,
            "date" => ColumnType::Date,
            "timestamptz" => ColumnType::TimestampTz,
            _ => {
                let inner = t
                    .strip_prefix("decimal(")
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| JournalError::Spec(format!("unknown column type {s:?}")))?;
                let (p, sc) = inner
                    .split_once(',')
                    .ok_or_else(|| JournalError::Spec(format!("decimal needs (precision,scale): {s:?}")))?;
                let precision: u8 = p
                    .trim()
                    .parse()
                    .map_err(|_| JournalError::Spec(format!("bad precision in {s:?}")))?;
                let scale: i8 = sc
                    .trim()
                    .parse()
                    .map_err(|_| JournalError::Spec(format!("bad scale in {s:?}")))?;
                if precision == 0 || precision > 38 || scale < 0 || scale as u8 > precision {
                    return Err(JournalError::Spec(format!(
                        "decimal precision 1..=38 and 0 <= scale <= precision: {s:?}"
                    )));
                }
                ColumnType::Decimal { precision, scale }
            }
        })
    }

    pub fn arrow_type(&self) -> DataType {
        match self {
            ColumnType::String => DataType::Utf8,
            ColumnType::Long => DataType::Int64,
            ColumnType::Int => DataType::Int32,
            ColumnType::Double => DataType::Float64,
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Date => DataType::Date32,
            ColumnType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            ColumnType::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
        }
    }
}

/// A validated spec with resolved column types and indexes.
#[derive(Debug, Clone)]
pub struct CompiledSpec {
    pub spec: TableSpec,
    pub types: Vec<ColumnType>,
    pub key_index: usize,
    pub version_index: usize,
    pub delete_index: usize,
    pub event_time_index: Option<usize>,
    /// Event-object schema: `journal_position` then the spec's columns.
    pub event_schema: SchemaRef,
    pub digest: String,
}

impl CompiledSpec {
    pub fn new(spec: TableSpec) -> Result<Self> {
        if spec.format_version != FORMAT_VERSION {
            return Err(JournalError::Spec(format!(
                "format_version {} is not supported (expected {FORMAT_VERSION})",
                spec.format_version
            )));
        }
        if spec.columns.is_empty() {
            return Err(JournalError::Spec("a spec needs columns".into()));
        }
        let mut types = Vec::with_capacity(spec.columns.len());
        for (i, c) in spec.columns.iter().enumerate() {
            if c.name.is_empty() || c.name == POSITION_COLUMN || c.name == "position" || c.name == "format_version" {
                return Err(JournalError::Spec(format!(
                    "column name {:?} is reserved or empty",
                    c.name
                )));
            }
            if spec.columns[..i].iter().any(|o| o.name == c.name) {
                return Err(JournalError::Spec(format!("column {:?} appears twice", c.name)));
            }
            types.push(ColumnType::parse(&c.data_type)?);
        }
        let find = |name: &str, role: &str| {
            spec.columns
                .iter()
                .position(|c| c.name == name)
                .ok_or_else(|| JournalError::Spec(format!("{role} column {name:?} is not among the columns")))
        };
        let key_index = find(&spec.key_column, "key")?;
        let version_index = find(&spec.version_column, "version")?;
        let delete_index = find(&spec.delete_column, "delete-flag")?;
        let event_time_index = match &spec.event_time_column {
            Some(c) => Some(find(c, "event-time")?),
            None => None,
        };
        if !matches!(
            types[key_index],
            ColumnType::String | ColumnType::Long | ColumnType::Int
        ) {
            return Err(JournalError::Spec(format!(
                "key column {:?} must be string, long or int",
                spec.key_column
            )));
        }
        if !matches!(types[version_index], ColumnType::Long | ColumnType::Int) {
            return Err(JournalError::Spec(format!(
                "version column {:?} must be long or int",
                spec.version_column
            )));
        }
        if types[delete_index] != ColumnType::Boolean {
            return Err(JournalError::Spec(format!(
                "delete-flag column {:?} must be boolean",
                spec.delete_column
            )));
        }
        if let Some(i) = event_time_index
            && types[i] != ColumnType::TimestampTz
        {
            return Err(JournalError::Spec(format!(
                "event-time column {:?} must be timestamptz",
                spec.columns[i].name
            )));
        }
        for &i in &[key_index, version_index, delete_index] {
            if spec.columns[i].nullable {
                return Err(JournalError::Spec(format!(
                    "column {:?} may not be nullable",
                    spec.columns[i].name
                )));
            }
        }
        let mut fields = vec![Field::new(POSITION_COLUMN, DataType::Int64, false)];
        for (c, t) in spec.columns.iter().zip(&types) {
            fields.push(Field::new(&c.name, t.arrow_type(), c.nullable));
        }
        let digest = spec_digest(&spec);
        Ok(CompiledSpec {
            spec,
            types,
            key_index,
            version_index,
            delete_index,
            event_time_index,
            event_schema: Arc::new(Schema::new(fields)),
            digest,
        })
    }

    pub fn orders() -> Self {
        Self::new(orders_spec()).expect("the default spec is valid")
    }

    /// Column index in the event schema (which has `journal_position` first).
    pub fn event_column(&self, spec_index: usize) -> usize {
        spec_index + 1
    }
}

/// The digest of a spec's canonical JSON (serde field order is fixed by the type).
pub fn spec_digest(spec: &TableSpec) -> String {
    crate::sha256_digest(&serde_json::to_vec(spec).expect("spec serializes"))
}

fn col(name: &str, data_type: &str, nullable: bool) -> ColumnSpec {
    ColumnSpec {
        name: name.into(),
        data_type: data_type.into(),
        nullable,
    }
}

/// The default spec: the orders table.
pub fn orders_spec() -> TableSpec {
    TableSpec {
        format_version: FORMAT_VERSION,
        name: "shop.orders".into(),
        key_column: "order_id".into(),
        version_column: "order_version".into(),
        delete_column: "is_deleted".into(),
        event_time_column: Some("event_time".into()),
        columns: vec![
            col("order_id", "string", false),
            col("order_version", "long", false),
            col("customer_id", "string", false),
            col("status", "string", false),
            col("amount", "decimal(18,2)", false),
            col("currency", "string", false),
            col("is_deleted", "boolean", false),
            col("event_time", "timestamptz", false),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_spec_compiles() {
        let s = CompiledSpec::orders();
        assert_eq!(s.event_schema.fields().len(), 9);
        assert_eq!(s.event_schema.field(0).name(), POSITION_COLUMN);
        assert_eq!(
            s.types[4],
            ColumnType::Decimal {
                precision: 18,
                scale: 2
            }
        );
        assert!(s.digest.starts_with("sha256:"));
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        let mut s = orders_spec();
        s.key_column = "nope".into();
        let e = CompiledSpec::new(s).unwrap_err().to_string();
        assert!(e.contains("key column \"nope\""), "{e}");
        let mut s = orders_spec();
        s.columns[6].data_type = "string".into();
        assert!(
            CompiledSpec::new(s)
                .unwrap_err()
                .to_string()
                .contains("must be boolean")
        );
        let mut s = orders_spec();
        s.columns[2].data_type = "varchar".into();
        assert!(
            CompiledSpec::new(s)
                .unwrap_err()
                .to_string()
                .contains("unknown column type")
        );
        assert!(ColumnType::parse("decimal(40,2)").is_err());
        assert_eq!(
            ColumnType::parse("DECIMAL(10, 3)").unwrap(),
            ColumnType::Decimal {
                precision: 10,
                scale: 3
            }
        );
    }
}
