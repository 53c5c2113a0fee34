//! tidemark's recovery side, by stage as the data flows (the `tidemark` command line is the
//! binary's `cli`):
//!
//! | module | what |
//! |---|---|
//! | [`catalog`] | the catalogs (SQLite/PostgreSQL, Iceberg REST, S3 Tables) behind one contract |
//! | [`table`] | Iceberg table work: schema, reads, file writes, commits, merge-on-read deletes |
//! | [`merge`] | the versioned merge rules as a DataFusion plan |
//! | [`reference`] | the same rules as a plain fold, independent of the merge: what validation compares with |
//! | [`provenance`] | the summary properties of the applier protocol and of recoveries |
//! | [`audit`] | a table's history held against the journal: finds the bad write, names the trusted snapshot |
//! | [`apply`] | the applier: journal batches into the state table, then the checkpoint |
//! | [`recover`] | recovery to a boundary H: choose, seed, replay, validate |
//! | [`dr`] | DR operations: rebuild, backup/restore, replica copy and check, follow, fail over, resync |
//! | [`rehearse`] | the drill, the game days and the fault that starts them |
//! | [`query`] | readers: resolve the route on every query |
//! | [`exit`], [`error_text`], [`progress`], [`ids`], [`allocator`], [`benchdata`] | exit codes, an error on one line with each cause once, progress lines, injected ids, the allocator's settings, synthetic orders |

pub mod allocator;
pub mod apply;
pub mod audit;
pub mod benchdata;
pub mod catalog;
pub mod dr;
pub mod error_text;
pub mod exit;
pub mod ids;
pub mod merge;
pub mod progress;
pub mod provenance;
pub mod query;
pub mod recover;
pub mod reference;
pub mod rehearse;
#[cfg(test)]
mod report_schemas;
pub mod table;
