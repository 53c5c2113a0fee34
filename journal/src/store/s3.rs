//! The S3 backend of the object-store contract ([`super`]): `s3://bucket/prefix` on AWS S3 or any
//! S3-protocol server that supports bucket versioning and conditional `PutObject`
//! (`If-None-Match: *`, `If-Match`), through aws-sdk-s3.
//!
//! The contract maps onto S3 almost one to one: versioning gives version ids and delete markers,
//! the conditional headers give create-only and compare-and-swap (S3 evaluates them atomically on
//! the server, so the guarantee holds between processes). What this file adds is the translation
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

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_config::environment::EnvironmentVariableRegionProvider;
use aws_config::meta::region::RegionProviderChain;
use aws_config::profile::ProfileFileRegionProvider;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_s3::config::retry::{RetryConfig, RetryMode, RetryPartition, TokenBucket};
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{ConfigBag, Intercept, Region, RuntimeComponents};
use aws_sdk_s3::error::{BoxError, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::{ByteStream, DateTime as SdkDateTime};
use aws_sdk_s3::types::{BucketVersioningStatus, CreateBucketConfiguration, VersioningConfiguration};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use tidemark_schemas::RequestCounts;

use super::error::{Result, StoreError, is_refused_credentials};
use super::object::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, PutResult, VersionEntry};

/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default read timeout: the time to the first byte of a reply.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default per-attempt timeout (a whole request, upload included).
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default bound on a whole operation, retries included, so that a server that stops answering
/// fails a request within a minute (8 attempts of a 30 s read timeout took over four minutes).
///
/// It cannot cut a large transfer short: the SDK's operation ends with the reply's headers, and
/// a GET body streams after it, guarded by the attempt timeout, the SDK's stalled-stream
/// protection (no byte for 5 s) and [`S3Store::get`]'s re-reads. A PUT carries its body inside
/// the operation, so a put's bound grows with its size: this plus one second per
/// [`PUT_BYTES_PER_SECOND`] bytes ([`S3Options::put_operation_timeout`]). An explicit
/// `TIDEMARK_S3_OPERATION_TIMEOUT` is used as given for every operation.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(60);
/// The slowest upload a put's default operation timeout allows for (1 MiB/s).
pub const PUT_BYTES_PER_SECOND: u64 = 1 << 20;
/// Default attempts per request when neither `AWS_MAX_ATTEMPTS` nor the profile sets one: enough
/// that a storm of 10% 503 SlowDown fails about one request in 10^8 (the SDK's own default, 3,
/// fails one in 1,000: a copy of a few thousand objects would fail).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// Keys given explicitly (a catalog's S3 properties) instead of the SDK's standard chain. The
/// `Debug` output shows the key id only.
#[derive(Clone, Default)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Where and how to reach S3. `None` fields fall back to the defaults (see [`from_env`]).
///
/// [`from_env`]: S3Options::from_env
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// A custom endpoint such as `http://127.0.0.1:5999`; `None` means AWS itself.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Static credentials (a catalog's `s3.access-key-id` / `s3.secret-access-key`); `None`: the
    /// SDK's standard chain.
    pub credentials: Option<StaticCredentials>,
    /// Path-style addressing (`http://host/bucket/key`). Default: on for an IP address or
    /// `localhost` endpoint (no DNS for `bucket.127.0.0.1`), off otherwise.
    pub path_style: Option<bool>,
    pub connect_timeout: Option<Duration>,
    pub read_timeout: Option<Duration>,
    pub attempt_timeout: Option<Duration>,
    /// A bound on a whole operation, retries included; `None`:
    /// [`DEFAULT_OPERATION_TIMEOUT`], size-aware for puts.
    pub operation_timeout: Option<Duration>,
    /// Attempts per request (`AWS_MAX_ATTEMPTS`); `None`: the profile's, else
    /// [`DEFAULT_MAX_ATTEMPTS`].
    pub max_attempts: Option<u32>,
    /// `AWS_RETRY_MODE` (`standard` or `adaptive`); `None`: the profile's, else standard.
    pub retry_mode: Option<RetryMode>,
    /// A setting that could not be read: (variable, why). Opening a store refuses it.
    pub invalid: Option<(String, String)>,
}

/// A duration in seconds (`2`, `0.5`).
fn seconds(name: &str, value: &str) -> std::result::Result<Duration, (String, String)> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            (
                name.to_string(),
                format!("{value:?} is not a positive number of seconds"),
            )
        })
}

impl S3Options {
    /// Reads `AWS_ENDPOINT_URL_S3` (else `AWS_ENDPOINT_URL`), `AWS_REGION` (else
    /// `AWS_DEFAULT_REGION`), `TIDEMARK_S3_PATH_STYLE` (`true`/`false`; anything else is
    /// ignored), the retry settings `AWS_MAX_ATTEMPTS` and `AWS_RETRY_MODE`, and the timeouts in
    /// seconds `TIDEMARK_S3_CONNECT_TIMEOUT` (default 5), `TIDEMARK_S3_READ_TIMEOUT` (30),
    /// `TIDEMARK_S3_ATTEMPT_TIMEOUT` (120) and `TIDEMARK_S3_OPERATION_TIMEOUT` (60, see
    /// [`DEFAULT_OPERATION_TIMEOUT`]). An invalid
    /// value is recorded in [`S3Options::invalid`] and refused when a store is opened.
    /// Credentials are not read here: the SDK's standard chain finds them.
    pub fn from_env() -> S3Options {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let path_style = var("TIDEMARK_S3_PATH_STYLE").and_then(|v| match v.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => None,
        });
        let mut invalid = None;
        let mut timeout = |name: &str| match var(name).map(|v| seconds(name, &v)) {
            Some(Ok(d)) => Some(d),
            Some(Err(e)) => {
                invalid.get_or_insert(e);
                None
            }
            None => None,
        };
        let connect_timeout = timeout("TIDEMARK_S3_CONNECT_TIMEOUT");
        let read_timeout = timeout("TIDEMARK_S3_READ_TIMEOUT");
        let attempt_timeout = timeout("TIDEMARK_S3_ATTEMPT_TIMEOUT");
        let operation_timeout = timeout("TIDEMARK_S3_OPERATION_TIMEOUT");
        let max_attempts = var("AWS_MAX_ATTEMPTS").and_then(|v| match v.trim().parse::<u32>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                invalid.get_or_insert((
                    "AWS_MAX_ATTEMPTS".into(),
                    format!("{v:?} is not a whole number of at least 1"),
                ));
                None
            }
        });
        let retry_mode = var("AWS_RETRY_MODE").and_then(|v| match v.parse::<RetryMode>() {
            Ok(m) => Some(m),
            Err(_) => {
                invalid.get_or_insert((
                    "AWS_RETRY_MODE".into(),
                    format!("{v:?} is not a retry mode (standard or adaptive)"),
                ));
                None
            }
        });
        S3Options {
            endpoint: var("AWS_ENDPOINT_URL_S3").or_else(|| var("AWS_ENDPOINT_URL")),
            region: var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")),
            credentials: None,
            path_style,
            connect_timeout,
            read_timeout,
            attempt_timeout,
            operation_timeout,
            max_attempts,
            retry_mode,
            invalid,
        }
    }

    /// The timeouts in effect (for every operation but a put, see [`Self::put_timeouts`]).
    pub fn timeouts(&self) -> TimeoutConfig {
        self.timeouts_with(self.operation_timeout.unwrap_or(DEFAULT_OPERATION_TIMEOUT))
    }

    /// The timeouts of a put of `len` bytes: [`Self::timeouts`] with the operation timeout of
    /// [`Self::put_operation_timeout`].
    pub fn put_timeouts(&self, len: u64) -> TimeoutConfig {
        self.timeouts_with(self.put_operation_timeout(len))
    }

    /// The bound on a put of `len` bytes, retries included: the one set, else
    /// [`DEFAULT_OPERATION_TIMEOUT`] plus the time to send `len` bytes at
    /// [`PUT_BYTES_PER_SECOND`].
    pub fn put_operation_timeout(&self, len: u64) -> Duration {
        self.operation_timeout
            .unwrap_or_else(|| DEFAULT_OPERATION_TIMEOUT + Duration::from_secs(len.div_ceil(PUT_BYTES_PER_SECOND)))
    }

    fn timeouts_with(&self, operation: Duration) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT))
            .read_timeout(self.read_timeout.unwrap_or(DEFAULT_READ_TIMEOUT))
            .operation_attempt_timeout(self.attempt_timeout.unwrap_or(DEFAULT_ATTEMPT_TIMEOUT))
            .operation_timeout(operation)
            .build()
    }

    /// The retry settings in effect: the variables, else the profile's (`loaded`, what
    /// aws-config read), else tidemark's defaults.
    fn retries(&self, loaded: Option<&RetryConfig>) -> RetryConfig {
        let from_profile = loaded.filter(|r| **r != RetryConfig::standard());
        let mut config = from_profile.cloned().unwrap_or_else(|| {
            RetryConfig::standard()
                .with_max_attempts(DEFAULT_MAX_ATTEMPTS)
                .with_initial_backoff(Duration::from_millis(200))
        });
        if let Some(n) = self.max_attempts {
            config = config.with_max_attempts(n);
        }
        if let Some(m) = self.retry_mode {
            config = config.with_retry_mode(m);
        }
        config
    }

    fn path_style(&self) -> bool {
        self.path_style.unwrap_or_else(|| {
            let host = self.endpoint.as_deref().and_then(|e| url::Url::parse(e).ok());
            match host.as_ref().and_then(|u| u.host()) {
                Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => true,
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                None => false,
            }
        })
    }

    /// Builds a client. Credentials resolve lazily on the first request; the region chain
    /// deliberately leaves out the EC2 instance-metadata lookup so that opening a store never
    /// waits on the network (set `AWS_REGION` on EC2).
    async fn client(&self) -> Client {
        let region = RegionProviderChain::first_try(self.region.clone().map(Region::new))
            .or_else(EnvironmentVariableRegionProvider::new())
            .or_else(ProfileFileRegionProvider::new())
            .or_else(Region::from_static("us-east-1"));
        let sdk_config = aws_config::defaults(BehaviorVersion::latest())
            .region(region)
            .load()
            .await;
        let retries = self.retries(sdk_config.retry_config());
        // A retry quota of its own, large enough for a storm: the SDK's shared default (500
        // tokens, none won back by a success) runs dry after a few dozen retries.
        let partition = RetryPartition::custom("tidemark-s3")
            .token_bucket(TokenBucket::builder().capacity(50_000).success_reward(1.0).build())
            .build();
        let mut builder = aws_sdk_s3::config::Builder::from(&sdk_config)
            .force_path_style(self.path_style())
            .timeout_config(self.timeouts())
            .retry_config(retries)
            .retry_partition(partition)
            .interceptor(CountRequests);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        if let Some(c) = &self.credentials {
            builder = builder.credentials_provider(aws_sdk_s3::config::Credentials::new(
                c.access_key_id.clone(),
                c.secret_access_key.clone(),
                c.session_token.clone(),
                None,
                "tidemark-static",
            ));
        }
        Client::from_conf(builder.build())
    }
}

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

/// Turns an SDK error into the contract's error. Service errors are told apart by HTTP status
/// and S3 error code: HEAD responses carry no body, hence no code, so the status must suffice.
fn classify<E>(
    store: &str,
    op: &'static str,
    key: &str,
    version_id: Option<&str>,
    mode: Option<&PutMode>,
    err: &SdkError<E>,
) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let raw = err.raw_response();
    let status = raw.map(|r| r.status().as_u16()).unwrap_or(0);
    // A put without a reply, or with a server error (possibly a proxy's, after the server
    // wrote), may have happened: the caller reads back (the store contract).
    if op == "put" && (status == 0 || status >= 500) {
        return StoreError::OutcomeUnknown {
            store: store.to_string(),
            op,
            key: key.to_string(),
            detail: describe(err),
        };
    }
    let code = err.code().unwrap_or("");
    let message = err.message().unwrap_or("");
    let delete_marker = raw.and_then(|r| r.headers().get("x-amz-delete-marker")) == Some("true");
    let conflict = |reason: String| StoreError::Conflict {
        store: store.to_string(),
        key: key.to_string(),
        reason,
    };
    // Only a conditional put can fail a precondition; elsewhere a 412 or 409 is unexpected.
    let condition = match mode {
        Some(PutMode::Create) => Some((
            "If-None-Match: *".to_string(),
            "the key already has a current version".to_string(),
        )),
        Some(PutMode::Update { etag }) => Some((
            format!("If-Match: {etag}"),
            format!("the current version no longer has the expected ETag {etag}"),
        )),
        _ => None,
    };
    if let Some((header, why)) = condition {
        if status == 412 || code == "PreconditionFailed" {
            return conflict(format!("{header} failed: {why}"));
        }
        // S3 answers 409 when another conditional write of the key is in flight; nothing was
        // written, and the caller must re-read either way.
        if code == "ConditionalRequestConflict" || (status == 409 && code.is_empty()) {
            return conflict(format!(
                "{header} not applied: a concurrent conditional write of the key was in progress \
                 (409 ConditionalRequestConflict)"
            ));
        }
    }
    if code == "NoSuchBucket" {
        return StoreError::NoSuchStore {
            store: store.to_string(),
            detail: format!("{op} of {key}: NoSuchBucket: {message}"),
        };
    }
    // 405 with `x-amz-delete-marker: true` is S3's answer to GET/HEAD of a delete marker's id.
    if matches!(code, "NoSuchKey" | "NoSuchVersion" | "NotFound") || status == 404 || (status == 405 && delete_marker) {
        return StoreError::NotFound {
            store: store.to_string(),
            key: key.to_string(),
            version_id: version_id.map(str::to_string),
        };
    }
    // A 403, or a refused or invalid credential whatever its status (S3 answers a malformed
    // session token with 400 InvalidToken). The SDK retries neither (its classifiers retry 5xx,
    // throttling and transient codes only; tests/e2e.rs counts the requests).
    if status == 403 || is_refused_credentials(code) {
        let code = if code.is_empty() { "403" } else { code };
        return StoreError::AccessDenied {
            store: store.to_string(),
            detail: format!("{op} of {key}: {code}: {message}"),
        };
    }
    StoreError::Backend {
        store: store.to_string(),
        op,
        key: key.to_string(),
        detail: describe(err),
    }
}

/// One line for an SDK error after its last attempt: the HTTP status, S3 code and message, or
/// what went wrong with the connection; never a debug dump of the SDK's internals.
fn describe<E>(err: &SdkError<E>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    // A 4xx reply (but a throttle) is the answer to one attempt: the SDK retries 5xx, 429,
    // `RequestTimeout` and failures without a reply; naming retries there would mislead.
    let retried = status.is_none_or(|s| s >= 500 || s == 429) || err.code() == Some("RequestTimeout");
    let attempts = "after the last retry";
    match err {
        SdkError::ServiceError(_) | SdkError::ResponseError(_) => {
            let code = err.code().unwrap_or("no error code");
            let message = err.message().map(|m| format!(": {m}")).unwrap_or_default();
            let attempts = if retried {
                format!(" ({attempts})")
            } else {
                String::new()
            };
            match status {
                Some(s) => format!("HTTP {s} {code}{message}{attempts}"),
                None => format!("{code}{message}{attempts}"),
            }
        }
        // The operation timeout (retries included) or the last attempt's: the source says which
        // and after how long.
        SdkError::TimeoutError(_) => {
            let which = std::error::Error::source(err)
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            format!("timed out{which} (see TIDEMARK_S3_*_TIMEOUT)")
        }
        SdkError::DispatchFailure(d) => {
            let what = if d.is_timeout() {
                "timed out"
            } else if d.is_io() {
                "connection failed"
            } else {
                "request not sent"
            };
            let cause = std::error::Error::source(err)
                .and_then(std::error::Error::source)
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            format!("{what}{cause} ({attempts})")
        }
        SdkError::ConstructionFailure(_) => "the request could not be built".to_string(),
        _ => match status {
            Some(s) => format!("HTTP {s}"),
            None => "no reply".to_string(),
        },
    }
}

static OPERATIONS: AtomicU64 = AtomicU64::new(0);
static ATTEMPTS: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// S3 requests of this process so far (every client): operations, attempts beyond the first,
/// and operations that failed with a transient error (5xx, throttling, timeout, connection)
/// after their last attempt.
pub fn request_stats() -> RequestCounts {
    let requests = OPERATIONS.load(Ordering::Relaxed);
    RequestCounts {
        requests,
        retried: ATTEMPTS.load(Ordering::Relaxed).saturating_sub(requests),
        failed: FAILED.load(Ordering::Relaxed),
    }
}

/// Counts operations, attempts and transient failures for [`request_stats`].
#[derive(Debug)]
struct CountRequests;

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "tidemark-count-requests"
    }

    fn read_before_execution(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        OPERATIONS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn read_after_execution(
        &self,
        ctx: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        let ctx = ctx.inner();
        if ctx.is_failed() {
            let status = ctx.response().map(|r| r.status().as_u16());
            if status.is_none_or(|s| s >= 500 || s == 429) {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A stalled request fails within a minute by default; a large put keeps the time to send it.
    #[test]
    fn the_default_operation_timeout_bounds_a_request_but_not_a_large_put() {
        let opts = S3Options::default();
        assert_eq!(opts.timeouts().operation_timeout(), Some(Duration::from_secs(60)));
        assert_eq!(opts.put_timeouts(0).operation_timeout(), Some(Duration::from_secs(60)));
        // 1 GiB at 1 MiB/s: 1,024 s more.
        assert_eq!(opts.put_operation_timeout(1 << 30), Duration::from_secs(60 + 1024));
        // The other timeouts are the same for a put (an override replaces the whole set).
        let (all, put) = (opts.timeouts(), opts.put_timeouts(1 << 30));
        assert_eq!(put.read_timeout(), all.read_timeout());
        assert_eq!(put.connect_timeout(), all.connect_timeout());
        assert_eq!(put.operation_attempt_timeout(), all.operation_attempt_timeout());

        let set = S3Options {
            operation_timeout: Some(Duration::from_secs(5)),
            ..S3Options::default()
        };
        assert_eq!(set.timeouts().operation_timeout(), Some(Duration::from_secs(5)));
        assert_eq!(set.put_operation_timeout(1 << 30), Duration::from_secs(5));
    }
}
