//! The S3 backend of the object-store contract ([`super`]): `s3://bucket/prefix` on AWS S3 or any
//! S3-protocol server that supports bucket versioning and conditional `PutObject`
//! (`If-None-Match: *`, `If-Match`), through aws-sdk-s3.
//!
//! The contract maps onto S3 almost one to one: versioning gives version ids and delete markers,
//! the conditional headers give create-only and compare-and-swap (S3 evaluates them atomically on
//! the server, so the guarantee holds between processes). What this module adds is the translation
//! of keys (relative to the prefix) and of errors into [`StoreError`]s that name the object.
//!
//! # Timeouts and retries
//!
//! Every request has a connect timeout, a read timeout (time to the first byte of the reply) and
//! a per-attempt timeout; a GET body that stalls or breaks is read again. Transient failures
//! (5xx, 503 SlowDown, timeouts, resets) are retried by the SDK's standard strategy with
//! exponential backoff and jitter. The settings come from the AWS standard names
//! (`AWS_MAX_ATTEMPTS`, `AWS_RETRY_MODE`, or `max_attempts` / `retry_mode` in the `AWS_PROFILE`
//! profile) and tidemark's `TIDEMARK_S3_*_TIMEOUT` variables; see [`S3Options::from_env`] for
//! the defaults. A put whose reply is lost after the last attempt is
//! [`StoreError::OutcomeUnknown`], resolved by the caller reading back (the store contract).
//! [`request_stats`] counts operations, retried attempts and failures of the process.
//!
//! * [`bucket`] — [`S3Store`]: the contract's operations on a bucket and prefix;
//!   [`create_test_bucket`] for tests and sandboxes.
//! * [`options`] — [`S3Options`] (endpoint, region, credentials, timeouts, retries) and the
//!   client built from them.
//! * [`classify`] — an SDK error turned into the contract's [`StoreError`](super::StoreError),
//!   described in one line.
//! * [`stats`] — [`request_stats`]: operations, retried attempts and failures of the process.

pub mod bucket;
pub mod classify;
pub mod options;
pub mod stats;

pub use bucket::{S3Store, create_test_bucket};
pub use options::{
    DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_ATTEMPTS, DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_READ_TIMEOUT, PUT_BYTES_PER_SECOND, S3Options, StaticCredentials,
};
pub use stats::request_stats;
