//! The journal: an append-only, checksummed chain of event batches on a versioned object store.
//!
//! * [`store`] — the object-store layer and its contract (local folder, S3).
//! * [`paths`] — every key the journal writes, built in one place.
//! * [`spec`] and [`codec`] — the table spec, NDJSON input, and the Parquet event objects;
//!   [`json_line`] keeps what a JSON parser loses (duplicate keys, a number's literal digits).
//! * [`writer`] — `append`: event object first, then the manifest (create-only); a batch counts
//!   only once both exist.
//! * [`verify`] — walks the manifest chain and proves a contiguous range of positions.
//! * [`events`] — reads the events of a range of positions (any position, also inside a batch).
//! * [`checkpoint`] — create-only checkpoint records of the pipeline.
//! * [`conflict`] — append refuses two events with one key and version and different payloads;
//!   [`resolution`] records an operator's way past a conflict the journal already holds.
//! * [`capability`] — probes a store for what the journal relies on.
//! * [`resend`] — events re-sent at positions the journal holds: compared, never appended twice.
//! * [`failpoint`] — `TIDEMARK_FAILPOINT`: simulated crashes at every step boundary.

pub mod capability;
pub mod checkpoint;
pub mod clock;
pub mod codec;
pub mod conflict;
pub mod error;
pub mod events;
pub mod failpoint;
pub mod generate;
pub mod journal;
pub mod json_line;
pub mod paths;
pub mod resend;
pub mod resolution;
pub mod spec;
pub mod store;
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod verify;
pub mod writer;

pub use error::{JournalError, Result};
pub use journal::Journal;

/// `sha256:<hex>` of some bytes: the digest form used in every format.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
