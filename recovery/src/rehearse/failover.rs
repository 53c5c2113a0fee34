//! `tidemark gameday --scenario failover`: primary loss under a live writer, with the warm
//! replica (issue 13), timed per step.
//!
//! 1. the primary applies the journal to two tables; a route points readers and the writer at
//!    the first (the second has none: it is promoted with the DR catalog, at its own version);
//! 2. the replica is filled object by object in a hostile order (metadata first) while the writer
//!    commits; the follower (strict) keeps the DR catalog in step;
//! 3. the primary is lost (never read again until step 7);
//! 4. **fail over**: fence the follower, final strict scan, flip the route, record the promotion;
//! 5. **recover the gap**: `recover` from the DR table with the journal into a new table
//!    (validated), and flip the route to it;
//! 6. keep writing on the DR side (`apply` through the route, fenced);
//! 7. the old primary comes back with the commit the DR side never got; **resync** it;
//! 8. check: the DR side's table equals the whole journal applied afresh, the second table the
//!    journal up to the version the DR side holds, the resynced old primary the journal up to the
//!    version both hold, every file walked over is kept.
//!
//! RTO is steps 4–5; RPO the commits and journal positions the promotion reports behind.

use std::time::Instant;

use serde::Serialize;
use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;
use tidemark_journal::generate::OrderGen;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store;
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_router::{Fence, FlipRequest, RouteStore};

use crate::apply::{ApplyOptions, Guard, RouteFence, apply, apply_all};
use crate::catalog::{CatalogConfig, open_catalog};
use crate::dr::follow::{FollowOptions, position_of};
use crate::dr::follow_state::FollowMode;
use crate::dr::follower::{self, RunLimits};
use crate::dr::rebuild::warehouse_base;
use crate::dr::{failover, resync};
use crate::ids::Ids;
use crate::recover::snapshot::{PrefixMap, SnapshotChoice, SnapshotSource};
use crate::recover::{RecoverOptions, recover};
use crate::rehearse::drill::{DrillCheck, DrillStep, Timer, checks_markdown};
use crate::rehearse::gameday::failover_io::{replicate, rows};
use crate::rehearse::gameday::{GamedayError, GamedayOptions};
use crate::table;

const TABLE: &str = "shop.orders";
/// A second table with no route: promoted with the DR catalog, at its own version.
const SECOND: &str = "shop.payments";
const RECOVERED: &str = "shop.orders_dr";
const EVENTS: u64 = 600;
const BATCH: usize = 100;

/// The report (`tidemark gameday --scenario failover --json`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FailoverGamedayReport {
    pub format_version: u32,
    pub ok: bool,
    pub location: String,
    pub steps: Vec<DrillStep>,
    /// Steps 4–5: fail over and recover the gap.
    pub rto_ms: u64,
    /// Commits and journal positions the DR side lacked at the failover.
    pub rpo_commits: Option<usize>,
    pub rpo_positions: Option<u64>,
    pub kept_files: usize,
    pub checks: Vec<DrillCheck>,
    pub ms: u64,
    /// S3 requests the game day made through tidemark's S3 client (journal, route, follower
    /// state, replica copy), retried and failed; absent when it made none (a local location).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

impl FailoverGamedayReport {
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "# Game day: failover to the warm replica\n\nLocation: `{}`. Result: **{}**. RTO {} ms; RPO {} commits, {} \
             journal positions; {} files kept by the resync.\n\n| step | ms | detail |\n|---|---|---|\n",
            self.location,
            if self.ok { "passed" } else { "FAILED" },
            self.rto_ms,
            self.rpo_commits.map_or("?".into(), |c| c.to_string()),
            self.rpo_positions.map_or("?".into(), |c| c.to_string()),
            self.kept_files,
        );
        for st in &self.steps {
            s.push_str(&format!(
                "| {} | {} | {} |\n",
                st.step,
                st.ms,
                st.detail.replace('|', "\\|")
            ));
        }
        s + &checks_markdown(&self.checks)
    }
}

fn fail(step: &'static str) -> impl Fn(String) -> GamedayError {
    move |message| GamedayError {
        step: step.to_string(),
        message,
    }
}

pub async fn run(
    opts: &GamedayOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&DrillStep),
) -> Result<FailoverGamedayReport, GamedayError> {
    let started = Instant::now();
    let mut timer = Timer {
        steps: Vec::new(),
        progress,
    };
    let base = match &opts.store {
        Some(s) => format!("{}/failover-{}", s.trim_end_matches('/'), ids.uuid().simple()),
        None => opts.work.join("failover").display().to_string(),
    };
    let url = |rel: &str| format!("{base}/{rel}");
    let wh = |rel: &str| warehouse_base(&url(rel)).map_err(|e| e.to_string());
    let catalog = |dir: &'static str, warehouse: String| {
        let d = opts.work.join("catalogs").join(dir);
        async move {
            if d.exists() {
                std::fs::remove_dir_all(&d).map_err(|e| e.to_string())?;
            }
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            open_catalog(&CatalogConfig {
                uri: d.join("catalog.db").display().to_string(),
                warehouse,
                name: "tidemark".into(),
            })
            .await
            .map_err(|e| e.to_string())
        }
    };

    // 1. The primary and its writer.
    let t = Instant::now();
    let step = fail("primary");
    if opts.store.is_none() && std::path::Path::new(&base).exists() {
        std::fs::remove_dir_all(&base).map_err(|e| step(e.to_string()))?;
    }
    let journal_store = store::open_or_create(&url("journal"))
        .await
        .map_err(|e| step(e.to_string()))?;
    let journal = Journal::init(journal_store, orders_spec(), format!("gameday-{}", ids.uuid()), clock)
        .await
        .map_err(|e| step(e.to_string()))?;
    let mut g = OrderGen::new(13, 120, 1);
    let events: String = (0..EVENTS)
        .map(|_| serde_json::to_string(&g.next_event()).expect("an event serializes") + "\n")
        .collect();
    let aopts = AppendOptions {
        batch_size: BATCH,
        writer_id: "gameday-writer".into(),
        source_name: "gameday failover".into(),
    };
    append(&journal, events.as_bytes(), &aopts, clock, &mut |_| {})
        .await
        .map_err(|e| step(e.to_string()))?;
    let (primary_wh, replica_wh) = (wh("primary").map_err(&step)?, wh("replica").map_err(&step)?);
    let primary = catalog("fo-primary", primary_wh.clone()).await.map_err(&step)?;
    let dr = catalog("fo-dr", String::new()).await.map_err(&step)?;
    let until = |u: u64| ApplyOptions {
        until: Some(u),
        ..Default::default()
    };
    let r = apply(&journal, &primary, TABLE, &until(200), clock, ids, &mut |_| {})
        .await
        .map_err(|e| step(e.to_string()))?;
    apply(&journal, &primary, SECOND, &until(100), clock, ids, &mut |_| {})
        .await
        .map_err(|e| step(e.to_string()))?;
    let routes = RouteStore::new(
        store::open_or_create(&url("route"))
            .await
            .map_err(|e| step(e.to_string()))?,
    );
    let pt = table::load_table(&primary, TABLE)
        .await
        .map_err(|e| step(e.to_string()))?;
    routes
        .init(
            FlipRequest {
                table_name: TABLE.into(),
                catalog: primary.reference().clone(),
                metadata_location: pt.metadata_location().unwrap_or_default().into(),
                table_uuid: pt.metadata().uuid().to_string(),
                applied_position: r.applied_to_position,
                reason: "game day primary".into(),
                recovery_id: None,
            },
            clock,
        )
        .await
        .map_err(|e| step(e.to_string()))?;
    timer.done(
        "1 primary applies 1..=200, route on it",
        t,
        format!("{EVENTS} events journaled"),
        false,
    );

    // 2. Follow, while the writer commits and the replication copies metadata first.
    let t = Instant::now();
    let step = fail("follow");
    replicate(&primary_wh, &replica_wh, true).await.map_err(&step)?;
    let (to_300, mut quiet) = (until(300), |_: &crate::apply::ApplyProgress| {});
    let (w, c) = tokio::join!(
        apply(&journal, &primary, TABLE, &to_300, clock, ids, &mut quiet),
        replicate(&primary_wh, &replica_wh, true)
    );
    w.map_err(|e| step(e.to_string()))?;
    c.map_err(&step)?;
    apply(&journal, &primary, SECOND, &until(200), clock, ids, &mut quiet)
        .await
        .map_err(|e| step(e.to_string()))?;
    replicate(&primary_wh, &replica_wh, false).await.map_err(&step)?;
    let follow = FollowOptions {
        warehouse: replica_wh.clone(),
        namespace: None,
        mode: FollowMode::Strict,
        prefix_map: Some(PrefixMap {
            from: primary_wh.clone(),
            to: replica_wh.clone(),
        }),
        file_io_props: primary.file_io_props().clone(),
        holder: "gameday-follower".into(),
        interval_ms: None,
    };
    // Outside the replica warehouse (see `replica follow --state`).
    let state_url = url("follower-state");
    let state_store = follower::open_state(&state_url)
        .await
        .map_err(|e| step(e.to_string()))?;
    let s = follower::run(&follow, &dr, state_store.clone(), RunLimits::once(), clock, &mut |_| {})
        .await
        .map_err(|e| step(e.to_string()))?;
    let ts = s.table(TABLE).cloned();
    timer.done(
        "2 replicate (metadata first) under the writer; follow strict",
        t,
        format!(
            "DR at position {}, primary at {}, {} files missing",
            ts.as_ref().and_then(|t| t.verified_position).unwrap_or(0),
            ts.as_ref().and_then(|t| t.latest_position).unwrap_or(0),
            ts.as_ref().map_or(0, |t| t.missing_count)
        ),
        false,
    );

    // 3. The primary is lost.
    let t = Instant::now();
    timer.done(
        "3 lose the primary",
        t,
        "its catalog and warehouse are not read again until step 7".into(),
        false,
    );

    // 4. Fail over.
    let t = Instant::now();
    let step = fail("failover");
    let promotion = failover::failover(
        &follow,
        &dr,
        state_store.clone(),
        &[url("route")],
        &format!("gameday-{}", ids.uuid().simple()),
        "game day: primary lost",
        Some(&journal),
        clock,
    )
    .await
    .map_err(|e| step(e.to_string()))?;
    let pt = promotion.tables.iter().find(|t| t.table == TABLE);
    let (rpo_commits, rpo_positions) = (pt.and_then(|t| t.commits_behind), pt.and_then(|t| t.positions_behind));
    let behind: Vec<String> = promotion
        .tables
        .iter()
        .map(|t| format!("{} {} positions behind", t.table, t.positions_behind.unwrap_or(0)))
        .collect();
    timer.done(
        "4 fail over (fence, strict scan, flip the route, record)",
        t,
        format!(
            "route generation {} -> {}; DR {}",
            promotion.routes.first().map_or(0, |r| r.from_generation),
            promotion.routes.first().map_or(0, |r| r.to_generation),
            behind.join(", ")
        ),
        true,
    );
    let second_at = promotion
        .tables
        .iter()
        .find(|t| t.table == SECOND)
        .and_then(|t| t.dr_position);

    // 5. Recover the gap from the DR table with the journal (validated), and flip the route to it.
    let t = Instant::now();
    let step = fail("recover the gap");
    let dr_pointer = dr
        .metadata_pointer(&crate::table::parse_ident(TABLE).map_err(|e| step(e.to_string()))?)
        .await
        .map_err(|e| step(e.to_string()))?
        .ok_or_else(|| step("the DR catalog has no table after the failover".into()))?;
    let ropts = RecoverOptions {
        recovery_id: format!("gameday-gap-{}", ids.uuid().simple()),
        source: SnapshotSource {
            metadata_location: dr_pointer,
            file_io_props: dr.file_io_props().clone(),
            prefix_map: None,
        },
        // The DR table's own snapshot (the newest checkpoint names the primary's, never replicated).
        choice: SnapshotChoice::SnapshotId(
            pt.and_then(|t| t.dr_snapshot_id)
                .ok_or_else(|| step("the promotion names no DR snapshot".into()))?,
        ),
        to: Some(300),
        into: RECOVERED.into(),
        partition_rows: None,
        validation_split: Default::default(),
        trust: Default::default(),
    };
    let (rr, recovered) = recover(&journal, &dr, &ropts, clock, ids, &mut |_| {})
        .await
        .map_err(|e| step(e.to_string()))?;
    let (current, etag, _) = routes
        .read()
        .await
        .map_err(|e| step(e.to_string()))?
        .ok_or_else(|| step("no route".into()))?;
    routes
        .flip(
            &etag,
            current.generation,
            FlipRequest {
                table_name: RECOVERED.into(),
                catalog: dr.reference().clone(),
                metadata_location: recovered.metadata_location().unwrap_or_default().into(),
                table_uuid: recovered.metadata().uuid().to_string(),
                applied_position: rr.h,
                reason: "game day: the gap recovered from the journal".into(),
                recovery_id: Some(ropts.recovery_id.clone()),
            },
            clock,
        )
        .await
        .map_err(|e| step(e.to_string()))?;
    timer.done(
        "5 recover the gap from the journal; flip the route to it",
        t,
        format!(
            "{RECOVERED} from position {} to {}, validation {}",
            rr.snapshot_position,
            rr.h,
            if rr.validation.ok { "ok" } else { "FAILED" }
        ),
        true,
    );

    // 6. The writer resumes on the DR side through the route, fenced.
    let t = Instant::now();
    let step = fail("keep writing");
    let (fence, route) = Fence::acquire(&routes).await.map_err(|e| step(e.to_string()))?;
    let guard = Guard(std::sync::Arc::new(RouteFence {
        routes: routes.clone(),
        fence,
    }));
    let o = ApplyOptions {
        guard: Some(guard),
        ..Default::default()
    };
    let resumed = apply(&journal, &dr, &route.table_name, &o, clock, ids, &mut |_| {})
        .await
        .map_err(|e| step(e.to_string()))?;
    timer.done(
        "6 keep writing on the DR side",
        t,
        format!("{} at position {}", route.table_name, resumed.applied_to_position),
        false,
    );

    // 7. The old primary returns with the commit the DR side never got; resync it.
    let t = Instant::now();
    let step = fail("resync");
    let plan = resync::resync(&primary, &dr, None, None, false)
        .await
        .map_err(|e| step(e.to_string()))?;
    let rt = plan.tables.iter().find(|t| t.table == TABLE).cloned();
    let kept = rt.as_ref().map_or(0, |t| t.kept_files.len());
    timer.done(
        "7 the old primary returns; resync it",
        t,
        format!(
            "{}: {} versions walked over, {kept} files kept",
            rt.as_ref()
                .map_or("no such table".into(), |t| format!("{:?}", t.action)),
            rt.as_ref().map_or(0, |t| t.walked_over.len())
        ),
        false,
    );

    // 8. Check against the journal.
    let t = Instant::now();
    let step = fail("check");
    let reference = catalog("fo-reference", wh("reference").map_err(&step)?)
        .await
        .map_err(&step)?;
    apply_all(&journal, &reference, TABLE, clock, ids)
        .await
        .map_err(|e| step(e.to_string()))?;
    let reference_at = catalog("fo-reference-at", wh("reference-at").map_err(&step)?)
        .await
        .map_err(&step)?;
    let back = table::load_table(&primary, TABLE)
        .await
        .map_err(|e| step(e.to_string()))?;
    let back_position = position_of(&serde_json::to_value(back.metadata()).unwrap_or_default());
    apply(
        &journal,
        &reference_at,
        TABLE,
        &until(back_position.unwrap_or(0)),
        clock,
        ids,
        &mut |_| {},
    )
    .await
    .map_err(|e| step(e.to_string()))?;
    let (dr_rows, ref_rows) = (
        rows(&dr, RECOVERED).await.map_err(&step)?,
        rows(&reference, TABLE).await.map_err(&step)?,
    );
    let (back_rows, ref_at_rows) = (
        rows(&primary, TABLE).await.map_err(&step)?,
        rows(&reference_at, TABLE).await.map_err(&step)?,
    );
    // The table without a route: the DR side holds a version the primary had, whole.
    let reference_second = catalog("fo-reference-second", wh("reference-second").map_err(&step)?)
        .await
        .map_err(&step)?;
    apply(
        &journal,
        &reference_second,
        SECOND,
        &until(second_at.unwrap_or(0)),
        clock,
        ids,
        &mut |_| {},
    )
    .await
    .map_err(|e| step(e.to_string()))?;
    let (second_rows, ref_second_rows) = (
        rows(&dr, SECOND).await.map_err(&step)?,
        rows(&reference_second, SECOND).await.map_err(&step)?,
    );
    let io = crate::recover::snapshot::file_io(primary.file_io_props());
    let mut gone = Vec::new();
    for f in rt.iter().flat_map(|t| &t.kept_files) {
        if !io.exists(&f.path).await.unwrap_or(false) {
            gone.push(f.path.clone());
        }
    }
    let check = |check: &str, ok: bool, detail: String| DrillCheck {
        check: check.into(),
        ok,
        detail,
    };
    let checks = vec![
        check(
            "the DR side equals the whole journal applied afresh",
            dr_rows == ref_rows,
            format!("{} rows vs {} in the reference", dr_rows.len(), ref_rows.len()),
        ),
        check(
            "the resynced old primary equals the journal up to the version both hold",
            back_rows == ref_at_rows && back_position.is_some(),
            format!(
                "{} rows at position {}",
                back_rows.len(),
                back_position.map_or("?".into(), |p| p.to_string())
            ),
        ),
        check(
            "the second table (no route) equals the journal up to the version the DR side holds",
            second_rows == ref_second_rows && second_at.is_some_and(|p| p > 0),
            format!(
                "{SECOND}: {} rows at position {}",
                second_rows.len(),
                second_at.map_or("?".into(), |p| p.to_string())
            ),
        ),
        check(
            "the failover lost positions, and the journal closed the gap",
            rpo_positions.is_some_and(|p| p > 0),
            format!("RPO {rpo_positions:?} positions, {rpo_commits:?} commits"),
        ),
        check(
            "the resync walked back and kept every file it walked over",
            rt.as_ref()
                .is_some_and(|t| t.action == resync::ResyncAction::WalkedBack)
                && kept > 0
                && gone.is_empty(),
            format!("{kept} files kept; gone: {gone:?}"),
        ),
    ];
    timer.done(
        "8 check against the journal",
        t,
        format!("{} checks", checks.len()),
        false,
    );
    let rto_ms = timer.steps.iter().filter(|s| s.recovery).map(|s| s.ms).sum();
    Ok(FailoverGamedayReport {
        format_version: tidemark_schemas::FORMAT_VERSION,
        ok: checks.iter().all(|c| c.ok),
        location: base,
        steps: timer.steps,
        rto_ms,
        rpo_commits,
        rpo_positions,
        kept_files: kept,
        checks,
        ms: started.elapsed().as_millis() as u64,
        s3_requests: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::SeededIds;

    #[tokio::test]
    async fn the_failover_game_day_passes_on_a_local_folder() {
        let dir = tempfile::tempdir().unwrap();
        let opts = GamedayOptions {
            work: dir.path().to_path_buf(),
            store: None,
            tables: 1,
            commits: 3,
            rows_per_commit: 10,
            catalog: None,
            dr_catalog: None,
        };
        let clock = tidemark_journal::clock::StepClock::new(
            chrono::TimeZone::timestamp_opt(&chrono::Utc, 1_900_000_000, 0).unwrap(),
            chrono::Duration::milliseconds(10),
        );
        let r = run(&opts, &clock, &SeededIds::new(5), &mut |_| {}).await.unwrap();
        assert!(r.ok, "{}", r.markdown());
        assert_eq!(r.rpo_positions, Some(100));
        assert_eq!(r.steps.len(), 8);
        assert!(r.markdown().contains("RTO"));
    }
}
