//! The engines `--engine` names ([`Engine`], parsed and displayed) and, for the Ballista ones,
//! the session: a DataFusion state with the object
//! stores the job reads and writes (a local folder needs none; an `s3://` bucket gets an
//! `object_store` S3 store from the same `s3.*` properties tidemark's own reads use), upgraded
//! for Ballista. In standalone mode the in-process executor shares that state's stores; the
//! executors of a real cluster bring their own (see `tidemark ballista executor`, which builds
//! them from the standard AWS environment).

use std::collections::HashMap;
use std::sync::Arc;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use ballista_core::extension::SessionStateExt;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use url::Url;

/// The engine named by `--engine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Engine {
    Local,
    /// A scheduler and one executor in this process.
    Standalone,
    /// A running cluster: the scheduler's gRPC address, `ballista://HOST:PORT`.
    Cluster {
        url: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "--engine {given}: expected local, ballista-standalone or ballista://HOST:PORT (the scheduler's gRPC port, 50050 by default)"
    )]
    BadEngine { given: String },
    #[error(
        "the Ballista scheduler at {url} cannot be reached or refused the session: {message}; is the cluster up (`sandbox/ballista.sh start`, docs/scale-out.md)?"
    )]
    Unreachable { url: String, message: String },
    #[error(
        "the distributed job failed at {stage} (engine {engine}): {message}; nothing was committed; see the scheduler's and executors' logs"
    )]
    JobFailed {
        engine: String,
        stage: &'static str,
        message: String,
    },
    #[error("object store for {location}: {message}")]
    Store { location: String, message: String },
}

impl std::str::FromStr for Engine {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Self, EngineError> {
        let bad = || EngineError::BadEngine { given: s.to_string() };
        match s {
            "local" => Ok(Engine::Local),
            "ballista-standalone" => Ok(Engine::Standalone),
            _ if s.starts_with("ballista://") => {
                let url = Url::parse(s).map_err(|_| bad())?;
                match (url.host_str(), url.path()) {
                    (Some(h), "" | "/") if !h.is_empty() => Ok(Engine::Cluster { url: s.to_string() }),
                    _ => Err(bad()),
                }
            }
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Engine::Local => f.write_str("local"),
            Engine::Standalone => f.write_str("ballista-standalone"),
            Engine::Cluster { url } => f.write_str(url),
        }
    }
}

/// Parallelism of the standalone executor and the target partitions of a job's plan.
pub const PARTITIONS: usize = 2;

/// A Ballista session for `engine` (not `Local`) with S3 stores for `buckets` (`s3://bucket`
/// URLs), configured from `s3_props` (`s3.endpoint`, `s3.access-key-id`, `s3.secret-access-key`,
/// `s3.region`, `s3.path-style-access`; missing keys come from the standard AWS environment).
pub async fn session(
    engine: &Engine,
    buckets: &[String],
    s3_props: &HashMap<String, String>,
) -> Result<SessionContext, EngineError> {
    let runtime = runtime(buckets, s3_props)?;
    let config = SessionConfig::new_with_ballista()
        .with_target_partitions(PARTITIONS)
        .with_ballista_standalone_parallelism(PARTITIONS)
        .with_ballista_job_name("tidemark recover");
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_runtime_env(runtime)
        .build();
    match engine {
        Engine::Local => Ok(SessionContext::new_with_state(state)),
        Engine::Standalone => {
            let unreachable = |e: &dyn std::fmt::Display| EngineError::Unreachable {
                url: "the in-process standalone scheduler".into(),
                message: e.to_string(),
            };
            let url = standalone_cluster(&state).await.map_err(|e| unreachable(&e))?;
            let state = state.upgrade_for_ballista(url).map_err(|e| unreachable(&e))?;
            Ok(SessionContext::new_with_state(state))
        }
        Engine::Cluster { url } => {
            let ctx = SessionContext::remote_with_state(url, state)
                .await
                .map_err(|e| EngineError::Unreachable {
                    url: url.clone(),
                    message: e.to_string(),
                })?;
            // The remote session connects lazily: a trivial job proves the scheduler answers
            // (and has an executor) before anything is written.
            let probe = async { ctx.sql("SELECT 1").await?.collect().await };
            probe.await.map_err(|e| EngineError::Unreachable {
                url: url.clone(),
                message: e.to_string(),
            })?;
            Ok(ctx)
        }
    }
}

/// Starts a scheduler and one executor in this process on 127.0.0.1, both over `state` (its
/// object stores and codecs), and returns the scheduler's URL. This is what `ballista`'s own
/// `SessionContext::standalone_with_state` does; tidemark does it itself because that function
/// lives behind `ballista`'s `standalone` feature, which turns on ballista-scheduler's default
/// features and with them `substrait`, whose build script needs `protoc` (Cargo.toml).
async fn standalone_cluster(state: &datafusion::execution::SessionState) -> Result<String, String> {
    let addr = ballista_scheduler::standalone::new_standalone_scheduler_from_state(state)
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("http://localhost:{}", addr.port());
    // The scheduler's listener is up when the function returns; its gRPC service may take a
    // moment to answer.
    let mut tries = 0;
    let scheduler = loop {
        match SchedulerGrpcClient::connect(url.clone()).await {
            Ok(s) => break s,
            Err(e) if tries >= 100 => return Err(format!("{url}: {e}")),
            Err(_) => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    let tasks = state.config().ballista_standalone_parallelism();
    ballista_executor::new_standalone_executor_from_state(scheduler, tasks, state)
        .await
        .map_err(|e| e.to_string())?;
    Ok(url)
}

/// A runtime with an S3 store per bucket.
pub fn runtime(buckets: &[String], s3_props: &HashMap<String, String>) -> Result<Arc<RuntimeEnv>, EngineError> {
    let runtime = RuntimeEnvBuilder::new().build_arc().map_err(|e| EngineError::Store {
        location: "runtime".into(),
        message: e.to_string(),
    })?;
    for bucket in buckets {
        let url = Url::parse(bucket).map_err(|e| EngineError::Store {
            location: bucket.clone(),
            message: e.to_string(),
        })?;
        runtime.register_object_store(&url, s3_store(bucket, s3_props)?);
    }
    Ok(runtime)
}

/// An S3 store for `bucket` (`s3://name`): the `s3.*` properties first, then the standard AWS
/// environment (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, …).
pub fn s3_store(bucket: &str, props: &HashMap<String, String>) -> Result<Arc<dyn ObjectStore>, EngineError> {
    let name = bucket.trim_start_matches("s3://").trim_end_matches('/');
    let mut b = AmazonS3Builder::from_env().with_bucket_name(name);
    if let Some(e) = props.get("s3.endpoint") {
        b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
    }
    if let Some(k) = props.get("s3.access-key-id") {
        b = b.with_access_key_id(k);
    }
    if let Some(k) = props.get("s3.secret-access-key") {
        b = b.with_secret_access_key(k);
    }
    if let Some(r) = props.get("s3.region") {
        b = b.with_region(r);
    }
    if props.get("s3.path-style-access").map(String::as_str) == Some("true") {
        b = b.with_virtual_hosted_style_request(false);
    }
    b.build()
        .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        .map_err(|e| EngineError::Store {
            location: bucket.to_string(),
            message: e.to_string(),
        })
}

/// The `s3://bucket` of an `s3://` or `s3a://` location (none for a local one).
pub fn bucket_of(location: &str) -> Option<String> {
    let rest = location
        .strip_prefix("s3://")
        .or_else(|| location.strip_prefix("s3a://"))?;
    Some(format!("s3://{}", rest.split('/').next().unwrap_or_default()))
}

/// `location` as a URL DataFusion's listing tables take: `file:///…` for a local path.
pub fn listing_url(location: &str) -> String {
    if let Some(rest) = location.strip_prefix("s3a://") {
        format!("s3://{rest}")
    } else if location.starts_with('/') {
        format!("file://{location}")
    } else if let Some(rest) = location.strip_prefix("file:") {
        // `file:/a/b` and `file:///a/b` alike.
        format!("file:///{}", rest.trim_start_matches('/'))
    } else {
        location.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_bad_ones_are_named() {
        assert_eq!("local".parse::<Engine>().unwrap(), Engine::Local);
        assert_eq!("ballista-standalone".parse::<Engine>().unwrap(), Engine::Standalone);
        assert_eq!(
            "ballista://127.0.0.1:50050".parse::<Engine>().unwrap(),
            Engine::Cluster {
                url: "ballista://127.0.0.1:50050".into()
            }
        );
        for bad in ["spark", "ballista://", "ballista://h:1/x", "ballista:h"] {
            let e = bad.parse::<Engine>().unwrap_err();
            assert!(e.to_string().contains(bad), "{e}");
        }
    }

    #[test]
    fn locations_become_listing_urls() {
        assert_eq!(listing_url("/tmp/a/x.parquet"), "file:///tmp/a/x.parquet");
        assert_eq!(listing_url("file:/tmp/a"), "file:///tmp/a");
        assert_eq!(listing_url("file:///tmp/a"), "file:///tmp/a");
        assert_eq!(listing_url("s3a://b/k"), "s3://b/k");
        assert_eq!(bucket_of("s3://b/k/x").as_deref(), Some("s3://b"));
        assert_eq!(bucket_of("file:///b"), None);
    }
}
