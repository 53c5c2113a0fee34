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

pub mod conformance;
pub mod faulty;
pub mod local;
#[cfg(feature = "s3")]
pub mod s3;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};

/// How a `put` treats an existing object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Write a new version whatever is there.
    Overwrite,
    /// Write only if the key has no current version (`If-None-Match: *`).
    Create,
    /// Write only if the current version has this ETag (`If-Match`).
    Update { etag: String },
}

/// What a successful `put` created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutResult {
    pub etag: String,
    /// `None` only on a store without versioning (refused by the journal's capability check).
    pub version_id: Option<String>,
}

/// One object version as `head`, `get` and `list` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub size: u64,
    pub etag: String,
    pub version_id: Option<String>,
    pub last_modified: Option<DateTime<Utc>>,
}

/// A body with the metadata of the exact version it came from.
#[derive(Debug, Clone)]
pub struct GetResult {
    pub meta: ObjectMeta,
    pub body: Bytes,
}

/// One page of a listing; `next` is an opaque token for the following page.
#[derive(Debug, Clone, Default)]
pub struct ListPage {
    pub objects: Vec<ObjectMeta>,
    pub next: Option<String>,
}

/// One entry of a version listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionEntry {
    pub key: String,
    pub version_id: String,
    pub size: u64,
    pub etag: Option<String>,
    pub is_latest: bool,
    pub is_delete_marker: bool,
    pub last_modified: Option<DateTime<Utc>>,
}

/// The S3 (and AWS) error codes that mean "these credentials are refused or invalid": the
/// request will fail the same way however often it is sent, so it is never retried and is
/// [`StoreError::AccessDenied`] (exit 8) wherever it comes from: tidemark's own S3 client, or
/// the table files' client, whose errors carry the code (see `tidemark_recovery::table`).
/// `InvalidToken` is S3's HTTP 400 for a malformed or otherwise invalid session token
/// (`AWS_SESSION_TOKEN`); `ExpiredToken` and `TokenRefreshRequired` are an expired one;
/// `InvalidClientTokenId` is the STS-style name of an unknown key id.
pub const REFUSED_CREDENTIAL_CODES: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "InvalidAccessKeyId",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "ExpiredTokenException",
    "TokenRefreshRequired",
    "InvalidSecurity",
    "UnrecognizedClientException",
];

/// Whether `code` is one of [`REFUSED_CREDENTIAL_CODES`].
pub fn is_refused_credentials(code: &str) -> bool {
    REFUSED_CREDENTIAL_CODES.contains(&code)
}

/// Errors of the object-store layer. Each names the object it is about.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object {key}{} not found in {store}", version_suffix(.version_id))]
    NotFound {
        store: String,
        key: String,
        version_id: Option<String>,
    },
    #[error("conditional write of {key} in {store} refused: {reason}")]
    Conflict { store: String, key: String, reason: String },
    #[error("access to {store} refused ({detail}); check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...)")]
    AccessDenied { store: String, detail: String },
    #[error("store {store} does not exist: {detail}")]
    NoSuchStore { store: String, detail: String },
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// An `s3://` store asked of a build without the `s3` feature (the embedded drill's).
    #[error("{url}: {}", NO_S3)]
    NotBuilt { url: String },
    #[error("I/O error on {key} in {store}: {source}")]
    Io {
        store: String,
        key: String,
        #[source]
        source: std::io::Error,
    },
    /// The request may have taken effect or not: no reply, a timeout or a 5xx after it was sent.
    #[error(
        "{op} of {key} in {store}: outcome unknown ({detail}); the write may or may not have happened: run the command again, it reads back what is stored"
    )]
    OutcomeUnknown {
        store: String,
        op: &'static str,
        key: String,
        detail: String,
    },
    #[error("{op} of {key} in {store} failed: {detail}")]
    Backend {
        store: String,
        op: &'static str,
        key: String,
        detail: String,
    },
}

fn version_suffix(v: &Option<String>) -> String {
    match v {
        Some(v) => format!(" (version {v})"),
        None => String::new(),
    }
}

impl StoreError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, StoreError::OutcomeUnknown { .. })
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The operations of the contract above.
#[async_trait]
pub trait ObjectStore: Send + Sync + fmt::Debug {
    /// The store's URL, for messages (`file:///…` or `s3://bucket/prefix`).
    fn url(&self) -> String;

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult>;

    /// The current version, or the given version.
    async fn get(&self, key: &str, version_id: Option<&str>) -> Result<GetResult>;

    async fn head(&self, key: &str, version_id: Option<&str>) -> Result<ObjectMeta>;

    /// Current objects whose key starts with `prefix`, in key order, at most `max` per page.
    async fn list_page(&self, prefix: &str, token: Option<&str>, max: usize) -> Result<ListPage>;

    /// Every version and delete marker of every key that starts with `prefix`, ordered by key,
    /// then newest first.
    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>>;

    /// Adds a delete marker: the key disappears, its versions remain.
    async fn delete(&self, key: &str) -> Result<()>;

    /// Removes one version for good.
    async fn delete_version(&self, key: &str, version_id: &str) -> Result<()>;
}

/// A `put` resolved by [`put_resolved`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub put: PutResult,
    /// The write was found by reading back after a conflict or an unknown outcome: it was this
    /// writer's own (its reply had been lost, or a backend retry saw it as a conflict).
    pub read_back: bool,
}

/// How many times [`put_resolved`] writes when reading back shows that a write did not land.
const RESOLVE_ATTEMPTS: usize = 3;

/// A `put` under the contract's rule for unknown outcomes (see the module documentation): on a
/// conflict or [`StoreError::OutcomeUnknown`] the key is read back; its current bytes equal to
/// `body` mean the write is this writer's own (`read_back: true`). When the read shows that the
/// write did not land (a create whose key is still absent, a compare-and-swap whose key still has
/// the expected ETag, an overwrite), it is written again, at most [`RESOLVE_ATTEMPTS`] times in
/// all; the condition still guards every retry. Otherwise the conflict is returned. When the read
/// itself fails, the original error is returned (still an unknown outcome: the caller re-runs).
pub async fn put_resolved(store: &dyn ObjectStore, key: &str, body: Bytes, mode: PutMode) -> Result<Resolved> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let err = match store.put(key, body.clone(), mode.clone()).await {
            Ok(put) => {
                return Ok(Resolved { put, read_back: false });
            }
            Err(e) if e.is_conflict() || e.is_outcome_unknown() => e,
            Err(e) => return Err(e),
        };
        let not_landed = match store.get(key, None).await {
            Ok(current) if current.body == body => {
                return Ok(Resolved {
                    put: PutResult {
                        etag: current.meta.etag,
                        version_id: current.meta.version_id,
                    },
                    read_back: true,
                });
            }
            // Another writer's bytes are current: a create cannot land under them; a
            // compare-and-swap did not land while the key keeps the expected ETag.
            Ok(current) => match &mode {
                PutMode::Create => false,
                PutMode::Update { etag } => &current.meta.etag == etag,
                PutMode::Overwrite => true,
            },
            // Absent: a create or overwrite did not land; a compare-and-swap's target is gone.
            Err(e) if e.is_not_found() => !matches!(mode, PutMode::Update { .. }),
            Err(_) => return Err(err),
        };
        if !not_landed {
            return Err(match err {
                StoreError::OutcomeUnknown { store, key, op, .. } => StoreError::Conflict {
                    store,
                    key,
                    reason: format!(
                        "another writer's version is current (read back after the {op}'s outcome was unknown)"
                    ),
                },
                conflict => conflict,
            });
        }
        if attempt >= RESOLVE_ATTEMPTS {
            return Err(err);
        }
    }
}

/// Every current object under `prefix`, all pages.
pub async fn list_all(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<ObjectMeta>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = store.list_page(prefix, token.as_deref(), 1000).await?;
        out.extend(page.objects);
        match page.next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// Deletes every current object under `prefix` (a delete marker on a versioned store); how many.
pub async fn delete_all(store: &dyn ObjectStore, prefix: &str) -> Result<usize> {
    let objects = list_all(store, prefix).await?;
    for o in &objects {
        store.delete(&o.key).await?;
    }
    Ok(objects.len())
}

/// Opens a store from a URL: a plain path or `file://` URL (local folder) or `s3://bucket/prefix`.
pub async fn open(url: &str) -> Result<Arc<dyn ObjectStore>> {
    if let Some(rest) = url.strip_prefix("s3://") {
        open_s3(url, rest).await
    } else if url.contains("://") && !url.starts_with("file://") {
        Err(StoreError::InvalidUrl {
            url: url.to_string(),
            reason: "supported schemes are s3:// and file:// (or a plain path)".into(),
        })
    } else {
        let path = url.strip_prefix("file://").unwrap_or(url);
        Ok(Arc::new(local::LocalStore::open(path)?))
    }
}

#[cfg(feature = "s3")]
async fn open_s3(_url: &str, rest: &str) -> Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(s3::S3Store::from_url(rest, s3::S3Options::from_env()).await?))
}

#[cfg(not(feature = "s3"))]
async fn open_s3(url: &str, _rest: &str) -> Result<Arc<dyn ObjectStore>> {
    Err(StoreError::NotBuilt { url: url.to_string() })
}

/// Why an `s3://` store cannot be opened by a build without the `s3` feature.
pub const NO_S3: &str = "this tidemark was built without S3 (the embedded build of `sandbox/drill.sh`: local \
                         folders and SQLite only); build it with its default features (`cargo build --release`) \
                         for S3";

/// The S3 requests tidemark's own S3 client made in this process (zero in a build without S3).
pub fn s3_request_stats() -> tidemark_schemas::RequestCounts {
    #[cfg(feature = "s3")]
    return s3::request_stats();
    #[cfg(not(feature = "s3"))]
    tidemark_schemas::RequestCounts::default()
}

/// [`open`], creating a local folder first when it does not exist (an S3 bucket is never
/// created: it must exist, with versioning, before tidemark writes to it).
pub async fn open_or_create(url: &str) -> Result<Arc<dyn ObjectStore>> {
    if url.starts_with("s3://") || (url.contains("://") && !url.starts_with("file://")) {
        return open(url).await;
    }
    let path = url.strip_prefix("file://").unwrap_or(url);
    Ok(Arc::new(local::LocalStore::create(path)?))
}

/// Joins a prefix and a key with exactly one `/`.
#[cfg(feature = "s3")]
pub(crate) fn join_key(prefix: &str, key: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}/{key}")
    }
}
