//! `tidemark replica status`: the follower's state object and lease read for people and alerts
//! (text, `--json`, and a Prometheus textfile for node_exporter's textfile collector).
//!
//! The follower is `running` (its lease is held and live), `idle` (a `--once` follower that
//! released its lease, last scan within the maximum age), `stale` (a held lease that expired, or a
//! last scan older than the maximum age: the follower died or hangs), `stopped` (released and
//! older than the maximum age), `fenced` (a failover promoted the catalog), or `never_ran`.
//! The maximum age is `--max-age`, else three intervals of the follower, else 15 minutes.
//!
//! Exit codes ([`StatusReport::exit_code`]): 0 the follower is running or idle and every table is
//! OK; 4 a table is behind, missing files, held, in conflict or failed; 8 a table's credentials
//! were refused (the replica's store or the DR catalog); 10 every table was OK at
//! the last scan but the follower is stale, stopped or fenced; 7 no state was ever written; with
//! `--audit`, 12 when a table's DR copy holds a divergence ([`attach_audits`]).
//! `replica follow --once` exits with the tables' part of it ([`tables_code`]).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::follow_state::{FollowerState, TableStatus};
use super::lease::{LeaseRecord, LeaseState};

/// Version of the JSON report.
pub const FORMAT_VERSION: u32 = 1;

/// The follower is not running (stale, stopped or fenced), its tables were OK at the last scan.
pub const EXIT_NOT_RUNNING: u8 = 10;

/// The default maximum age of the last scan without an interval.
pub const DEFAULT_MAX_AGE_MS: i64 = 15 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FollowerHealth {
    Running,
    Idle,
    Stale,
    Stopped,
    Fenced,
    NeverRan,
}

/// One waiting file with its age.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WaitingAge {
    pub path: String,
    pub what: String,
    pub missing_since: String,
    pub age_ms: i64,
}

/// One table of a [`StatusReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TableHealth {
    pub table: String,
    pub status: TableStatus,
    /// `OK`, `N versions behind`, `missing files`, `held`, `conflict`, `failed`.
    pub summary: String,
    pub reason: String,
    /// RPO in commits.
    pub versions_behind: Option<usize>,
    /// RPO in time (`last-updated-ms` of the newest seen minus the one held).
    pub rpo_ms: Option<i64>,
    /// Journal positions between what the DR catalog holds and the newest version seen.
    pub positions_behind: Option<u64>,
    pub missing: Vec<WaitingAge>,
    pub missing_count: usize,
    pub verified_metadata: Option<String>,
    pub latest_metadata: Option<String>,
    /// The DR copy held against the table's journal (`--audit TABLE=JOURNAL`); `None`: not asked.
    pub audit: Option<super::replica_audit::ReplicaAudit>,
}

/// The result of [`status`] (`tidemark replica status --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StatusReport {
    pub format_version: u32,
    pub follower: FollowerHealth,
    pub holder: Option<String>,
    pub catalog: Option<String>,
    pub mode: Option<super::follow_state::FollowMode>,
    pub last_scan_at: Option<String>,
    pub last_scan_age_ms: Option<i64>,
    pub max_age_ms: i64,
    pub lease_expires_at: Option<String>,
    pub tables: Vec<TableHealth>,
    /// The code `replica status` exits with (see the module documentation).
    pub exit_code: u8,
}

fn parse(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|t| t.with_timezone(&Utc))
}

/// The status of a follower from its state and lease, as of `now`.
pub fn status(
    state: Option<&FollowerState>,
    lease: Option<&LeaseRecord>,
    max_age_ms: Option<i64>,
    now: DateTime<Utc>,
) -> StatusReport {
    let max_age_ms = max_age_ms
        .or_else(|| state.and_then(|s| s.interval_ms).map(|i| 3 * i as i64))
        .unwrap_or(DEFAULT_MAX_AGE_MS);
    let Some(state) = state else {
        return StatusReport {
            format_version: FORMAT_VERSION,
            follower: FollowerHealth::NeverRan,
            holder: lease.map(|l| l.holder.clone()),
            catalog: lease.map(|l| l.catalog.clone()),
            mode: None,
            last_scan_at: None,
            last_scan_age_ms: None,
            max_age_ms,
            lease_expires_at: lease.map(|l| l.expires_at.clone()),
            tables: Vec::new(),
            exit_code: crate::exit::NOT_FOUND,
        };
    };
    let age = parse(&state.last_scan_at).map(|t| (now - t).num_milliseconds());
    let fresh = age.is_some_and(|a| a <= max_age_ms);
    let follower = match lease {
        Some(l) if l.state == LeaseState::Fenced => FollowerHealth::Fenced,
        Some(l) if l.is_live(now) && fresh => FollowerHealth::Running,
        Some(l) if l.state == LeaseState::Held => FollowerHealth::Stale,
        _ if fresh => FollowerHealth::Idle,
        _ => FollowerHealth::Stopped,
    };
    let tables: Vec<TableHealth> = state
        .tables
        .iter()
        .map(|t| TableHealth {
            table: t.table.clone(),
            status: t.status,
            summary: match t.status {
                TableStatus::Ok => "OK".into(),
                TableStatus::Behind => format!("{} versions behind", t.versions_behind.unwrap_or(0)),
                TableStatus::MissingFiles => "missing files".into(),
                TableStatus::Held => "held".into(),
                TableStatus::Conflict => "conflict".into(),
                TableStatus::Failed => "failed".into(),
                TableStatus::Refused => "credentials refused".into(),
            },
            reason: t.reason.clone(),
            versions_behind: t.versions_behind,
            rpo_ms: t.behind_ms,
            positions_behind: t
                .latest_position
                .zip(t.verified_position)
                .map(|(l, v)| l.saturating_sub(v)),
            missing: t
                .missing
                .iter()
                .map(|m| WaitingAge {
                    path: m.path.clone(),
                    what: m.what.clone(),
                    missing_since: m.missing_since.clone(),
                    age_ms: parse(&m.missing_since).map_or(0, |s| (now - s).num_milliseconds()),
                })
                .collect(),
            missing_count: t.missing_count,
            verified_metadata: t.verified_metadata.clone(),
            latest_metadata: t.latest_metadata.clone(),
            audit: None,
        })
        .collect();
    let exit_code = if tables_code(state) != crate::exit::OK {
        tables_code(state)
    } else if matches!(follower, FollowerHealth::Running | FollowerHealth::Idle) {
        crate::exit::OK
    } else {
        EXIT_NOT_RUNNING
    };
    StatusReport {
        format_version: FORMAT_VERSION,
        follower,
        holder: Some(state.holder.clone()),
        catalog: Some(state.catalog.clone()),
        mode: Some(state.mode),
        last_scan_at: Some(state.last_scan_at.clone()),
        last_scan_age_ms: age,
        max_age_ms,
        lease_expires_at: lease.map(|l| l.expires_at.clone()),
        tables,
        exit_code,
    }
}

/// Attaches the audits of the tables' DR copies (`--audit`): a copy holding a divergence makes
/// the status exit 12 ([`crate::exit::DIVERGENCE`], before any other code: failing over to it
/// would serve the bad write); a copy that could not be audited, 4.
pub fn attach_audits(report: &mut StatusReport, audits: Vec<(String, super::replica_audit::ReplicaAudit)>) {
    use super::replica_audit::ReplicaAudit;
    for (table, audit) in audits {
        if let Some(t) = report.tables.iter_mut().find(|t| t.table == table) {
            t.audit = Some(audit);
        }
    }
    let verdicts: Vec<&str> = report
        .tables
        .iter()
        .filter_map(|t| t.audit.as_ref().map(|a| a.verdict.as_str()))
        .collect();
    if verdicts.contains(&ReplicaAudit::DIVERGENCE) {
        report.exit_code = crate::exit::DIVERGENCE;
    } else if verdicts.contains(&ReplicaAudit::NOT_AUDITED) && report.exit_code == crate::exit::OK {
        report.exit_code = crate::exit::VERIFY_FAILED;
    }
}

/// The code for the tables of one cycle's state, as `replica status` judges them: 4
/// ([`crate::exit::VERIFY_FAILED`]) when a table is behind, missing files, held, in conflict or
/// failed, 8 ([`crate::exit::ACCESS_DENIED`]) before that when a table's credentials were refused,
/// else 0. `replica follow --once` exits with it, so a cron job alerts as `replica status`
/// would.
pub fn tables_code(state: &FollowerState) -> u8 {
    if state.tables.iter().any(|t| t.status == TableStatus::Refused) {
        crate::exit::ACCESS_DENIED
    } else if state.tables.iter().any(|t| t.status != TableStatus::Ok) {
        crate::exit::VERIFY_FAILED
    } else {
        crate::exit::OK
    }
}

/// The tables of `state` that are not OK, as `table status` (for a one-line message).
pub fn tables_not_ok(state: &FollowerState) -> Vec<String> {
    state
        .tables
        .iter()
        .filter(|t| t.status != TableStatus::Ok)
        .map(|t| {
            let status = serde_json::to_value(t.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("{} {status}", t.table)
        })
        .collect()
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The report as Prometheus text exposition format: one gauge family per figure, per table.
pub fn prometheus(report: &StatusReport) -> String {
    let mut out = String::new();
    let catalog = label(report.catalog.as_deref().unwrap_or(""));
    let mut gauge = |name: &str, help: &str, rows: Vec<(String, f64)>| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        for (labels, v) in rows {
            out.push_str(&format!("{name}{{{labels}}} {v}\n"));
        }
    };
    let up = matches!(report.follower, FollowerHealth::Running | FollowerHealth::Idle);
    gauge(
        "tidemark_replica_follower_up",
        "1 when the follower is running (or idle within its maximum age).",
        vec![(format!("catalog=\"{catalog}\""), f64::from(u8::from(up)))],
    );
    gauge(
        "tidemark_replica_last_scan_age_seconds",
        "Seconds since the follower's last scan.",
        vec![(
            format!("catalog=\"{catalog}\""),
            report.last_scan_age_ms.map_or(f64::NAN, |a| a as f64 / 1000.0),
        )],
    );
    let per_table = |f: &dyn Fn(&TableHealth) -> f64| -> Vec<(String, f64)> {
        report
            .tables
            .iter()
            .map(|t| (format!("catalog=\"{catalog}\",table=\"{}\"", label(&t.table)), f(t)))
            .collect()
    };
    let opt = |v: Option<f64>| v.unwrap_or(f64::NAN);
    let ok = per_table(&|t| f64::from(u8::from(t.status == TableStatus::Ok)));
    let behind = per_table(&|t| opt(t.versions_behind.map(|v| v as f64)));
    let rpo = per_table(&|t| opt(t.rpo_ms.map(|v| v as f64 / 1000.0)));
    let positions = per_table(&|t| opt(t.positions_behind.map(|v| v as f64)));
    let missing = per_table(&|t| t.missing_count as f64);
    let oldest = per_table(&|t| {
        t.missing
            .iter()
            .map(|m| m.age_ms)
            .max()
            .map_or(0.0, |a| a as f64 / 1000.0)
    });
    let divergence = report
        .tables
        .iter()
        .filter_map(|t| {
            let a = t.audit.as_ref()?;
            let v = match a.verdict.as_str() {
                super::replica_audit::ReplicaAudit::DIVERGENCE => 1.0,
                super::replica_audit::ReplicaAudit::TRUSTED => 0.0,
                _ => f64::NAN,
            };
            Some((format!("catalog=\"{catalog}\",table=\"{}\"", label(&t.table)), v))
        })
        .collect::<Vec<_>>();
    gauge("tidemark_replica_table_ok", "1 when the table is OK.", ok);
    if !divergence.is_empty() {
        gauge(
            "tidemark_replica_table_divergence",
            "1 when the DR copy's history holds a write its journal does not explain (replica status --audit), 0 when trusted, NaN when it could not be audited.",
            divergence,
        );
    }
    gauge(
        "tidemark_replica_table_versions_behind",
        "Commits the DR catalog is behind the newest version seen (RPO in commits).",
        behind,
    );
    gauge("tidemark_replica_table_rpo_seconds", "RPO in time.", rpo);
    gauge(
        "tidemark_replica_table_positions_behind",
        "Journal positions the DR catalog is behind the newest version seen.",
        positions,
    );
    gauge(
        "tidemark_replica_table_missing_files",
        "Files of the newest version seen that the replica lacks.",
        missing,
    );
    gauge(
        "tidemark_replica_table_oldest_missing_age_seconds",
        "How long the oldest missing file has been missing.",
        oldest,
    );
    out
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::dr::follow_state::{FollowMode, TableState, WaitingFile};
    use crate::dr::lease::FORMAT_VERSION as LEASE_VERSION;

    fn state(status: TableStatus) -> FollowerState {
        FollowerState {
            format_version: 1,
            catalog: "sqlite dr.db".into(),
            warehouse: "file:///r".into(),
            namespace: None,
            mode: FollowMode::Strict,
            prefix_map: None,
            holder: "f1".into(),
            cycle: 3,
            interval_ms: Some(30_000),
            last_scan_at: "2030-01-01T00:00:00Z".into(),
            scan_ms: 5,
            tables: vec![TableState {
                table: "shop.orders".into(),
                status,
                reason: String::new(),
                verified_metadata: Some("shop/orders/metadata/00002-a.metadata.json".into()),
                verified_snapshot_id: Some(1),
                verified_ms: Some(1_000),
                verified_position: Some(20),
                registered_metadata: None,
                latest_metadata: Some("shop/orders/metadata/00004-b.metadata.json".into()),
                latest_ms: Some(3_000),
                latest_position: Some(40),
                versions_behind: Some(2),
                behind_ms: Some(2_000),
                missing: vec![WaitingFile {
                    path: "file:///r/shop/orders/data/x.parquet".into(),
                    what: "data file".into(),
                    missing_since: "2029-12-31T23:59:00Z".into(),
                }],
                missing_count: 1,
                strays: Vec::new(),
                head_choice: String::new(),
                last_advanced_at: None,
                last_scan_at: "2030-01-01T00:00:00Z".into(),
            }],
        }
    }

    fn lease(state: LeaseState, expires: &str) -> LeaseRecord {
        LeaseRecord {
            format_version: LEASE_VERSION,
            holder: "f1".into(),
            catalog: "sqlite dr.db".into(),
            state,
            acquired_at: "2030-01-01T00:00:00Z".into(),
            renewed_at: "2030-01-01T00:00:00Z".into(),
            expires_at: expires.into(),
            fenced_holder: None,
            reason: None,
        }
    }

    #[test]
    fn exit_codes_tell_a_table_problem_from_a_dead_follower() {
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 30).unwrap();
        let live = lease(LeaseState::Held, "2030-01-01T00:01:30Z");
        let r = status(Some(&state(TableStatus::Ok)), Some(&live), None, now);
        assert_eq!((r.follower, r.exit_code), (FollowerHealth::Running, 0));
        let r = status(Some(&state(TableStatus::MissingFiles)), Some(&live), None, now);
        assert_eq!(r.exit_code, 4);
        assert_eq!(r.tables[0].missing[0].age_ms, 90_000);
        assert_eq!(r.tables[0].positions_behind, Some(20));
        // Three intervals (90 s) without a scan and an expired lease: stale.
        let later = Utc.with_ymd_and_hms(2030, 1, 1, 0, 2, 0).unwrap();
        let r = status(Some(&state(TableStatus::Ok)), Some(&live), None, later);
        assert_eq!((r.follower, r.exit_code), (FollowerHealth::Stale, EXIT_NOT_RUNNING));
        let released = lease(LeaseState::Released, "2030-01-01T00:00:00Z");
        let r = status(Some(&state(TableStatus::Ok)), Some(&released), None, now);
        assert_eq!((r.follower, r.exit_code), (FollowerHealth::Idle, 0));
        let r = status(Some(&state(TableStatus::Ok)), Some(&released), None, later);
        assert_eq!((r.follower, r.exit_code), (FollowerHealth::Stopped, EXIT_NOT_RUNNING));
        let fenced = lease(LeaseState::Fenced, "2030-01-01T00:00:00Z");
        let r = status(Some(&state(TableStatus::Ok)), Some(&fenced), None, now);
        assert_eq!(r.follower, FollowerHealth::Fenced);
        let r = status(None, None, None, now);
        assert_eq!((r.follower, r.exit_code), (FollowerHealth::NeverRan, 7));
    }

    #[test]
    fn the_prometheus_file_has_a_gauge_per_table() {
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 30).unwrap();
        let live = lease(LeaseState::Held, "2030-01-01T00:01:30Z");
        let text = prometheus(&status(Some(&state(TableStatus::Behind)), Some(&live), None, now));
        assert!(
            text.contains("# TYPE tidemark_replica_table_versions_behind gauge\n"),
            "{text}"
        );
        assert!(
            text.contains("tidemark_replica_table_versions_behind{catalog=\"sqlite dr.db\",table=\"shop.orders\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("tidemark_replica_table_ok{catalog=\"sqlite dr.db\",table=\"shop.orders\"} 0\n"));
        assert!(text.contains("tidemark_replica_follower_up{catalog=\"sqlite dr.db\"} 1\n"));
        assert!(
            text.contains("tidemark_replica_table_rpo_seconds{catalog=\"sqlite dr.db\",table=\"shop.orders\"} 2\n")
        );
    }
}
