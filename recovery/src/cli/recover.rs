//! `tidemark recover`: steps 1–6 — choose the trusted snapshot, boundary H, seed a new table,
//! replay, validate against the independent reference, and flip the route (only when validation
//! passed and not `--dry-run`). The route is read when the job starts and flipped with If-Match
//! on what was read, so a controller that decided on a stale route cannot overwrite a newer one.

use anyhow::Context;
use clap::Args;
use tidemark_journal::clock::SystemClock;
use tidemark_journal::{Journal, store};
use tidemark_recovery::exit::{VERIFY_FAILED, exit_error};
use tidemark_recovery::ids::{Ids, RandomIds};
use tidemark_recovery::progress::Progress;
use tidemark_recovery::recover::RecoverOptions;
#[cfg(feature = "ballista-engine")]
use tidemark_recovery::recover::engine::{self, Engine};
use tidemark_recovery::recover::snapshot::{PrefixMap, SnapshotChoice, SnapshotSource};
use tidemark_recovery::{catalog, table};
use tidemark_router::{FlipRequest, RouteStore};

use super::common::Common;
use super::output::{print_json, s3_requests};
use super::table::CatalogArgs;

/// `--reference`: what else the recovered table is validated against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Reference {
    /// The fold of the whole journal from position 1.
    Journal,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[arg(long)]
    pub journal: String,
    /// Where the recovered table is created.
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// The new table, namespace.name (must not exist, unless it is this recovery's).
    #[arg(long)]
    pub into: String,
    /// Source table in a catalog (default: the --catalog) …
    #[arg(long, conflicts_with = "source_metadata")]
    pub source_table: Option<String>,
    #[arg(long)]
    pub source_catalog: Option<String>,
    #[arg(long)]
    pub source_warehouse: Option<String>,
    /// … or a replica's metadata file location.
    #[arg(long)]
    pub source_metadata: Option<String>,
    /// Read the replica through a path prefix map FROM=TO (a copy under another root).
    #[arg(long)]
    pub prefix_map: Option<String>,
    /// The snapshot to start from (default, none of these three: the newest snapshot the audit
    /// of the source's history trusts): the newest checkpoint at or before this position …
    #[arg(long)]
    pub at_or_before: Option<u64>,
    /// … or a snapshot id …
    #[arg(long, conflicts_with_all = ["at_or_before", "tag"])]
    pub snapshot_id: Option<i64>,
    /// … or a tag.
    #[arg(long, conflicts_with = "at_or_before")]
    pub tag: Option<String>,
    /// Start from a snapshot the audit does not trust anyway (its history holds a write the
    /// journal does not explain); the reason is recorded on the recovered table's seed.
    #[arg(long, value_name = "REASON")]
    pub accept_divergence: Option<String>,
    /// `journal`: also validate the recovered table against the fold of the whole journal from
    /// position 1 (needs the journal from position 1; reads all of it).
    #[arg(long, value_enum)]
    pub reference: Option<Reference>,
    /// The journal boundary H (default: the end of the verified range when the job starts).
    #[arg(long)]
    pub to: Option<u64>,
    /// Resume a recovery by its id (default: a new one).
    #[arg(long)]
    pub recovery_id: Option<String>,
    /// Flip this route to the recovered table after validation.
    #[arg(long)]
    pub route: Option<String>,
    #[arg(long, default_value = "recovery after a bad write")]
    pub reason: String,
    /// Validate without flipping.
    #[arg(long)]
    pub dry_run: bool,
    /// How the validation splits the keys of a large table: `auto` (by key range when every
    /// data file's manifest records its key bounds, each part's rows read once from its files;
    /// else by key hash) or `key-hash` (every row spilled to disk by a hash of its key).
    #[arg(long, value_enum, default_value = "auto")]
    pub validation_split: tidemark_recovery::recover::validate::Split,
    /// Where the replay runs: local, ballista-standalone (scheduler and executor in this
    /// process), or ballista://HOST:PORT (a Ballista cluster's scheduler).
    #[cfg(feature = "ballista-engine")]
    #[arg(long, default_value = "local", env = "TIDEMARK_ENGINE")]
    pub engine: Engine,
    #[command(flatten)]
    pub common: Common,
}

pub async fn run(args: RecoverArgs) -> anyhow::Result<()> {
    let journal = Journal::open(store::open(&args.journal).await?).await?;
    let handle = args.catalog.open().await?;
    let source = resolve_source(
        Some(&handle),
        &SourceArgs {
            table: args.source_table.clone(),
            catalog: args.source_catalog.clone(),
            warehouse: args.source_warehouse.clone(),
            metadata: args.source_metadata.clone(),
            prefix_map: args.prefix_map.clone(),
        },
    )
    .await?;
    let choice = match (&args.snapshot_id, &args.tag) {
        (Some(id), _) => SnapshotChoice::SnapshotId(*id),
        (None, Some(tag)) => SnapshotChoice::Tag(tag.clone()),
        (None, None) => match args.at_or_before {
            Some(p) => SnapshotChoice::Checkpoint { at_or_before: Some(p) },
            None => SnapshotChoice::Trusted,
        },
    };
    let routes = match &args.route {
        Some(r) => Some(RouteStore::open_or_create(r).await?),
        None => None,
    };
    // The route as the job found it: the flip is If-Match on this.
    let route_at_start = match &routes {
        Some(r) => r.read().await?,
        None => None,
    };
    let recovery_id = args
        .recovery_id
        .clone()
        .unwrap_or_else(|| format!("rec-{}", RandomIds.uuid()));
    let opts = RecoverOptions {
        recovery_id: recovery_id.clone(),
        source,
        choice,
        to: args.to,
        into: args.into.clone(),
        partition_rows: None,
        validation_split: args.validation_split,
        trust: tidemark_recovery::recover::audited::TrustOptions {
            accept_divergence: args.accept_divergence.clone(),
            reference_journal: args.reference == Some(Reference::Journal),
            ..Default::default()
        },
    };
    let mut progress = Progress::new("recover", args.common.quiet);
    let mut on_step = |s: &tidemark_recovery::recover::StepTiming| {
        progress.update(|| format!("{} done in {} ms: {}", s.step, s.ms, s.detail), true)
    };
    #[cfg(feature = "ballista-engine")]
    let (report, t) = engine::recover(
        &journal,
        &handle,
        &opts,
        &args.engine,
        &SystemClock,
        &RandomIds,
        &mut on_step,
    )
    .await?;
    #[cfg(not(feature = "ballista-engine"))]
    let (report, t) =
        tidemark_recovery::recover::recover(&journal, &handle, &opts, &SystemClock, &RandomIds, &mut on_step).await?;
    let mut flipped = None;
    let mut already_flipped = false;
    if report.ok()
        && !args.dry_run
        && let Some(routes) = &routes
    {
        let req = FlipRequest {
            table_name: args.into.clone(),
            catalog: handle.reference().clone(),
            metadata_location: t.metadata_location().unwrap_or_default().to_string(),
            table_uuid: t.metadata().uuid().to_string(),
            applied_position: report.h,
            reason: args.reason.clone(),
            recovery_id: Some(recovery_id.clone()),
        };
        let started = std::time::Instant::now();
        // A completed recovery does not flip again: its own flip in the route's history (same
        // recovery id, same table) is the success to report. Flipping again could take readers
        // back from a decision made after it.
        let done = routes.find_recovery_flip(&recovery_id, &req.table_uuid).await?;
        let (route, _) = match (&done, &route_at_start) {
            (Some((route, _)), _) => (route.clone(), String::new()),
            (None, None) => routes.init(req, &SystemClock).await?,
            (None, Some((cur, etag, _))) => routes.flip(etag, cur.generation, req, &SystemClock).await?,
        };
        already_flipped = done.is_some();
        tidemark_journal::failpoint::hit("recover:after-flip");
        progress.update(
            || {
                format!(
                    "flip done in {} ms: route generation {}{}",
                    started.elapsed().as_millis(),
                    route.generation,
                    if already_flipped {
                        " (already flipped by this recovery)"
                    } else {
                        ""
                    }
                )
            },
            true,
        );
        flipped = Some(route);
    }
    if args.common.json {
        let mut v = serde_json::to_value(&report)?;
        v["route"] = serde_json::to_value(&flipped)?;
        v["dry_run"] = args.dry_run.into();
        v["route_already_flipped"] = already_flipped.into();
        v["s3_requests"] = serde_json::to_value(s3_requests())?;
        print_json(&v)?;
    } else {
        println!(
            "recovery {} into {} (table uuid {})",
            report.recovery_id, report.into, report.table_uuid
        );
        for s in &report.steps {
            println!("  {:<16} {:>8} ms  {}", s.step, s.ms, s.detail);
        }
        println!("  total            {:>8} ms", report.total_ms);
        match &flipped {
            Some(r) if already_flipped => println!(
                "route already flipped by this recovery: generation {} ({}); not flipped again",
                r.generation, r.table_name
            ),
            Some(r) => println!("route flipped to generation {} ({})", r.generation, r.table_name),
            None if args.dry_run => println!("dry run: route not flipped"),
            None => {}
        }
    }
    let failed = if !report.validation.ok {
        Some(("validation", &report.validation))
    } else {
        report
            .journal_reference
            .as_ref()
            .filter(|r| !r.ok)
            .map(|r| ("validation against the whole journal", r))
    };
    if let Some((what, v)) = failed {
        let first: Vec<String> = v
            .first_mismatches
            .iter()
            .take(5)
            .map(|m| {
                format!(
                    "{} {}{}",
                    m.key,
                    m.kind,
                    m.column.as_ref().map(|c| format!(" ({c})")).unwrap_or_default()
                )
            })
            .collect();
        return Err(exit_error(
            VERIFY_FAILED,
            format!(
                "{what} failed: {} missing, {} extra, {} version, {} delete-flag, {} value mismatches, {} duplicate keys; first: {}; the route was not flipped",
                v.missing,
                v.extra,
                v.version_mismatches,
                v.delete_flag_mismatches,
                v.value_mismatches,
                v.duplicate_keys,
                first.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Where the trusted snapshot is read from: a table in a catalog, or a replica's metadata file.
pub struct SourceArgs {
    pub table: Option<String>,
    /// The table's catalog (default: the command's own).
    pub catalog: Option<String>,
    pub warehouse: Option<String>,
    pub metadata: Option<String>,
    /// FROM=TO
    pub prefix_map: Option<String>,
}

/// The source as `recover` and `drill` read it: the metadata file, the S3 settings its files are
/// read with, and the prefix map.
/// `handle` is the command's own catalog, where a table is looked up when `args.catalog` names
/// none.
pub async fn resolve_source(
    handle: Option<&catalog::CatalogHandle>,
    args: &SourceArgs,
) -> anyhow::Result<SnapshotSource> {
    let source_catalog = match &args.catalog {
        Some(uri) => Some(
            CatalogArgs {
                catalog: uri.clone(),
                warehouse: args.warehouse.clone(),
                catalog_name: None,
            }
            .open()
            .await?,
        ),
        None => None,
    };
    // The trusted snapshot's files are read with the S3 settings of the catalog that holds it
    // (another catalog's may name another S3 server); a bare metadata file with the environment's.
    let (metadata_location, file_io_props) = match (&args.metadata, &args.table) {
        (Some(m), _) => (
            m.clone(),
            source_catalog.as_ref().map_or_else(
                || catalog::s3_props(|k| std::env::var(k).ok()),
                |c| c.file_io_props().clone(),
            ),
        ),
        (None, Some(t)) => {
            let holder = source_catalog
                .as_ref()
                .or(handle)
                .context("--table needs --catalog (or give --source-metadata)")?;
            let source = table::load_table(holder, t).await?;
            let location = source.metadata_location().unwrap_or_default().to_string();
            // The table's own FileIO: what its catalog vends for it included.
            (location, source.file_io().config().props().clone())
        }
        (None, None) => {
            anyhow::bail!("name the source table: --source-table (--table for `audit`) or --source-metadata")
        }
    };
    let prefix_map = match &args.prefix_map {
        Some(m) => Some(PrefixMap::parse(m).context("--prefix-map is FROM=TO")?),
        None => None,
    };
    Ok(SnapshotSource {
        metadata_location,
        file_io_props,
        prefix_map,
    })
}
