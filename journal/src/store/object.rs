//! The objects of the contract: how a `put` treats an existing object ([`PutMode`]), what
//! `put`, `get`, `head` and the listings return, and the [`ObjectStore`] trait every backend
//! implements (the contract itself is the [`store`](super) module documentation).

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::error::Result;

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
/// The operations of the contract (the [`store`](super) documentation).
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
