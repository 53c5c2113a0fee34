//! The event codec: NDJSON lines in, Arrow record batches in the spec's event schema, Parquet
//! event objects out (so that DataFusion reads a batch as it is stored), and back.
//!
//! Every value is checked against the spec as it is parsed; an error names the input line and
//! the field. Decimals are exact (string or JSON number, never through floating point).
//!
//! * [`ndjson`] — [`NdjsonReader`]: NDJSON lines read into record batches, every field checked.
//! * [`event_object`] — a batch encoded as a Parquet event object and decoded back, its
//!   positions checked contiguous, its event-time range.
//! * [`values`] — the exact text forms of timestamps (RFC 3339, microseconds) and decimals.

pub mod event_object;
pub mod ndjson;
pub mod values;

pub use event_object::{
    META_FORMAT_VERSION, META_SPEC_DIGEST, check_contiguous, decode_parquet, decode_positions, encode_parquet,
    event_time_range,
};
pub use ndjson::{LineRef, MAX_STRING_BYTES, NdjsonReader};
pub use values::{format_decimal, format_timestamp_micros, parse_decimal, parse_timestamp_micros};
