//! `recover --engine ballista-standalone | ballista://HOST:PORT`: the replay's merge as one
//! distributed DataFusion plan on a Ballista cluster; tidemark keeps the control.
//!
//! The steps, beside the local ones in [`super::recover`]:
//! 1. choose the trusted snapshot and the boundary H exactly as the local engine does: the
//!    events after the snapshot are read by their object version ids and verified (chain and
//!    sha256) before anything runs, and the voids of recorded resolutions are applied;
//! 2. refuse what the plan cannot carry: a snapshot with delete files (the listing would read
//!    deleted rows as live) or a partition transform SQL cannot compute (bucket; see
//!    [`super::partition`]);
//! 3. create the new table (same ownership rules as the seed: a table of this recovery or a
//!    refused attempt of it is replaced, anything else is refused);
//! 4. stage the verified events as one Parquet file in the new table's location
//!    (`tidemark-staging/<attempt>/`), so that executors read exactly the bytes tidemark
//!    verified, never a newer version of a journal object;
//! 5. register the snapshot's data files and the staged events as Parquet listings (the only
//!    tables that serialize to the scheduler) and run, distributed, the local merge's own SQL
//!    ([`crate::merge::conflicts_in_events_sql`], [`crate::merge::conflicts_with_table_sql`],
//!    [`crate::merge::decided_sql`]): a conflict stops the job and nothing is committed; the new
//!    table's rows (winners that insert or update, tombstones included, and every snapshot row
//!    whose key no winner updates) are written as Parquet into `data/tidemark-<attempt>/`, by
//!    partition folder when the table is partitioned ([`super::partition`]);
//! 6. build the manifests from the written files' footers ([`super::footer`]), check every key
//!    of the written files on the cluster against a second, differently formulated plan
//!    ([`super::distributed_check`]; a difference stops here, nothing committed), and commit them
//!    through the catalog contract in one snapshot whose summary carries the seed's and the
//!    replay's provenance (step `replay`, source snapshot and metadata, journal range, H,
//!    manifest digest, and `tidemark.recovery-engine`);
//! 7. validate with the local engine's independent reference ([`crate::reference`], no
//!    DataFusion) recomputed from the snapshot and the events, against the rows read back from
//!    the committed table's files, on a sample of the key partitions ([`REFERENCE_ONE_IN`]; every
//!    key when the table fits one validation partition, or when the recovery was already
//!    committed). docs/scale-out.md says what the two prove together and what they do not.
//!
//! Before anything is created, a snapshot whose files name a column otherwise than its schema
//! (by Parquet field id) is refused: the listings match columns by name
//! ([`super::footer::check_field_names`]).
//!
//! `run.rs`: the steps in order ([`recover`]); `target.rs`: the new table (step 3); `plan.rs`:
//! the staged events, the distributed plan and the commit (steps 4–6).

mod plan;
mod run;
mod target;

#[cfg(test)]
pub(crate) use plan::sabotage;
pub use run::{PROP_ENGINE, REFERENCE_ONE_IN, recover};
