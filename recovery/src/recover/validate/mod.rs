//! Step 5: validate the recovered table against an independent reference: the merge rules
//! implemented a second time, columnar ([`super::columnar`]; it shares no code with the
//! DataFusion plan that produced the table), over the trusted snapshot's rows (read from the
//! snapshot's own files, not from the seeded table) and the verified events up to H. Every key is compared: missing, extra,
//! different values, different version, different delete flag, duplicate keys. Equal counts prove
//! nothing, so counts are only reported beside the per-key verdict. A distributed recovery asks
//! for a sample of the key partitions instead ([`validate_keys`], [`SampleRequest`]): it checks
//! every key on the cluster itself (`recover::distributed_check`).
//!
//! `keys.rs`: the validation ([`validate`], [`validate_keys`]), whole or split by key hash;
//! `by_range.rs` and `ranges.rs`: the split by key range (its run, and its plan from the
//! manifests' key bounds); `spill.rs`: the partitions' spill files; `limits.rs`: the memory
//! bound ([`PARTITION_ROWS`]) and [`Split`]; `report.rs`: the verdict ([`ValidationReport`]).

mod by_range;
mod keys;
mod limits;
mod ranges;
mod report;
mod spill;

pub use keys::{events_by_position, table_rows, validate, validate_keys};
#[cfg(test)]
pub(crate) use limits::{MAX_PART_EVENTS, ROWS_IN_FLIGHT};
pub use limits::{PARTITION_ROWS, Split};
pub use report::{
    DistributedCheck, FIRST_MISMATCHES, MIN_SAMPLE_PARTITIONS, Mismatch, Sample, SampleRequest, ValidationReport,
};
