//! [`S3Options`]: where and how to reach S3 (endpoint, region, credentials, addressing), the
//! timeouts and retry settings read from the environment, and the client built from them.

use std::fmt;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::environment::EnvironmentVariableRegionProvider;
use aws_config::meta::region::RegionProviderChain;
use aws_config::profile::ProfileFileRegionProvider;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::Region;
use aws_sdk_s3::config::retry::{RetryConfig, RetryMode, RetryPartition, TokenBucket};
use aws_sdk_s3::config::timeout::TimeoutConfig;

use super::stats::CountRequests;

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
///
/// [`S3Store::get`]: super::S3Store::get
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
    pub(super) async fn client(&self) -> Client {
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
