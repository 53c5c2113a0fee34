//! `tidemark drill`: the whole incident on a scratch location (see `tidemark_recovery::rehearse::drill`);
//! `tidemark gameday`: the catalog- and region-loss rehearsal (see `tidemark_recovery::rehearse::gameday`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::{Journal, store};
use tidemark_recovery::exit::{BAD_INPUT, VERIFY_FAILED, exit_error};
use tidemark_recovery::ids::Ids;
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::progress::Progress;
use tidemark_recovery::rehearse::drill::{self, DrillCheck, DrillOptions};
use tidemark_recovery::rehearse::gameday::{self, GamedayOptions};
use tidemark_recovery::rehearse::history;
use tidemark_recovery::rehearse::table_drill::{self, TableDrillOptions};
use tidemark_recovery::rehearse::trend;

use super::common::{Common, parse_duration};
use super::output::{print_json, s3_requests};
use super::recover::{SourceArgs, resolve_source};
use super::table::CatalogArgs;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DrillArgs {
    #[command(subcommand)]
    pub command: Option<DrillCommand>,
    /// Scratch folder for catalogs (and everything, without --store); default: a new temp folder.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// s3://bucket/prefix for the journal, warehouses and route (a real S3-protocol store).
    #[arg(long)]
    pub store: Option<String>,
    #[arg(long, default_value_t = 2_000)]
    pub orders: u64,
    #[arg(long, default_value_t = 20_000)]
    pub events: u64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// The catalog of the source and recovered tables (any form `--catalog` accepts;
    /// docs/catalogs.md); default: a SQLite catalog each for the source and DR sides in the work folder.
    #[arg(long)]
    pub catalog: Option<String>,
    /// Write the report as Markdown here (default: drill-report.md in the work folder).
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub real: RealTableArgs,
    #[command(flatten)]
    pub common: Common,
}

/// The drill of a real table (docs/recovery.md, "The drill of a real table"): with `--source-table` or `--source-metadata`, the
/// real recovery runs read-only against production into `--scratch`.
#[derive(Debug, Args)]
pub struct RealTableArgs {
    /// The production table (namespace.name in --catalog) to drill …
    #[arg(long, conflicts_with = "source_metadata", requires_all = ["journal", "scratch"])]
    pub source_table: Option<String>,
    /// … or the DR replica's metadata file.
    #[arg(long, requires_all = ["journal", "scratch"])]
    pub source_metadata: Option<String>,
    /// Read the replica through a path prefix map FROM=TO (a copy under another root).
    #[arg(long)]
    pub prefix_map: Option<String>,
    /// The production journal (read only).
    #[arg(long)]
    pub journal: Option<String>,
    /// Warehouse of --catalog (as `recover --warehouse`).
    #[arg(long)]
    pub warehouse: Option<String>,
    /// The namespace the scratch table is made in; it must hold nothing but drill tables.
    #[arg(long)]
    pub scratch: Option<String>,
    /// The route readers resolve (read only: its table and generation are reported).
    #[arg(long)]
    pub route: Option<String>,
    /// Where drill records are kept (a folder or s3://bucket/prefix); without it the drill
    /// writes no record.
    #[arg(long)]
    pub history: Option<String>,
    /// The recovery-time budget (e.g. 15m, 90s); over it the drill exits 13.
    #[arg(long, value_parser = parse_duration)]
    pub rto_budget: Option<std::time::Duration>,
    /// How the validation splits the keys (as `recover --validation-split`).
    #[arg(long, value_enum, default_value = "auto")]
    pub validation_split: tidemark_recovery::recover::validate::Split,
    /// Where the replay runs (as `recover --engine`).
    #[cfg(feature = "ballista-engine")]
    #[arg(long, default_value = "local", env = "TIDEMARK_ENGINE")]
    pub engine: tidemark_recovery::recover::engine::Engine,
}

#[derive(Debug, clap::Subcommand)]
pub enum DrillCommand {
    /// The trend of the drills recorded under --history: prints it, writes the HTML page and
    /// the Prometheus textfile metrics.
    History(HistoryArgs),
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The drill history location (as `drill --history`).
    #[arg(long)]
    pub history: String,
    /// Write the self-contained HTML trend page here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write Prometheus textfile metrics here (e.g. the node exporter's textfile folder).
    #[arg(long)]
    pub metrics: Option<PathBuf>,
    /// Print only the newest N drills (all are charted).
    #[arg(long, default_value_t = 20)]
    pub last: usize,
    #[command(flatten)]
    pub common: Common,
}

pub async fn run(args: DrillArgs) -> anyhow::Result<()> {
    if let Some(DrillCommand::History(h)) = args.command {
        return run_history(h).await;
    }
    if args.real.source_table.is_some() || args.real.source_metadata.is_some() {
        return run_real(args).await;
    }
    let work = match args.work {
        Some(w) => w,
        None => tempfile_dir()?,
    };
    let opts = DrillOptions {
        work: work.clone(),
        store: args.store.clone(),
        orders: args.orders,
        events: args.events,
        seed: args.seed,
        catalog: args.catalog.clone(),
    };
    let mut progress = Progress::new("drill", args.common.quiet);
    let mut report = drill::run(&opts, &SystemClock, &RandomIds, &mut |s| {
        progress.update(|| format!("{:<32} {:>7} ms  {}", s.step, s.ms, s.detail), true)
    })
    .await?;
    report.s3_requests = s3_requests();
    let md_path = args.report.unwrap_or_else(|| work.join("drill-report.md"));
    finish(
        "drill",
        &report,
        &report.markdown(),
        &report.checks,
        &md_path,
        args.common.json,
    )
}

/// Writes the Markdown report, prints it (or the JSON), and exits 4 naming the failed checks.
fn finish<R: serde::Serialize>(
    what: &str,
    report: &R,
    markdown: &str,
    checks: &[DrillCheck],
    md_path: &std::path::Path,
    json: bool,
) -> anyhow::Result<()> {
    std::fs::write(md_path, markdown).with_context(|| format!("writing {}", md_path.display()))?;
    if json {
        print_json(report)?;
    } else {
        println!("{markdown}");
        println!("report: {}", md_path.display());
    }
    let failed: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.check.as_str()).collect();
    if !failed.is_empty() {
        return Err(exit_error(
            VERIFY_FAILED,
            format!("{what} failed checks: {}", failed.join("; ")),
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    Region,
    Failover,
}

#[derive(Debug, Args)]
pub struct GamedayArgs {
    /// Scratch folder for catalogs (and everything, without --store); default: a new temp folder.
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// s3://bucket/prefix for the warehouses (a real S3-protocol store).
    #[arg(long)]
    pub store: Option<String>,
    /// Tables in the scratch namespace `gameday`.
    #[arg(long, default_value_t = 4)]
    pub tables: usize,
    /// Commits per table (at least 3).
    #[arg(long, default_value_t = 4)]
    pub commits: usize,
    #[arg(long, default_value_t = 1_000)]
    pub rows_per_commit: usize,
    /// The catalog of the source tables (any form `--catalog` accepts), in its scratch namespace
    /// `gameday`, which must not exist; dropped at the end. Default: a scratch SQLite catalog.
    #[arg(long)]
    pub catalog: Option<String>,
    /// Where the lost catalog is rebuilt (it must be able to register a metadata file); default:
    /// a scratch SQLite catalog.
    #[arg(long)]
    pub dr_catalog: Option<String>,
    /// `region`: catalog and region loss (rebuild from the replica); `failover`: primary loss
    /// under a live writer with the warm replica (follow, fail over, recover the gap, resync).
    #[arg(long, value_enum, default_value = "region")]
    pub scenario: Scenario,
    /// Write the report as Markdown here (default: gameday-report.md in the work folder).
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

pub async fn run_gameday(args: GamedayArgs) -> anyhow::Result<()> {
    let work = match args.work {
        Some(w) => w,
        None => tempfile_dir()?,
    };
    let opts = GamedayOptions {
        work: work.clone(),
        store: args.store.clone(),
        tables: args.tables,
        commits: args.commits,
        rows_per_commit: args.rows_per_commit,
        catalog: args.catalog.clone(),
        dr_catalog: args.dr_catalog.clone(),
    };
    // A catalog that cannot take part is refused before anything is made (exit 6 for a missing
    // capability), with the error's own kind.
    if opts.catalog.is_some() || opts.dr_catalog.is_some() {
        if args.scenario == Scenario::Failover {
            return Err(exit_error(
                BAD_INPUT,
                "gameday --scenario failover runs on scratch catalogs of its own: --catalog and --dr-catalog \
                 are for the region scenario (the default)",
            ));
        }
        gameday::check_catalogs(&opts).await?;
    }
    let mut progress = Progress::new("gameday", args.common.quiet);
    if args.scenario == Scenario::Failover {
        let mut report = tidemark_recovery::rehearse::failover::run(&opts, &SystemClock, &RandomIds, &mut |s| {
            progress.update(|| format!("{:<56} {:>7} ms  {}", s.step, s.ms, s.detail), true)
        })
        .await?;
        report.s3_requests = s3_requests();
        let md_path = args.report.unwrap_or_else(|| work.join("gameday-failover-report.md"));
        return finish(
            "failover game day",
            &report,
            &report.markdown(),
            &report.checks,
            &md_path,
            args.common.json,
        );
    }
    let report = gameday::run(&opts, &SystemClock, &RandomIds, &mut |s| {
        progress.update(|| format!("{:<48} {:>7} ms  {}", s.step, s.ms, s.detail), true)
    })
    .await;
    let mut report = match report {
        Ok(r) => r,
        Err(e) if opts.catalog.is_some() || opts.dr_catalog.is_some() => {
            // The scratch namespace the preflight found absent is the game day's own: dropped.
            let left = gameday::drop_scratch(&opts).await;
            let left = if left.is_empty() {
                String::new()
            } else {
                format!("; left behind in the catalogs: {}", left.join("; "))
            };
            return Err(anyhow::Error::new(e).context(format!("the game day's scratch namespace was dropped{left}")));
        }
        Err(e) => return Err(e.into()),
    };
    report.s3_requests = s3_requests();
    let md_path = args.report.unwrap_or_else(|| work.join("gameday-report.md"));
    finish(
        "game day",
        &report,
        &report.markdown(),
        &report.checks,
        &md_path,
        args.common.json,
    )
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir();
    for i in 0..1000u32 {
        let p = base.join(format!("tidemark-drill-{}-{i}", std::process::id()));
        if std::fs::create_dir(&p).is_ok() {
            return Ok(p);
        }
    }
    anyhow::bail!("cannot create a scratch folder under {}", base.display())
}

/// `tidemark drill --source-table …`: the weekly drill of a real table.
async fn run_real(args: DrillArgs) -> anyhow::Result<()> {
    let real = args.real;
    let (Some(journal_url), Some(scratch)) = (&real.journal, &real.scratch) else {
        return Err(exit_error(
            BAD_INPUT,
            "a drill of a real table needs --journal and --scratch",
        ));
    };
    let Some(catalog) = &args.catalog else {
        return Err(exit_error(
            BAD_INPUT,
            "a drill of a real table needs --catalog (where the scratch namespace is, and the source table)",
        ));
    };
    let handle = CatalogArgs {
        catalog: catalog.clone(),
        warehouse: real.warehouse.clone(),
        catalog_name: None,
    }
    .open()
    .await?;
    let journal = Journal::open(store::open(journal_url).await?).await?;
    let source = resolve_source(
        Some(&handle),
        &SourceArgs {
            table: real.source_table.clone(),
            catalog: None,
            warehouse: None,
            metadata: real.source_metadata.clone(),
            prefix_map: real.prefix_map.clone(),
        },
    )
    .await?;
    let history = match &real.history {
        Some(h) => Some(store::open_or_create(h).await?),
        None => None,
    };
    let opts = TableDrillOptions {
        drill_id: format!("{}{}", table_drill::ID_PREFIX, RandomIds.uuid()),
        source_label: real.source_table.clone().unwrap_or_else(|| {
            // The replica's table location: its metadata file changes with every commit, and
            // the metrics are labelled by the source.
            let m = &source.metadata_location;
            m.rsplit_once("/metadata/")
                .map_or(m.clone(), |(table, _)| table.to_string())
        }),
        source,
        scratch: scratch.clone(),
        route: real.route.clone(),
        history,
        rto_budget_ms: real.rto_budget.map(|d| d.as_millis() as u64),
        validation_split: real.validation_split,
        #[cfg(feature = "ballista-engine")]
        engine: real.engine.clone(),
    };
    let mut progress = Progress::new("drill", args.common.quiet);
    let report = table_drill::run(&journal, &handle, &opts, &SystemClock, &RandomIds, &mut |s| {
        progress.update(|| format!("{:<16} {:>8} ms  {}", s.step, s.ms, s.detail), true)
    })
    .await?;
    if args.common.json {
        print_json(&report)?;
    } else {
        print!("{}", table_drill::text(&report));
    }
    let code = report.exit_code();
    if code != 0 {
        return Err(exit_error(
            code,
            format!("drill {}: {}", report.record.drill_id, report.record.verdict),
        ));
    }
    Ok(())
}

/// `tidemark drill history`.
async fn run_history(args: HistoryArgs) -> anyhow::Result<()> {
    let store = store::open(&args.history).await?;
    let records = history::load_records(store.as_ref()).await?;
    if let Some(p) = &args.html {
        std::fs::write(p, trend::html(&records)).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.metrics {
        // Written aside and renamed, so that a scraper never reads half a file.
        let tmp = p.with_extension("prom.tmp");
        std::fs::write(&tmp, trend::metrics(&records)).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, p).with_context(|| format!("renaming {} to {}", tmp.display(), p.display()))?;
    }
    let shown = &records[records.len().saturating_sub(args.last)..];
    if args.common.json {
        print_json(&serde_json::json!({ "drills": shown, "total": records.len() }))?;
    } else {
        println!("{} drills recorded under {}", records.len(), args.history);
        for r in shown {
            println!(
                "  {}  {:<5}  RTO {:>8} ms  RPO {:>8} positions  {:>10} rows  {}",
                r.started_at,
                if r.ok { "pass" } else { "FAIL" },
                r.rto_ms,
                r.rpo_positions.map_or("?".into(), |p| p.to_string()),
                r.rows,
                if r.ok { String::new() } else { r.verdict.clone() }
            );
        }
        if let Some(p) = &args.html {
            println!("trend page: {}", p.display());
        }
        if let Some(p) = &args.metrics {
            println!("metrics: {}", p.display());
        }
    }
    Ok(())
}
