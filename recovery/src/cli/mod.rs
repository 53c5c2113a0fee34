//! The command line: [`Cli`] and its [`Command`]s, one subcommand a file under `cli/`, and
//! [`run`], which dispatches to them.
//!
//! * [`common`] — the options every command takes ([`common::Common`]) and the shared parsers
//!   (`--hint` maps, durations, the default writer id); [`output`] — printing JSON and the
//!   process's S3 request counts. Both import no command.
//! * [`store`] — `store check`; [`journal`] — `journal …`; [`generate`] — `gen events`.
//! * [`table`] — the catalog options, `apply`, `fault delete`.
//! * [`audit`] — `audit`; [`recover`] — `recover` (and the source table the audit shares).
//! * [`route`] — `route …`, `query`; [`catalog`] — `catalog …`.
//! * [`dr`] — `history …`, `replica check|copy`, `table rewrite-paths|compact`; [`replica`] —
//!   the warm follower: `replica follow|status|failover|resync`.
//! * [`drill`] — `drill`, `gameday`; `ballista` — the hidden Ballista processes.

mod audit;
#[cfg(feature = "ballista-engine")]
mod ballista;
mod catalog;
mod common;
mod dr;
mod drill;
mod generate;
mod journal;
mod output;
mod recover;
mod replica;
mod route;
mod store;
mod table;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "tidemark", version, about = "Bring an Iceberg table back to a proven state after a bad write", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Whether the command runs until stopped (the warm follower without `--once` or
    /// `--max-cycles`, a Ballista scheduler or executor) or ends when its work is done; the
    /// allocator's settings follow it (`tidemark_recovery::allocator`).
    pub fn process(&self) -> tidemark_recovery::allocator::Process {
        use tidemark_recovery::allocator::Process;
        match &self.command {
            #[cfg(feature = "ballista-engine")]
            Command::Ballista(_) => Process::Service,
            Command::Replica(dr::ReplicaCommand::Warm(replica::WarmCommand::Follow {
                once: false,
                max_cycles: None,
                ..
            })) => Process::Service,
            _ => Process::OneShot,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Object-store checks.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// The event journal: init, append, verify, status, checkpoints.
    #[command(subcommand)]
    Journal(journal::JournalCommand),
    /// Merge verified journal batches into the Iceberg state table, then checkpoint.
    Apply(Box<table::ApplyArgs>),
    /// Hold a table's history against the journal, snapshot by snapshot: find the bad write and
    /// the newest trusted snapshot (exit 12 on a divergence).
    Audit(Box<audit::AuditArgs>),
    /// Fault injection for drills: writes that bypass the journal.
    #[command(subcommand)]
    Fault(FaultCommand),
    /// Catalog operations: rebuild from the warehouse's metadata files; backup, state, restore.
    #[command(subcommand)]
    Catalog(catalog::CatalogCommand),
    /// Table history records: record, compare.
    #[command(subcommand)]
    History(dr::HistoryCommand),
    /// Table operations: compact (merge-on-read deletes); rewrite-paths (DR copies).
    #[command(subcommand)]
    Table(dr::TableCommand),
    /// DR replicas: check by referenced-file existence; copy in a consistent order; the warm
    /// follower (follow, status, failover).
    #[command(subcommand)]
    Replica(dr::ReplicaCommand),
    /// Rehearse the whole incident on a scratch location, timed (RTO, RPO, checks).
    Drill(drill::DrillArgs),
    /// Rehearse a catalog and region loss on a scratch namespace of several tables: record,
    /// lose, discover, choose by chain, register, validate, RTO per table; then the same after a
    /// wrong-order copy under a live writer, which validation must catch.
    Gameday(drill::GamedayArgs),
    /// Recover to a journal boundary H into a new table, validate, flip the route.
    Recover(Box<recover::RecoverArgs>),
    /// The routing record: show, flip.
    #[command(subcommand)]
    Route(route::RouteCommand),
    /// Query the table the route points at (resolved on every invocation).
    Query(route::QueryArgs),
    /// Generate deterministic test data.
    #[command(subcommand)]
    Gen(generate::GenCommand),
    /// A Ballista scheduler or executor process for `recover --engine ballista://…`
    /// (sandbox/ballista.sh; docs/scale-out.md).
    #[cfg(feature = "ballista-engine")]
    #[command(subcommand, hide = true)]
    Ballista(ballista::BallistaCommand),
}

#[derive(Debug, Subcommand)]
pub enum FaultCommand {
    /// Delete rows from a table directly, committed like any other write (the cleanup job that
    /// went wrong).
    Delete(table::FaultDeleteArgs),
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Store(c) => store::run(c).await,
        Command::Journal(c) => journal::run(c).await,
        Command::Gen(c) => generate::run(c),
        Command::Apply(a) => table::run_apply(*a).await,
        Command::Audit(a) => audit::run(*a).await,
        Command::Recover(a) => recover::run(*a).await,
        #[cfg(feature = "ballista-engine")]
        Command::Ballista(c) => ballista::run(c).await,
        Command::Drill(a) => drill::run(a).await,
        Command::Gameday(a) => drill::run_gameday(a).await,
        Command::Catalog(c) => catalog::run(c).await,
        Command::History(c) => dr::run_history(c).await,
        Command::Replica(c) => dr::run_replica(c).await,
        Command::Table(c) => dr::run_table(c).await,
        Command::Route(c) => route::run(c).await,
        Command::Query(a) => route::run_query(a).await,
        Command::Fault(FaultCommand::Delete(a)) => table::run_fault_delete(a).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tidemark_recovery::allocator::Process;

    use super::Cli;

    fn process(args: &[&str]) -> Process {
        let cli = Cli::try_parse_from(std::iter::once("tidemark").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        cli.process()
    }

    /// The allocator's purge delay follows the command: only what runs until stopped purges.
    #[test]
    fn only_the_commands_that_run_until_stopped_are_services() {
        let follow = ["replica", "follow", "--warehouse", "/w", "--catalog", "/c.db"];
        assert_eq!(process(&follow), Process::Service);
        assert_eq!(
            process(&[&follow[..], &["--interval", "5m"]].concat()),
            Process::Service
        );
        assert_eq!(process(&[&follow[..], &["--once"]].concat()), Process::OneShot);
        assert_eq!(
            process(&[&follow[..], &["--max-cycles", "3"]].concat()),
            Process::OneShot
        );
        assert_eq!(process(&["drill", "--work", "/d"]), Process::OneShot);
        assert_eq!(process(&["replica", "status", "--catalog", "/c.db"]), Process::OneShot);
        #[cfg(feature = "ballista-engine")]
        {
            assert_eq!(process(&["ballista", "scheduler"]), Process::Service);
            assert_eq!(process(&["ballista", "executor"]), Process::Service);
        }
    }
}
