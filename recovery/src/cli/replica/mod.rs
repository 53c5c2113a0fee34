//! `tidemark replica follow | status | failover | resync`: the warm DR replica (issue 13).
//!
//! * [`target`] — [`FollowTarget`], what `follow` and `failover` follow.
//! * [`follow`] — `replica follow`; [`status`] — `replica status` (with `--audit`);
//!   [`failover`] — `replica failover`; [`resync`] — `replica resync` (failback).

mod failover;
mod follow;
mod resync;
mod status;
mod target;

use std::path::PathBuf;

use clap::Subcommand;
use tidemark_recovery::dr::follow_state::FollowMode;

use self::target::FollowTarget;
use crate::cli::common::{Common, parse_duration};

#[derive(Debug, Subcommand)]
pub enum WarmCommand {
    /// Keep a DR catalog in step with a replicated warehouse (strict or eventual), under a lease.
    Follow {
        #[command(flatten)]
        target: FollowTarget,
        #[arg(long, value_enum, default_value = "strict")]
        mode: FollowMode,
        /// Time between cycles (30s, 5m, 500ms); without --once the follower runs until stopped.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        interval: std::time::Duration,
        /// One cycle, then release the lease and exit (for cron): exit 0 when every table is OK,
        /// 4 when one is behind, missing files, held, in conflict or failed (as `replica status`).
        #[arg(long)]
        once: bool,
        /// Stop after this many cycles (drills and tests).
        #[arg(long, hide = true)]
        max_cycles: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// The follower's state for people and alerts; exit 0 OK, 4 a table not OK, 10 the follower
    /// is not running, 7 no state.
    Status {
        /// The follower's state location (as `follow --state`), or give --catalog for the default
        /// beside a SQLite DR catalog.
        #[arg(long, required_unless_present = "catalog")]
        state: Option<String>,
        /// The SQLite DR catalog file whose default state location (<file>.follower) to read.
        #[arg(long, conflicts_with = "state")]
        catalog: Option<String>,
        /// How old the last scan may be before the follower counts as stale (default three
        /// intervals, or 15m).
        #[arg(long, value_parser = parse_duration)]
        max_age: Option<std::time::Duration>,
        /// Also write the status as a Prometheus textfile (gauges per table).
        #[arg(long)]
        prometheus: Option<PathBuf>,
        /// Audit a table's DR copy against its journal, TABLE=JOURNAL_URL (repeat for several):
        /// exit 12 when a copy holds a write its journal does not explain. Records go under the
        /// state location (`audits/`), so the next status reads only what was replicated since.
        #[arg(long, value_name = "TABLE=JOURNAL")]
        audit: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Promote the DR catalog: fence the follower, one final strict scan, flip the routes,
    /// record the promotion and what the DR side lacks.
    Failover {
        #[command(flatten)]
        target: FollowTarget,
        /// A route to flip to the DR table of the same name (repeat for several).
        #[arg(long = "route")]
        routes: Vec<String>,
        #[arg(long, default_value = "failover to the DR replica")]
        reason: String,
        /// The promotion's id (default failover-<UTC time>).
        #[arg(long)]
        failover_id: Option<String>,
        /// The tables' journal: the promotion then reports the newest checkpoint the primary
        /// recorded in it for each table, and whether a recovery must close the gap before the
        /// writer continues (`recover_needed`).
        #[arg(long)]
        journal: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Failback: walk the demoted old primary back to the newest versions the new primary
    /// holds, keeping and listing every file walked over; restore what only it deleted.
    Resync {
        /// The old primary (SQLite file, postgres://…, or a defined name).
        #[arg(long)]
        demote: String,
        /// The new primary (the promoted DR catalog).
        #[arg(long)]
        primary: String,
        #[arg(long)]
        namespace: Option<String>,
        /// The new primary's follower state location: refused while it reports missing files.
        #[arg(long)]
        follower_state: Option<String>,
        /// Show the plan; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also write the report (JSON) here.
        #[arg(long)]
        report: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

pub async fn run(cmd: WarmCommand) -> anyhow::Result<()> {
    match cmd {
        WarmCommand::Follow {
            target,
            mode,
            interval,
            once,
            max_cycles,
            common,
        } => follow::run_follow(target, mode, interval, once, max_cycles, common).await,
        WarmCommand::Status {
            state,
            catalog,
            max_age,
            prometheus,
            audit,
            common,
        } => status::run_status(state, catalog, max_age, prometheus, audit, common).await,
        WarmCommand::Failover {
            target,
            routes,
            reason,
            failover_id,
            journal,
            common,
        } => failover::run_failover(target, routes, reason, failover_id, journal, common).await,
        WarmCommand::Resync {
            demote,
            primary,
            namespace,
            follower_state,
            dry_run,
            report,
            common,
        } => resync::run_resync(demote, primary, namespace, follower_state, dry_run, report, common).await,
    }
}
