//! Rehearsals: the incident and the losses, run on scratch locations and timed step by step.
//!
//! [`drill`] (`tidemark drill`: the bad write and its recovery, on synthetic orders),
//! [`table_drill`] (`tidemark drill --source-table`: the real recovery of a production table
//! into a scratch namespace, read-only against production), [`history`] and [`trend`] (the
//! drills' records, their HTML trend and Prometheus metrics), [`gameday`] (catalog and region
//! loss), [`failover`] (primary loss under a live writer, with the warm replica), and [`fault`]
//! (`tidemark fault delete`, the bad write itself).

pub mod drill;
pub mod failover;
pub mod fault;
pub mod gameday;
pub mod history;
pub mod table_drill;
pub mod trend;
