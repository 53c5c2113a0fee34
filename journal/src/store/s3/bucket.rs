//! [`S3Store`]: the contract's operations on `s3://bucket/prefix` (keys relative to the prefix,
//! a GET body that stalls or breaks read again), and [`create_test_bucket`].

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::{ByteStream, DateTime as SdkDateTime};
use aws_sdk_s3::types::{BucketVersioningStatus, CreateBucketConfiguration, VersioningConfiguration};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::classify::classify;
use super::options::{DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_MAX_ATTEMPTS, S3Options};
use super::stats::ATTEMPTS;
use crate::store::error::{Result, StoreError};
use crate::store::object::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, PutResult, VersionEntry};

/// A store under `s3://bucket/prefix`.
#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    /// Attempts at reading a GET body that stalls or breaks (the SDK retries only up to the
    /// reply's headers), and the time one attempt may take.
    body_attempts: u32,
    body_timeout: Duration,
    bucket: String,
    /// Without leading or trailing `/`; empty for the bucket's root.
    prefix: String,
    /// The settings the client was built with, for the size-aware timeout of a put.
    opts: S3Options,
}

impl S3Store {
    /// Opens `rest` = `bucket[/prefix]` (the part of the URL after `s3://`). Makes no request:
    /// a missing bucket or bad credentials show up on the first operation.
    pub async fn from_url(rest: &str, opts: S3Options) -> Result<S3Store> {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(StoreError::InvalidUrl {
                url: format!("s3://{rest}"),
                reason: "no bucket name (expected s3://bucket/optional/prefix)".into(),
            });
        }
        if let Some((setting, reason)) = &opts.invalid {
            return Err(StoreError::InvalidUrl {
                url: format!("s3://{rest}"),
                reason: format!("{setting}: {reason}"),
            });
        }
        let client = opts.client().await;
        let body_attempts = client
            .config()
            .retry_config()
            .map_or(DEFAULT_MAX_ATTEMPTS, |r| r.max_attempts());
        Ok(S3Store {
            body_attempts,
            body_timeout: opts.attempt_timeout.unwrap_or(DEFAULT_ATTEMPT_TIMEOUT),
            client,
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            opts,
        })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn full_key(&self, key: &str) -> String {
        join_key(&self.prefix, key)
    }

    /// The inverse of [`Self::full_key`] for keys that S3 returns.
    fn relative_key(&self, full: &str) -> String {
        if self.prefix.is_empty() {
            return full.to_string();
        }
        full.strip_prefix(self.prefix.as_str())
            .and_then(|k| k.strip_prefix('/'))
            .unwrap_or(full)
            .to_string()
    }

    fn error<E>(
        &self,
        op: &'static str,
        key: &str,
        version_id: Option<&str>,
        mode: Option<&PutMode>,
        err: SdkError<E>,
    ) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        classify(&self.url(), op, key, version_id, mode, &err)
    }

    fn backend(&self, op: &'static str, key: &str, detail: impl Into<String>) -> StoreError {
        StoreError::Backend {
            store: self.url(),
            op,
            key: key.to_string(),
            detail: detail.into(),
        }
    }
}

fn to_chrono(t: Option<&SdkDateTime>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
}

fn size(len: Option<i64>) -> u64 {
    len.and_then(|l| u64::try_from(l).ok()).unwrap_or(0)
}

impl S3Store {
    async fn get_once(&self, key: &str, version_id: Option<&str>) -> Result<GetResult> {
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .set_version_id(version_id.map(str::to_string))
            .send()
            .await
            .map_err(|e| self.error("get", key, version_id, None, e))?;
        let meta = ObjectMeta {
            key: key.to_string(),
            size: size(out.content_length),
            etag: out.e_tag.unwrap_or_default(),
            version_id: out.version_id,
            last_modified: to_chrono(out.last_modified.as_ref()),
        };
        // The body streams after the headers; a broken or stalled connection surfaces here.
        let body = match tokio::time::timeout(self.body_timeout, out.body.collect()).await {
            Ok(Ok(body)) => body,
            Ok(Err(e)) => return Err(self.backend("get", key, format!("{BODY_ERROR}: {e}"))),
            Err(_) => {
                return Err(self.backend(
                    "get",
                    key,
                    format!("{BODY_ERROR}: no end after {:?}", self.body_timeout),
                ));
            }
        };
        Ok(GetResult {
            meta,
            body: body.into_bytes(),
        })
    }
}

/// How a failed body read starts its detail (so that [`S3Store::get`] retries it).
const BODY_ERROR: &str = "reading the body failed";

#[async_trait]
impl ObjectStore for S3Store {
    fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        // The whole set, not the operation timeout alone: an override replaces the client's.
        let timeouts = self.opts.put_timeouts(body.len() as u64);
        let mut req = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .body(ByteStream::from(body));
        req = match &mode {
            PutMode::Overwrite => req,
            PutMode::Create => req.if_none_match("*"),
            PutMode::Update { etag } => req.if_match(etag),
        };
        let out = req
            .customize()
            .config_override(aws_sdk_s3::config::Builder::default().timeout_config(timeouts))
            .send()
            .await
            .map_err(|e| self.error("put", key, None, Some(&mode), e))?;
        let etag = out
            .e_tag
            .ok_or_else(|| self.backend("put", key, "the PutObject response has no ETag"))?;
        Ok(PutResult {
            etag,
            version_id: out.version_id,
        })
    }

    /// The SDK retries a GET up to its reply's headers; a body that stalls (no byte for the
    /// stalled-stream grace period, or past the attempt timeout) or breaks is read again here.
    async fn get(&self, key: &str, version_id: Option<&str>) -> Result<GetResult> {
        let mut attempt = 1;
        loop {
            match self.get_once(key, version_id).await {
                Err(StoreError::Backend { detail, .. })
                    if detail.starts_with(BODY_ERROR) && attempt < self.body_attempts =>
                {
                    ATTEMPTS.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100 << attempt.min(6))).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn head(&self, key: &str, version_id: Option<&str>) -> Result<ObjectMeta> {
        let out = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .set_version_id(version_id.map(str::to_string))
            .send()
            .await
            .map_err(|e| self.error("head", key, version_id, None, e))?;
        Ok(ObjectMeta {
            key: key.to_string(),
            size: size(out.content_length),
            etag: out.e_tag.unwrap_or_default(),
            version_id: out.version_id,
            last_modified: to_chrono(out.last_modified.as_ref()),
        })
    }

    async fn list_page(&self, prefix: &str, token: Option<&str>, max: usize) -> Result<ListPage> {
        let max_keys = i32::try_from(max.clamp(1, 1000)).unwrap_or(1000);
        let out = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(self.full_key(prefix))
            .set_continuation_token(token.map(str::to_string))
            .max_keys(max_keys)
            .send()
            .await
            .map_err(|e| self.error("list", prefix, None, None, e))?;
        let objects = out
            .contents
            .unwrap_or_default()
            .into_iter()
            .filter_map(|o| {
                Some(ObjectMeta {
                    key: self.relative_key(o.key.as_deref()?),
                    size: size(o.size),
                    etag: o.e_tag.unwrap_or_default(),
                    version_id: None,
                    last_modified: to_chrono(o.last_modified.as_ref()),
                })
            })
            .collect();
        let next = match out.is_truncated {
            Some(true) => Some(
                out.next_continuation_token
                    .ok_or_else(|| self.backend("list", prefix, "truncated listing without a continuation token"))?,
            ),
            _ => None,
        };
        Ok(ListPage { objects, next })
    }

    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>> {
        let full_prefix = self.full_key(prefix);
        let mut entries = Vec::new();
        let mut markers: (Option<String>, Option<String>) = (None, None);
        loop {
            let out = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(&full_prefix)
                .set_key_marker(markers.0.clone())
                .set_version_id_marker(markers.1.clone())
                .send()
                .await
                .map_err(|e| self.error("list versions", prefix, None, None, e))?;
            // The SDK hands versions and delete markers back as two lists, losing S3's
            // interleaving; appending them and sorting below restores one newest-first order.
            for v in out.versions.unwrap_or_default() {
                let Some(key) = v.key else { continue };
                entries.push(VersionEntry {
                    key: self.relative_key(&key),
                    version_id: v.version_id.unwrap_or_else(|| "null".into()),
                    size: size(v.size),
                    etag: v.e_tag,
                    is_latest: v.is_latest.unwrap_or(false),
                    is_delete_marker: false,
                    last_modified: to_chrono(v.last_modified.as_ref()),
                });
            }
            for m in out.delete_markers.unwrap_or_default() {
                let Some(key) = m.key else { continue };
                entries.push(VersionEntry {
                    key: self.relative_key(&key),
                    version_id: m.version_id.unwrap_or_else(|| "null".into()),
                    size: 0,
                    etag: None,
                    is_latest: m.is_latest.unwrap_or(false),
                    is_delete_marker: true,
                    last_modified: to_chrono(m.last_modified.as_ref()),
                });
            }
            if out.is_truncated != Some(true) {
                break;
            }
            let next = (out.next_key_marker, out.next_version_id_marker);
            // Guard against a server that reports truncation without moving forward.
            if next.0.is_none() || next == markers {
                return Err(self.backend(
                    "list versions",
                    prefix,
                    "truncated version listing without new key/version markers",
                ));
            }
            markers = next;
        }
        // Stable sort: by key, the current entry first, then newest first. Timestamps can tie
        // (some servers report whole seconds); ties keep the order the server returned.
        entries.sort_by(|a, b| {
            a.key
                .cmp(&b.key)
                .then(b.is_latest.cmp(&a.is_latest))
                .then(b.last_modified.cmp(&a.last_modified))
        });
        Ok(entries)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .send()
            .await
            .map_err(|e| self.error("delete", key, None, None, e))?;
        Ok(())
    }

    async fn delete_version(&self, key: &str, version_id: &str) -> Result<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(self.full_key(key))
            .version_id(version_id)
            .send()
            .await
            .map_err(|e| self.error("delete version", key, Some(version_id), None, e))?;
        Ok(())
    }
}

/// Creates bucket `name` (turning versioning on when asked) at the endpoint of `opts`. Meant
/// for tests and sandboxes (moto, a scratch account); production buckets are made by whoever
/// owns the account. An existing bucket owned by the caller is not an error.
pub async fn create_test_bucket(opts: &S3Options, name: &str, versioned: bool) -> Result<()> {
    let client = opts.client().await;
    let store = format!("s3://{name}");
    let mut req = client.create_bucket().bucket(name);
    // us-east-1 is the one region that refuses an explicit location constraint.
    let region = client.config().region().map(|r| r.as_ref().to_string());
    if let Some(region) = region.filter(|r| r != "us-east-1") {
        req = req.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(region.as_str().into())
                .build(),
        );
    }
    if let Err(e) = req.send().await
        && e.code() != Some("BucketAlreadyOwnedByYou")
    {
        return Err(classify(&store, "create bucket", "", None, None, &e));
    }
    if versioned {
        client
            .put_bucket_versioning()
            .bucket(name)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| classify(&store, "enable versioning", "", None, None, &e))?;
    }
    Ok(())
}

/// Joins a prefix and a key with exactly one `/`.
fn join_key(prefix: &str, key: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}/{key}")
    }
}
