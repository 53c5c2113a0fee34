//! The snapshot summary's standard counts ([`Counts`], [`summary_counts`]) of a commit.

use std::collections::HashMap;

/// Counts for the snapshot summary.
#[derive(Default)]
pub(super) struct Counts {
    pub(super) added_files: u64,
    pub(super) added_records: u64,
    pub(super) added_size: u64,
    pub(super) deleted_files: u64,
    pub(super) deleted_records: u64,
    pub(super) removed_size: u64,
    pub(super) total_files: u64,
    pub(super) total_records: u64,
    pub(super) total_size: u64,
    /// Delete files: kept (total) and dropped because no remaining data file needs them.
    pub(super) total_delete_files: u64,
    pub(super) total_position_deletes: u64,
    pub(super) total_equality_deletes: u64,
    pub(super) total_delete_size: u64,
    pub(super) removed_delete_files: u64,
    pub(super) removed_position_deletes: u64,
    pub(super) removed_equality_deletes: u64,
    pub(super) removed_delete_size: u64,
    /// Position delete files this commit adds (merge-on-read).
    pub(super) added_delete_files: u64,
    pub(super) added_position_deletes: u64,
    pub(super) added_delete_size: u64,
}

/// The standard summary counts. Totals are counted from the files themselves rather than
/// carried from the parent's summary, which another writer may have left out. Sizes count data
/// and delete files, as Java and PyIceberg do.
pub(super) fn summary_counts(counts: &Counts) -> HashMap<String, String> {
    let mut out: Vec<(&str, u64)> = vec![
        ("added-data-files", counts.added_files),
        ("deleted-data-files", counts.deleted_files),
        ("added-records", counts.added_records),
        ("deleted-records", counts.deleted_records),
        ("added-files-size", counts.added_size + counts.added_delete_size),
        ("removed-files-size", counts.removed_size + counts.removed_delete_size),
        ("total-data-files", counts.total_files),
        ("total-records", counts.total_records),
        ("total-files-size", counts.total_size + counts.total_delete_size),
        ("total-delete-files", counts.total_delete_files),
        ("total-position-deletes", counts.total_position_deletes),
        ("total-equality-deletes", counts.total_equality_deletes),
    ];
    if counts.added_delete_files > 0 {
        out.extend([
            ("added-delete-files", counts.added_delete_files),
            ("added-position-delete-files", counts.added_delete_files),
            ("added-position-deletes", counts.added_position_deletes),
        ]);
    }
    if counts.removed_delete_files > 0 {
        out.extend([
            ("removed-delete-files", counts.removed_delete_files),
            ("removed-position-deletes", counts.removed_position_deletes),
            ("removed-equality-deletes", counts.removed_equality_deletes),
        ]);
    }
    out.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
