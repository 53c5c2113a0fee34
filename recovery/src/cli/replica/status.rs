//! `replica status`: the follower's state for people and alerts (text, JSON, a Prometheus
//! textfile), with `--audit` each named table's DR copy audited against its journal.

use std::path::PathBuf;

use anyhow::Context;
use tidemark_journal::clock::{Clock, SystemClock};
use tidemark_recovery::catalog::config::sqlite_file;
use tidemark_recovery::dr::follow_state::StateStore;
use tidemark_recovery::dr::follow_status::{self, StatusReport};
use tidemark_recovery::dr::{follower, lease};
use tidemark_recovery::exit::{BAD_INPUT, exit_error};

use crate::cli::common::Common;
use crate::cli::output::print_json;

pub(super) async fn run_status(
    state: Option<String>,
    catalog: Option<String>,
    max_age: Option<std::time::Duration>,
    prometheus: Option<PathBuf>,
    audit: Vec<String>,
    common: Common,
) -> anyhow::Result<()> {
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
