//! Disaster-recovery operations (issue 5): putting a catalog back from what survives on the
//! object store.
//!
//! A catalog holds only one pointer per table; every snapshot, branch and tag lives in the
//! table's metadata files on the store. So a lost catalog can be rebuilt from the warehouse alone
//! ([`rebuild`]), provided each table's true head metadata file is told apart from the strays
//! that failed or interrupted commits leave behind ([`rebuild::choose_head`]).
//!
//! The children: [`rebuild`] (`catalog rebuild`) with `head` (a table folder's head, chosen
//! the one way every reader uses) and `warehouse.rs` (the errors and table folders every reader
//! shares); [`backup`] (`catalog backup | state | restore`); [`history`] (a catalog's tables
//! recorded and compared); [`replica`] and [`replica_audit`] (`replica check`, `replica status
//! --audit`); [`copy`] (`replica copy` in a consistent order); [`rewrite`] (a copy's paths
//! rewritten); the warm follower: [`follow`] (one cycle and its publish step), [`follower`]
//! (cycles under the [`lease`]), [`follow_state`] and [`follow_status`] (its state and
//! `replica status`); [`failover`] (`replica failover`); [`resync`] (`replica resync`, the
//! failback) with [`resync_record`] and [`resync_record_write`] (the records of its walks).

pub mod backup;
pub mod copy;
pub mod failover;
pub mod follow;
pub mod follow_state;
pub mod follow_status;
pub mod follower;
pub(crate) mod head;
pub mod history;
pub mod lease;
pub mod rebuild;
#[cfg(test)]
mod rebuild_tests;
pub mod replica;
pub mod replica_audit;
pub mod resync;
pub mod resync_record;
pub mod resync_record_write;
pub mod rewrite;
#[cfg(test)]
pub(crate) mod test_support;
mod warehouse;

pub use follow::publish as follow_publish;
