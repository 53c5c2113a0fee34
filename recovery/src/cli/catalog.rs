//! `tidemark catalog rebuild`: register each table's head metadata file, chosen by the
//! metadata-log chain (never newest-by-name), into a (new) catalog after the old one was lost.
//! `tidemark catalog backup | state | restore`: content-addressed catalog backups and a restore
//! that fails closed.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use tidemark_journal::store;
use tidemark_recovery::dr::backup::{self, Expected, Refusal, RestoreAction};
use tidemark_recovery::dr::rebuild::rebuild;
use tidemark_recovery::exit::{CONFLICT, VERIFY_FAILED, exit_error};

use super::common::{Common, parse_hints};
use super::output::{print_json, s3_requests};
use super::table::CatalogArgs;

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
    /// Back up the catalog's table pointers with each metadata file's ETag and a watermark of
    /// the objects it references. The id is derived from the content: a repeated backup of an
    /// unchanged catalog is the same backup, and nothing is overwritten.
    Backup {
        #[command(flatten)]
        catalog: CatalogArgs,
        #[arg(long)]
        namespace: Option<String>,
        /// Store for the backups (folder or s3://bucket/prefix); files go to catalog-backups/.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        common: Common,
    },
    /// Print (and save) the catalog's current table pointers and their digest: the expected state
    /// that `catalog restore --expect` takes.
    State {
        #[command(flatten)]
        catalog: CatalogArgs,
        #[arg(long)]
        namespace: Option<String>,
        /// Write the state here (JSON).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Restore a backup: refuses when the catalog moved from the expected state (exit 5) unless
    /// --allow-replace, and when any referenced object is missing or changed (exit 4); nothing is
    /// changed before every check passed.
    Restore {
        #[command(flatten)]
        catalog: CatalogArgs,
        /// Store holding the backups (as given to `catalog backup --to`).
        #[arg(long)]
        from: String,
        /// Backup id (sha256:… as `catalog backup` printed it).
        #[arg(long)]
        id: String,
        /// `empty` (none of the backup's tables is in the catalog) or a state file written by
        /// `catalog state --out`.
        #[arg(long)]
        expect: String,
        /// Replace tables that moved since the expected state.
        #[arg(long)]
        allow_replace: bool,
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
            let map = parse_hints(hints)?;
            let handle = catalog.open().await?;
            let warehouse = handle.warehouse().to_string();
            let mut report = rebuild(&warehouse, &handle, namespace.as_deref(), &map).await?;
            report.s3_requests = s3_requests();
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
        CatalogCommand::Backup {
            catalog,
            namespace,
            to,
            common,
        } => {
            let handle = catalog.open().await?;
            // Refused before the backup folder is created, when there is nothing it could hold.
            handle.warehouse_location("back up the catalog")?;
            let backups = store::open_or_create(&to).await?;
            let out = backup::backup(&handle, namespace.as_deref(), backups.as_ref()).await?;
            if common.json {
                print_json(&out)?;
            } else {
                println!(
                    "{} {} ({} tables){}",
                    out.id,
                    out.location,
                    out.tables,
                    if out.already_stored {
                        "; already stored, nothing written"
                    } else {
                        ""
                    }
                );
            }
            Ok(())
        }
        CatalogCommand::State {
            catalog,
            namespace,
            out,
            common,
        } => {
            let handle = catalog.open().await?;
            let names: Vec<String> = handle
                .pointers(namespace.as_deref())
                .await?
                .into_iter()
                .map(|(t, _)| t)
                .collect();
            let state = backup::state(&handle, &names).await?;
            if let Some(path) = &out {
                std::fs::write(path, serde_json::to_vec_pretty(&state)?)
                    .with_context(|| format!("write the state to {}", path.display()))?;
            }
            if common.json {
                print_json(&state)?;
            } else {
                println!("{}", state.id);
                for (t, p) in &state.tables {
                    println!("{t:<32} {}", p.as_deref().unwrap_or("-"));
                }
            }
            Ok(())
        }
        CatalogCommand::Restore {
            catalog,
            from,
            id,
            expect,
            allow_replace,
            common,
        } => {
            let expected = if expect == "empty" {
                Expected::Empty
            } else {
                let text = std::fs::read(&expect).with_context(|| {
                    format!("--expect is `empty` or a state file of `catalog state --out`; cannot read {expect}")
                })?;
                Expected::State(
                    serde_json::from_slice(&text).with_context(|| format!("{expect} is not a catalog state file"))?,
                )
            };
            let handle = catalog.open().await?;
            let backups = store::open(&from).await?;
            let b = backup::load(backups.as_ref(), &id).await?;
            let mut report = backup::restore(&handle, &b, &expected, allow_replace).await?;
            report.s3_requests = s3_requests();
            if common.json {
                print_json(&report)?;
            } else {
                for t in &report.tables {
                    println!("{:<32} {:<10} {}", t.table, format!("{:?}", t.action), t.restored);
                    if let Some(p) = &t.problem {
                        println!("{:<32} {p}", "");
                    }
                    for m in &t.missing {
                        println!("{:<32} missing {} {}", "", m.what, m.path);
                    }
                }
                println!("{}", if report.applied { "restored" } else { "nothing changed" });
            }
            if let Some(reason) = &report.refused {
                let code = match report.refusal {
                    Some(Refusal::Moved) => CONFLICT,
                    _ => VERIFY_FAILED,
                };
                return Err(exit_error(code, reason.clone()));
            }
            if report.tables.iter().any(|t| t.action == RestoreAction::Conflict) {
                return Err(exit_error(
                    CONFLICT,
                    "some tables moved during the restore and were left alone: see the report",
                ));
            }
            Ok(())
        }
    }
}
