//! Catalog options shared by the commands that work on tables, and `tidemark apply` and
//! `tidemark fault delete`.

use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::{Journal, store};
use tidemark_recovery::apply::mor::MergeMode;
use tidemark_recovery::apply::{ApplyOptions, Grouping, Guard, RouteFence, apply};
use tidemark_recovery::catalog::{CatalogConfig, CatalogHandle, CatalogRef, open_catalog, open_ref, same_catalog};
use tidemark_recovery::exit::{BAD_INPUT, exit_error};
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::progress::Progress;
use tidemark_recovery::rehearse::fault;
use tidemark_router::{Fence, RouteStore};

use super::common::Common;
use super::output::{print_json, s3_requests};

/// Where the Iceberg catalog and warehouse are (docs/catalogs.md).
#[derive(Debug, Clone, Args)]
pub struct CatalogArgs {
    /// A SQLite file (the embedded default), postgres://…, rest+http(s)://host[:port][/path], an
    /// S3 Tables table-bucket ARN, or the name of a catalog defined in .pyiceberg.yaml or
    /// PYICEBERG_CATALOG__<NAME>__<KEY> variables.
    #[arg(long, env = "TIDEMARK_CATALOG")]
    pub catalog: String,
    /// Warehouse folder or s3://bucket/prefix; default: the defined catalog's, or `warehouse`
    /// beside a SQLite catalog file.
    #[arg(long, env = "TIDEMARK_WAREHOUSE")]
    pub warehouse: Option<String>,
    /// Catalog name (PyIceberg's and Java's readers must use the same); default: the defined
    /// catalog's name, or `tidemark`.
    #[arg(long)]
    pub catalog_name: Option<String>,
}

impl CatalogArgs {
    pub fn config(&self) -> CatalogConfig {
        CatalogConfig {
            uri: self.catalog.clone(),
            warehouse: self.warehouse.clone().unwrap_or_default(),
            name: self.catalog_name.clone().unwrap_or_default(),
        }
    }

    pub async fn open(&self) -> anyhow::Result<CatalogHandle> {
        Ok(open_catalog(&self.config()).await?)
    }
}

/// [`CatalogArgs`] for `apply`, where `--route` alone names the catalog (the route's own).
#[derive(Debug, Clone, Args)]
pub struct ApplyCatalogArgs {
    /// As for every command; with --route it may be left out: the route's catalog is opened,
    /// with the credentials of a catalog defined under the route's catalog name.
    #[arg(long, env = "TIDEMARK_CATALOG", required_unless_present = "route")]
    pub catalog: Option<String>,
    #[arg(long, env = "TIDEMARK_WAREHOUSE")]
    pub warehouse: Option<String>,
    #[arg(long)]
    pub catalog_name: Option<String>,
}

impl ApplyCatalogArgs {
    fn given(&self) -> Option<CatalogArgs> {
        self.catalog.as_ref().map(|catalog| CatalogArgs {
            catalog: catalog.clone(),
            warehouse: self.warehouse.clone(),
            catalog_name: self.catalog_name.clone(),
        })
    }
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[arg(long)]
    pub journal: String,
    #[command(flatten)]
    pub catalog: ApplyCatalogArgs,
    /// The state table, namespace.name (created from the journal's spec if missing).
    #[arg(long, required_unless_present = "route")]
    pub table: Option<String>,
    /// Apply into the table this route points at, fenced: refuse to commit once the route's
    /// generation moved past the one this writer started with.
    #[arg(long, conflicts_with = "table")]
    pub route: Option<String>,
    /// Apply up to this journal position (default: everything verified).
    #[arg(long)]
    pub until: Option<u64>,
    /// Journal batches merged per table commit (default: every batch waiting, up to 100
    /// batches and 100,000 events a commit; one a commit when caught up).
    #[arg(long)]
    pub batches_per_commit: Option<usize>,
    /// How changes are written: copy-on-write rewrites the data files holding a replaced key;
    /// merge-on-read adds new files and position deletes (default: the table's
    /// `write.merge.mode`, else copy-on-write).
    #[arg(long, value_enum)]
    pub merge_mode: Option<MergeMode>,
    /// Merge-on-read: compact once position deletes remove this fraction of the table's rows
    /// (default: the table's `tidemark.apply.compact-deleted-fraction`, else 0.2; 0: never).
    #[arg(long)]
    pub compact_at: Option<f64>,
    /// When another writer committed a change the journal does not explain since the applier's
    /// own last commit: `stop` (commit nothing, exit 12) or `continue` (accept it; needs
    /// --reason, recorded in the next commit's summary).
    #[arg(long, value_enum, default_value = "stop")]
    pub on_divergence: OnDivergenceArg,
    /// Why the divergence is accepted (with `--on-divergence continue`).
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDivergenceArg {
    Stop,
    Continue,
}

pub async fn run_apply(args: ApplyArgs) -> anyhow::Result<()> {
    let on_divergence = match (args.on_divergence, &args.reason) {
        (OnDivergenceArg::Stop, _) => tidemark_recovery::apply::OnDivergence::Stop,
        (OnDivergenceArg::Continue, Some(r)) if !r.trim().is_empty() => {
            tidemark_recovery::apply::OnDivergence::Continue { reason: r.clone() }
        }
        (OnDivergenceArg::Continue, _) => {
            return Err(tidemark_recovery::exit::exit_error(
                tidemark_recovery::exit::BAD_INPUT,
                "--on-divergence continue needs --reason TEXT (recorded in the commit that accepts the change)",
            ));
        }
    };
    let journal = Journal::open(store::open(&args.journal).await?).await?;
    let (handle, table_name, guard) = match (&args.table, &args.route) {
        (Some(t), _) => {
            let Some(given) = args.catalog.given() else {
                anyhow::bail!("--catalog is required with --table");
            };
            (given.open().await?, t.clone(), None)
        }
        (None, Some(r)) => {
            let routes = RouteStore::open(r).await?;
            let (fence, route) = Fence::acquire(&routes).await?;
            let handle = route_catalog(&args.catalog, r, &route.catalog).await?;
            eprintln!("apply: route generation {} -> {}", route.generation, route.table_name);
            let guard: Arc<dyn tidemark_recovery::apply::CommitGuard> = Arc::new(RouteFence { routes, fence });
            (handle, route.table_name, Some(Guard(guard)))
        }
        (None, None) => anyhow::bail!("--table or --route is required"),
    };
    let opts = ApplyOptions {
        guard,
        until: args.until,
        grouping: Grouping::of(args.batches_per_commit),
        merge_mode: args.merge_mode,
        compact_at: args.compact_at,
        on_divergence,
        // For drills and tests: simulate a crash at a named step (see docs/errors.md, "Failpoints").
        failpoint: std::env::var("TIDEMARK_FAILPOINT").ok().filter(|v| !v.is_empty()),
        ..Default::default()
    };
    let mut progress = Progress::new("apply", args.common.quiet);
    let mut report = apply(
        &journal,
        &handle,
        &table_name,
        &opts,
        &SystemClock,
        &RandomIds,
        &mut |p| {
            progress.update(
                || {
                    format!(
                        "position {}/{}, {} commits, {} events",
                        p.position, p.target, p.commits, p.events
                    )
                },
                p.position == p.target,
            )
        },
    )
    .await?;
    report.s3_requests = s3_requests();
    if args.common.json {
        print_json(&report)?;
    } else {
        if report.recovered_checkpoint {
            println!(
                "the table was ahead of its newest checkpoint (a stop between commit and checkpoint); wrote the missing checkpoint"
            );
        }
        println!(
            "applied positions {}..={} to {}: {} commits, {} events ({} inserted, {} updated, {} unchanged, {} tombstones), snapshot {}",
            report.started_after_position + 1,
            report.applied_to_position,
            report.table,
            report.commits,
            report.merge.events,
            report.merge.inserted,
            report.merge.updated,
            report.merge.unchanged,
            report.merge.tombstones_written,
            report.snapshot_id.map_or("-".into(), |s| s.to_string())
        );
        println!(
            "{}: {} data files ({} bytes) and {} delete files ({} bytes, {} position deletes) written, {} data files removed; {} compactions",
            report.merge_mode.as_str(),
            report.writes.data_files_written,
            report.writes.data_bytes_written,
            report.writes.delete_files_written,
            report.writes.delete_bytes_written,
            report.writes.position_deletes_written,
            report.writes.data_files_removed,
            report.compactions
        );
    }
    Ok(())
}

/// The catalog the fenced writer commits to: the route's own, opened from its reference (the
/// reader's definition of that name supplies credentials), or `--catalog`, which must then be
/// that same catalog: a writer committing elsewhere than readers look would be lost work.
async fn route_catalog(
    args: &ApplyCatalogArgs,
    route_url: &str,
    recorded: &CatalogRef,
) -> anyhow::Result<CatalogHandle> {
    let Some(given) = args.given() else {
        return open_ref(recorded).await.with_context(|| {
            format!(
                "apply --route {route_url}: cannot open the route's {recorded}; define a catalog named {:?} \
                 (.pyiceberg.yaml or PYICEBERG_CATALOG__{}__… variables) with its credentials, or give --catalog",
                recorded.name,
                recorded.name.to_uppercase()
            )
        });
    };
    let handle = given.open().await?;
    if !same_catalog(handle.reference(), recorded) {
        return Err(exit_error(
            BAD_INPUT,
            format!(
                "apply --route {route_url}: --catalog is the {}, but the route's table is in the {recorded}; \
                 leave --catalog out to use the route's catalog",
                handle.reference()
            ),
        ));
    }
    Ok(handle)
}

#[derive(Debug, Args)]
pub struct FaultDeleteArgs {
    #[command(flatten)]
    pub catalog: CatalogArgs,
    #[arg(long)]
    pub table: String,
    /// SQL predicate over the table's columns selecting the rows to delete.
    #[arg(long = "where")]
    pub predicate: String,
    #[command(flatten)]
    pub common: Common,
}

pub async fn run_fault_delete(args: FaultDeleteArgs) -> anyhow::Result<()> {
    let handle = args.catalog.open().await?;
    let mut report = fault::delete_rows(&handle, &args.table, &args.predicate, &SystemClock, &RandomIds).await?;
    report.s3_requests = s3_requests();
    if args.common.json {
        print_json(&report)?;
    } else {
        println!(
            "deleted {} rows from {} ({} files rewritten) outside the journal; snapshot {}",
            report.rows_deleted,
            report.table,
            report.files_rewritten,
            report.snapshot_id.map_or("-".into(), |s| s.to_string())
        );
    }
    Ok(())
}
