//! `tidemark store check URL`: the capability table.

use anyhow::Context;
use clap::Subcommand;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::{capability, store};
use tidemark_recovery::exit::{CAPABILITY, exit_error};

use super::common::{Common, default_writer_id};
use super::output::{print_json, s3_requests};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Probe a folder or bucket/prefix for versioning, create-only and compare-and-swap.
    Check {
        /// A folder, file:// URL or s3://bucket/prefix.
        url: String,
        #[command(flatten)]
        common: Common,
    },
}

pub async fn run(cmd: StoreCommand) -> anyhow::Result<()> {
    match cmd {
        StoreCommand::Check { url, common } => {
            let store = store::open(&url).await?;
            let report = capability::check(store, &default_writer_id(), &SystemClock)
                .await
                .with_context(|| format!("probing {url}"))?;
            if common.json {
                print_json(&tidemark_schemas::StoreCheckReport {
                    s3_requests: s3_requests(),
                    ..report.clone()
                })?;
            } else {
                println!("store {}", report.store);
                println!("{:<40} {:<9} {:<6} detail", "capability", "required", "result");
                for c in &report.capabilities {
                    println!(
                        "{:<40} {:<9} {:<6} {}",
                        c.name,
                        if c.required { "yes" } else { "no" },
                        if c.ok { "ok" } else { "FAIL" },
                        c.detail
                    );
                }
            }
            if !report.ok {
                let failed: Vec<&str> = report
                    .capabilities
                    .iter()
                    .filter(|c| c.required && !c.ok)
                    .map(|c| c.name.as_str())
                    .collect();
                return Err(exit_error(
                    CAPABILITY,
                    format!("{url} lacks required capabilities: {}", failed.join(", ")),
                ));
            }
            Ok(())
        }
    }
}
