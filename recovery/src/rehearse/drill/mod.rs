//! `tidemark drill`: the whole incident, rehearsed on a scratch location, timed step by step.
//!
//! Generate orders → journal → apply with checkpoints → route readers to the table → the bad
//! cleanup job deletes rows → replication copies the warehouse, damage included, to the DR side →
//! the stream goes on (with the five orders A–E) → recover from the DR copy to H → validate →
//! flip the route → the next writer resumes after H, fenced by the route → a reader queries
//! through the route. Every step is timed; RTO is the recovery steps end to end; RPO is how far
//! behind the replica was (commits and journal positions) — and what the journal replay won back.
//!
//! `run.rs`: the drill, step by step ([`run`], [`DrillOptions`]); `report.rs`: what it reports
//! ([`DrillReport`]) and how its steps are timed (`Timer`), shared with the table drill and the
//! game days.

mod report;
mod run;

pub use report::{DrillCheck, DrillError, DrillReport, DrillStep};
pub(crate) use report::{Timer, checks_markdown};
pub use run::{DrillOptions, run};
