//! The object-store layer: the small set of operations the journal, the checkpoints and the router
//! rely on, with one written contract that every backend honours.
//!
//! # Contract
//!
//! Keys are `/`-separated strings relative to the store's root (a folder or `s3://bucket/prefix`).
//!
//! * **Atomic visibility.** A `put` is all or nothing: a reader sees the previous version or the
//!   new one, never a partial body. When `put` returns, `get(key, None)` returns the new version
//!   (read-after-write), and `get(key, Some(version_id))` returns exactly those bytes until that
//!   version is deleted.
//! * **Versioning.** Every successful `put` creates a new version with its own `version_id`; older
//!   versions stay readable by id. `delete` adds a delete marker (the key disappears from `list`
//!   and `get(key, None)` but its versions remain); `delete_version` removes one version for good.
//! * **Create-only** (`PutMode::Create`, S3 `If-None-Match: *`). Succeeds only when the key has no
//!   current version. Of any number of concurrent creators exactly one succeeds; every other gets
//!   [`StoreError::Conflict`]. This also holds between processes.
//! * **Compare-and-swap** (`PutMode::Update`, S3 `If-Match: <etag>`). Succeeds only when the key's
//!   current ETag equals the one given. A writer holding a stale ETag gets
//!   [`StoreError::Conflict`] and changes nothing.
//! * **ETags** name the content of the current version: two reads with equal ETags returned the
//!   same bytes, and a put that changes a key's bytes changes its ETag. Beyond that an ETag
//!   promises nothing about *where* the bytes live, so a byte-identical copy of a store (`cp -a`
//!   of a folder, a restore from backup media, a bucket replicated object by object) keeps every
//!   ETag, and a check "unchanged since the backup" survives it. The local backend's ETag of a
//!   version written through this layer is its version id (new on every put); of a plain file
//!   written by another tool it is a digest of the file's bytes (never its inode or mtime). S3
//!   ETags are content hashes, so an identical rewrite keeps the ETag, which is harmless for CAS:
//!   the state the writer read is the state it replaces.
//! * **Listing** is lexicographic by key and paginated; a key written before `list` starts is
//!   listed. Listing is not a snapshot: concurrent writes may or may not appear.
//! * **Outcome unknown.** A `put` whose reply never came (a timeout, a reset connection, a 5xx
//!   from the server or a proxy after the request was sent) returns
//!   [`StoreError::OutcomeUnknown`]: the write may or may not have happened. A backend that
//!   retries a conditional write itself can also see its own first attempt as a conflict
//!   (`412` for the write that succeeded). So **a conditional write whose outcome is unknown is
//!   resolved by reading back, never by reporting a conflict or blindly retrying**: every
//!   conditional write tidemark makes goes through [`put_resolved`], which on a conflict or an
//!   unknown outcome reads the key and takes the write as its own when the current bytes are the
//!   ones it wrote, retries only when the read shows the write did not land (the condition
//!   still protects the retry), and otherwise reports the conflict. Callers whose object can
//!   move on after their write (the route) also look for their bytes in the version history.
//!
//! Backends: [`local::LocalStore`] (a folder; versioning and conditional writes emulated under a
//! per-key file lock, so they are atomic between processes too) and [`s3::S3Store`] (aws-sdk-s3
//! against any S3-protocol endpoint that supports versioning and conditional writes).
//! [`conformance`] holds the suite both pass.
//!
//! # Modules
//!
//! * [`object`] — the objects of the contract and the [`ObjectStore`] trait.
//! * [`error`] — [`StoreError`], the refused-credential codes, [`NO_S3`].
//! * [`resolve`] — [`put_resolved`], the rule for unknown outcomes.
//! * [`listing`] — [`list_all`] and [`delete_all`] over a prefix.
//! * [`open_url`] — [`open()`] and [`open_or_create`] from a URL; [`s3_request_stats`].
//! * [`local`], [`s3`] — the backends; [`faulty`] — a fault-injecting wrapper for tests;
//!   [`conformance`] — the suite every backend passes.

pub mod conformance;
pub mod error;
pub mod faulty;
pub mod listing;
pub mod local;
pub mod object;
pub mod open_url;
pub mod resolve;
#[cfg(feature = "s3")]
pub mod s3;
pub mod tap;

pub use error::{
    NO_S3, REFUSED_CREDENTIAL_CODES, REFUSED_HINT, Result, StoreError, is_refusal_text, is_refused_credentials,
};
pub use listing::{delete_all, list_all};
pub use object::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, PutResult, VersionEntry};
pub use open_url::{open, open_or_create, s3_request_stats};
pub use resolve::{Resolved, put_resolved};
