//! [`NdjsonReader`]: NDJSON events read into record batches in the spec's event schema, every
//! value checked against the spec as it is parsed (an error names the input line and the field),
//! positions checked contiguous.

use std::io::BufRead;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use chrono::NaiveDate;
use serde_json::Value;

use super::values::{parse_decimal, parse_timestamp_micros};
use crate::error::{JournalError, Result};
use crate::json_line;
use crate::spec::{ColumnType, CompiledSpec, UTC};

enum ColumnBuilder {
    Utf8(StringBuilder),
    Int64(Int64Builder),
    Int32(Int32Builder),
    Float64(Float64Builder),
    Bool(BooleanBuilder),
    Date(Date32Builder),
    Ts(TimestampMicrosecondBuilder),
    Dec(Decimal128Builder, u8, i8),
}

impl ColumnBuilder {
    fn new(t: ColumnType, capacity: usize) -> Self {
        match t {
            ColumnType::String => ColumnBuilder::Utf8(StringBuilder::with_capacity(capacity, capacity * 16)),
            ColumnType::Long => ColumnBuilder::Int64(Int64Builder::with_capacity(capacity)),
            ColumnType::Int => ColumnBuilder::Int32(Int32Builder::with_capacity(capacity)),
            ColumnType::Double => ColumnBuilder::Float64(Float64Builder::with_capacity(capacity)),
            ColumnType::Boolean => ColumnBuilder::Bool(BooleanBuilder::with_capacity(capacity)),
            ColumnType::Date => ColumnBuilder::Date(Date32Builder::with_capacity(capacity)),
            ColumnType::TimestampTz => {
                ColumnBuilder::Ts(TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone(UTC))
            }
            ColumnType::Decimal { precision, scale } => ColumnBuilder::Dec(
                Decimal128Builder::with_capacity(capacity)
                    .with_precision_and_scale(precision, scale)
                    .expect("valid decimal"),
                precision,
                scale,
            ),
        }
    }

    /// Appends one value; `literal` is its source text (a decimal sent as a JSON number is read
    /// from its digits, never through `f64`).
    fn append(&mut self, v: Option<&Value>, literal: Option<&str>) -> std::result::Result<(), String> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            self.append_null();
            return Ok(());
        };
        match self {
            ColumnBuilder::Utf8(b) => b.append_value(v.as_str().ok_or_else(|| expected("a string", v))?),
            ColumnBuilder::Int64(b) => b.append_value(v.as_i64().ok_or_else(|| expected("an integer", v))?),
            ColumnBuilder::Int32(b) => {
                let i = v.as_i64().ok_or_else(|| expected("an integer", v))?;
                b.append_value(i32::try_from(i).map_err(|_| format!("{i} does not fit an int"))?)
            }
            ColumnBuilder::Float64(b) => b.append_value(v.as_f64().ok_or_else(|| expected("a number", v))?),
            ColumnBuilder::Bool(b) => b.append_value(v.as_bool().ok_or_else(|| expected("true or false", v))?),
            ColumnBuilder::Date(b) => {
                let s = v.as_str().ok_or_else(|| expected("a date string (YYYY-MM-DD)", v))?;
                let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|e| format!("{s:?} is not a date: {e}"))?;
                let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch");
                b.append_value((d - epoch).num_days() as i32)
            }
            ColumnBuilder::Ts(b) => {
                let s = v.as_str().ok_or_else(|| expected("an RFC 3339 timestamp string", v))?;
                b.append_value(parse_timestamp_micros(s)?)
            }
            ColumnBuilder::Dec(b, p, s) => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => match literal {
                        Some(lit) => json_line::number_literal_as_decimal(lit)?,
                        None => n.to_string(),
                    },
                    _ => return Err(expected("a decimal (string or number)", v)),
                };
                b.append_value(parse_decimal(&text, *p, *s)?)
            }
        }
        Ok(())
    }

    fn append_null(&mut self) {
        match self {
            ColumnBuilder::Utf8(b) => b.append_null(),
            ColumnBuilder::Int64(b) => b.append_null(),
            ColumnBuilder::Int32(b) => b.append_null(),
            ColumnBuilder::Float64(b) => b.append_null(),
            ColumnBuilder::Bool(b) => b.append_null(),
            ColumnBuilder::Date(b) => b.append_null(),
            ColumnBuilder::Ts(b) => b.append_null(),
            ColumnBuilder::Dec(b, ..) => b.append_null(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Utf8(b) => Arc::new(b.finish()),
            ColumnBuilder::Int64(b) => Arc::new(b.finish()),
            ColumnBuilder::Int32(b) => Arc::new(b.finish()),
            ColumnBuilder::Float64(b) => Arc::new(b.finish()),
            ColumnBuilder::Bool(b) => Arc::new(b.finish()),
            ColumnBuilder::Date(b) => Arc::new(b.finish()),
            ColumnBuilder::Ts(b) => Arc::new(b.finish()),
            ColumnBuilder::Dec(b, ..) => Arc::new(b.finish()),
        }
    }
}

fn expected(what: &str, v: &Value) -> String {
    let mut shown = v.to_string();
    if shown.len() > 40 {
        shown.truncate(40);
        shown.push('…');
    }
    format!("expected {what}, got {shown}")
}

/// The longest string field an event may carry, in bytes (64 KiB): an order's fields are short,
/// and a huge value (a whole document pasted into a field) is refused with its line instead of
/// being written into every batch, the table and each validation.
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// One parsed line's position and its line number in the input (for messages).
#[derive(Debug, Clone, Copy)]
pub struct LineRef {
    pub line: u64,
    pub position: u64,
}

/// Reads NDJSON events into record batches of at most `batch_size` rows, checking every field
/// against the spec and that positions are contiguous from `expected_first`.
pub struct NdjsonReader<'a, R> {
    spec: &'a CompiledSpec,
    input: R,
    source_name: String,
    line_no: u64,
    next_position: u64,
    buf: String,
    /// Input line of each row of the last batch.
    lines: Vec<u64>,
}

impl<'a, R: BufRead> NdjsonReader<'a, R> {
    pub fn new(spec: &'a CompiledSpec, input: R, source_name: impl Into<String>, expected_first: u64) -> Self {
        NdjsonReader {
            spec,
            input,
            source_name: source_name.into(),
            line_no: 0,
            next_position: expected_first,
            buf: String::new(),
            lines: Vec::new(),
        }
    }

    fn input_error(&self, message: impl Into<String>) -> JournalError {
        JournalError::Input {
            source_name: self.source_name.clone(),
            line: self.line_no,
            message: message.into(),
        }
    }

    /// The next batch, or `None` at the end of the input.
    pub fn next_batch(&mut self, batch_size: usize) -> Result<Option<RecordBatch>> {
        let spec = self.spec;
        let mut positions = Int64Builder::with_capacity(batch_size);
        let mut builders: Vec<ColumnBuilder> = spec.types.iter().map(|t| ColumnBuilder::new(*t, batch_size)).collect();
        let mut rows = 0usize;
        self.lines.clear();
        while rows < batch_size {
            self.buf.clear();
            let n = self.input.read_line(&mut self.buf).map_err(|e| {
                // The line that could not be read is the next one (invalid UTF-8 on line 5 is
                // line 5, not the last line read).
                JournalError::Input {
                    source_name: self.source_name.clone(),
                    line: self.line_no + 1,
                    message: format!("cannot read input: {e}"),
                }
            })?;
            if n == 0 {
                break;
            }
            self.line_no += 1;
            let mut line = self.buf.trim();
            if self.line_no == 1 {
                // A UTF-8 byte-order mark (as some editors and Windows tools write) is not data.
                line = line.strip_prefix('\u{feff}').unwrap_or(line).trim_start();
            }
            if line.is_empty() {
                continue;
            }
            let value: Value =
                serde_json::from_str(line).map_err(|e| self.input_error(format!("malformed JSON: {e}")))?;
            let Value::Object(mut obj) = value else {
                return Err(self.input_error("an event is a JSON object"));
            };
            let literals = literal_fields(line).map_err(|m| self.input_error(m))?;
            match obj.remove("format_version") {
                None => {}
                Some(v) if v.as_u64() == Some(u64::from(tidemark_schemas::FORMAT_VERSION)) => {}
                Some(v) => return Err(self.input_error(format!("field `format_version`: unsupported {v}"))),
            }
            let position = match obj.remove("position") {
                Some(v) => v.as_u64().filter(|p| *p > 0).ok_or_else(|| {
                    self.input_error(format!("field `position`: {}", expected("a positive integer", &v)))
                })?,
                None => return Err(self.input_error("missing field `position`")),
            };
            if position != self.next_position {
                return Err(JournalError::PositionMismatch {
                    source_name: self.source_name.clone(),
                    line: self.line_no,
                    expected: self.next_position,
                    received: position,
                });
            }
            for (i, c) in spec.spec.columns.iter().enumerate() {
                let v = obj.remove(&c.name);
                match &v {
                    None if !c.nullable => {
                        return Err(self.input_error(format!("missing field `{}` (position {position})", c.name)));
                    }
                    Some(Value::Null) if !c.nullable => {
                        return Err(self.input_error(format!(
                            "field `{}` (position {position}) is null, but the spec requires a value",
                            c.name
                        )));
                    }
                    Some(Value::String(s)) if s.len() > MAX_STRING_BYTES => {
                        return Err(self.input_error(format!(
                            "field `{}` (position {position}) is {} bytes long; a string holds at most {MAX_STRING_BYTES} bytes",
                            c.name,
                            s.len()
                        )));
                    }
                    _ => {}
                }
                let literal = literals
                    .iter()
                    .find(|(k, _)| k == &c.name)
                    .map(|(_, r)| &line[r.clone()]);
                check_identity(spec, i, v.as_ref())
                    .and_then(|()| builders[i].append(v.as_ref(), literal))
                    .map_err(|m| self.input_error(format!("field `{}` (position {position}): {m}", c.name)))?;
            }
            if let Some(extra) = obj.keys().next() {
                return Err(self.input_error(format!(
                    "unknown field `{extra}` (position {position}); the spec's columns are {}",
                    spec.spec
                        .columns
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            positions.append_value(position as i64);
            self.lines.push(self.line_no);
            self.next_position += 1;
            rows += 1;
        }
        if rows == 0 {
            return Ok(None);
        }
        let mut columns: Vec<ArrayRef> = vec![Arc::new(positions.finish())];
        columns.extend(builders.iter_mut().map(ColumnBuilder::finish));
        let batch = RecordBatch::try_new(spec.event_schema.clone(), columns)
            .map_err(|e| self.input_error(format!("cannot build a batch: {e}")))?;
        Ok(Some(batch))
    }

    /// The input line of each row of the batch the last [`Self::next_batch`] returned.
    pub fn last_lines(&self) -> &[u64] {
        &self.lines
    }

    /// The position the next event must have.
    pub fn next_position(&self) -> u64 {
        self.next_position
    }
}

/// The line's top-level fields with their literal text; a field named twice is refused (which of
/// the two a JSON reader keeps differs between readers, so the event is ambiguous).
fn literal_fields(line: &str) -> std::result::Result<Vec<json_line::Field<'_>>, String> {
    let fields = json_line::object_fields(line)?;
    for (i, (k, _)) in fields.iter().enumerate() {
        if fields[..i].iter().any(|(seen, _)| seen == k) {
            return Err(format!("field `{k}` appears twice in one event; send each field once"));
        }
    }
    Ok(fields)
}

/// The key and the version identify an event: an empty key or a negative version is refused.
fn check_identity(spec: &CompiledSpec, column: usize, v: Option<&Value>) -> std::result::Result<(), String> {
    if column == spec.key_index
        && let Some(Value::String(s)) = v
        && s.trim().is_empty()
    {
        return Err(format!("the key is empty ({s:?}); every event needs a key"));
    }
    if column == spec.version_index
        && let Some(n) = v.and_then(Value::as_i64)
        && n < 0
    {
        return Err(format!("the version {n} is negative; versions start at 0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;

    use super::*;
    use crate::codec::{check_contiguous, decode_parquet, decode_positions, encode_parquet};

    #[test]
    fn input_errors_name_their_line_and_cause() {
        let spec = CompiledSpec::orders();
        let read_all = |input: &[u8]| -> Result<u64> {
            let mut r = NdjsonReader::new(&spec, input, "in.ndjson", 1);
            let mut n = 0;
            while let Some(b) = r.next_batch(10)? {
                n += b.num_rows() as u64;
            }
            Ok(n)
        };
        // Invalid UTF-8 on line 3 is reported as line 3.
        let mut bad = (line(1, "") + "\n" + &line(2, "") + "\n").into_bytes();
        bad.extend_from_slice(b"{\"position\": 3, \"order_id\": \"\xff\"}\n");
        let err = read_all(&bad).unwrap_err().to_string();
        assert!(err.starts_with("in.ndjson:3:"), "{err}");
        // A null in a required field says null.
        let null = line(1, "").replace("\"status\":\"placed\"", "\"status\":null");
        let err = read_all(null.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("field `status` (position 1) is null"), "{err}");
        // A string longer than the limit is refused with its line.
        let long = line(1, "").replace(
            "\"status\":\"placed\"",
            &format!("\"status\":\"{}\"", "x".repeat(MAX_STRING_BYTES + 1)),
        );
        let err = read_all(format!("\n{long}").as_bytes()).unwrap_err().to_string();
        assert!(
            err.starts_with("in.ndjson:2:") && err.contains("at most 65536 bytes"),
            "{err}"
        );
        assert_eq!(read_all(b"\n\n").unwrap(), 0);
    }

    fn line(pos: u64, extra: &str) -> String {
        format!(
            r#"{{"position":{pos},"order_id":"o-{pos}","order_version":1,"customer_id":"c","status":"placed","amount":"1.50","currency":"EUR","is_deleted":false,"event_time":"2026-11-29T08:00:00Z"{extra}}}"#
        )
    }

    #[test]
    fn reads_batches_and_round_trips_through_parquet() {
        let spec = CompiledSpec::orders();
        let input: String = (1..=5).map(|p| line(p, "") + "\n").collect();
        let mut r = NdjsonReader::new(&spec, input.as_bytes(), "in.ndjson", 1);
        let b1 = r.next_batch(3).unwrap().unwrap();
        let b2 = r.next_batch(3).unwrap().unwrap();
        assert!(r.next_batch(3).unwrap().is_none());
        assert_eq!((b1.num_rows(), b2.num_rows()), (3, 2));
        let bytes = encode_parquet(&spec, &b1).unwrap();
        assert_eq!(bytes, encode_parquet(&spec, &b1).unwrap(), "encoding is deterministic");
        let back = decode_parquet(&spec, "k", bytes.clone()).unwrap();
        assert_eq!(back, vec![b1]);
        let positions = decode_positions(&spec, "k", bytes).unwrap();
        assert_eq!(check_contiguous(&positions, 1), Ok(3));
        assert_eq!(check_contiguous(&positions, 2), Err((2, 1)));
    }

    #[test]
    fn bad_lines_name_the_line_and_field() {
        let spec = CompiledSpec::orders();
        let cases = [
            (format!("{}\n{{not json\n", line(1, "")), "in:2: malformed JSON"),
            (
                line(1, "").replace(r#""amount":"1.50""#, r#""amount":true"#),
                "field `amount` (position 1)",
            ),
            (
                line(1, "").replace(r#""status":"placed","#, ""),
                "missing field `status`",
            ),
            (line(1, r#","colour":"red""#), "unknown field `colour`"),
            (
                line(1, "").replace(r#""order_version":1"#, r#""order_version":"1""#),
                "expected an integer",
            ),
            (
                format!("{}\n{}\n", line(1, ""), line(3, "")),
                "in:2: position 3 does not continue the journal: expected position 2",
            ),
            (
                format!("{}\n{}\n", line(1, ""), line(1, "")),
                "position 1 does not continue",
            ),
        ];
        for (input, want) in cases {
            let mut r = NdjsonReader::new(&spec, input.as_bytes(), "in", 1);
            let err = r.next_batch(10).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }

    fn amounts(input: &str) -> Vec<i128> {
        let spec = CompiledSpec::orders();
        let mut r = NdjsonReader::new(&spec, input.as_bytes(), "in", 1);
        let b = r.next_batch(10).unwrap().unwrap();
        let amount = spec.spec.columns.iter().position(|c| c.name == "amount").unwrap();
        let col = b.column(spec.event_column(amount));
        let d = col.as_any().downcast_ref::<arrow_array::Decimal128Array>().unwrap();
        (0..d.len()).map(|i| d.value(i)).collect()
    }

    #[test]
    fn decimal_numbers_are_read_from_their_digits() {
        let input = [
            line(1, "").replace(r#""amount":"1.50""#, r#""amount":1234567890123456.78"#),
            line(2, "").replace(r#""amount":"1.50""#, r#""amount":0.1"#),
            line(3, "").replace(r#""amount":"1.50""#, r#""amount":-12.5e-1"#),
            line(4, "").replace(r#""amount":"1.50""#, r#""amount":9007199254740993"#),
        ]
        .join("\n");
        assert_eq!(amounts(&input), vec![123456789012345678, 10, -125, 900719925474099300]);
        // Digits that do not fit the scale are refused, not rounded.
        let spec = CompiledSpec::orders();
        let bad = line(1, "").replace(r#""amount":"1.50""#, r#""amount":1.005"#);
        let err = NdjsonReader::new(&spec, bad.as_bytes(), "in", 1)
            .next_batch(10)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("field `amount` (position 1)") && err.contains("more than 2"),
            "{err}"
        );
    }

    #[test]
    fn ambiguous_identity_is_refused_and_a_bom_is_skipped() {
        let spec = CompiledSpec::orders();
        let cases = [
            (
                format!("{}\n{}", line(1, ""), line(2, r#","status":"paid""#)),
                "in:2: field `status` appears twice",
            ),
            (
                line(1, "").replace(r#""order_id":"o-1""#, r#""order_id":"""#),
                "in:1: field `order_id` (position 1): the key is empty",
            ),
            (
                line(1, "").replace(r#""order_version":1"#, r#""order_version":-3"#),
                "in:1: field `order_version` (position 1): the version -3 is negative",
            ),
        ];
        for (input, want) in cases {
            let err = NdjsonReader::new(&spec, input.as_bytes(), "in", 1)
                .next_batch(10)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
        let with_bom = format!("\u{feff}{}\n{}\n", line(1, ""), line(2, ""));
        let b = NdjsonReader::new(&spec, with_bom.as_bytes(), "in", 1)
            .next_batch(10)
            .unwrap()
            .unwrap();
        assert_eq!(b.num_rows(), 2);
        // A byte-order mark anywhere but at the start is not skipped.
        let late = format!("{}\n\u{feff}{}\n", line(1, ""), line(2, ""));
        assert!(
            NdjsonReader::new(&spec, late.as_bytes(), "in", 1)
                .next_batch(10)
                .is_err()
        );
    }
}
