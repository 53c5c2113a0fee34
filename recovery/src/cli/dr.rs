//! `tidemark history record | compare` and `tidemark replica check`.

use std::path::PathBuf;

use clap::Subcommand;
use tidemark_journal::clock::SystemClock;
use tidemark_recovery::catalog::s3_props;
use tidemark_recovery::dr::copy::{self, CopyOptions, CopyOrder, Verify};
use tidemark_recovery::dr::{history, replica};
use tidemark_recovery::exit::{FAILURE, VERIFY_FAILED, exit_error};
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::progress::Progress;
use tidemark_recovery::recover::snapshot::PrefixMap;

use super::common::{Common, parse_hints};
use super::output::{print_json, s3_requests};
use super::table::CatalogArgs;

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Record every table: rows, snapshots, refs, schema, metadata location.
    Record {
        #[command(flatten)]
        catalog: CatalogArgs,
        #[arg(long)]
        namespace: Option<String>,
        /// Write the record here (JSON).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// Compare two records as wholes; exits 4 when they differ (beyond metadata locations).
    Compare {
        a: PathBuf,
        b: PathBuf,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReplicaCommand {
    /// Check a replica by referenced-file existence: missing files, newest consistent metadata, RPO.
    Check {
        #[arg(long)]
        warehouse: String,
        /// Read through a prefix map FROM=TO (metadata still names the source's paths).
        #[arg(long)]
        prefix_map: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Copy tables so that the replica is always a consistent (possibly older) table: per
    /// commit, referenced files before the metadata naming them; resumable; verified.
    Copy {
        /// Source warehouse (folder or s3://bucket/prefix).
        #[arg(long)]
        from: String,
        /// Replica warehouse (folder or s3://bucket/prefix); keys are kept.
        #[arg(long)]
        to: String,
        /// Only these tables (namespace.name, comma-separated).
        #[arg(long, value_delimiter = ',')]
        tables: Option<Vec<String>>,
        /// `data-first` copies data/ then metadata/ from two listings: unsafe, for drills only.
        #[arg(long, value_enum, default_value = "safe")]
        order: CopyOrder,
        /// Check each object by size, or by sha256 (reads the copy back).
        #[arg(long, value_enum, default_value = "size")]
        verify: Verify,
        /// NS.TABLE=METADATA_FILE: the expected head of a table whose chain cannot decide.
        #[arg(long = "hint")]
        hints: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// The warm replica: follow, status, failover (cli/replica/).
    #[command(flatten)]
    Warm(super::replica::WarmCommand),
}

pub async fn run_history(cmd: HistoryCommand) -> anyhow::Result<()> {
    match cmd {
        HistoryCommand::Record {
            catalog,
            namespace,
            out,
            common,
        } => {
            let handle = catalog.open().await?;
            let rec = history::record_at(&handle, namespace.as_deref(), &SystemClock).await?;
            history::save(&rec, &out)?;
            if common.json {
                // The saved record leaves the requests out (it describes the catalog, not the run).
                let printed = history::HistoryRecord {
                    s3_requests: s3_requests(),
                    ..rec.clone()
                };
                print_json(&printed)?;
            } else {
                println!("recorded {} tables into {}", rec.tables.len(), out.display());
            }
            Ok(())
        }
        HistoryCommand::Compare { a, b, common } => {
            let (ra, rb) = (history::load(&a)?, history::load(&b)?);
            let diffs = history::compare(&ra, &rb);
            if common.json {
                let (pa, pb) = (a.display().to_string(), b.display().to_string());
                print_json(&history::HistoryComparison::new(&pa, &pb, diffs.clone()))?;
            } else if diffs.is_empty() {
                println!("no differences");
            } else {
                for d in &diffs {
                    println!(
                        "{:<32} {:<36} A: {:<24} B: {}{}",
                        d.table,
                        d.what,
                        d.a.as_deref().unwrap_or("-"),
                        d.b.as_deref().unwrap_or("-"),
                        if d.informational { "  (informational)" } else { "" }
                    );
                }
            }
            let real = diffs.iter().filter(|d| !d.informational).count();
            if real > 0 {
                return Err(exit_error(
                    VERIFY_FAILED,
                    format!("{real} differences between {} and {}", a.display(), b.display()),
                ));
            }
            Ok(())
        }
    }
}

pub async fn run_replica(cmd: ReplicaCommand) -> anyhow::Result<()> {
    match cmd {
        ReplicaCommand::Warm(c) => super::replica::run(c).await,
        ReplicaCommand::Copy {
            from,
            to,
            tables,
            order,
            verify,
            hints,
            common,
        } => {
            let map = parse_hints(hints)?;
            let opts = CopyOptions {
                tables,
                order,
                verify,
                stop_after: None,
                hints: map,
            };
            let mut progress = Progress::new("replica copy", common.quiet);
            let report = copy::copy(&from, &to, &opts, &mut |line| {
                progress.update(|| line.to_string(), false)
            })
            .await?;
            if common.json {
                print_json(&copy::CopyReport {
                    s3_requests: s3_requests(),
                    ..report.clone()
                })?;
            } else {
                for t in &report.tables {
                    println!(
                        "{:<32} head {}  {} metadata files  {} copied  {} already there  {} repaired  {} bytes",
                        t.table,
                        t.head.as_deref().unwrap_or("-"),
                        t.metadata_files,
                        t.copied,
                        t.skipped,
                        t.repaired,
                        t.bytes_copied
                    );
                    for problem in t.refused.iter().chain(&t.error) {
                        println!("{:<32} {problem}", "");
                    }
                }
                if order == CopyOrder::DataFirst {
                    println!(
                        "order data-first: unsafe under a live writer; check the replica with `tidemark replica check`"
                    );
                }
            }
            if !report.is_complete() {
                return Err(exit_error(FAILURE, "some tables were not copied: see the report"));
            }
            Ok(())
        }
        ReplicaCommand::Check {
            warehouse,
            prefix_map,
            common,
        } => {
            let map = match prefix_map {
                Some(m) => Some(PrefixMap::parse(&m).ok_or_else(|| anyhow::anyhow!("--prefix-map is FROM=TO"))?),
                None => None,
            };
            let report = replica::check(&warehouse, &s3_props(|k| std::env::var(k).ok()), map.as_ref()).await?;
            if common.json {
                print_json(&report)?;
            } else {
                for t in &report.tables {
                    println!(
                        "{:<32} newest {}  missing {}  consistent {}  behind {} commits / {} ms",
                        t.table,
                        t.newest_metadata.as_deref().unwrap_or("-"),
                        t.newest_missing_count,
                        t.consistent_metadata.as_deref().unwrap_or("NONE"),
                        t.behind_commits.map_or("?".into(), |c| c.to_string()),
                        t.behind_ms.map_or("?".into(), |c| c.to_string())
                    );
                    for m in &t.newest_missing {
                        println!("{:<32}   missing {} {}", "", m.what, m.path);
                    }
                    for w in &t.walked_over {
                        println!("{:<32}   walked over by replica resync, not a head: {w}", "");
                    }
                    if let Some(r) = &t.refused {
                        println!("{:<32}   REFUSED: {r}", "");
                    }
                }
            }
            let refused = report.refused_tables();
            if !refused.is_empty() {
                let first = report
                    .tables
                    .iter()
                    .find_map(|t| t.error.as_deref().filter(|_| t.access_denied));
                return Err(exit_error(
                    tidemark_recovery::exit::ACCESS_DENIED,
                    format!(
                        "the replica's store refused the credentials for {}: {}",
                        refused.join(", "),
                        first.unwrap_or_default()
                    ),
                ));
            }
            if !report.is_current() {
                return Err(exit_error(
                    VERIFY_FAILED,
                    "the replica is behind or inconsistent: see the report",
                ));
            }
            Ok(())
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Fold position deletes back into the data files: rewrite the data files with deleted rows
    /// (and small files) in one commit, dropping the delete files no data file needs any more.
    Compact {
        #[command(flatten)]
        catalog: CatalogArgs,
        /// The table, namespace.name.
        #[arg(long)]
        table: String,
        /// Rewrite a data file only when at least this fraction of its rows is deleted (default
        /// 0: every file with a deleted row, so that every position delete file is dropped).
        #[arg(long, default_value_t = 0.0)]
        min_deleted_fraction: f64,
        /// Memory the sort of the rewritten rows may hold, in MiB; beyond it sorted runs spill
        /// under $TIDEMARK_SPILL_DIR (default the system's temporary folder) and are merged from there.
        #[arg(long, default_value_t = tidemark_recovery::apply::compact::DEFAULT_MEMORY_BYTES >> 20)]
        memory_mb: usize,
        #[command(flatten)]
        common: Common,
    },
    /// Rewrite absolute paths in a table copy's metadata (metadata.json, manifest lists,
    /// manifests), writing new files beside the old, so that a copy under another bucket or
    /// prefix is readable; prints the copy plan.
    RewritePaths {
        /// The copy's metadata.json (as readable at its new location).
        #[arg(long)]
        metadata: String,
        #[arg(long)]
        from_prefix: String,
        #[arg(long)]
        to_prefix: String,
        #[command(flatten)]
        common: Common,
    },
}

pub async fn run_table(cmd: TableCommand) -> anyhow::Result<()> {
    match cmd {
        TableCommand::Compact {
            catalog,
            table,
            min_deleted_fraction,
            memory_mb,
            common,
        } => {
            let handle = catalog.open().await?;
            let t = tidemark_recovery::table::load_table(&handle, &table).await?;
            let opts = tidemark_recovery::apply::compact::CompactOptions {
                min_deleted_fraction,
                memory_bytes: memory_mb << 20,
                ..Default::default()
            };
            let mut progress = tidemark_recovery::progress::Progress::new("compact", common.quiet);
            let (report, _) = tidemark_recovery::apply::compact::compact_with_progress(
                &handle,
                t,
                &opts,
                &SystemClock,
                &RandomIds,
                &mut |p| {
                    progress.update(
                        || {
                            format!(
                                "{}read {} of {} files, wrote {} rows (of at most {}){}",
                                if p.attempt > 0 {
                                    format!("attempt {}: ", p.attempt + 1)
                                } else {
                                    String::new()
                                },
                                p.files_read,
                                p.files_to_read,
                                p.rows_written,
                                p.rows_at_most,
                                if p.written { "; committing" } else { "" }
                            )
                        },
                        p.written,
                    )
                },
            )
            .await?;
            if common.json {
                print_json(&report)?;
            } else if report.snapshot_id.is_none() {
                println!(
                    "{table}: nothing to compact ({} delete files)",
                    report.delete_files_before
                );
            } else {
                println!(
                    "{table}: rewrote {} of {} data files ({} rows kept, {} deleted rows dropped, {} bytes written); delete files {} -> {}",
                    report.data_files_rewritten,
                    report.data_files_before,
                    report.rows_read,
                    report.rows_dropped,
                    report.writes.data_bytes_written,
                    report.delete_files_before,
                    report.delete_files_after
                );
            }
            Ok(())
        }
        TableCommand::RewritePaths {
            metadata,
            from_prefix,
            to_prefix,
            common,
        } => {
            let report = tidemark_recovery::dr::rewrite::rewrite_paths(
                &metadata,
                &from_prefix,
                &to_prefix,
                &s3_props(|k| std::env::var(k).ok()),
            )
            .await?;
            if common.json {
                print_json(&report)?;
            } else {
                println!(
                    "new metadata {} ({} manifest lists, {} manifests rewritten, {} paths)",
                    report.new_metadata,
                    report.manifest_lists_rewritten,
                    report.manifests_rewritten,
                    report.paths_rewritten
                );
                for (old, new) in &report.copy_plan {
                    println!("copy {old} -> {new}");
                }
            }
            Ok(())
        }
    }
}
