//! `tidemark drill --source-table` (or `--source-metadata`): the weekly drill of a real table.
//!
//! The real recovery, read-only against production, into a scratch namespace:
//!
//! 1. **scratch**: the scratch namespace must hold nothing but drill tables (`tidemark_drill_*`,
//!    made by a drill: their recovery id starts with `drill-`); a foreign table there is refused
//!    before anything is written. Leftovers of a drill killed half-way are named and removed.
//! 2. **audit**: the source's history against the journal ([`crate::audit`]); its records go to
//!    the drill history (or a temporary folder), never under the journal.
//! 3. **journal**: the chain reaches from the trusted snapshot's position to the head (events a
//!    retention rule removed are named, with the oldest position still held).
//! 4. **route** (with `--route`): read, never flipped; the routed table's audit must be clean.
//! 5. **recover**: choose, boundary, seed, replay and validate into `<scratch>.tidemark_drill_<id>`,
//!    exactly as `tidemark recover` would (the trusted snapshot as a real recovery chooses it).
//! 6. **checks** (validation, audit, journal, route, RTO against `--rto-budget`), then
//!    **cleanup** (the scratch table dropped and its files deleted, also after a failed step),
//!    then the record ([`crate::rehearse::history`]).
//!
//! Nothing of production is written: not the journal, the source table or its catalog entry,
//! the route, the checkpoints. The only writes are the scratch namespace's tables and the
//! history location's objects.
//!
//! `run.rs`: the drill, step by step ([`run`]); `report.rs`: its options, checks and report
//! ([`TableDrillReport`], [`text`]); `scratch.rs`: the scratch namespace (drill tables only, and
//! their leftovers); `journal.rs`: what the journal still holds.

mod journal;
mod report;
mod run;
mod scratch;

pub use journal::{JournalHeld, journal_held};
pub use report::{
    CHECK_AUDIT, CHECK_JOURNAL, CHECK_ROUTE, CHECK_RTO, CHECK_TRUSTED, CHECK_VALIDATION, RECOVERY_STEPS, RouteSeen,
    StepFailure, TableDrillOptions, TableDrillReport, text,
};
pub use run::run;
pub use scratch::{
    ForeignScratchTable, ID_PREFIX, Leftover, Removal, TABLE_PREFIX, clear_scratch, remove_dead_temp_records,
    remove_scratch_table, temp_records_dir,
};
