//! Partitioned tables on the distributed engine: the Iceberg partition transforms as DataFusion
//! SQL that runs alike on the scheduler and on any executor (no UDF), the lossless encoding of a
//! computed partition value in the folder the job writes it to, and the Iceberg partition value
//! of each written file.
//!
//! The job adds one computed column per partition field (`_tidemark_p<i>`) and writes with
//! DataFusion's partitioned write, which groups the rows by those columns into folders
//! `_tidemark_p0=<code>/…` and leaves the columns out of the files. DataFusion's own folder names
//! are lossy (a null is written as the type's default value, `""` or `0`; strings verbatim), so the
//! column is not the value but a code of it, a string tidemark decodes exactly: `n` for null, `v`
//! and the decimal text for numbers, dates (days) and timestamps (microseconds), `v` and the
//! UTF-8 bytes in hex for strings, `vtrue`/`vfalse`.
//!
//! What SQL computes (Iceberg's rules): identity; year, month (since 1970-01), day (a date) and
//! hour (since the epoch) of a `timestamptz` or `date`, floored for instants before 1970;
//! truncate[W] of ints and longs (`v - (((v % W) + W) % W)`) and of strings (the first W code
//! points); void (null, no folder). Refused: bucket[N] (Iceberg's murmur3 hash has no SQL
//! form and a foreign cluster has no tidemark UDF), and an identity or truncate of a type whose
//! text form is not exact here (double, decimal, binary).
//!
//! Each file's value is then checked against its own footer with iceberg-rust's transform
//! functions, the ones the local engine partitions with: the transform of the source column's
//! lower and of its upper bound must both give the folder's value (every transform here is
//! monotonic, so then every row of the file is in that partition), and a null value needs a
//! source column that is all null.

use iceberg::spec::{DataFile, Datum, Literal, PartitionSpec, PrimitiveType, Schema, Struct, Transform, Type};
use iceberg::transform::create_transform_function;

use super::RecoverError;
use super::engine::EngineError;

/// One computed partition column of the job.
#[derive(Debug, Clone)]
pub struct PartitionColumn {
    /// Position of the field in the spec.
    pub index: usize,
    /// The column (and folder) name, `_tidemark_p<index>`.
    pub name: String,
    /// SQL giving the code of the partition value (never null).
    pub sql: String,
}

/// The plan of a spec: a column per field that is not void.
#[derive(Debug, Clone)]
pub struct PartitionPlan {
    pub columns: Vec<PartitionColumn>,
    fields: Vec<Field>,
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    source_id: i32,
    transform: Transform,
    result: PrimitiveType,
}

const MICROS_PER_DAY: i64 = 86_400_000_000;
const MICROS_PER_HOUR: i64 = 3_600_000_000;

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `v` floored to a multiple of `w` (Iceberg's truncate of an integer; also the floor division
/// of the time transforms).
fn floor_to(v: &str, w: i64) -> String {
    format!("({v} - ((({v} % {w}) + {w}) % {w}))")
}

fn refuse(field: &str, transform: &Transform, source: &str, why: &str) -> RecoverError {
    RecoverError::Unsupported {
        reason: format!(
            "partition field {field} is {transform}({source}): {why}; the distributed engine cannot write this partition spec: recover it with --engine local"
        ),
    }
}

/// The SQL of the partition value of `transform` over the source column `col` of type `t`.
fn value_sql(col: &str, t: &PrimitiveType, transform: &Transform) -> Option<String> {
    use PrimitiveType as P;
    let year = |c: &str| format!("(CAST(date_part('year', {c}) AS INT) - 1970)");
    let month = |c: &str| format!("(CAST(date_part('month', {c}) AS INT) - 1)");
    match (transform, t) {
        (Transform::Identity, P::String | P::Int | P::Long | P::Boolean | P::Date | P::Timestamptz) => {
            Some(col.to_string())
        }
        (Transform::Year, P::Date | P::Timestamptz) => Some(year(col)),
        (Transform::Month, P::Date | P::Timestamptz) => Some(format!("({} * 12 + {})", year(col), month(col))),
        (Transform::Day, P::Date) => Some(col.to_string()),
        (Transform::Day, P::Timestamptz) => {
            let micros = format!("CAST({col} AS BIGINT)");
            Some(format!(
                "CAST({} / {MICROS_PER_DAY} AS INT)",
                floor_to(&micros, MICROS_PER_DAY)
            ))
        }
        (Transform::Hour, P::Timestamptz) => {
            let micros = format!("CAST({col} AS BIGINT)");
            Some(format!(
                "CAST({} / {MICROS_PER_HOUR} AS INT)",
                floor_to(&micros, MICROS_PER_HOUR)
            ))
        }
        (Transform::Truncate(w), P::Int | P::Long) => Some(floor_to(col, i64::from(*w))),
        (Transform::Truncate(w), P::String) => Some(format!("left({col}, {w})")),
        _ => None,
    }
}

/// The SQL of the code of a value of Iceberg type `t` (see the module doc).
fn code_sql(v: &str, t: &PrimitiveType) -> String {
    let text = match t {
        PrimitiveType::String => format!("encode({v}, 'hex')"),
        PrimitiveType::Date => format!("CAST(CAST({v} AS INT) AS VARCHAR)"),
        PrimitiveType::Timestamptz => format!("CAST(CAST({v} AS BIGINT) AS VARCHAR)"),
        _ => format!("CAST({v} AS VARCHAR)"),
    };
    format!("CASE WHEN {v} IS NULL THEN 'n' ELSE concat('v', {text}) END")
}

/// The plan of `spec` over `schema`, or the refusal (exit 3) naming the field and transform.
pub fn plan(spec: &PartitionSpec, schema: &Schema) -> Result<PartitionPlan, RecoverError> {
    let mut columns = Vec::new();
    let mut fields = Vec::new();
    for (index, f) in spec.fields().iter().enumerate() {
        let source = schema
            .field_by_id(f.source_id)
            .ok_or_else(|| RecoverError::Unsupported {
                reason: format!(
                    "partition field {} names source field {}, which the schema does not have",
                    f.name, f.source_id
                ),
            })?;
        let Type::Primitive(t) = source.field_type.as_ref() else {
            return Err(refuse(
                &f.name,
                &f.transform,
                &source.name,
                "its source is not a primitive column",
            ));
        };
        let result = match f.transform.result_type(&source.field_type) {
            Ok(Type::Primitive(r)) => r,
            _ => {
                return Err(refuse(
                    &f.name,
                    &f.transform,
                    &source.name,
                    "not a valid transform of its type",
                ));
            }
        };
        fields.push(Field {
            name: f.name.clone(),
            source_id: f.source_id,
            transform: f.transform,
            result: result.clone(),
        });
        if f.transform == Transform::Void {
            continue;
        }
        if matches!(f.transform, Transform::Bucket(_)) {
            return Err(refuse(
                &f.name,
                &f.transform,
                &source.name,
                "bucket needs Iceberg's murmur3 hash, which DataFusion SQL does not have and a foreign cluster has no function for",
            ));
        }
        let Some(value) = value_sql(&quote(&source.name), t, &f.transform) else {
            return Err(refuse(
                &f.name,
                &f.transform,
                &source.name,
                &format!("not computed exactly in DataFusion SQL for a {t} column"),
            ));
        };
        columns.push(PartitionColumn {
            index,
            name: format!("_tidemark_p{index}"),
            sql: code_sql(&value, &result),
        });
    }
    Ok(PartitionPlan { columns, fields })
}

fn bad(location: &str, message: String) -> EngineError {
    EngineError::Store {
        location: location.to_string(),
        message,
    }
}

/// The value a code stands for, as a datum of type `t` (`None`: null).
fn decode(code: &str, t: &PrimitiveType) -> Result<Option<Datum>, String> {
    if code == "n" {
        return Ok(None);
    }
    let text = code
        .strip_prefix('v')
        .ok_or_else(|| format!("partition code {code:?}"))?;
    let int = |s: &str| s.parse::<i64>().map_err(|e| format!("partition code {code:?}: {e}"));
    let narrow = |v: i64| i32::try_from(v).map_err(|e| format!("partition code {code:?}: {e}"));
    Ok(Some(match t {
        PrimitiveType::Int => Datum::int(narrow(int(text)?)?),
        PrimitiveType::Long => Datum::long(int(text)?),
        PrimitiveType::Date => Datum::date(narrow(int(text)?)?),
        PrimitiveType::Timestamptz => Datum::timestamptz_micros(int(text)?),
        PrimitiveType::Boolean => Datum::bool(match text {
            "true" => true,
            "false" => false,
            _ => return Err(format!("partition code {code:?}")),
        }),
        PrimitiveType::String => {
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| format!("partition code {code:?}: not hex"))?;
            Datum::string(String::from_utf8(bytes).map_err(|e| format!("partition code {code:?}: {e}"))?)
        }
        other => return Err(format!("partition code {code:?} of type {other}")),
    }))
}

impl PartitionPlan {
    /// The partition values of the file at `relative` (its path under the job's output folder,
    /// `_tidemark_p0=<code>/…/<file>`), one per field of the spec.
    pub fn values_of(&self, relative: &str) -> Result<Vec<Option<Datum>>, EngineError> {
        let dirs: Vec<&str> = relative.split('/').collect();
        let dirs = &dirs[..dirs.len().saturating_sub(1)];
        if dirs.len() != self.columns.len() {
            return Err(bad(
                relative,
                format!(
                    "a written file in {} partition folders, the spec has {} computed fields",
                    dirs.len(),
                    self.columns.len()
                ),
            ));
        }
        let mut values = vec![None; self.fields.len()];
        for (dir, col) in dirs.iter().zip(&self.columns) {
            let code = dir
                .strip_prefix(&format!("{}=", col.name))
                .ok_or_else(|| bad(relative, format!("folder {dir:?} is not of {}", col.name)))?;
            values[col.index] = decode(code, &self.fields[col.index].result).map_err(|m| bad(relative, m))?;
        }
        Ok(values)
    }

    /// Checks `values` against the footer statistics of `file` (see the module doc) and returns
    /// them as the file's Iceberg partition.
    pub fn partition_of(&self, file: &DataFile, values: Vec<Option<Datum>>) -> Result<Struct, EngineError> {
        let path = file.file_path();
        for (f, value) in self.fields.iter().zip(&values) {
            let nulls = file.null_value_counts().get(&f.source_id).copied();
            let all_null = nulls == Some(file.record_count());
            let wrong = |why: String| {
                bad(
                    path,
                    format!(
                        "partition field {} = {value:?} of a written file does not hold: {why}; nothing was committed",
                        f.name
                    ),
                )
            };
            if f.transform == Transform::Void {
                continue;
            }
            match value {
                None if !all_null => return Err(wrong(format!("{nulls:?} nulls in {} rows", file.record_count()))),
                None => continue,
                Some(_) if nulls.is_some_and(|n| n > 0) => {
                    return Err(wrong(format!("the source column has {} nulls", nulls.unwrap_or(0))));
                }
                Some(_) => {}
            }
            let function = create_transform_function(&f.transform).map_err(|e| wrong(e.to_string()))?;
            for bound in [
                file.lower_bounds().get(&f.source_id),
                file.upper_bounds().get(&f.source_id),
            ]
            .into_iter()
            .flatten()
            {
                let of_bound = function.transform_literal(bound).map_err(|e| wrong(e.to_string()))?;
                if of_bound.as_ref() != value.as_ref() {
                    return Err(wrong(format!("the source bound {bound} gives {of_bound:?}")));
                }
            }
        }
        Ok(values.into_iter().map(|v| v.map(Literal::from)).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, NestedField, UnboundPartitionSpec};

    use super::*;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "k", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(2, "t", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            ])
            .build()
            .unwrap()
    }

    fn spec(transform: Transform) -> PartitionSpec {
        UnboundPartitionSpec::builder()
            .add_partition_field(2, "t_part", transform)
            .unwrap()
            .build()
            .bind(schema())
            .unwrap()
    }

    /// A file of `rows` rows whose column `t` spans `lo..=hi` (microseconds) with `nulls` nulls.
    fn file(lo: i64, hi: i64, rows: u64, nulls: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("file:///t/data/x/_tidemark_p0=v1/f.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .record_count(rows)
            .file_size_in_bytes(10)
            .null_value_counts(HashMap::from([(2, nulls)]))
            .lower_bounds(HashMap::from([(2, Datum::timestamptz_micros(lo))]))
            .upper_bounds(HashMap::from([(2, Datum::timestamptz_micros(hi))]))
            .partition_spec_id(0)
            .build()
            .unwrap()
    }

    #[test]
    fn a_files_value_is_checked_against_its_bounds_with_icebergs_transform() {
        let day = plan(&spec(Transform::Day), &schema()).unwrap();
        let d = MICROS_PER_DAY;
        // Day 1 holds [d, 2d): the folder's value holds for a file inside it.
        let values = day.values_of("_tidemark_p0=v1/f.parquet").unwrap();
        assert_eq!(values, vec![Some(Datum::date(1))]);
        let p = day.partition_of(&file(d, 2 * d - 1, 5, 0), values.clone()).unwrap();
        assert_eq!(p, Struct::from_iter([Some(Literal::date(1))]));
        // A file spanning two days, or labelled with the wrong day, or holding nulls, is refused.
        for (f, why) in [
            (file(d, 2 * d, 5, 0), "gives Some"),
            (file(0, 10, 5, 0), "gives Some"),
            (file(d, d, 5, 1), "nulls"),
        ] {
            let err = day.partition_of(&f, values.clone()).unwrap_err().to_string();
            assert!(err.contains("partition field t_part") && err.contains(why), "{err}");
        }
        // Before 1970 the day is floored, as Iceberg's (and the SQL's) is.
        assert_eq!(
            day.partition_of(&file(-1, -1, 1, 0), vec![Some(Datum::date(-1))])
                .unwrap(),
            Struct::from_iter([Some(Literal::date(-1))])
        );
        // A null value needs an all-null column.
        assert!(day.partition_of(&file(d, d, 3, 3), vec![None]).is_ok());
        assert!(day.partition_of(&file(d, d, 3, 2), vec![None]).is_err());
        // Folders that are not the plan's are named.
        assert!(day.values_of("f.parquet").is_err());
        assert!(day.values_of("other=v1/f.parquet").is_err());
    }

    #[test]
    fn transforms_without_an_exact_sql_form_are_refused_naming_field_and_transform() {
        let err = plan(&spec(Transform::Bucket(8)), &schema()).unwrap_err().to_string();
        assert!(
            err.contains("partition field t_part is bucket[8](t)") && err.contains("--engine local"),
            "{err}"
        );
        let void = plan(&spec(Transform::Void), &schema()).unwrap();
        assert!(void.columns.is_empty());
        assert_eq!(void.values_of("f.parquet").unwrap(), vec![None]);
    }

    #[test]
    fn codes_decode_exactly_nulls_and_odd_strings_included() {
        for s in ["", "a/b=c", "é€😀", "n", "v1", "__HIVE_DEFAULT_PARTITION__"] {
            let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
            assert_eq!(
                decode(&format!("v{hex}"), &PrimitiveType::String).unwrap(),
                Some(Datum::string(s))
            );
        }
        assert_eq!(decode("n", &PrimitiveType::String).unwrap(), None);
        assert_eq!(decode("v-3", &PrimitiveType::Int).unwrap(), Some(Datum::int(-3)));
        assert_eq!(
            decode("v20400", &PrimitiveType::Date).unwrap(),
            Some(Datum::date(20400))
        );
        assert!(decode("x1", &PrimitiveType::Int).is_err());
        assert!(decode("v99999999999", &PrimitiveType::Int).is_err());
        assert!(decode("vzz", &PrimitiveType::String).is_err());
    }
}
