//! The table drill, step by step ([`run`]; see the module above).

use std::sync::Arc;
use std::time::Instant;

use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;
use tidemark_journal::store::{self, ObjectStore};
use tidemark_router::RouteStore;
use tidemark_schemas::FORMAT_VERSION;

use super::journal::journal_held;
use super::report::{
    CHECK_AUDIT, CHECK_JOURNAL, CHECK_ROUTE, CHECK_RTO, CHECK_TRUSTED, CHECK_VALIDATION, RECOVERY_STEPS, RouteSeen,
    StepFailure, TableDrillOptions, TableDrillReport,
};
use super::scratch::{
    ID_PREFIX, Removal, TABLE_PREFIX, clear_scratch, remove_dead_temp_records, remove_scratch_table, temp_records_dir,
};
use crate::audit::{self, AuditOptions, AuditReport};
use crate::catalog::CatalogHandle;
use crate::exit;
use crate::ids::Ids;
use crate::recover::audited::{AuditRecords, TrustOptions, describe};
use crate::recover::snapshot::{SnapshotChoice, SnapshotSource};
use crate::recover::{RecoverOptions, RecoveryReport, StepTiming};
use crate::rehearse::history::{self, DrillRecord, RecordCheck, RecordStep};
use crate::table;

struct Steps {
    started: Instant,
    steps: Vec<RecordStep>,
}

impl Steps {
    fn push(&mut self, step: &str, t: Instant, ok: bool, detail: String, progress: &mut dyn FnMut(&RecordStep)) {
        let s = RecordStep {
            step: step.into(),
            start_ms: t.duration_since(self.started).as_millis() as u64,
            ms: t.elapsed().as_millis() as u64,
            ok,
            detail,
        };
        progress(&s);
        self.steps.push(s);
    }
}

fn check(checks: &mut Vec<RecordCheck>, name: &str, ok: bool, detail: String) {
    checks.push(RecordCheck {
        check: name.into(),
        ok,
        detail,
    });
}

/// Runs the drill. A failed step is reported in [`TableDrillReport::failure`] after the cleanup
/// and the record; only a refusal before anything was written (a foreign scratch table) or a
/// failed cleanup is an `Err`.
pub async fn run(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &TableDrillOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&RecordStep),
) -> anyhow::Result<TableDrillReport> {
    let started_at = clock.now_rfc3339();
    let io_before = process_bytes_read();
    let mut steps = Steps {
        started: Instant::now(),
        steps: Vec::new(),
    };
    let scratch_table = format!(
        "{}.{TABLE_PREFIX}{}",
        opts.scratch,
        opts.drill_id
            .trim_start_matches(ID_PREFIX)
            .replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );

    // 1. The scratch namespace: refused with a foreign table, leftovers removed.
    let t = Instant::now();
    let leftovers = clear_scratch(handle, &opts.scratch).await?;
    let dead_records = remove_dead_temp_records();
    let mut detail = if leftovers.is_empty() {
        format!("{} holds no drill table", opts.scratch)
    } else {
        format!(
            "removed {} left by killed drills: {}",
            leftovers.len(),
            leftovers
                .iter()
                .map(|l| l.table.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    if !dead_records.is_empty() {
        detail += &format!(
            "; removed the audit records killed drills left in {}: {}",
            std::env::temp_dir().display(),
            dead_records.join(", ")
        );
    }
    steps.push("scratch", t, true, detail, progress);
    tidemark_journal::failpoint::hit("drill:after-scratch");

    // The audit's records: the history's, or a temporary folder's (the recovery's own step 0
    // then resumes from this drill's audit instead of auditing again).
    let temp_records = temp_records_dir(&opts.drill_id);
    let records: Arc<dyn ObjectStore> = match &opts.history {
        Some(h) => h.clone(),
        None => store::open_or_create(&temp_records.display().to_string()).await?,
    };

    let mut checks = Vec::new();
    let mut out = Partial::default();
    let result = drill_steps(
        journal,
        handle,
        opts,
        &scratch_table,
        &records,
        clock,
        ids,
        &mut steps,
        &mut checks,
        &mut out,
        progress,
    )
    .await;
    let failure = result.err().map(|(step, e)| StepFailure {
        step,
        code: exit::code_of(&e),
        message: crate::error_text::one_line(&e),
    });

    // Cleanup, also after a failed step.
    tidemark_journal::failpoint::hit("drill:before-cleanup");
    let t = Instant::now();
    let removal = remove_scratch_table(handle, &scratch_table).await?;
    let _ = std::fs::remove_dir_all(&temp_records);
    steps.push(
        "cleanup",
        t,
        !matches!(removal, Removal::EntryOnly { .. }),
        removal.describe(&scratch_table),
        progress,
    );
    let scratch_location = match removal {
        Removal::Removed { location } => Some(location),
        _ => None,
    };
    tidemark_journal::failpoint::hit("drill:after-cleanup");

    let recovery_steps: Vec<&RecordStep> = steps
        .steps
        .iter()
        .filter(|s| RECOVERY_STEPS.contains(&s.step.as_str()))
        .collect();
    let rto_ms: u64 = recovery_steps.iter().map(|s| s.ms).sum();
    if failure.is_none()
        && let Some(budget) = opts.rto_budget_ms
    {
        let over: Vec<String> = recovery_steps
            .iter()
            .map(|s| format!("{} {} ms", s.step, s.ms))
            .collect();
        check(
            &mut checks,
            CHECK_RTO,
            rto_ms <= budget,
            format!("RTO {rto_ms} ms against a budget of {budget} ms ({})", over.join(", ")),
        );
    }
    let ok = failure.is_none() && checks.iter().all(|c| c.ok);
    let verdict = match &failure {
        Some(f) => format!("step {} failed: {}", f.step, f.message),
        None if ok => "pass".into(),
        None => format!(
            "failed checks: {}",
            checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| c.check.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    let recovery = out.recovery.as_ref();
    let record = DrillRecord {
        format_version: FORMAT_VERSION,
        drill_id: opts.drill_id.clone(),
        started_at,
        finished_at: clock.now_rfc3339(),
        tidemark_version: env!("CARGO_PKG_VERSION").into(),
        source: opts.source_label.clone(),
        journal: journal.url(),
        ok,
        verdict,
        rto_ms,
        rto_budget_ms: opts.rto_budget_ms,
        rpo_positions: out.rpo_positions,
        rpo_seconds: out.rpo_seconds,
        rows: recovery.map_or(0, |r| r.validation.rows_found),
        events_replayed: recovery.map_or(0, |r| r.replay.events),
        bytes_read: process_bytes_read().saturating_sub(io_before),
        peak_memory_bytes: peak_memory_bytes(),
        trusted_snapshot_id: out.trusted.as_ref().map(|t| t.snapshot_id),
        trusted_position: out.trusted.as_ref().and_then(|t| t.position),
        h: recovery.map(|r| r.h),
        steps: steps.steps,
        checks,
    };
    let history_key = match &opts.history {
        Some(h) => Some(history::store_record(h.as_ref(), &record).await?),
        None => None,
    };
    Ok(TableDrillReport {
        record,
        scratch_table,
        scratch_location,
        leftovers_removed: leftovers,
        route: out.route,
        journal_head: out.head,
        journal_oldest_held: out.oldest_held,
        failure,
        history_key,
    })
}

#[derive(Default)]
struct Partial {
    trusted: Option<audit::TrustedPoint>,
    head: Option<u64>,
    oldest_held: Option<u64>,
    rpo_positions: Option<u64>,
    rpo_seconds: Option<f64>,
    route: Option<RouteSeen>,
    recovery: Option<RecoveryReport>,
}

type StepResult = Result<(), (String, anyhow::Error)>;

fn at(step: &str) -> impl FnOnce(anyhow::Error) -> (String, anyhow::Error) + '_ {
    move |e| (step.to_string(), e)
}

#[allow(clippy::too_many_arguments)]
async fn drill_steps(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &TableDrillOptions,
    scratch_table: &str,
    records: &Arc<dyn ObjectStore>,
    clock: &dyn Clock,
    ids: &dyn Ids,
    steps: &mut Steps,
    checks: &mut Vec<RecordCheck>,
    out: &mut Partial,
    progress: &mut dyn FnMut(&RecordStep),
) -> StepResult {
    // 2. The audit (the recovery's step 0 resumes from its records).
    let t = Instant::now();
    let aopts = AuditOptions {
        records: Some(records.clone()),
        ..Default::default()
    };
    let report = audit::audit(journal, &opts.source, &aopts, &mut |_| {})
        .await
        .map_err(|e| at("audit")(e.into()))?;
    let detail = audit_detail(&report);
    check(checks, CHECK_AUDIT, report.ok, detail.clone());
    if report.trusted.is_none() {
        // A real recovery is refused here (no snapshot to start from).
        check(checks, CHECK_TRUSTED, false, detail.clone());
    }
    out.trusted = report.trusted.clone();
    steps.push("audit", t, true, detail, progress);
    tidemark_journal::failpoint::hit("drill:after-audit");

    // 3. The journal from the trusted snapshot's position to its head.
    let t = Instant::now();
    let after = out.trusted.as_ref().and_then(|t| t.position).unwrap_or(0);
    let held = journal_held(journal, after)
        .await
        .map_err(|e| at("journal")(e.into()))?;
    out.head = Some(held.head);
    out.oldest_held = held.oldest_held;
    out.rpo_positions = Some(held.head.saturating_sub(after));
    out.rpo_seconds = trusted_age_seconds(&report, clock);
    check(checks, CHECK_JOURNAL, held.gone.is_none(), held.detail(after));
    steps.push("journal", t, held.gone.is_none(), held.detail(after), progress);

    // 4. The route, read only.
    if let Some(url) = &opts.route {
        let t = Instant::now();
        let (seen, ok, detail) = route_check(journal, url, &report, records).await.map_err(at("route"))?;
        check(checks, CHECK_ROUTE, ok, detail.clone());
        out.route = seen;
        steps.push("route", t, ok, detail, progress);
    }
    if out.trusted.is_none() || held.gone.is_some() {
        // A real recovery would be refused here: nothing to rehearse further.
        return Ok(());
    }

    // 5. The recovery into the scratch table, as `tidemark recover` would run it.
    let ropts = RecoverOptions {
        recovery_id: opts.drill_id.clone(),
        source: opts.source.clone(),
        choice: SnapshotChoice::Trusted,
        to: Some(held.head),
        into: scratch_table.to_string(),
        partition_rows: None,
        validation_split: opts.validation_split,
        trust: TrustOptions {
            records: AuditRecords::At(records.clone()),
            ..Default::default()
        },
    };
    let mut last = Instant::now();
    let mut on_step = |s: &StepTiming| {
        // The recovery's own steps, placed on the drill's timeline.
        let begin = last;
        last = Instant::now();
        let r = RecordStep {
            step: s.step.clone(),
            start_ms: begin.duration_since(steps.started).as_millis() as u64,
            ms: s.ms,
            ok: true,
            detail: s.detail.clone(),
        };
        progress(&r);
        steps.steps.push(r);
    };
    #[cfg(feature = "ballista-engine")]
    let recovered =
        crate::recover::engine::recover(journal, handle, &ropts, &opts.engine, clock, ids, &mut on_step).await;
    #[cfg(not(feature = "ballista-engine"))]
    let recovered = crate::recover::recover(journal, handle, &ropts, clock, ids, &mut on_step).await;
    let (recovery, _table) = recovered.map_err(|e| at("recover")(e.into()))?;
    // The recovery's audit step repeats the drill's (resumed from its records): the drill's
    // own is the one on the timeline.
    if let Some(i) = steps.steps.iter().rposition(|s| s.step == "audit")
        && i + 1 < steps.steps.len()
        && steps.steps[i].detail.contains("audited before")
    {
        steps.steps.remove(i);
    }
    check(
        checks,
        CHECK_VALIDATION,
        recovery.validation.ok,
        format!(
            "{} keys expected, {} rows found, {} missing, {} extra, {} mismatched",
            recovery.validation.keys_expected,
            recovery.validation.rows_found,
            recovery.validation.missing,
            recovery.validation.extra,
            recovery.validation.version_mismatches
                + recovery.validation.delete_flag_mismatches
                + recovery.validation.value_mismatches
        ),
    );
    out.recovery = Some(recovery);
    tidemark_journal::failpoint::hit("drill:after-recover");
    Ok(())
}

fn audit_detail(r: &AuditReport) -> String {
    let trusted = r.trusted.as_ref().map_or("no trusted snapshot".into(), |t| {
        format!(
            "newest trusted snapshot {} at position {}",
            t.snapshot_id,
            t.position.map_or("?".into(), |p| p.to_string())
        )
    });
    match &r.first_divergence {
        None => format!("{} snapshots audited, no divergence; {trusted}", r.audited),
        Some(d) => format!(
            "{} snapshots audited; {} open divergence(s), first: {}; {trusted}",
            r.audited,
            r.open_divergences.len().max(1),
            describe(Some(d))
        ),
    }
}

/// Seconds from the trusted snapshot's commit to now.
fn trusted_age_seconds(r: &AuditReport, clock: &dyn Clock) -> Option<f64> {
    let t = r.trusted.as_ref()?;
    let committed = r.timeline.iter().find(|s| s.snapshot_id == t.snapshot_id)?;
    let committed = chrono::DateTime::parse_from_rfc3339(&committed.committed_at).ok()?;
    let now = chrono::DateTime::parse_from_rfc3339(&clock.now_rfc3339()).ok()?;
    Some((now - committed).num_milliseconds() as f64 / 1000.0)
}

/// Reads the route (never writes it) and audits the table it points at, when that is not the
/// drill's source (whose audit is `source`).
async fn route_check(
    journal: &Journal,
    url: &str,
    source: &AuditReport,
    records: &Arc<dyn ObjectStore>,
) -> anyhow::Result<(Option<RouteSeen>, bool, String)> {
    let routes = RouteStore::open(url).await?;
    let Some((route, _, _)) = routes.read().await? else {
        return Ok((None, false, format!("no route at {url}")));
    };
    let seen = RouteSeen {
        table_name: route.table_name.clone(),
        table_uuid: route.table_uuid.clone(),
        generation: route.generation,
        applied_position: route.applied_position,
    };
    let report = if route.table_uuid == source.table_uuid {
        source.clone()
    } else {
        let catalog = crate::catalog::open_ref(&route.catalog).await?;
        let t = table::load_table(&catalog, &route.table_name).await?;
        let src = SnapshotSource {
            metadata_location: t.metadata_location().unwrap_or_default().to_string(),
            file_io_props: t.file_io().config().props().clone(),
            prefix_map: None,
        };
        let aopts = AuditOptions {
            records: Some(records.clone()),
            ..Default::default()
        };
        audit::audit(journal, &src, &aopts, &mut |_| {}).await?
    };
    let detail = format!(
        "route generation {} → {} (table {}): {}",
        route.generation,
        route.table_name,
        route.table_uuid,
        match &report.first_divergence {
            None => "its audit is clean".to_string(),
            Some(d) => format!("its history holds a divergence: {}", describe(Some(d))),
        }
    );
    Ok((Some(seen), report.ok, detail))
}

/// Bytes this process read (local files and network), from `/proc/self/io` (`rchar`); 0 where
/// it cannot be read.
fn process_bytes_read() -> u64 {
    proc_field("/proc/self/io", "rchar:").unwrap_or(0)
}

/// The process's peak resident memory (`VmHWM`), in bytes; 0 where it cannot be read.
fn peak_memory_bytes() -> u64 {
    proc_field("/proc/self/status", "VmHWM:").map_or(0, |kb| kb * 1024)
}

fn proc_field(file: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}
