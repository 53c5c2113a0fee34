//! `tidemark table compact`: folds position deletes back into the data files. The data files
//! with enough deleted rows (and the small files merge-on-read commits leave, when there are
//! several) are read with every delete applied, written again as key-sorted files, and replaced
//! in one copy-on-write commit through the catalog contract ([`commit_overwrite`]); delete
//! files that no remaining data file needs are dropped by that commit (`removed-delete-files`).
//! A concurrent commit makes it reload and redo the work, like the applier.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use std::time::Instant;

use iceberg::spec::DataFile;
use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::clock::Clock;
use tidemark_schemas::FORMAT_VERSION;

use crate::apply::chunks::{after_failed_commit, discard, written_paths};
use crate::apply::error::ApplyError;
use crate::apply::mor::WriteStats;
use crate::apply::rules::ROWS_PER_FILE;
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::MergeError;
use crate::table::deletes::Deletes;
use crate::table::read::{live_files, read_files};
use crate::table::{self, CommitStamp, arrow_schema, commit_overwrite, write_data_file};

/// Summary key a compaction commit sets (its value: the number of data files it rewrote).
pub const PROP_COMPACTED: &str = "tidemark.compacted-files";

/// The sort's memory when not told ([`CompactOptions::memory_bytes`]).
pub const DEFAULT_MEMORY_BYTES: usize = 512 << 20;

/// Which files a compaction rewrites.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// A data file is rewritten when at least this fraction of its rows is deleted (0: any
    /// deleted row, which lets every position delete file be dropped).
    pub min_deleted_fraction: f64,
    /// Files under this many rows are rewritten together when there are at least two of them.
    pub small_file_rows: u64,
    pub max_attempts: usize,
    /// Memory the sort of the rewritten rows may hold; beyond it, sorted runs spill to files
    /// under `$TIDEMARK_SPILL_DIR` (default the system's temporary folder) and are merged from there.
    pub memory_bytes: usize,
    /// The folder for those runs (created, and removed when the compaction ends, also on
    /// error); `None`: a new `tidemark-compact-*` folder under `$TIDEMARK_SPILL_DIR`.
    pub spill_dir: Option<std::path::PathBuf>,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            min_deleted_fraction: 0.0,
            small_file_rows: ROWS_PER_FILE as u64 / 4,
            max_attempts: 5,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            spill_dir: None,
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
    /// Bytes of sorted runs the sort wrote to temporary files (0: it fitted in memory).
    pub spilled_bytes: u64,
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

/// Where a compaction is: what [`compact_with_progress`] tells its caller about once a second
/// while it reads and sorts, after each file it writes, and once the rewrite is written.
#[derive(Debug, Clone, Default)]
pub struct CompactProgress {
    pub files_read: u64,
    pub files_to_read: u64,
    /// Rows written so far, of the chosen files' rows before their deletes (an upper bound).
    pub rows_written: u64,
    pub rows_at_most: u64,
    /// A retry after a concurrent commit (counted from 0).
    pub attempt: usize,
    /// Every file of this attempt is written (its commit comes next).
    pub written: bool,
}

/// Compacts the table `table` (loaded from `handle`). Returns the report and the table after.
pub async fn compact(
    handle: &CatalogHandle,
    table: Table,
    opts: &CompactOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<(CompactReport, Table), ApplyError> {
    compact_with_progress(handle, table, opts, clock, ids, &mut |_| {}).await
}

/// [`compact`], telling `progress` where it is (`tidemark table compact` prints it).
pub async fn compact_with_progress(
    handle: &CatalogHandle,
    mut table: Table,
    opts: &CompactOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&CompactProgress),
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
        let chosen_files: Vec<DataFile> = chosen.iter().map(|f| (*f).clone()).collect();
        let before = chosen.iter().map(|f| f.record_count()).sum::<u64>();
        let mut added = Vec::new();
        let mut at = CompactProgress {
            files_to_read: chosen_files.len() as u64,
            rows_at_most: before,
            attempt: attempt - 1,
            ..Default::default()
        };
        let rewritten = rewrite_sorted(
            &table,
            chosen_files,
            &schema,
            key_name.as_deref(),
            &deletes,
            opts,
            ids,
            &mut added,
            &mut |files_read, rows_written| {
                at.files_read = files_read;
                at.rows_written = rows_written;
                progress(&at);
            },
        )
        .await;
        let (read, spilled) = match rewritten {
            Ok(r) => {
                at.written = true;
                progress(&at);
                r
            }
            // What the compaction wrote before it stopped is in no snapshot: removed.
            Err(e) => return Err(discard(&table, e, added).await),
        };
        let mut writes = WriteStats::default();
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
                report.spilled_bytes = spilled;
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

/// Reads `files` one at a time (`deletes` applied), sorts their rows by `key` (when the table
/// has a sort key) within [`CompactOptions::memory_bytes`], spilling sorted runs to temporary
/// files beyond it (DataFusion's external sort), and writes the sorted rows as files of
/// [`ROWS_PER_FILE`] rows into `added`. Memory holds one input file, the sort's budget and one
/// output file's rows, whatever the number of rows rewritten. Returns the rows written and the
/// bytes spilled. `progress(files read, rows written)` is called about once a second while the
/// sort reads, and after each file written.
#[allow(clippy::too_many_arguments)]
async fn rewrite_sorted(
    table: &Table,
    files: Vec<DataFile>,
    schema: &arrow_schema::SchemaRef,
    key: Option<&str>,
    deletes: &Deletes,
    opts: &CompactOptions,
    ids: &dyn Ids,
    added: &mut Vec<DataFile>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(u64, u64), ApplyError> {
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::physical_plan::execute_stream;
    use datafusion::prelude::{SessionConfig, SessionContext, ident};
    use futures::TryStreamExt;

    let df = |context| move |source| ApplyError::from(MergeError::DataFusion { context, source });
    let failed: ReadFailure = Default::default();
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let source = FileRows {
        read: read.clone(),
        table: table.clone(),
        files: Arc::new(files),
        schema: schema.clone(),
        deletes: deletes.clone(),
        failed: failed.clone(),
    };
    use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
    // The sort's runs go in a folder of this compaction's (removed when it ends, also on error).
    let dir = crate::apply::spill::SpillDir(
        opts.spill_dir
            .clone()
            .unwrap_or_else(|| crate::apply::spill::spill_dir_for("compact")),
    );
    std::fs::create_dir_all(&dir.0).map_err(|e| ApplyError::Spill {
        path: dir.0.display().to_string(),
        message: e.to_string(),
    })?;
    let disk = DiskManagerBuilder::default()
        .with_mode(DiskManagerMode::Directories(vec![dir.0.clone()]))
        .with_max_temp_directory_size(u64::MAX);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(opts.memory_bytes.max(1 << 20), 1.0)
        .with_disk_manager_builder(disk)
        .build_arc()
        .map_err(df("compaction memory pool"))?;
    // Room for the merge of the spilled runs, out of the budget (DataFusion's default, 10 MB,
    // would be all of a small one).
    let config = SessionConfig::new()
        .with_target_partitions(1)
        .with_batch_size(8 * 1024)
        .with_sort_spill_reservation_bytes(opts.memory_bytes / 4);
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    let provider = datafusion::catalog::streaming::StreamingTable::try_new(schema.clone(), vec![Arc::new(source)])
        .map_err(df("compaction input"))?;
    let mut frame = ctx.read_table(Arc::new(provider)).map_err(df("compaction input"))?;
    if let Some(k) = key {
        frame = frame
            .sort(vec![ident(k).sort(true, true)])
            .map_err(df("compaction sort"))?;
    }
    let plan = frame.create_physical_plan().await.map_err(df("compaction plan"))?;
    let mut stream = execute_stream(plan.clone(), ctx.task_ctx()).map_err(df("compaction sort"))?;
    let (mut pending, mut pending_rows, mut written) = (Vec::new(), 0usize, 0u64);
    loop {
        let files_read = || read.load(std::sync::atomic::Ordering::Relaxed);
        // The sort yields nothing until it has read every file: a line a second meanwhile.
        let next = loop {
            match tokio::time::timeout(std::time::Duration::from_secs(1), stream.try_next()).await {
                Ok(next) => break next,
                Err(_) => progress(files_read(), written),
            }
        };
        let batch = match next {
            Ok(b) => b,
            // A read error inside the stream comes back as itself, naming its file.
            Err(e) => {
                return Err(failed
                    .lock()
                    .expect("not poisoned")
                    .take()
                    .map_or_else(|| df("compaction sort")(e), ApplyError::from));
            }
        };
        let last = batch.is_none();
        if let Some(b) = batch {
            let b = RecordBatch::try_new(schema.clone(), b.columns().to_vec())
                .map_err(|e| MergeError::Input(e.to_string()))?;
            pending_rows += b.num_rows();
            pending.push(b);
        }
        while pending_rows >= ROWS_PER_FILE || (last && pending_rows > 0) {
            let n = ROWS_PER_FILE.min(pending_rows);
            let (mut file, mut taken) = (Vec::new(), 0);
            while taken < n {
                let b = pending.remove(0);
                let want = n - taken;
                if b.num_rows() > want {
                    file.push(b.slice(0, want));
                    pending.insert(0, b.slice(want, b.num_rows() - want));
                    taken = n;
                } else {
                    taken += b.num_rows();
                    file.push(b);
                }
            }
            pending_rows -= n;
            written += n as u64;
            added.extend(write_data_file(table, &file, ids.uuid()).await?);
            progress(files_read(), written);
        }
        if last {
            break;
        }
    }
    Ok((written, spilled_bytes(plan.as_ref()) as u64))
}

/// The bytes every operator of `plan` spilled.
fn spilled_bytes(plan: &dyn datafusion::physical_plan::ExecutionPlan) -> usize {
    let own = plan.metrics().and_then(|m| m.spilled_bytes()).unwrap_or(0);
    own + plan.children().iter().map(|c| spilled_bytes(c.as_ref())).sum::<usize>()
}

/// The first read error of a [`FileRows`] stream, kept as it is (DataFusion only carries text).
type ReadFailure = Arc<std::sync::Mutex<Option<crate::table::TableError>>>;

/// The live rows of data files, read one file at a time, as a DataFusion partition.
#[derive(Clone)]
struct FileRows {
    table: Table,
    files: Arc<Vec<DataFile>>,
    schema: arrow_schema::SchemaRef,
    deletes: Deletes,
    failed: ReadFailure,
    /// Files read so far.
    read: Arc<std::sync::atomic::AtomicU64>,
}

impl FileRows {
    /// The live rows of file `i`, or the error that stops the stream (kept in `failed`).
    async fn read(
        &self,
        i: usize,
    ) -> futures::stream::Iter<std::vec::IntoIter<Result<RecordBatch, datafusion::error::DataFusionError>>> {
        let rows = read_files(&self.table, &[&self.files[i]], &self.schema, None, &self.deletes).await;
        self.read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        futures::stream::iter(match rows {
            Ok(rows) => rows.into_iter().map(Ok).collect(),
            Err(e) => {
                let text = e.to_string();
                *self.failed.lock().expect("not poisoned") = Some(e);
                vec![Err(datafusion::error::DataFusionError::Execution(text))]
            }
        })
    }
}

impl std::fmt::Debug for FileRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileRows({} files)", self.files.len())
    }
}

impl datafusion::physical_plan::streaming::PartitionStream for FileRows {
    fn schema(&self) -> &arrow_schema::SchemaRef {
        &self.schema
    }

    fn execute(
        &self,
        _ctx: Arc<datafusion::execution::TaskContext>,
    ) -> datafusion::execution::SendableRecordBatchStream {
        use futures::StreamExt;
        let this = self.clone();
        let per_file = futures::stream::iter(0..self.files.len()).then(move |i| {
            let this = this.clone();
            async move { this.read(i).await }
        });
        Box::pin(datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(
            self.schema.clone(),
            per_file.flatten(),
        ))
    }
}
