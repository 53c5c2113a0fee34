//! Parquet event objects: a batch encoded deterministically with the spec's digest in its
//! metadata, decoded back (or only its positions) after checking that digest and the columns;
//! contiguous positions; the event-time range of a batch.

use arrow_array::{Array, Int64Array, RecordBatch, TimestampMicrosecondArray};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::values::format_timestamp_micros;
use crate::error::{JournalError, Result};
use crate::spec::CompiledSpec;

/// Parquet key-value metadata written into every event object.
pub const META_FORMAT_VERSION: &str = "tidemark.format_version";
pub const META_SPEC_DIGEST: &str = "tidemark.spec_digest";

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
