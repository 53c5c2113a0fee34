//! The event codec: NDJSON lines in, Arrow record batches in the spec's event schema, Parquet
//! event objects out (so that DataFusion reads a batch as it is stored), and back.
//!
//! Every value is checked against the spec as it is parsed; an error names the input line and
//! the field. Decimals are exact (string or JSON number, never through floating point).

use std::io::BufRead;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, TimestampMicrosecondArray};
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use crate::error::{JournalError, Result};
use crate::json_line;
use crate::spec::{ColumnType, CompiledSpec, UTC};

/// Parquet key-value metadata written into every event object.
pub const META_FORMAT_VERSION: &str = "tidemark.format_version";
pub const META_SPEC_DIGEST: &str = "tidemark.spec_digest";

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

/// RFC 3339 to microseconds since the epoch (UTC), exactly: the column holds microseconds, so a
/// value with non-zero digits below a microsecond is refused (as a decimal with more fractional
/// digits than its scale is), and so are a leap second (`23:59:60`, which would silently become
/// the next second) and a year outside 0001–9999 (which other Iceberg readers, PyIceberg among
/// them, cannot read).
pub fn parse_timestamp_micros(s: &str) -> std::result::Result<i64, String> {
    let t = DateTime::parse_from_rfc3339(s).map_err(|e| format!("{s:?} is not an RFC 3339 timestamp: {e}"))?;
    let nanos = t.timestamp_subsec_nanos();
    if nanos >= 1_000_000_000 {
        return Err(format!(
            "{s:?} is a leap second, which an Iceberg timestamp cannot hold"
        ));
    }
    if nanos % 1_000 != 0 {
        return Err(format!(
            "{s:?} has digits below a microsecond, which the timestamp column (microseconds) cannot hold"
        ));
    }
    let utc = t.with_timezone(&Utc);
    let year = chrono::Datelike::year(&utc);
    if !(1..=9999).contains(&year) {
        return Err(format!(
            "{s:?} is in year {year}: timestamps must lie in years 0001 to 9999 (UTC)"
        ));
    }
    Ok(utc.timestamp_micros())
}

pub fn format_timestamp_micros(micros: i64) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true))
        .unwrap_or_else(|| micros.to_string())
}

/// Exact decimal text (`-12.5`, `3`, `0.07`) to its unscaled i128 at `scale`. Refuses more
/// fractional digits than the scale and more digits than the precision.
pub fn parse_decimal(text: &str, precision: u8, scale: i8) -> std::result::Result<i128, String> {
    let t = text.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int_part.is_empty() && frac_part.is_empty()) || !ok(int_part) || !ok(frac_part) {
        return Err(format!("{text:?} is not a decimal number"));
    }
    let scale = scale as usize;
    let frac_trimmed = frac_part.trim_end_matches('0');
    if frac_trimmed.len() > scale {
        return Err(format!("{text:?} has more than {scale} fractional digits"));
    }
    let int_trimmed = int_part.trim_start_matches('0');
    if int_trimmed.len() + scale > precision as usize {
        return Err(format!("{text:?} does not fit decimal({precision},{scale})"));
    }
    let mut unscaled: i128 = 0;
    for b in int_trimmed.bytes().chain(frac_trimmed.bytes()) {
        unscaled = unscaled * 10 + i128::from(b - b'0');
    }
    for _ in frac_trimmed.len()..scale {
        unscaled *= 10;
    }
    Ok(if neg { -unscaled } else { unscaled })
}

/// Decimal text of an unscaled value, e.g. (1250, 2) → "12.50".
pub fn format_decimal(unscaled: i128, scale: i8) -> String {
    let neg = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale.max(0) as usize;
    let body = if scale == 0 {
        digits
    } else if digits.len() > scale {
        format!(
            "{}.{}",
            &digits[..digits.len() - scale],
            &digits[digits.len() - scale..]
        )
    } else {
        format!("0.{}{}", "0".repeat(scale - digits.len()), digits)
    };
    if neg { format!("-{body}") } else { body }
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

fn writer_properties(spec: &CompiledSpec) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level 1")))
        .set_created_by("tidemark".into())
        .set_key_value_metadata(Some(vec![
            KeyValue::new(META_FORMAT_VERSION.into(), tidemark_schemas::FORMAT_VERSION.to_string()),
            KeyValue::new(META_SPEC_DIGEST.into(), spec.digest.clone()),
        ]))
        .build()
}

/// Encodes a batch as a Parquet event object. Deterministic: the same batch gives the same bytes.
pub fn encode_parquet(spec: &CompiledSpec, batch: &RecordBatch) -> Result<Bytes> {
    let mut out = Vec::with_capacity(batch.get_array_memory_size() / 2);
    let fail = |e: parquet::errors::ParquetError| JournalError::Format {
        context: "encoding an event object".into(),
        message: e.to_string(),
    };
    let mut writer =
        ArrowWriter::try_new(&mut out, spec.event_schema.clone(), Some(writer_properties(spec))).map_err(fail)?;
    writer.write(batch).map_err(fail)?;
    writer.close().map_err(fail)?;
    Ok(Bytes::from(out))
}

/// Decodes an event object into batches in the spec's event schema, checking its metadata.
pub fn decode_parquet(spec: &CompiledSpec, key: &str, body: Bytes) -> Result<Vec<RecordBatch>> {
    let builder = open_reader(spec, key, body)?;
    read_all(key, builder)
}

/// Only the `journal_position` column of an event object (what the verifier needs).
pub fn decode_positions(spec: &CompiledSpec, key: &str, body: Bytes) -> Result<Vec<Int64Array>> {
    let builder = open_reader(spec, key, body)?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), [0]);
    let batches = read_all(key, builder.with_projection(mask))?;
    Ok(batches
        .iter()
        .map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("position column is int64")
                .clone()
        })
        .collect())
}

fn corrupt(key: &str, message: impl Into<String>) -> JournalError {
    JournalError::Format {
        context: format!("event object {key}"),
        message: message.into(),
    }
}

fn open_reader(spec: &CompiledSpec, key: &str, body: Bytes) -> Result<ParquetRecordBatchReaderBuilder<Bytes>> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(body)
        .map_err(|e| corrupt(key, format!("not a readable Parquet file: {e}")))?;
    let kv = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned()
        .unwrap_or_default();
    let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
    if get(META_SPEC_DIGEST).as_deref() != Some(spec.digest.as_str()) {
        return Err(corrupt(
            key,
            format!(
                "spec digest {:?} differs from the journal's {}",
                get(META_SPEC_DIGEST),
                spec.digest
            ),
        ));
    }
    let fields: Vec<_> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    let want: Vec<_> = spec
        .event_schema
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    if fields != want {
        return Err(corrupt(key, "its columns differ from the journal's spec"));
    }
    Ok(builder)
}

fn read_all(key: &str, builder: ParquetRecordBatchReaderBuilder<Bytes>) -> Result<Vec<RecordBatch>> {
    let reader = builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| corrupt(key, e.to_string()))?;
    reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| corrupt(key, e.to_string()))
}

/// Min and max of the event-time column, as RFC 3339.
pub fn event_time_range(spec: &CompiledSpec, batch: &RecordBatch) -> (Option<String>, Option<String>) {
    let Some(i) = spec.event_time_index else {
        return (None, None);
    };
    let col = batch.column(spec.event_column(i));
    let ts = col
        .as_any()
        .downcast_ref::<TimestampMicrosecondArray>()
        .expect("event time is a timestamp");
    let min = arrow::compute::min(ts).map(format_timestamp_micros);
    let max = arrow::compute::max(ts).map(format_timestamp_micros);
    (min, max)
}

/// The positions of a batch must be `first..=first+len-1`; returns the first offending index.
pub fn check_contiguous(positions: &[Int64Array], first: u64) -> std::result::Result<u64, (u64, u64)> {
    let mut expected = first as i64;
    for arr in positions {
        if arr.null_count() > 0 {
            return Err((expected as u64, 0));
        }
        for &p in arr.values().iter() {
            if p != expected {
                return Err((expected as u64, p as u64));
            }
            expected += 1;
        }
    }
    Ok(expected as u64 - first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact() {
        assert_eq!(parse_decimal("12.5", 18, 2), Ok(1250));
        assert_eq!(parse_decimal("-0.07", 18, 2), Ok(-7));
        assert_eq!(parse_decimal("3", 18, 2), Ok(300));
        assert_eq!(parse_decimal("1.230", 18, 2), Ok(123));
        assert!(parse_decimal("1.234", 18, 2).unwrap_err().contains("more than 2"));
        assert!(parse_decimal("1e3", 18, 2).is_err());
        assert!(
            parse_decimal("12345678901234567", 18, 2)
                .unwrap_err()
                .contains("does not fit")
        );
        assert_eq!(format_decimal(1250, 2), "12.50");
        assert_eq!(format_decimal(-7, 2), "-0.07");
        assert_eq!(format_decimal(5, 0), "5");
    }

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

    #[test]
    fn timestamps_are_exact_or_refused() {
        assert_eq!(parse_timestamp_micros("1970-01-01T00:00:00.000001Z"), Ok(1));
        // Zeros below a microsecond change nothing; any other digit there is refused.
        assert_eq!(parse_timestamp_micros("1970-01-01T00:00:00.000001000Z"), Ok(1));
        assert!(
            parse_timestamp_micros("2026-11-29T08:00:00.0000011Z")
                .unwrap_err()
                .contains("below a microsecond")
        );
        assert!(
            parse_timestamp_micros("2016-12-31T23:59:60Z")
                .unwrap_err()
                .contains("leap second")
        );
        assert!(
            parse_timestamp_micros("0000-01-01T00:00:00Z")
                .unwrap_err()
                .contains("year 0")
        );
        // Year 0001 in UTC is the first one readers take; an offset that moves it to year 0 is not.
        assert!(parse_timestamp_micros("0001-01-01T00:00:00Z").is_ok());
        assert!(parse_timestamp_micros("0001-01-01T00:00:00+01:00").is_err());
        assert!(parse_timestamp_micros("9999-12-31T23:59:59.999999Z").is_ok());
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
