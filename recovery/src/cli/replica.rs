//! `tidemark replica follow | status | failover | resync`: the warm DR replica (issue 13).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use tidemark_journal::clock::{Clock, SystemClock};
use tidemark_recovery::catalog::config::{resolve, sqlite_file};
use tidemark_recovery::catalog::{CatalogConfig, CatalogKind, Definitions, open_catalog, s3_props};
use tidemark_recovery::dr::follow::FollowOptions;
use tidemark_recovery::dr::follow_state::{FollowMode, FollowerState, StateStore};
use tidemark_recovery::dr::follow_status::{self, StatusReport};
use tidemark_recovery::dr::follower::{self, RunLimits};
use tidemark_recovery::dr::resync::{self, ResyncAction};
use tidemark_recovery::dr::{failover, lease};
use tidemark_recovery::exit::{BAD_INPUT, exit_error};
use tidemark_recovery::recover::snapshot::PrefixMap;

use super::common::{Common, default_writer_id, parse_duration};
use super::output::print_json;

/// What the follower follows; shared by `follow` and `failover`.
#[derive(Debug, Clone, Args)]
pub struct FollowTarget {
    /// The replica warehouse: a folder or s3://bucket/prefix, as replication fills it.
    #[arg(long)]
    pub warehouse: String,
    /// The DR catalog the follower keeps in step (SQLite file, postgres://…, or a defined name).
    #[arg(long)]
    pub catalog: String,
    #[arg(long)]
    pub catalog_name: Option<String>,
    /// Only the tables directly in this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// FROM=TO: the replica holds under TO what its metadata names under FROM; what is registered
    /// is metadata rewritten to TO.
    #[arg(long)]
    pub prefix_map: Option<String>,
    /// Where the lease and state objects live (a folder or s3://…); default, for a SQLite DR
    /// catalog, the folder <catalog file>.follower beside it; required for other catalogs.
    #[arg(long)]
    pub state: Option<String>,
    /// Allow --state inside the replica warehouse or the --prefix-map target (refused otherwise:
    /// a replication that mirrors deletions would remove it).
    #[arg(long)]
    pub state_in_replica: bool,
    /// This follower's id in the lease; default host and process.
    #[arg(long)]
    pub holder: Option<String>,
}

impl FollowTarget {
    fn options(&self, mode: FollowMode, interval_ms: Option<u64>) -> anyhow::Result<FollowOptions> {
        let prefix_map = match &self.prefix_map {
            Some(m) => Some(
                PrefixMap::parse(m)
                    .ok_or_else(|| exit_error(tidemark_recovery::exit::BAD_INPUT, "--prefix-map is FROM=TO"))?,
            ),
            None => None,
        };
        Ok(FollowOptions {
            warehouse: self.warehouse.clone(),
            namespace: self.namespace.clone(),
            mode,
            prefix_map,
            file_io_props: s3_props(|k| std::env::var(k).ok()),
            holder: self.holder.clone().unwrap_or_else(default_writer_id),
            interval_ms,
        })
    }

    /// The DR catalog as its definition resolves it, without opening it (`None`: it does not
    /// resolve; opening it then says why).
    fn resolved(&self) -> anyhow::Result<Option<tidemark_recovery::catalog::Resolved>> {
        let name = self.catalog_name.as_deref().filter(|n| !n.trim().is_empty());
        Ok(resolve(&self.catalog, name, None, &Definitions::load()?).ok())
    }

    /// The state location: `--state`, or beside a SQLite DR catalog; refused inside the replica
    /// (see [`follower::check_state_location`]) unless `--state-in-replica`. Decided before the
    /// catalog is opened (opening a SQLite file creates it).
    fn state_url(&self) -> anyhow::Result<String> {
        let url = match (&self.state, self.resolved()?) {
            (Some(s), _) => s.clone(),
            (None, Some(r)) if r.kind == CatalogKind::Sqlite => {
                let file = sqlite_file(r.props.get("uri").map_or(self.catalog.as_str(), String::as_str));
                follower::default_state_url(&file.display().to_string())
            }
            (None, _) => {
                return Err(exit_error(
                    tidemark_recovery::exit::USAGE,
                    format!(
                        "give --state (a folder or s3://… outside the replica warehouse) for the follower's lease \
                         and state: only a SQLite DR catalog has a default place beside it, and {} is not one",
                        self.catalog
                    ),
                ));
            }
        };
        if !self.state_in_replica {
            let map_to = self
                .prefix_map
                .as_deref()
                .and_then(|m| m.split_once('='))
                .map(|(_, to)| to);
            follower::check_state_location(&url, &self.warehouse, map_to)
                .map_err(|e| exit_error(tidemark_recovery::exit::USAGE, e.to_string()))?;
        }
        Ok(url)
    }

    /// The DR catalog; its warehouse (where tables it creates go, e.g. `recover --into` after a
    /// failover) is the replica's unless the catalog's definition names one. A REST catalog's
    /// warehouse selects the server's catalog (SeaweedFS: its table bucket), so a defined one is
    /// never replaced by the replica's location.
    async fn open(&self) -> anyhow::Result<tidemark_recovery::catalog::CatalogHandle> {
        let own = self.resolved()?.is_some_and(|r| {
            r.kind == CatalogKind::Rest && r.props.get("warehouse").is_some_and(|w| !w.trim().is_empty())
        });
        Ok(open_catalog(&CatalogConfig {
            uri: self.catalog.clone(),
            warehouse: if own { String::new() } else { self.warehouse.clone() },
            name: self.catalog_name.clone().unwrap_or_default(),
        })
        .await?)
    }
}

#[derive(Debug, Subcommand)]
pub enum WarmCommand {
    /// Keep a DR catalog in step with a replicated warehouse (strict or eventual), under a lease.
    Follow {
        #[command(flatten)]
        target: FollowTarget,
        #[arg(long, value_enum, default_value = "strict")]
        mode: FollowMode,
        /// Time between cycles (30s, 5m, 500ms); without --once the follower runs until stopped.
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        interval: std::time::Duration,
        /// One cycle, then release the lease and exit (for cron): exit 0 when every table is OK,
        /// 4 when one is behind, missing files, held, in conflict or failed (as `replica status`).
        #[arg(long)]
        once: bool,
        /// Stop after this many cycles (drills and tests).
        #[arg(long, hide = true)]
        max_cycles: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// The follower's state for people and alerts; exit 0 OK, 4 a table not OK, 10 the follower
    /// is not running, 7 no state.
    Status {
        /// The follower's state location (as `follow --state`), or give --catalog for the default
        /// beside a SQLite DR catalog.
        #[arg(long, required_unless_present = "catalog")]
        state: Option<String>,
        /// The SQLite DR catalog file whose default state location (<file>.follower) to read.
        #[arg(long, conflicts_with = "state")]
        catalog: Option<String>,
        /// How old the last scan may be before the follower counts as stale (default three
        /// intervals, or 15m).
        #[arg(long, value_parser = parse_duration)]
        max_age: Option<std::time::Duration>,
        /// Also write the status as a Prometheus textfile (gauges per table).
        #[arg(long)]
        prometheus: Option<PathBuf>,
        /// Audit a table's DR copy against its journal, TABLE=JOURNAL_URL (repeat for several):
        /// exit 12 when a copy holds a write its journal does not explain. Records go under the
        /// state location (`audits/`), so the next status reads only what was replicated since.
        #[arg(long, value_name = "TABLE=JOURNAL")]
        audit: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Promote the DR catalog: fence the follower, one final strict scan, flip the routes,
    /// record the promotion and what the DR side lacks.
    Failover {
        #[command(flatten)]
        target: FollowTarget,
        /// A route to flip to the DR table of the same name (repeat for several).
        #[arg(long = "route")]
        routes: Vec<String>,
        #[arg(long, default_value = "failover to the DR replica")]
        reason: String,
        /// The promotion's id (default failover-<UTC time>).
        #[arg(long)]
        failover_id: Option<String>,
        /// The tables' journal: the promotion then reports the newest checkpoint the primary
        /// recorded in it for each table, and whether a recovery must close the gap before the
        /// writer continues (`recover_needed`).
        #[arg(long)]
        journal: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Failback: walk the demoted old primary back to the newest versions the new primary
    /// holds, keeping and listing every file walked over; restore what only it deleted.
    Resync {
        /// The old primary (SQLite file, postgres://…, or a defined name).
        #[arg(long)]
        demote: String,
        /// The new primary (the promoted DR catalog).
        #[arg(long)]
        primary: String,
        #[arg(long)]
        namespace: Option<String>,
        /// The new primary's follower state location: refused while it reports missing files.
        #[arg(long)]
        follower_state: Option<String>,
        /// Show the plan; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also write the report (JSON) here.
        #[arg(long)]
        report: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

fn print_state(state: &FollowerState) {
    println!(
        "cycle {} at {} ({} ms, {:?})",
        state.cycle, state.last_scan_at, state.scan_ms, state.mode
    );
    for t in &state.tables {
        println!("{:<32} {:<14} {}", t.table, format!("{:?}", t.status), t.reason);
        for m in &t.missing {
            println!("{:<32}   missing {} {} since {}", "", m.what, m.path, m.missing_since);
        }
    }
}

pub async fn run(cmd: WarmCommand) -> anyhow::Result<()> {
    match cmd {
        WarmCommand::Follow {
            target,
            mode,
            interval,
            once,
            max_cycles,
            common,
        } => {
            let state_url = target.state_url()?;
            let handle = target.open().await?;
            // Refused before anything is created, the state location included.
            tidemark_recovery::dr::follow::require_capabilities(&handle)?;
            let (limits, interval_ms) = if once {
                (RunLimits::once(), None)
            } else {
                (
                    RunLimits::every(interval, max_cycles),
                    Some(interval.as_millis() as u64),
                )
            };
            let opts = target.options(mode, interval_ms)?;
            let store = follower::open_state(&state_url).await?;
            let json = common.json;
            let last = follower::run(&opts, &handle, store, limits, &SystemClock, &mut |s| {
                if json {
                    if let Err(e) = print_json(s) {
                        eprintln!("cannot print the state: {e}");
                    }
                } else {
                    print_state(s);
                }
            })
            .await?;
            // `--once` (cron) exits as `replica status` would for the tables; the looping
            // follower keeps running whatever its tables show.
            let code = follow_status::tables_code(&last);
            if once && code != tidemark_recovery::exit::OK {
                return Err(exit_error(
                    code,
                    format!(
                        "followed, but not every table is OK: {}",
                        follow_status::tables_not_ok(&last).join(", ")
                    ),
                ));
            }
            Ok(())
        }
        WarmCommand::Status {
            state,
            catalog,
            max_age,
            prometheus,
            audit,
            common,
        } => {
            let url = match (state, catalog) {
                (Some(s), _) => s,
                (None, c) => follower::default_state_url(&sqlite_file(&c.unwrap_or_default()).display().to_string()),
            };
            let store = follower::open_state(&url).await?;
            let mut states = StateStore::new(store.clone());
            let current = states.load().await?;
            let lease = lease::read(store.as_ref()).await?.map(|(l, _)| l);
            let mut report = follow_status::status(
                current.as_ref(),
                lease.as_ref(),
                max_age.map(|d| d.as_millis() as i64),
                SystemClock.now(),
            );
            if !audit.is_empty() {
                let audits = audit_copies(current.as_ref(), &audit, &store).await?;
                follow_status::attach_audits(&mut report, audits);
            }
            if let Some(path) = &prometheus {
                write_textfile(path, &follow_status::prometheus(&report))?;
            }
            if common.json {
                print_json(&report)?;
            } else {
                print_status(&report);
            }
            if report.exit_code != 0 {
                return Err(exit_error(report.exit_code, status_line(&report)));
            }
            Ok(())
        }
        WarmCommand::Failover {
            target,
            routes,
            reason,
            failover_id,
            journal,
            common,
        } => {
            let journal = match journal {
                Some(url) => Some(tidemark_journal::Journal::open(tidemark_journal::store::open(&url).await?).await?),
                None => None,
            };
            let state_url = target.state_url()?;
            let handle = target.open().await?;
            tidemark_recovery::dr::follow::require_capabilities(&handle)?;
            let opts = target.options(FollowMode::Strict, None)?;
            let store = follower::open_state(&state_url).await?;
            let id = failover_id.unwrap_or_else(|| format!("failover-{}", SystemClock.now().format("%Y%m%dT%H%M%SZ")));
            let p = failover::failover(
                &opts,
                &handle,
                store,
                &routes,
                &id,
                &reason,
                journal.as_ref(),
                &SystemClock,
            )
            .await?;
            if p.already_recorded {
                eprintln!(
                    "failover {id} is already recorded ({state_url}/promotions/{id}.json, at {}): nothing done again; \
                     its promotion follows",
                    p.at
                );
            }
            if common.json {
                print_json(&p)?;
            } else {
                println!(
                    "promoted {} ({}); follower {} fenced",
                    p.catalog,
                    p.failover_id,
                    p.fenced_holder.as_deref().unwrap_or("(none)")
                );
                for r in &p.routes {
                    println!(
                        "route {} {} generation {} -> {} at position {}",
                        r.route, r.table, r.from_generation, r.to_generation, r.applied_position
                    );
                }
                for t in &p.tables {
                    let journal = match (t.journal_checkpoint_position, t.recover_needed) {
                        (_, None) => " (without --journal: the primary's checkpoints were not read)".to_string(),
                        (Some(c), Some(true)) => format!(
                            "; the primary checkpointed position {c}: recover before the writer continues (`tidemark recover --source-table {} --to H`, then flip the route)",
                            t.table
                        ),
                        (c, Some(_)) => format!(
                            "; the primary's newest checkpoint {}: no recovery needed, the writer continues with `tidemark apply --route`",
                            c.map_or("(none)".into(), |v| v.to_string())
                        ),
                    };
                    println!(
                        "{:<32} {:?}: DR at position {}, primary last seen at {}: {} commits / {} positions behind{journal}",
                        t.table,
                        t.status,
                        t.dr_position.map_or("?".into(), |v| v.to_string()),
                        t.primary_latest_position.map_or("?".into(), |v| v.to_string()),
                        t.commits_behind.map_or("?".into(), |v| v.to_string()),
                        t.positions_behind.map_or("?".into(), |v| v.to_string()),
                    );
                }
            }
            Ok(())
        }
        WarmCommand::Resync {
            demote,
            primary,
            namespace,
            follower_state,
            dry_run,
            report,
            common,
        } => run_resync(demote, primary, namespace, follower_state, dry_run, report, common).await,
    }
}

async fn run_resync(
    demote: String,
    primary: String,
    namespace: Option<String>,
    follower_state: Option<String>,
    dry_run: bool,
    report: Option<PathBuf>,
    common: Common,
) -> anyhow::Result<()> {
    let open = |uri: String| async move {
        open_catalog(&CatalogConfig {
            uri,
            warehouse: String::new(),
            name: String::new(),
        })
        .await
    };
    let (demoted, new_primary) = (open(demote).await?, open(primary).await?);
    let follower = match follower_state {
        Some(url) => StateStore::new(follower::open_state(&url).await?).load().await?,
        None => None,
    };
    let r = resync::resync(&demoted, &new_primary, namespace.as_deref(), follower.as_ref(), dry_run).await?;
    if let Some(path) = &report {
        std::fs::write(path, serde_json::to_string_pretty(&r)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if common.json {
        print_json(&r)?;
    } else {
        for t in &r.tables {
            println!("{:<32} {:<18} {}", t.table, format!("{:?}", t.action), t.reason);
            if let Some(a) = &t.kept_aside {
                println!("{:<32}   kept aside as table {} at {}", "", a.table, a.location);
            }
            for f in &t.kept_files {
                println!("{:<32}   kept {} {}", "", f.what, f.path);
            }
        }
        if r.dry_run {
            println!("dry run: nothing changed");
        }
    }
    // Exit 4 when a table cannot be resynced as it is (or failed), else 5 when another writer moved
    // a table while the resync ran (nothing of it moved; a re-run once that writer stops resyncs it).
    let of = |actions: &[ResyncAction]| -> Vec<String> {
        r.tables
            .iter()
            .filter(|t| actions.contains(&t.action))
            .map(|t| {
                let action = serde_json::to_value(t.action).unwrap_or_default();
                format!("{} ({})", t.table, action.as_str().unwrap_or_default())
            })
            .collect()
    };
    let held = of(&[ResyncAction::NoCommonVersion, ResyncAction::Failed]);
    let moved = of(&[ResyncAction::Conflict]);
    if !held.is_empty() {
        let all: Vec<String> = held.into_iter().chain(moved).collect();
        return Err(exit_error(
            tidemark_recovery::exit::VERIFY_FAILED,
            format!("not resynced: {}", all.join(", ")),
        ));
    }
    if !moved.is_empty() {
        return Err(exit_error(
            tidemark_recovery::exit::CONFLICT,
            format!(
                "not resynced: {} moved while the resync ran (another writer); nothing of them moved: run the resync \
                 again once that writer stops",
                moved.join(", ")
            ),
        ));
    }
    Ok(())
}

/// `--audit TABLE=JOURNAL`: each named table's DR copy audited against its journal.
async fn audit_copies(
    state: Option<&tidemark_recovery::dr::follow_state::FollowerState>,
    specs: &[String],
    store: &std::sync::Arc<dyn tidemark_journal::store::ObjectStore>,
) -> anyhow::Result<Vec<(String, tidemark_recovery::dr::replica_audit::ReplicaAudit)>> {
    let mut out = Vec::new();
    for spec in specs {
        let Some((table, url)) = spec.split_once('=') else {
            return Err(exit_error(
                BAD_INPUT,
                format!("--audit {spec:?}: give TABLE=JOURNAL_URL"),
            ));
        };
        let Some((state, t)) = state.and_then(|s| Some((s, s.tables.iter().find(|t| t.table == table)?))) else {
            return Err(exit_error(
                BAD_INPUT,
                format!("--audit {table}: the follower's state holds no table {table}"),
            ));
        };
        let journal = tidemark_journal::Journal::open(tidemark_journal::store::open(url).await?).await?;
        out.push((
            table.to_string(),
            tidemark_recovery::dr::replica_audit::audit_copy(state, t, &journal, store.clone()).await,
        ));
    }
    Ok(out)
}

fn status_line(r: &StatusReport) -> String {
    let bad: Vec<String> = r
        .tables
        .iter()
        .filter(|t| t.summary != "OK")
        .map(|t| format!("{} {}", t.table, t.summary))
        .chain(r.tables.iter().filter_map(|t| {
            let a = t.audit.as_ref()?;
            match &a.first_divergence {
                Some(d) => Some(format!(
                    "{}: its DR copy holds a divergence at snapshot {} ({})",
                    t.table, d.snapshot_id, d.detail
                )),
                None => a.error.as_ref().map(|e| format!("{}: not audited: {e}", t.table)),
            }
        }))
        .collect();
    let follower = serde_json::to_value(r.follower)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    if r.last_scan_at.is_none() {
        "no follower state: the follower never ran".to_string()
    } else if bad.is_empty() {
        format!("the follower is {follower}")
    } else {
        format!("follower {follower}; {}", bad.join(", "))
    }
}

fn print_status(r: &StatusReport) {
    println!(
        "follower {:?} (holder {}, last scan {} , {} ms ago)",
        r.follower,
        r.holder.as_deref().unwrap_or("-"),
        r.last_scan_at.as_deref().unwrap_or("never"),
        r.last_scan_age_ms.map_or("?".into(), |a| a.to_string())
    );
    for t in &r.tables {
        println!(
            "{:<32} {:<20} RPO {} commits / {} ms / {} positions",
            t.table,
            t.summary,
            t.versions_behind.map_or("?".into(), |v| v.to_string()),
            t.rpo_ms.map_or("?".into(), |v| v.to_string()),
            t.positions_behind.map_or("?".into(), |v| v.to_string())
        );
        for m in &t.missing {
            println!("{:<32}   missing {} {} for {} s", "", m.what, m.path, m.age_ms / 1000);
        }
        if let Some(a) = &t.audit {
            let trusted = a.trusted.as_ref().map_or("no trusted snapshot".into(), |p| {
                format!(
                    "newest trusted snapshot {} at position {}",
                    p.snapshot_id,
                    p.position.map_or("?".into(), |p| p.to_string())
                )
            });
            match (&a.first_divergence, &a.error) {
                (Some(d), _) => println!(
                    "{:<32}   audit: divergence at snapshot {} ({} by {}: {} removed, {} changed, {} added); {trusted}",
                    "", d.snapshot_id, d.operation, d.writer, d.counts.removed, d.counts.changed, d.counts.added
                ),
                (None, Some(e)) => println!("{:<32}   audit: not audited: {e}", ""),
                (None, None) => println!("{:<32}   audit: trusted; {trusted}", ""),
            }
        }
    }
}

/// Written beside and renamed into place, as the textfile collector requires.
fn write_textfile(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("prom.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))?;
    Ok(())
}
