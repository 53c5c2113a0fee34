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

/// The spec's columns that another writer renamed, each with its name in a table schema
/// (resolved by [`check_schema_in`]). The journal names its columns; the table's rows are read
/// and written by field id, so under [`Renames::spec_view`] the merge sees the spec's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Renames(Vec<(String, String)>);

impl Renames {
    /// (spec name, table name) of each renamed column.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// The name of the spec's column `name` in the table.
    pub fn table_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.0
            .iter()
            .find(|(spec, _)| spec == name)
            .map_or(name, |(_, table)| table.as_str())
    }

    /// `schema` (a table's Arrow schema, field ids in the metadata) with each renamed column
    /// under the spec's name: rows read by field id with it carry the spec's names, and rows
    /// written with it keep the table's field ids.
    pub fn spec_view(&self, schema: &arrow_schema::SchemaRef) -> arrow_schema::SchemaRef {
        if self.0.is_empty() {
            return schema.clone();
        }
        let fields: Vec<arrow_schema::Field> = schema
            .fields()
            .iter()
            .map(|f| match self.0.iter().find(|(_, table)| table == f.name()) {
                Some((spec, _)) => f.as_ref().clone().with_name(spec.clone()),
                None => f.as_ref().clone(),
            })
            .collect();
        std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        ))
    }
}

/// The field of `schema` that holds the spec's column `name`: the one of that name or, when
/// there is none, the one another writer renamed it to: the only field id the name had in the
/// schemas of `history`, present in `schema` under a name that is not one of the spec's columns
/// (`expected`). `None` when there is no such field, or the history is ambiguous (the name had
/// several ids).
fn resolve<'a>(
    name: &str,
    schema: &'a Schema,
    history: &[&Schema],
    expected: &[(String, PrimitiveType, bool)],
) -> Option<&'a iceberg::spec::NestedFieldRef> {
    if let Some(f) = schema.field_by_name(name) {
        return Some(f);
    }
    let mut ids: Vec<i32> = history
        .iter()
        .filter_map(|h| h.field_by_name(name).map(|f| f.id))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let [id] = ids[..] else { return None };
    let field = schema.field_by_id(id)?;
    // A top-level column, not claimed by another of the spec's names.
    let top = schema.as_struct().fields().iter().any(|f| f.id == id);
    (top && !expected.iter().any(|(n, _, _)| *n == field.name)).then_some(field)
}

/// [`check_schema`] for a schema with a history (`history`: every schema of the table's
/// metadata): a spec column another writer renamed is matched by the field id its name had
/// (see [`resolve`]) and returned in [`Renames`]; everything else is checked as
/// [`check_schema`] does.
pub fn check_schema_in<'a>(
    spec: &CompiledSpec,
    table_schema: &Schema,
    history: impl IntoIterator<Item = &'a iceberg::spec::SchemaRef>,
) -> Result<Renames, TableError> {
    let history: Vec<&Schema> = history.into_iter().map(|s| s.as_ref()).collect();
    check(spec, table_schema, &history)
}

/// Checks that `table_schema` has the spec's columns with the spec's types and nullability
/// (field order and ids are not compared: writers match columns by field id). Other columns
/// (added by another writer) may be there when they are optional: the merge carries their values
/// forward and a new key gets null. The error names the first mismatching column in spec order,
/// then any required extra table column.
pub fn check_schema(spec: &CompiledSpec, table_schema: &Schema) -> Result<(), TableError> {
    check(spec, table_schema, &[]).map(|_| ())
}

fn check(spec: &CompiledSpec, table_schema: &Schema, history: &[&Schema]) -> Result<Renames, TableError> {
    let table = spec.spec.name.clone();
    let mismatch = |column: &str, expected: String, found: String| TableError::SchemaMismatch {
        table: table.clone(),
        column: column.to_string(),
        expected,
        found,
    };
    let expected = expected_columns(spec);
    let mut renames = Vec::new();
    for (name, t, required) in &expected {
        let want = Type::Primitive(t.clone());
        let Some(field) = resolve(name, table_schema, history, &expected) else {
            return Err(mismatch(name, describe(&want, *required), "missing".into()));
        };
        if field.name != *name {
            renames.push((name.clone(), field.name.clone()));
        }
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
        let held = expected.iter().any(|(name, _, _)| name == &field.name)
            || renames.iter().any(|(_, table)| table == &field.name);
        if field.required && !held {
            return Err(mismatch(
                &field.name,
                "absent".into(),
                describe(&field.field_type, field.required),
            ));
        }
    }
    Ok(Renames(renames))
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

    #[test]
    fn a_renamed_spec_column_is_found_by_the_field_id_its_name_had() {
        let spec = CompiledSpec::orders();
        let old = std::sync::Arc::new(iceberg_schema(&spec));
        let rename = |f: &mut Vec<NestedField>, at: usize, to: &str| f[at].name = to.to_string();
        // status (id 4) renamed to state: found through the history, not without it.
        let renamed = schema_with(&spec, |f| rename(f, 3, "state"));
        assert_eq!(mismatch_of(&spec, &renamed).0, "status");
        let renames = check_schema_in(&spec, &renamed, [&old]).unwrap();
        assert_eq!(renames.pairs(), [("status".to_string(), "state".to_string())]);
        assert_eq!(renames.table_name("status"), "state");
        assert_eq!(renames.table_name("currency"), "currency");
        let arrow = std::sync::Arc::new(iceberg::arrow::schema_to_arrow_schema(&renamed).unwrap());
        let view = renames.spec_view(&arrow);
        assert_eq!(view.field(3).name(), "status");
        assert_eq!(view.field(3).metadata(), arrow.field(3).metadata(), "same field id");

        // The name had two ids in the history (dropped and added again, then renamed): refused.
        let again = std::sync::Arc::new(schema_with(&spec, |f| {
            f.remove(3);
            f.push(NestedField::required(
                10,
                "status",
                Type::Primitive(PrimitiveType::String),
            ));
        }));
        assert_eq!(
            check_schema_in(&spec, &renamed, [&old, &again])
                .map(|_| ())
                .unwrap_err()
                .to_string(),
            check_schema(&spec, &renamed).unwrap_err().to_string()
        );
        // The field now holds another spec column's name (a swap is matched by name, not here).
        let claimed = schema_with(&spec, |f| {
            rename(f, 3, "currency");
            f.remove(5);
        });
        assert_eq!(mismatch_of(&spec, &claimed).0, "status");
        assert!(check_schema_in(&spec, &claimed, [&old]).is_err());
        // The renamed field must still have the spec's type.
        let retyped = schema_with(&spec, |f| {
            rename(f, 3, "state");
            *f[3].field_type = Type::Primitive(PrimitiveType::Long);
        });
        let err = check_schema_in(&spec, &retyped, [&old]).unwrap_err().to_string();
        assert!(err.contains("\"status\"") && err.contains("long"), "{err}");
    }

    #[test]
    fn a_swap_is_matched_by_the_current_names() {
        let spec = CompiledSpec::orders();
        let old = std::sync::Arc::new(iceberg_schema(&spec));
        let swapped = schema_with(&spec, |f| {
            f[3].name = "currency".into();
            f[5].name = "status".into();
        });
        assert!(check_schema_in(&spec, &swapped, [&old]).unwrap().pairs().is_empty());
    }
}
