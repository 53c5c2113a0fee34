//! `replica follow`: the follower keeps the DR catalog in step with the replica warehouse, under
//! a lease, once (for cron) or until stopped; each cycle's state is printed.

use tidemark_journal::clock::SystemClock;
use tidemark_recovery::dr::follow_state::{FollowMode, FollowerState};
use tidemark_recovery::dr::follow_status;
use tidemark_recovery::dr::follower::{self, RunLimits};
use tidemark_recovery::exit::exit_error;

use super::target::FollowTarget;
use crate::cli::common::Common;
use crate::cli::output::print_json;

pub(super) async fn run_follow(
    target: FollowTarget,
    mode: FollowMode,
    interval: std::time::Duration,
    once: bool,
    max_cycles: Option<u64>,
    common: Common,
) -> anyhow::Result<()> {
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
