//! The Iceberg schema of a spec's table, and the check that an existing table still has it.
//!
//! A table holds the spec's columns in spec order followed by `journal_position` (the journal
//! position of the event that produced the row). Field ids are 1..n in that order; the key column
//! is the schema's identifier field.

use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
use tidemark_journal::spec::{ColumnType, CompiledSpec, POSITION_COLUMN};

use super::TableError;

/// The Iceberg type of a spec column type.
pub fn iceberg_type(t: ColumnType) -> PrimitiveType {
    match t {
        ColumnType::String => PrimitiveType::String,
        ColumnType::Long => PrimitiveType::Long,
        ColumnType::Int => PrimitiveType::Int,
        ColumnType::Double => PrimitiveType::Double,
        ColumnType::Boolean => PrimitiveType::Boolean,
        ColumnType::Date => PrimitiveType::Date,
        // Iceberg's `timestamptz` is microseconds since the epoch, UTC.
        ColumnType::TimestampTz => PrimitiveType::Timestamptz,
        ColumnType::Decimal { precision, scale } => PrimitiveType::Decimal {
            precision: u32::from(precision),
            scale: scale.max(0) as u32,
        },
    }
}

/// One expected column: name, type, required.
fn expected_columns(spec: &CompiledSpec) -> Vec<(String, PrimitiveType, bool)> {
    let mut cols: Vec<_> = spec
        .spec
        .columns
        .iter()
        .zip(&spec.types)
        .map(|(c, t)| (c.name.clone(), iceberg_type(*t), !c.nullable))
        .collect();
    cols.push((POSITION_COLUMN.to_string(), PrimitiveType::Long, true));
    cols
}

/// The schema a spec's table has: the spec's columns, then `journal_position` (long, required).
pub fn iceberg_schema(spec: &CompiledSpec) -> Schema {
    let fields = expected_columns(spec)
        .into_iter()
        .enumerate()
        .map(|(i, (name, t, required))| NestedField::new(i as i32 + 1, name, Type::Primitive(t), required).into());
    Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .with_identifier_field_ids([spec.key_index as i32 + 1])
        .build()
        // Names are unique and the key is required (CompiledSpec checks both), so this holds.
        .expect("a compiled spec gives a valid Iceberg schema")
}

fn describe(t: &Type, required: bool) -> String {
    format!("{t} {}", if required { "required" } else { "optional" })
}

/// Checks that `table_schema` has the spec's columns with the spec's types and nullability
/// (field order and ids are not compared: writers match columns by field id). Other columns
/// (added by another writer) may be there when they are optional: the merge carries their values
/// forward and a new key gets null. The error names the first mismatching column in spec order,
/// then any required extra table column.
pub fn check_schema(spec: &CompiledSpec, table_schema: &Schema) -> Result<(), TableError> {
    let table = spec.spec.name.clone();
    let mismatch = |column: &str, expected: String, found: String| TableError::SchemaMismatch {
        table: table.clone(),
        column: column.to_string(),
        expected,
        found,
    };
    let expected = expected_columns(spec);
    for (name, t, required) in &expected {
        let want = Type::Primitive(t.clone());
        let Some(field) = table_schema.field_by_name(name) else {
            return Err(mismatch(name, describe(&want, *required), "missing".into()));
        };
        if *field.field_type != want {
            return Err(mismatch(name, want.to_string(), field.field_type.to_string()));
        }
        if field.required != *required {
            return Err(mismatch(
                name,
                describe(&want, *required),
                describe(&field.field_type, field.required),
            ));
        }
    }
    for field in table_schema.as_struct().fields() {
        if field.required && !expected.iter().any(|(name, _, _)| name == &field.name) {
            return Err(mismatch(
                &field.name,
                "absent".into(),
                describe(&field.field_type, field.required),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_schema_has_the_spec_columns_then_the_position() {
        let spec = CompiledSpec::orders();
        let schema = iceberg_schema(&spec);
        let fields = schema.as_struct().fields();
        assert_eq!(fields.len(), 9);
        assert_eq!(fields[0].name, "order_id");
        assert_eq!(fields[0].id, 1);
        assert_eq!(fields[8].name, POSITION_COLUMN);
        assert_eq!(fields[8].id, 9);
        assert!(fields[8].required);
        assert_eq!(
            *fields[4].field_type,
            Type::Primitive(PrimitiveType::Decimal {
                precision: 18,
                scale: 2
            })
        );
        assert_eq!(*fields[7].field_type, Type::Primitive(PrimitiveType::Timestamptz));
        assert_eq!(schema.identifier_field_ids().collect::<Vec<_>>(), vec![1]);
        check_schema(&spec, &schema).unwrap();
    }

    fn schema_with(spec: &CompiledSpec, edit: impl FnOnce(&mut Vec<NestedField>)) -> Schema {
        let mut fields: Vec<NestedField> = iceberg_schema(spec)
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        edit(&mut fields);
        Schema::builder()
            .with_fields(fields.into_iter().map(Into::into))
            .build()
            .unwrap()
    }

    fn mismatch_of(spec: &CompiledSpec, schema: &Schema) -> (String, String, String) {
        match check_schema(spec, schema).unwrap_err() {
            TableError::SchemaMismatch {
                column,
                expected,
                found,
                ..
            } => (column, expected, found),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn each_kind_of_mismatch_names_the_column() {
        let spec = CompiledSpec::orders();
        let missing = schema_with(&spec, |f| {
            f.remove(3);
        });
        assert_eq!(
            mismatch_of(&spec, &missing),
            ("status".into(), "string required".into(), "missing".into())
        );

        // An optional column another writer added is carried; a required one could not be
        // filled for a new key.
        let extra = schema_with(&spec, |f| {
            f.push(NestedField::optional(
                10,
                "note",
                Type::Primitive(PrimitiveType::String),
            ))
        });
        check_schema(&spec, &extra).unwrap();
        let required_extra = schema_with(&spec, |f| {
            f.push(NestedField::required(
                10,
                "note",
                Type::Primitive(PrimitiveType::String),
            ))
        });
        assert_eq!(
            mismatch_of(&spec, &required_extra),
            ("note".into(), "absent".into(), "string required".into())
        );

        let wrong_type = schema_with(&spec, |f| *f[1].field_type = Type::Primitive(PrimitiveType::Int));
        assert_eq!(
            mismatch_of(&spec, &wrong_type),
            ("order_version".into(), "long".into(), "int".into())
        );

        let nullable = schema_with(&spec, |f| f[5].required = false);
        assert_eq!(
            mismatch_of(&spec, &nullable),
            ("currency".into(), "string required".into(), "string optional".into())
        );

        let decimal = schema_with(&spec, |f| {
            *f[4].field_type = Type::Primitive(PrimitiveType::Decimal {
                precision: 18,
                scale: 3,
            })
        });
        assert_eq!(mismatch_of(&spec, &decimal).0, "amount");
    }
}
