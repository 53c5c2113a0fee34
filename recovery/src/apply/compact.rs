//! `tidemark table compact`: folds position deletes back into the data files. The data files
//! with enough deleted rows (and the small files merge-on-read commits leave, when there are
//! several) are read with every delete applied, written again as key-sorted files, and replaced
//! in one copy-on-write commit through the catalog contract ([`commit_overwrite`]); delete
//! files that no remaining data file needs are dropped by that commit (`removed-delete-files`).
//! A concurrent commit makes it reload and redo the work, like the applier.

use std::collections::HashMap;
use std::time::Instant;

use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::clock::Clock;
use tidemark_schemas::FORMAT_VERSION;

use crate::apply::chunks::{after_failed_commit, discard, written_paths};
use crate::apply::error::ApplyError;
use crate::apply::mor::WriteStats;
use crate::apply::rules::{MERGE_CHUNK_ROWS, ROWS_PER_FILE, sort_by_key};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::table::read::{chunk_by_key, live_files, read_files};
use crate::table::{self, CommitStamp, arrow_schema, commit_overwrite, write_data_file};

/// Summary key a compaction commit sets (its value: the number of data files it rewrote).
pub const PROP_COMPACTED: &str = "tidemark.compacted-files";

/// Which files a compaction rewrites.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// A data file is rewritten when at least this fraction of its rows is deleted (0: any
    /// deleted row, which lets every position delete file be dropped).
    pub min_deleted_fraction: f64,
    /// Files under this many rows are rewritten together when there are at least two of them.
    pub small_file_rows: u64,
    pub max_attempts: usize,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            min_deleted_fraction: 0.0,
            small_file_rows: ROWS_PER_FILE as u64 / 4,
            max_attempts: 5,
        }
    }
}

/// `tidemark table compact --json`.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct CompactReport {
    pub format_version: u32,
    pub table: String,
    /// The snapshot compacted (`None`: nothing to do).
    pub snapshot_id: Option<i64>,
    pub data_files_before: u64,
    pub data_files_rewritten: u64,
    pub rows_read: u64,
    pub rows_dropped: u64,
    pub delete_files_before: u64,
    pub delete_files_after: u64,
    pub retries: u64,
    pub writes: WriteStats,
    pub elapsed_ms: u64,
}

/// The fraction of the current snapshot's rows that position deletes remove, from its summary.
pub fn deleted_fraction(table: &Table) -> f64 {
    let Some(s) = table.metadata().current_snapshot() else {
        return 0.0;
    };
    let get = |k: &str| {
        s.summary()
            .additional_properties
            .get(k)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let records = get("total-records");
    if records <= 0.0 {
        0.0
    } else {
        get("total-position-deletes") / records
    }
}

/// Compacts the table `table` (loaded from `handle`). Returns the report and the table after.
pub async fn compact(
    handle: &CatalogHandle,
    mut table: Table,
    opts: &CompactOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<(CompactReport, Table), ApplyError> {
    let started = Instant::now();
    let name = table.identifier().to_string();
    table::check_supported(&name, table.metadata())?;
    let mut report = CompactReport {
        format_version: FORMAT_VERSION,
        table: name.clone(),
        ..Default::default()
    };
    // The key: the first field of the sort order (tidemark's tables sort by their key column).
    let key_field_id = table
        .metadata()
        .default_sort_order()
        .fields
        .first()
        .map_or(-1, |f| f.source_id);
    for attempt in 1..=opts.max_attempts.max(1) {
        let (files, deletes) = live_files(&table).await?;
        let snapshot = crate::table::commit::current_files(&table).await?;
        report.data_files_before = files.len() as u64;
        report.delete_files_before = snapshot.deletes.len() as u64;
        let mut chosen: Vec<&iceberg::spec::DataFile> = files
            .iter()
            .filter(|f| {
                let gone = deletes.deleted_positions(f.file_path());
                gone > 0 && gone as f64 >= opts.min_deleted_fraction * f.record_count() as f64
            })
            .collect();
        // Small files (those chosen already included) are written together once there are two.
        let small: Vec<_> = files
            .iter()
            .filter(|f| f.record_count() < opts.small_file_rows)
            .collect();
        if small.len() >= 2 {
            for f in small {
                if !chosen.iter().any(|c| c.file_path() == f.file_path()) {
                    chosen.push(f);
                }
            }
        }
        if chosen.is_empty() {
            report.delete_files_after = report.delete_files_before;
            report.elapsed_ms = started.elapsed().as_millis() as u64;
            return Ok((report, table));
        }
        let schema = arrow_schema(&table)?;
        let key_name = schema
            .fields()
            .iter()
            .find(|f| crate::table::files::field_id(f) == Some(key_field_id))
            .map(|f| f.name().clone());
        let (chunks, _) = chunk_by_key(&chosen, key_field_id, MERGE_CHUNK_ROWS);
        let (mut added, mut writes) = (Vec::new(), WriteStats::default());
        let (mut read, mut before) = (0u64, 0u64);
        for chunk in &chunks {
            before += chunk.iter().map(|f| f.record_count()).sum::<u64>();
            let rewritten = async {
                let rows = read_files(&table, chunk, &schema, None, &deletes).await?;
                let n = rows.iter().map(|b| b.num_rows() as u64).sum::<u64>();
                let sorted = match &key_name {
                    Some(k) => sort_by_key(&schema, &rows, k)?,
                    None => rows,
                };
                for batch in &sorted {
                    let mut offset = 0;
                    while offset < batch.num_rows() {
                        let len = ROWS_PER_FILE.min(batch.num_rows() - offset);
                        added.extend(write_data_file(&table, &[batch.slice(offset, len)], ids.uuid()).await?);
                        offset += len;
                    }
                }
                Ok::<_, ApplyError>(n)
            }
            .await;
            match rewritten {
                Ok(n) => read += n,
                // What the compaction wrote before it stopped is in no snapshot: removed.
                Err(e) => return Err(discard(&table, e, added).await),
            }
        }
        writes.count_data(&added);
        writes.data_files_removed = chosen.len() as u64;
        let removed: Vec<String> = chosen.iter().map(|f| f.file_path().to_string()).collect();
        let summary = HashMap::from([(PROP_COMPACTED.to_string(), removed.len().to_string())]);
        let stamp = CommitStamp {
            id: ids.uuid(),
            at: clock.now(),
        };
        let parent = table.metadata().current_snapshot_id();
        let written = written_paths(&added);
        match commit_overwrite(handle, &table, &removed, added, summary, stamp).await {
            Ok(t) => {
                report.snapshot_id = parent;
                report.data_files_rewritten = removed.len() as u64;
                report.rows_read = read;
                report.rows_dropped = before - read;
                report.delete_files_after = crate::table::commit::current_files(&t).await?.deletes.len() as u64;
                report.writes = writes;
                report.elapsed_ms = started.elapsed().as_millis() as u64;
                return Ok((report, t));
            }
            Err(e) => {
                let retry = e.is_retryable_commit() && attempt < opts.max_attempts;
                after_failed_commit(&table, e, written, retry).await?;
                report.retries += 1;
                table = table::load_table(handle, &name).await?;
            }
        }
    }
    Err(ApplyError::Contended {
        table: name,
        attempts: opts.max_attempts,
    })
}
