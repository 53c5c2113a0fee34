//! `replica failover`: promote the DR catalog (fence the follower, one final strict scan, flip
//! the routes, record the promotion and what the DR side lacks) and print the promotion.

use tidemark_journal::clock::{Clock, SystemClock};
use tidemark_recovery::dr::failover;
use tidemark_recovery::dr::follow_state::FollowMode;
use tidemark_recovery::dr::follower;

use super::target::FollowTarget;
use crate::cli::common::Common;
use crate::cli::output::print_json;

pub(super) async fn run_failover(
    target: FollowTarget,
    routes: Vec<String>,
    reason: String,
    failover_id: Option<String>,
    journal: Option<String>,
    common: Common,
) -> anyhow::Result<()> {
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
