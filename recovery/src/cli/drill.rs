//! `tidemark drill`: the whole incident on a scratch location (see `tidemark_recovery::rehearse::drill`);
//! `tidemark gameday`: the catalog- and region-loss rehearsal (see `tidemark_recovery::rehearse::gameday`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tidemark_journal::clock::SystemClock;
use tidemark_recovery::exit::{BAD_INPUT, VERIFY_FAILED, exit_error};
use tidemark_recovery::ids::RandomIds;
use tidemark_recovery::progress::Progress;
use tidemark_recovery::rehearse::drill::{self, DrillCheck, DrillOptions};
use tidemark_recovery::rehearse::gameday::{self, GamedayOptions};

use super::{Common, print_json};

#[derive(Debug, Args)]
pub struct DrillArgs {
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
    pub common: Common,
}

pub async fn run(args: DrillArgs) -> anyhow::Result<()> {
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
    report.s3_requests = super::s3_requests();
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
        report.s3_requests = super::s3_requests();
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
    report.s3_requests = super::s3_requests();
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
