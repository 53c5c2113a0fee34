//! `tidemark ballista scheduler|executor` (hidden): a Ballista scheduler or executor process
//! built from the same ballista-scheduler / ballista-executor crates (53.0.0) as the
//! `--engine ballista-standalone` engine, so a cluster runs exactly the DataFusion that plans
//! tidemark's jobs (`sandbox/ballista.sh`, docs/scale-out.md).
//!
//! Object stores: a local folder needs none; each `--s3-bucket s3://NAME` gets an S3 store
//! built from the standard AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, `AWS_ENDPOINT_URL`, instance or pod credentials), read as the same
//! `AWS_*` variables tidemark itself reads (docs/catalogs.md).

use std::sync::Arc;

use anyhow::Context;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use clap::{Args, Subcommand};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use tidemark_recovery::catalog;
use tidemark_recovery::recover::engine;

#[derive(Debug, Subcommand)]
pub enum BallistaCommand {
    /// Run a Ballista scheduler (gRPC on --port).
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor that registers with the scheduler.
    Executor(ExecutorArgs),
}

#[derive(Debug, Args)]
pub struct SchedulerArgs {
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    #[arg(long, default_value_t = 50050)]
    pub port: u16,
    /// The host executors and clients reach this scheduler at.
    #[arg(long, default_value = "127.0.0.1")]
    pub external_host: String,
    /// A bucket the jobs read or write (repeatable).
    #[arg(long)]
    pub s3_bucket: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ExecutorArgs {
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// Flight (shuffle) port; the gRPC port is --grpc-port.
    #[arg(long, default_value_t = 50051)]
    pub port: u16,
    #[arg(long, default_value_t = 50052)]
    pub grpc_port: u16,
    /// The host other executors and the scheduler reach this executor at.
    #[arg(long)]
    pub external_host: Option<String>,
    #[arg(long, default_value = "127.0.0.1")]
    pub scheduler_host: String,
    #[arg(long, default_value_t = 50050)]
    pub scheduler_port: u16,
    /// Tasks run at once (default: the cores).
    #[arg(long, default_value_t = 0)]
    pub concurrent_tasks: usize,
    /// Shuffle and spill folder.
    #[arg(long)]
    pub work_dir: Option<String>,
    #[arg(long)]
    pub s3_bucket: Vec<String>,
}

fn s3_props() -> std::collections::HashMap<String, String> {
    catalog::s3_props(|k| std::env::var(k).ok())
}

/// Every (flag, port) pair can be bound on `host` now, else an error naming the port that cannot.
fn ports_free(host: &str, ports: &[(&str, u16)]) -> anyhow::Result<()> {
    for (flag, port) in ports {
        std::net::TcpListener::bind((host, *port)).with_context(|| {
            format!(
                "ballista executor: cannot bind {flag} {host}:{port} (another process, or a client \
                 connection's source port, holds it); pass another {flag}"
            )
        })?;
    }
    Ok(())
}

pub async fn run(cmd: BallistaCommand) -> anyhow::Result<()> {
    match cmd {
        BallistaCommand::Scheduler(a) => {
            let buckets = a.s3_bucket.clone();
            // Fail at start, not at the first job, when a bucket's store cannot be built.
            engine::runtime(&buckets, &s3_props())?;
            let config = SchedulerConfig {
                bind_host: a.bind.clone(),
                bind_port: a.port,
                external_host: a.external_host.clone(),
                ..Default::default()
            }
            .with_override_session_builder(Arc::new(move |config: datafusion::prelude::SessionConfig| {
                let state = ballista_core::utils::default_session_builder(config)?;
                for b in &buckets {
                    let url = url::Url::parse(b).map_err(|e| datafusion::error::DataFusionError::External(e.into()))?;
                    let store = engine::s3_store(b, &s3_props())
                        .map_err(|e| datafusion::error::DataFusionError::External(e.into()))?;
                    state.runtime_env().register_object_store(&url, store);
                }
                Ok(state)
            }));
            let addr: std::net::SocketAddr = format!("{}:{}", a.bind, a.port)
                .parse()
                .with_context(|| format!("bind address {}:{}", a.bind, a.port))?;
            let cluster = BallistaCluster::new_from_config(&config).await?;
            eprintln!("ballista scheduler listening on {addr}");
            start_server(cluster, addr, Arc::new(config)).await?;
            Ok(())
        }
        BallistaCommand::Executor(a) => {
            // Ballista binds these ports inside spawned tasks whose bind error goes to a logger
            // this process does not install: the executor would only fail later, when the
            // scheduler cannot connect back. Refuse here, naming the port.
            ports_free(&a.bind, &[("--port (flight)", a.port), ("--grpc-port", a.grpc_port)])?;
            let buckets = a.s3_bucket.clone();
            engine::runtime(&buckets, &s3_props())?;
            let work_dir = a.work_dir.clone();
            let config = ExecutorProcessConfig {
                bind_host: a.bind.clone(),
                external_host: a.external_host.clone().or_else(|| Some(a.bind.clone())),
                port: a.port,
                grpc_port: a.grpc_port,
                scheduler_host: a.scheduler_host.clone(),
                scheduler_port: a.scheduler_port,
                scheduler_connect_timeout_seconds: 30,
                concurrent_tasks: a.concurrent_tasks,
                work_dir: a.work_dir.clone(),
                print_thread_info: false,
                override_runtime_producer: Some(Arc::new(move |_: &datafusion::prelude::SessionConfig| {
                    let mut b = RuntimeEnvBuilder::new();
                    if let Some(d) = &work_dir {
                        b = b.with_temp_file_path(d.clone());
                    }
                    let runtime = b.build_arc()?;
                    for bucket in &buckets {
                        let url = url::Url::parse(bucket)
                            .map_err(|e| datafusion::error::DataFusionError::External(e.into()))?;
                        let store = engine::s3_store(bucket, &s3_props())
                            .map_err(|e| datafusion::error::DataFusionError::External(e.into()))?;
                        runtime.register_object_store(&url, store);
                    }
                    Ok(runtime)
                })),
                ..Default::default()
            };
            eprintln!(
                "ballista executor on {}:{} (grpc {}), scheduler {}:{}",
                a.bind, a.port, a.grpc_port, a.scheduler_host, a.scheduler_port
            );
            // Ballista spawns the executor's gRPC server and then registers with the scheduler,
            // which connects back to that server at once. Started from the main thread
            // (`block_on`), the server task waits in the runtime's shared queue for a worker to
            // wake, and on a loaded machine the scheduler's connect comes first: the
            // registration fails and the executor exits. Run on a worker, the server task is
            // that worker's next task and binds when the registration first waits.
            tokio::spawn(async move { start_executor_process(Arc::new(config)).await })
                .await
                .context("the executor task")??;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ports_free;

    #[test]
    fn a_held_port_is_refused_by_name_and_a_free_one_passes() {
        let held = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        let err = ports_free("127.0.0.1", &[("--grpc-port", port)]).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains(&format!("--grpc-port 127.0.0.1:{port}")), "{text}");
        drop(held);
        ports_free("127.0.0.1", &[("--grpc-port", port)]).unwrap();
    }
}
