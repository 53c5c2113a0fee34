//! tidemark's recovery side: Iceberg table work, DataFusion replay, reference validation, DR
//! tools, and the `tidemark` command line (in `cli`).

pub mod allocator;
pub mod apply;
pub(crate) mod apply_chunks;
#[cfg(test)]
mod apply_chunks_tests;
pub mod apply_group;
#[cfg(test)]
mod apply_group_tests;
pub mod apply_mor;
pub mod apply_spill;
#[cfg(test)]
mod apply_spill_tests;
#[cfg(test)]
mod apply_tests;
pub mod apply_unit;
#[cfg(all(test, feature = "ballista-engine"))]
mod ballista_partition_tests;
#[cfg(all(test, feature = "ballista-engine"))]
mod ballista_tests;
pub mod benchdata;
pub mod catalog;
pub mod compact;
#[cfg(test)]
mod deletes_tests;
pub mod dr;
pub mod drill;
pub mod exit;
pub mod fault;
pub mod gameday;
pub mod gameday_failover;
pub mod ids;
pub mod merge;
#[cfg(test)]
mod merge_props;
#[cfg(test)]
mod mor_tests;
pub mod progress;
pub mod query;
pub mod recover;
#[cfg(test)]
mod recover_tests;
pub mod reference;
#[cfg(test)]
mod report_schemas;
pub mod sqlite_check;
pub mod table;
