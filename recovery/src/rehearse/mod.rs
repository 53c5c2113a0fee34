//! Rehearsals: the incident and the losses, run on scratch locations and timed step by step.
//!
//! [`drill`] (`tidemark drill`: the bad write and its recovery), [`gameday`] (catalog and region
//! loss), [`failover`] (primary loss under a live writer, with the warm replica), and [`fault`]
//! (`tidemark fault delete`, the bad write itself).

pub mod drill;
pub mod failover;
pub mod fault;
pub mod gameday;
