//! `tidemark gameday`: the catalog- and region-loss rehearsal, timed per step and per table.
//!
//! On a scratch namespace of several tables, each with a few commits, a tag and a branch (and
//! one stray metadata file left by a commit that lost its race):
//!
//! 1. **record** the tables' history (rows, snapshots, refs, schema);
//! 2. **lose** the region: the tables were copied to the DR warehouse in the consistent order
//!    (`replica copy`), then the source catalog and warehouse are deleted;
//! 3. **discover** the table folders in the DR warehouse;
//! 4. **choose** each head by the metadata-log chain (never newest by name);
//! 5. **register** it in a new catalog, after rewriting its paths to the DR warehouse;
//! 6. **validate** every table against the record, and scan every data file;
//! 7. **RTO** per table: the time of steps 3–6 spent on it;
//! 8. **repeat** with a copy in the wrong order (data first, metadata last) under a live writer,
//!    and show that step 6 catches the tables whose newest metadata names missing files — while
//!    `replica check` names the older consistent head and the RPO.
//!
//! The report is JSON (`--json`) and Markdown, like the drill's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Int64Array, RecordBatch};
use iceberg::ErrorKind;
use iceberg::spec::{SnapshotReference, SnapshotRetention};
use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::clock::Clock;
use tidemark_journal::spec::CompiledSpec;
use tidemark_journal::store;
use tidemark_schemas::FORMAT_VERSION;

use crate::benchdata::order_columns;
use crate::catalog::{CatalogConfig, CatalogHandle, INSTEAD_OF_REGISTER, open_catalog};
use crate::dr::copy::{self, CopyOptions, Phase};
use crate::dr::head::{HeadRead, choose_folder_head};
use crate::dr::history::{self, HistoryRecord};
use crate::dr::rebuild::{self, file_name, warehouse_base};
use crate::dr::replica;
use crate::dr::rewrite::rewrite_paths;
use crate::ids::Ids;
use crate::recover::snapshot::PrefixMap;
use crate::rehearse::drill::{DrillCheck, DrillStep, Timer};
use crate::table::read::read_table;
use crate::table::{
    self, CommitStamp, TableError, arrow_schema, commit_overwrite, commit_refs, parse_ident, write_data_file,
};

mod catalogs;
pub(crate) mod failover_io;

/// Checks `--catalog` and `--dr-catalog` as [`run`] does first, returning the catalog's own
/// error (for its exit code): a catalog that cannot take part is refused before anything is made.
pub async fn check_catalogs(opts: &GamedayOptions) -> Result<(), TableError> {
    let place = Place::of(opts).map_err(|reason| TableError::InvalidCatalog {
        uri: opts.work.display().to_string(),
        reason: format!("the game day's work folder: {reason}"),
    })?;
    catalogs::preflight(opts, &place.warehouse("gameday-source"), &place.warehouse("gameday-dr"))
        .await
        .map(|_| ())
}

/// After a game day on the user's catalogs that failed part-way: drops its scratch namespace
/// there (call only when [`check_catalogs`] passed); what could not be dropped.
pub async fn drop_scratch(opts: &GamedayOptions) -> Vec<String> {
    match Place::of(opts) {
        Ok(place) => {
            catalogs::drop_scratch(opts, &place.warehouse("gameday-source"), &place.warehouse("gameday-dr")).await
        }
        Err(reason) => vec![format!("the game day's work folder: {reason}")],
    }
}

/// The scratch namespace.
pub const NAMESPACE: &str = "gameday";

#[derive(Debug, Clone)]
pub struct GamedayOptions {
    /// A folder for catalogs (and, without `store`, for everything).
    pub work: std::path::PathBuf,
    /// `s3://bucket/prefix` for the warehouses; default: the work folder.
    pub store: Option<String>,
    pub tables: usize,
    /// Commits per table (at least 3: the tag and the branch sit on the first two).
    pub commits: usize,
    pub rows_per_commit: usize,
    /// `--catalog`: the catalog of the source tables (what `--catalog` accepts), in its scratch
    /// namespace `gameday`; default: a scratch SQLite catalog. See [`catalogs`].
    pub catalog: Option<String>,
    /// `--dr-catalog`: where the lost catalog is rebuilt; default: a scratch SQLite catalog.
    pub dr_catalog: Option<String>,
}

/// One table of a [`GamedayRun`].
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GamedayTable {
    pub table: String,
    /// The head chosen by the chain (file name).
    pub head: Option<String>,
    /// Stray metadata files found beside it.
    pub strays: usize,
    pub validated: bool,
    /// What validation found (or why the table was not registered).
    pub detail: String,
    /// Steps 3–6 spent on this table.
    pub rto_ms: u64,
}

/// One pass of steps 2–7 over one replica.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GamedayRun {
    /// `consistent copy` or `data-first copy under a live writer`.
    pub copy: String,
    pub tables: Vec<GamedayTable>,
    /// Steps 3–6 end to end.
    pub rto_ms: u64,
    /// Tables that failed step 6.
    pub failed_validation: Vec<String>,
    /// Per table, the commits `replica check` found the replica's consistent head behind its
    /// newest metadata (the RPO of the unsafe copy), for tables behind at all.
    pub replica_behind: Vec<(String, usize)>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GamedayReport {
    pub format_version: u32,
    pub ok: bool,
    pub location: String,
    pub tables: usize,
    pub steps: Vec<DrillStep>,
    pub runs: Vec<GamedayRun>,
    pub checks: Vec<DrillCheck>,
    pub total_ms: u64,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

impl GamedayReport {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "# tidemark game day\n\nLocation: `{}` — {} tables in namespace `{NAMESPACE}` — result: **{}**\n\n",
            self.location,
            self.tables,
            if self.ok { "PASS" } else { "FAIL" }
        );
        s += "| step | ms | detail |\n|---|---:|---|\n";
        for st in &self.steps {
            s += &format!("| {} | {} | {} |\n", st.step, st.ms, st.detail);
        }
        for run in &self.runs {
            s += &format!(
                "\n## {}\n\nRTO (steps 3–6): **{} ms**. Failed validation: {}.\n\n",
                run.copy,
                run.rto_ms,
                if run.failed_validation.is_empty() {
                    "none".to_string()
                } else {
                    run.failed_validation.join(", ")
                }
            );
            s += "| table | head | strays | validated | RTO ms | detail |\n|---|---|---:|---|---:|---|\n";
            for t in &run.tables {
                s += &format!(
                    "| {} | {} | {} | {} | {} | {} |\n",
                    t.table,
                    t.head.as_deref().unwrap_or("-"),
                    t.strays,
                    if t.validated { "yes" } else { "**NO**" },
                    t.rto_ms,
                    t.detail
                );
            }
        }
        s + &crate::rehearse::drill::checks_markdown(&self.checks)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("game day step {step} failed: {message}")]
pub struct GamedayError {
    pub step: String,
    pub message: String,
}

fn fail(step: &str) -> impl Fn(String) -> GamedayError + '_ {
    move |message| GamedayError {
        step: step.to_string(),
        message,
    }
}

/// Where everything lives.
struct Place {
    work: std::path::PathBuf,
    base: String,
}

impl Place {
    /// The work folder (made if new) and the warehouses' base.
    fn of(opts: &GamedayOptions) -> Result<Place, String> {
        std::fs::create_dir_all(&opts.work).map_err(|e| e.to_string())?;
        let work = std::fs::canonicalize(&opts.work).map_err(|e| e.to_string())?;
        let base = opts
            .store
            .clone()
            .unwrap_or_else(|| work.display().to_string())
            .trim_end_matches('/')
            .to_string();
        Ok(Place { work, base })
    }

    fn url(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base)
    }

    /// The warehouse as table locations spell it.
    fn warehouse(&self, rel: &str) -> String {
        if self.base.starts_with("s3://") {
            self.url(rel)
        } else {
            format!("file://{}/{rel}", self.base)
        }
    }

    /// Deletes what a previous game day left under `rel`.
    async fn clear(&self, rel: &str) -> Result<(), String> {
        if self.base.starts_with("s3://") {
            wipe(&self.url(rel)).await.map(|_| ())
        } else {
            let p = std::path::Path::new(&self.base).join(rel);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| format!("cannot clear {}: {e}", p.display()))?;
            }
            Ok(())
        }
    }

    /// A new SQLite catalog in `catalogs/<dir>` of the work folder.
    async fn catalog(&self, dir: &str, warehouse: &str) -> Result<CatalogHandle, String> {
        let d = self.work.join("catalogs").join(dir);
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| e.to_string())?;
        }
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        open_catalog(&CatalogConfig {
            uri: d.join("catalog.db").display().to_string(),
            warehouse: warehouse.to_string(),
            name: "tidemark".into(),
        })
        .await
        .map_err(|e| e.to_string())
    }
}

/// Appends `rows` orders as commit `n` of a table.
async fn commit(
    handle: &CatalogHandle,
    table: &Table,
    n: usize,
    rows: usize,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<Table, TableError> {
    let keys: Vec<u64> = (0..rows as u64).map(|j| n as u64 * 1_000_000 + j).collect();
    let mut cols = order_columns(&keys, &vec![1; rows], &vec![false; rows]);
    cols.push(Arc::new(Int64Array::from(vec![n as i64; rows])));
    let batch = RecordBatch::try_new(arrow_schema(table)?, cols).map_err(|e| TableError::BatchSchema {
        table: table.identifier().to_string(),
        detail: e.to_string(),
    })?;
    let files = write_data_file(table, &[batch], ids.uuid()).await?;
    let stamp = CommitStamp {
        id: ids.uuid(),
        at: clock.now(),
    };
    commit_overwrite(handle, table, &[], files, HashMap::new(), stamp).await
}

/// The scratch tables: `commits` commits each, tag `eod` on the first, branch `audit` on the
/// second; the first table also gets a stray metadata file from a commit that lost its race.
async fn build_tables(
    handle: &CatalogHandle,
    opts: &GamedayOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<Vec<Table>, String> {
    let spec = CompiledSpec::orders();
    let mut out = Vec::with_capacity(opts.tables);
    for i in 0..opts.tables {
        let name = format!("{NAMESPACE}.t{i:02}");
        let mut t = table::create_or_load_table(handle, &name, &spec)
            .await
            .map_err(|e| e.to_string())?;
        let commits = opts.commits.max(3);
        for n in 1..=commits {
            let before = t.clone();
            t = commit(handle, &t, n, opts.rows_per_commit, clock, ids)
                .await
                .map_err(|e| e.to_string())?;
            if i == 0 && n == commits - 1 {
                // A writer holding the table as of one commit ago loses its race: its metadata
                // file stays behind as a stray (a fork at one version, which the next commit's
                // longer chain decides).
                match commit(handle, &before, 99, 1, clock, ids).await {
                    Err(TableError::CommitConflict { .. }) => {}
                    other => return Err(format!("the stale commit should lose its race, got {other:?}")),
                }
            }
            let retention = match n {
                1 => Some(("eod", SnapshotRetention::Tag { max_ref_age_ms: None })),
                2 => Some((
                    "audit",
                    SnapshotRetention::Branch {
                        min_snapshots_to_keep: None,
                        max_snapshot_age_ms: None,
                        max_ref_age_ms: None,
                    },
                )),
                _ => None,
            };
            if let Some((ref_name, retention)) = retention {
                let id = t.metadata().current_snapshot_id().expect("just committed");
                t = commit_refs(
                    handle,
                    &t,
                    vec![(ref_name.into(), SnapshotReference::new(id, retention))],
                    clock.now(),
                )
                .await
                .map_err(|e| e.to_string())?;
            }
        }
        out.push(t);
    }
    Ok(out)
}

/// Each table's metadata file name, by `namespace.name`.
fn pointers_of(tables: &[Table]) -> HashMap<String, String> {
    tables
        .iter()
        .map(|t| {
            (
                t.identifier().to_string(),
                file_name(t.metadata_location().unwrap_or_default()).to_string(),
            )
        })
        .collect()
}

/// Deletes every object under `url`.
async fn wipe(url: &str) -> Result<usize, String> {
    let s = store::open(url).await.map_err(|e| e.to_string())?;
    store::delete_all(s.as_ref(), "").await.map_err(|e| e.to_string())
}

/// Steps 3–7 against the replica warehouse `dr_url` (holding the source's keys), into `dr`.
async fn recover_catalog(
    timer: &mut Timer<'_>,
    label: &str,
    source_base: &str,
    dr_url: &str,
    dr: &CatalogHandle,
    record: &HistoryRecord,
) -> Result<GamedayRun, GamedayError> {
    // Step 5 registers: a DR catalog that cannot is refused before anything is read or written.
    dr.require(true, false, "register the game day's tables", INSTEAD_OF_REGISTER)
        .map_err(|e| fail("discover")(e.to_string()))?;
    let dr_base = warehouse_base(dr_url).map_err(|e| fail("discover")(e.to_string()))?;
    let dr_store = store::open(dr_url).await.map_err(|e| fail("discover")(e.to_string()))?;
    let started = Instant::now();

    // 3. Discover.
    let t = Instant::now();
    let found = rebuild::discover(dr_store.as_ref(), Some(NAMESPACE))
        .await
        .map_err(|e| fail("discover")(e.to_string()))?;
    let discover_ms = t.elapsed().as_millis() as u64;
    timer.done(
        &format!("3 discover ({label})"),
        t,
        format!("{} table folders under {dr_base}", found.len()),
        true,
    );
    let share = discover_ms / found.len().max(1) as u64;
    let mut tables: Vec<GamedayTable> = found
        .iter()
        .map(|f| GamedayTable {
            table: f.ident(),
            head: None,
            strays: 0,
            validated: false,
            detail: String::new(),
            rto_ms: share,
        })
        .collect();

    // 4. Choose each head by the chain.
    let t = Instant::now();
    let mut heads: Vec<Option<String>> = Vec::with_capacity(found.len());
    for (files, out) in found.iter().zip(tables.iter_mut()) {
        let tt = Instant::now();
        let choice = choose_folder_head(dr_store.as_ref(), files, HeadRead::default())
            .await
            .map_err(|e| fail("choose")(e.to_string()))?
            .choice;
        out.strays = choice.strays.len();
        out.head = choice.head.as_deref().map(|h| file_name(h).to_string());
        if let Some(r) = &choice.refused {
            out.detail = format!("refused: {r}");
        }
        heads.push(choice.head);
        out.rto_ms += tt.elapsed().as_millis() as u64;
    }
    let strays: usize = tables.iter().map(|t| t.strays).sum();
    timer.done(
        &format!("4 choose by chain ({label})"),
        t,
        format!(
            "{} heads chosen, {strays} strays set aside",
            heads.iter().flatten().count()
        ),
        true,
    );

    // 5. Register: rewrite the head's paths to the DR warehouse, then register the new file.
    let t = Instant::now();
    let props = dr.file_io_props().clone();
    for (head, out) in heads.iter().zip(tables.iter_mut()) {
        let Some(head) = head else { continue };
        let tt = Instant::now();
        let result = async {
            let rw = rewrite_paths(&format!("{dr_base}/{head}"), source_base, &dr_base, &props)
                .await
                .map_err(|e| e.to_string())?;
            let ident = parse_ident(&out.table).map_err(|e| e.to_string())?;
            match dr.catalog().create_namespace(ident.namespace(), HashMap::new()).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NamespaceAlreadyExists => {}
                Err(e) => return Err(e.to_string()),
            }
            dr.register_table(&ident, &rw.new_metadata)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        }
        .await;
        if let Err(e) = result {
            out.detail = format!("not registered: {e}");
        }
        out.rto_ms += tt.elapsed().as_millis() as u64;
    }
    timer.done(
        &format!("5 register ({label})"),
        t,
        format!("paths rewritten {source_base} -> {dr_base}; registered in a new catalog"),
        true,
    );

    // 6. Validate against the record: history compared as a whole, every data file scanned.
    let t = Instant::now();
    let diffs = match history::record(dr, Some(NAMESPACE)).await {
        Ok(now) => history::compare(record, &now),
        // No table was registered (the namespace does not exist): each table says why.
        Err(_) if tables.iter().all(|t| !t.detail.is_empty()) => Vec::new(),
        Err(e) => return Err(fail("validate")(e.to_string())),
    };
    for out in tables.iter_mut() {
        if out.detail.starts_with("not registered") || out.detail.starts_with("refused") {
            continue;
        }
        let tt = Instant::now();
        let real: Vec<String> = diffs
            .iter()
            .filter(|d| d.table == out.table && !d.informational)
            .map(|d| {
                format!(
                    "{}: {} vs {}",
                    d.what,
                    d.a.as_deref().unwrap_or("-"),
                    d.b.as_deref().unwrap_or("-")
                )
            })
            .collect();
        let expected_rows = record.tables.iter().find(|r| r.table == out.table).map(|r| r.row_count);
        match scan(dr, &out.table).await {
            Ok(rows) if real.is_empty() && Some(rows) == expected_rows => {
                out.validated = true;
                out.detail = format!("{rows} rows scanned; history equal to the record (refs, schema, snapshots)");
            }
            Ok(rows) => {
                out.detail = format!(
                    "{rows} rows scanned (record {expected_rows:?}); differences: {}",
                    real.join("; ")
                );
            }
            Err(e) => out.detail = format!("scan failed: {e}"),
        }
        out.rto_ms += tt.elapsed().as_millis() as u64;
    }
    let failed: Vec<String> = tables
        .iter()
        .filter(|t| !t.validated)
        .map(|t| t.table.clone())
        .collect();
    timer.done(
        &format!("6 validate ({label})"),
        t,
        format!(
            "{} of {} tables equal to the record and fully readable{}",
            tables.len() - failed.len(),
            tables.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!("; FAILED: {}", failed.join(", "))
            }
        ),
        true,
    );
    let rto_ms = started.elapsed().as_millis() as u64;
    let t = Instant::now();
    let slowest = tables.iter().max_by_key(|t| t.rto_ms);
    timer.done(
        &format!("7 RTO ({label})"),
        t,
        format!(
            "{rto_ms} ms for {} tables; slowest {} at {} ms",
            tables.len(),
            slowest.map_or("-", |t| t.table.as_str()),
            slowest.map_or(0, |t| t.rto_ms)
        ),
        false,
    );
    Ok(GamedayRun {
        copy: label.to_string(),
        tables,
        rto_ms,
        failed_validation: failed,
        replica_behind: Vec::new(),
    })
}

/// Drops the game day's scratch namespace from the user's catalogs; a check saying so.
async fn catalogs_cleanup(
    opts: &GamedayOptions,
    source: Option<&CatalogHandle>,
    dr: Option<&CatalogHandle>,
) -> Option<DrillCheck> {
    let names = catalogs::names(opts);
    let mut left = Vec::new();
    let mut dropped = Vec::new();
    for h in [source, dr].into_iter().flatten() {
        left.extend(catalogs::cleanup(h, &names).await);
        dropped.push(h.reference().to_string());
    }
    (!dropped.is_empty()).then(|| DrillCheck {
        check: format!("the scratch namespace `{NAMESPACE}` is dropped from the user's catalogs"),
        ok: left.is_empty(),
        detail: if left.is_empty() {
            format!("dropped from {}", dropped.join(", "))
        } else {
            format!("left behind: {}", left.join("; "))
        },
    })
}

/// Reads every live data file of the table; the row count.
async fn scan(handle: &CatalogHandle, name: &str) -> Result<u64, String> {
    let t = table::load_table(handle, name).await.map_err(|e| e.to_string())?;
    let batches = read_table(&t).await.map_err(|e| e.to_string())?;
    Ok(batches.iter().map(|b| b.num_rows() as u64).sum())
}

/// Runs the game day (see the module documentation).
pub async fn run(
    opts: &GamedayOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&DrillStep),
) -> Result<GamedayReport, GamedayError> {
    let started = Instant::now();
    let mut timer = Timer {
        steps: Vec::new(),
        progress,
    };
    let place = Place::of(opts).map_err(fail("setup"))?;
    // The user's catalogs are checked before anything is created or cleared.
    let user = catalogs::preflight(opts, &place.warehouse("gameday-source"), &place.warehouse("gameday-dr"))
        .await
        .map_err(|e| fail("setup")(e.to_string()))?;
    // A previous game day in the same place is cleared (only tidemark's own scratch names).
    for rel in ["gameday-source", "gameday-dr", "gameday-source-2", "gameday-dr-2"] {
        place.clear(rel).await.map_err(fail("setup"))?;
    }
    let mut checks = Vec::new();
    let mut runs = Vec::new();

    // Setup and 1: the tables, recorded.
    let t = Instant::now();
    let src_wh = place.warehouse("gameday-source");
    let source = match user.source {
        Some(h) => h,
        None => place.catalog("gameday-source", &src_wh).await.map_err(fail("setup"))?,
    };
    let tables = build_tables(&source, opts, clock, ids).await.map_err(fail("setup"))?;
    let src_wh = match opts.catalog {
        Some(_) => catalogs::warehouse_of(&tables).map_err(fail("setup"))?,
        None => src_wh,
    };
    let pointers = pointers_of(&tables);
    timer.done(
        "setup",
        t,
        format!(
            "{} tables x {} commits x {} rows, tag eod and branch audit on each, one stray, in {src_wh}",
            opts.tables,
            opts.commits.max(3),
            opts.rows_per_commit
        ),
        false,
    );
    let t = Instant::now();
    let record = history::record(&source, Some(NAMESPACE))
        .await
        .map_err(|e| fail("record")(e.to_string()))?;
    timer.done(
        "1 record",
        t,
        format!("{} tables: rows, snapshots, refs, schema", record.tables.len()),
        false,
    );

    // 2: replicate consistently, then lose the region.
    let t = Instant::now();
    let dr_url = place.url("gameday-dr");
    let only_ours = CopyOptions {
        tables: Some(catalogs::names(opts)),
        ..CopyOptions::default()
    };
    let copied = copy::copy(&src_wh, &dr_url, &only_ours, &mut |_| {})
        .await
        .map_err(|e| fail("replicate")(e.to_string()))?;
    if !copied.is_complete() {
        return Err(fail("replicate")(format!("the copy did not complete: {copied:?}")));
    }
    let lost = match opts.catalog {
        // A user's catalog is never damaged: the game day stops using it (a simulated loss).
        Some(_) => format!("then {} no longer used (a simulated loss)", source.reference()),
        None => {
            let lost = wipe(&src_wh).await.map_err(fail("lose"))?;
            std::fs::remove_dir_all(place.work.join("catalogs/gameday-source"))
                .map_err(|e| fail("lose")(e.to_string()))?;
            format!("then the source catalog and its {lost} objects deleted")
        }
    };
    let user_source = opts.catalog.is_some().then_some(source);
    timer.done(
        "2 lose the region",
        t,
        format!("replica made by `replica copy` ({} objects); {lost}", copied.copied),
        false,
    );
    let (dr, user_dr) = match user.dr {
        Some(h) => (h.clone(), Some(h)),
        None => (
            place
                .catalog("gameday-dr", &place.warehouse("gameday-dr"))
                .await
                .map_err(fail("setup"))?,
            None,
        ),
    };
    let run1 = recover_catalog(&mut timer, "consistent copy", &src_wh, &dr_url, &dr, &record).await?;
    checks.push(DrillCheck {
        check: "every table equals the record after the consistent copy".into(),
        ok: run1.failed_validation.is_empty() && run1.tables.len() == opts.tables,
        detail: format!(
            "{} tables validated",
            run1.tables.iter().filter(|t| t.validated).count()
        ),
    });
    runs.push(run1);

    // 8: the same, with a data-first copy while a writer commits to half the tables.
    let t = Instant::now();
    let src2 = place.warehouse("gameday-source-2");
    let source2 = place.catalog("gameday-source-2", &src2).await.map_err(fail("setup"))?;
    let mut tables2 = build_tables(&source2, opts, clock, ids).await.map_err(fail("setup"))?;
    let dr2_url = place.url("gameday-dr-2");
    let unsafe_opts = CopyOptions::default();
    copy::copy_phase(&src2, &dr2_url, &unsafe_opts, Phase::Data, &mut |_| {})
        .await
        .map_err(|e| fail("wrong-order copy")(e.to_string()))?;
    let writes = opts.tables.div_ceil(2);
    let mut written = Vec::new();
    for t in tables2.iter_mut().take(writes) {
        *t = commit(&source2, t, 50, opts.rows_per_commit, clock, ids)
            .await
            .map_err(|e| fail("live writer")(e.to_string()))?;
        written.push(t.identifier().to_string());
    }
    copy::copy_phase(&src2, &dr2_url, &unsafe_opts, Phase::Metadata, &mut |_| {})
        .await
        .map_err(|e| fail("wrong-order copy")(e.to_string()))?;
    let record2 = history::record(&source2, Some(NAMESPACE))
        .await
        .map_err(|e| fail("record")(e.to_string()))?;
    let src2_base = warehouse_base(&src2).map_err(|e| fail("lose")(e.to_string()))?;
    let map = PrefixMap {
        from: src2_base.clone(),
        to: warehouse_base(&dr2_url).map_err(|e| fail("lose")(e.to_string()))?,
    };
    wipe(&src2).await.map_err(fail("lose"))?;
    drop(source2);
    std::fs::remove_dir_all(place.work.join("catalogs/gameday-source-2")).map_err(|e| fail("lose")(e.to_string()))?;
    let check = replica::check(&dr2_url, dr.file_io_props(), Some(&map))
        .await
        .map_err(|e| fail("replica check")(e.to_string()))?;
    let behind: Vec<(String, usize)> = check
        .tables
        .iter()
        .filter_map(|t| t.behind_commits.filter(|b| *b > 0).map(|b| (t.table.clone(), b)))
        .collect();
    timer.done(
        "8 wrong-order copy under a live writer",
        t,
        format!(
            "data/ copied, then {} commits by a live writer ({}), then metadata/; record taken, region lost; \
             replica check: {} tables behind",
            written.len(),
            written.join(", "),
            behind.len()
        ),
        false,
    );
    let dr2 = place
        .catalog("gameday-dr-2", &place.warehouse("gameday-dr-2"))
        .await
        .map_err(fail("setup"))?;
    let mut run2 = recover_catalog(
        &mut timer,
        "data-first copy under a live writer",
        &src2_base,
        &dr2_url,
        &dr2,
        &record2,
    )
    .await?;
    run2.replica_behind = behind.clone();
    // The object-level copy carried the stray along (the consistent copy copies only what a
    // chain references); the chain set it aside in both.
    let pointers2 = pointers_of(&tables2);
    let heads_match = |run: &GamedayRun, pointers: &HashMap<String, String>| {
        run.tables.iter().all(|t| {
            t.head
                .as_deref()
                .is_some_and(|h| pointers.get(&t.table).is_some_and(|p| p == h))
        })
    };
    let strays2: usize = run2.tables.iter().map(|t| t.strays).sum();
    checks.push(DrillCheck {
        check: "every head chosen by the chain is the lost catalog's pointer (strays not chosen)".into(),
        ok: heads_match(&runs[0], &pointers) && heads_match(&run2, &pointers2) && strays2 > 0,
        detail: format!(
            "consistent copy: {} strays copied; object-level copy: {strays2} strays found and set aside",
            runs[0].tables.iter().map(|t| t.strays).sum::<usize>()
        ),
    });
    let mut caught = run2.failed_validation.clone();
    caught.sort();
    written.sort();
    checks.push(DrillCheck {
        check: "step 6 catches every table the wrong-order copy broke, and only those".into(),
        ok: caught == written && !written.is_empty(),
        detail: format!(
            "failed validation: {}; written during the copy: {}",
            caught.join(", "),
            written.join(", ")
        ),
    });
    let mut behind_tables: Vec<String> = behind.iter().map(|(t, _)| t.clone()).collect();
    behind_tables.sort();
    checks.push(DrillCheck {
        check: "replica check names an older consistent head for those tables (RPO 1 commit)".into(),
        ok: behind_tables == written && behind.iter().all(|(_, b)| *b == 1),
        detail: behind
            .iter()
            .map(|(t, b)| format!("{t}: {b} behind"))
            .collect::<Vec<_>>()
            .join(", "),
    });
    runs.push(run2);
    if let Some(check) = catalogs_cleanup(opts, user_source.as_ref(), user_dr.as_ref()).await {
        checks.push(check);
    }

    Ok(GamedayReport {
        format_version: FORMAT_VERSION,
        ok: checks.iter().all(|c| c.ok),
        location: place.base.clone(),
        tables: opts.tables,
        steps: timer.steps,
        runs,
        checks,
        total_ms: started.elapsed().as_millis() as u64,
        s3_requests: None,
    })
}

#[cfg(test)]
mod tests {
    use tidemark_journal::clock::SystemClock;

    use super::*;
    use crate::ids::SeededIds;

    #[tokio::test]
    async fn a_game_day_on_a_folder_passes_and_catches_the_wrong_order_copy() {
        let dir = tempfile::tempdir().unwrap();
        let opts = GamedayOptions {
            work: dir.path().to_path_buf(),
            store: None,
            tables: 3,
            commits: 3,
            rows_per_commit: 20,
            catalog: None,
            dr_catalog: None,
        };
        let mut steps = Vec::new();
        let report = run(&opts, &SystemClock, &SeededIds::new(5), &mut |s| {
            steps.push(s.step.clone())
        })
        .await
        .unwrap();
        assert!(report.ok, "{}", report.markdown());
        assert_eq!(report.runs.len(), 2);
        assert!(report.runs[0].failed_validation.is_empty());
        assert_eq!(report.runs[1].failed_validation, vec!["gameday.t00", "gameday.t01"]);
        assert!(
            report.runs[1].tables[0].detail.contains("scan failed"),
            "{:?}",
            report.runs[1].tables[0]
        );
        assert_eq!(
            report.runs[0].tables[0].strays, 0,
            "the consistent copy copies referenced files only"
        );
        assert_eq!(report.runs[1].tables[0].strays, 1);
        for n in [
            "1 record",
            "2 lose the region",
            "8 wrong-order copy under a live writer",
        ] {
            assert!(steps.iter().any(|s| s == n), "{steps:?}");
        }
        for n in ["3 discover", "4 choose by chain", "5 register", "6 validate", "7 RTO"] {
            assert_eq!(steps.iter().filter(|s| s.starts_with(n)).count(), 2, "{n}: {steps:?}");
        }
        assert!(report.markdown().contains("| gameday.t00 |"));
    }
}
