//! Catalog backup and restore (issue 5 item 6): `tidemark catalog backup | state | restore`.
//!
//! A catalog is one pointer per table, so a backup is that list plus what proves each pointer is
//! still good: per table, the metadata file's ETag and size, and a *watermark* of the objects
//! its current snapshot references (the snapshot id, the last sequence number and the number of
//! referenced objects: manifest list, manifests, data and delete files).
//!
//! Backups are immutable and idempotent: the id is the sha256 of the backup's canonical JSON
//! (which holds no clock reading), and the file `catalog-backups/<hex>.json` is written
//! create-only. Backing up an unchanged catalog again finds the same id and writes nothing; a
//! different backup can never overwrite it.
//!
//! Restore fails closed, in this order, changing nothing until every check passed:
//! 1. **Expected state.** The caller says what it expects the catalog to hold for the backup's
//!    tables: `empty` (a new or rebuilt catalog) or a state id printed by `tidemark catalog
//!    state` (a digest of the tables' current pointers). If the catalog moved since, the restore
//!    is refused with a conflict report naming every table whose pointer differs from the
//!    backup, unless `allow_replace` is set.
//! 2. **Referenced objects.** For every table: the metadata file exists with the recorded ETag,
//!    and every object its current snapshot references exists, as many as the watermark says.
//!    Anything missing or changed refuses the whole restore.
//! 3. **Apply.** A table not in the catalog is registered; one at another pointer is swapped with
//!    the catalog's compare-and-swap from the pointer seen in step 1, so a commit that lands
//!    during the restore makes that table a conflict instead of being overwritten silently.
//!    Tables in the catalog but not in the backup are left alone.
//!
//! `take.rs`: the backup, its loading and the catalog's state id; `restore.rs`: the restore;
//! `read.rs`: a table's metadata file and watermark, read for both; `report.rs`: the backup's
//! content and the reports.

mod read;
mod report;
mod restore;
mod take;
#[cfg(test)]
mod tests;

pub use report::{
    BACKUP_PREFIX, BackupError, BackupOutcome, BackupTable, CatalogBackup, CatalogState, FORMAT_VERSION, Refusal,
    RestoreAction, RestoreReport, RestoreTable, Watermark,
};
pub use restore::{Expected, restore, restore_through};
pub use take::{backup, load, snapshot_catalog, state};
