//! `tidemark gameday`: the catalog- and region-loss rehearsal, timed per step and per table.
//!
//! On a scratch namespace of several tables, each with a few commits, a tag and a branch (and
//! one stray metadata file left by a writer that died before its swap):
//!
//! 1. **record** the tables' history (rows, snapshots, refs, schema);
//! 2. **lose** the region: the tables were copied to the DR warehouse in the consistent order
//!    (`replica copy`), then the source catalog and warehouse are deleted;
//! 3. **discover** the table folders in the DR warehouse;
//! 4. **choose** each head by the metadata-log chain (never newest by name);
//! 5. **register** it in a new catalog, after rewriting its paths to the DR warehouse;
//! 6. **validate** every table against the record, and scan every data file;
//! 7. **RTO** per table: the time of steps 3–6 spent on it;
//! 8. **repeat** with a copy in the wrong order (data first, metadata last) under a live writer,
//!    and show that step 6 catches the tables whose newest metadata names missing files — while
//!    `replica check` names the older consistent head and the RPO.
//!
//! The report is JSON (`--json`) and Markdown, like the drill's.
//!
//! `run.rs`: the game day, step by step ([`run`]), and the check of the user's catalogs
//! ([`check_catalogs`]); `place.rs`: its options and where everything lives; `tables.rs`: the
//! scratch tables; `recover_catalog.rs`: steps 3–7 against a DR warehouse; `catalogs.rs`: the game
//! day on the user's catalogs; `report.rs`: the report; `failover_io.rs`: the failover game day's
//! own I/O ([`crate::rehearse::failover`]).

mod catalogs;
pub(crate) mod failover_io;
mod place;
mod recover_catalog;
mod report;
mod run;
mod tables;

pub use place::{GamedayOptions, NAMESPACE};
pub use report::{GamedayError, GamedayReport, GamedayRun, GamedayTable};
pub use run::{check_catalogs, drop_scratch, run};
