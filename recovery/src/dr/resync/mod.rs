//! `tidemark replica resync` (failback): make the demoted old primary converge on the new
//! primary without losing anything silently.
//!
//! Per table of either catalog:
//! - **on both**: the demoted pointer's metadata chain is walked back (through `metadata-log`)
//!   to the newest version whose current snapshot the new primary also holds (by snapshot id);
//!   the demoted pointer is swapped to it (compare-and-swap from the pointer read), after the
//!   metadata files walked over are recorded beside them (`super::resync_record`), so that a
//!   follower into the demoted catalog never chooses them as a head. The versions
//!   walked over and every file only their snapshots reference (manifest lists, manifests, data
//!   and delete files) are listed in the report and **never deleted**, so diverged data can be
//!   inspected and replayed. A table already at a common version is left alone; one whose chain
//!   shares no version with the new primary is held and named.
//! - **only on the demoted side**: reported, not deleted.
//! - **only on the new primary** (deleted, or dropped, only on the demoted side): restored from
//!   the demoted warehouse's own metadata files (head by the chain, walked back as above) and
//!   registered; when the demoted warehouse has no file of it, reported as not restorable.
//!
//! Per kind of demoted catalog:
//! - **SQL** (SQLite, PostgreSQL): as above, the pointer swapped by compare-and-swap.
//! - **AWS S3 Tables**: the same walk (the metadata files are in the table's own warehouse, each
//!   logging the one before); the pointer is moved by UpdateTableMetadataLocation with the version
//!   token read with the pointer (a stale token: someone else moved it, a conflict, nothing moved),
//!   the call the follower uses. A table deleted only there is created again like the new
//!   primary's, at its current version, as the follower creates one (see `restore.rs`).
//! - **Iceberg REST**: walked back by snapshots (see `rest.rs`): the table is renamed aside
//!   (kept, with every file) and created again at the newest snapshot both sides hold, so that
//!   its last sequence number is that snapshot's and the new primary's later snapshots can be
//!   added; the server's metadata files on the walked-over branch are recorded as on the other
//!   kinds. A table deleted only there: as S3 Tables. A table an earlier resync renamed aside is
//!   reported (`kept_aside`), on either side, never resynced or restored.
//!
//! Each walk gets a record of its own, named by the walk (`super::resync_record`), written
//! conditionally (`super::resync_record_write`): a walk is never lost to a concurrent resync of
//! the same table, nor to a replication that brings the other side's records back; one that
//! keeps losing that write is a `conflict`.
//!
//! `dry_run` plans and changes nothing. Refused while the new primary's follower state shows a
//! table whose registered version lacks files (eventual mode). After a resync, a follower of the new primary into the
//! demoted catalog (replication reversed) advances every table from a version on its chain.
//!
//! `run.rs`: the resync, table by table ([`resync`]); `walk.rs`: the walk back of a demoted chain
//! and its record; `rest.rs`: the walk back of an Iceberg REST table; `restore.rs`: a table
//! deleted only on the demoted side, restored; `report.rs`: the report ([`ResyncReport`]).

mod report;
mod rest;
mod restore;
mod run;
mod walk;

pub use report::{AsideTable, FORMAT_VERSION, KeptFile, ResyncAction, ResyncError, ResyncReport, ResyncTable};
pub use run::resync;
