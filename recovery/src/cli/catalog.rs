//! `tidemark catalog rebuild`: register each table's head metadata file, chosen by the
//! metadata-log chain (never newest-by-name), into a (new) catalog after the old one was lost.

use std::collections::HashMap;

use clap::Subcommand;
use tidemark_recovery::dr::rebuild::rebuild;
use tidemark_recovery::exit::{VERIFY_FAILED, exit_error};

use super::table::CatalogArgs;
use super::{Common, print_json};

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Rebuild a lost catalog from the metadata files in the warehouse.
    Rebuild {
        #[command(flatten)]
        catalog: CatalogArgs,
        /// Only tables of this namespace.
        #[arg(long)]
        namespace: Option<String>,
        /// NS.TABLE=METADATA_FILE: the expected head of a table (from a history record or the old
        /// catalog), used when the chain alone cannot decide.
        #[arg(long = "hint")]
        hints: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
}

pub async fn run(cmd: CatalogCommand) -> anyhow::Result<()> {
    match cmd {
        CatalogCommand::Rebuild {
            catalog,
            namespace,
            hints,
            common,
        } => {
            let mut map = HashMap::new();
            for h in hints {
                let (table, file) = h
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("--hint is NS.TABLE=METADATA_FILE, got {h:?}"))?;
                map.insert(table.to_string(), file.to_string());
            }
            let warehouse = catalog.default_warehouse()?;
            let handle = catalog.open().await?;
            let report = rebuild(&warehouse, &handle, namespace.as_deref(), &map).await?;
            if common.json {
                print_json(&report)?;
            } else {
                for t in &report.tables {
                    println!(
                        "{:<32} {:<20} {}  ({} ms)",
                        t.table,
                        format!("{:?}", t.status),
                        t.metadata_file.as_deref().unwrap_or("-"),
                        t.ms
                    );
                    println!("{:<32} reason: {}", "", t.reason);
                    for s in &t.strays {
                        println!("{:<32} stray: {s}", "");
                    }
                    if let Some(r) = &t.refused {
                        println!("{:<32} REFUSED: {r}", "");
                    }
                }
                let n = &report.totals;
                println!(
                    "{} tables: {} registered, {} already registered, {} conflicts, {} refused, {} failed; {} strays ({} ms)",
                    n.tables, n.registered, n.already_registered, n.conflicts, n.refused, n.failed, n.strays, report.ms
                );
            }
            if !report.is_complete() {
                return Err(exit_error(
                    VERIFY_FAILED,
                    "some tables were not registered (refused, conflicting or failed): see the report",
                ));
            }
            Ok(())
        }
    }
}
