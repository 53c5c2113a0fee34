//! Running the warm follower: take the lease, run cycles ([`super::follow::cycle`]), write the
//! state after each, renew the lease between them, and give it up at the end of `--once` (or of
//! `max_cycles`). A lost or fenced lease stops the follower at once: it writes nothing more.

use std::sync::Arc;

use chrono::Duration;
use tidemark_journal::clock::Clock;
use tidemark_journal::store::{self, ObjectStore};

use super::follow::{self, FollowError, FollowOptions};
use super::follow_state::{FollowerState, StateError, StateStore};
use super::lease::{Lease, LeaseError};
use crate::catalog::CatalogHandle;

/// How long the follower runs.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Cycles to run (`Some(1)`: `--once`); `None`: until stopped.
    pub max_cycles: Option<u64>,
    /// Time between cycles.
    pub interval: std::time::Duration,
    /// How long the lease is good for after each renewal.
    pub lease_ttl: Duration,
}

impl RunLimits {
    /// `--once`: one cycle under a lease of ten minutes, released at the end.
    pub fn once() -> Self {
        RunLimits {
            max_cycles: Some(1),
            interval: std::time::Duration::ZERO,
            lease_ttl: Duration::minutes(10),
        }
    }

    /// `--interval`: the lease outlives three missed cycles, and at least a minute.
    pub fn every(interval: std::time::Duration, max_cycles: Option<u64>) -> Self {
        let ttl = (interval * 3).max(std::time::Duration::from_secs(60));
        RunLimits {
            max_cycles,
            interval,
            lease_ttl: Duration::from_std(ttl).unwrap_or(Duration::hours(1)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Follow(#[from] FollowError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error("cannot open the follower state location {url}: {source}")]
    Open {
        url: String,
        #[source]
        source: tidemark_journal::store::StoreError,
    },
}

/// The default state location of a follower into the SQLite catalog file `catalog`: the folder
/// `<file>.follower` beside it (outside the replica warehouse, which a replication that mirrors
/// deletions would empty). Other catalogs have no place beside them: `--state` is required.
pub fn default_state_url(catalog: &str) -> String {
    let file = catalog
        .strip_prefix("sqlite://")
        .or(catalog.strip_prefix("sqlite:"))
        .unwrap_or(catalog);
    format!("{}.follower", file.trim_end_matches('/'))
}

/// Why a state location is refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "the follower state location {state} is inside {inside} ({what}): a replication that mirrors deletions, \
     or the reverse replication after a failover, would remove or overwrite the lease and the state; put \
     --state elsewhere (beside the DR catalog), or give --state-in-replica to keep it there"
)]
pub struct StateInReplica {
    pub state: String,
    pub inside: String,
    pub what: &'static str,
}

/// Refuses a state location under the replica warehouse or under the `--prefix-map` target.
pub fn check_state_location(state: &str, replica: &str, map_to: Option<&str>) -> Result<(), StateInReplica> {
    let norm = |u: &str| super::rebuild::warehouse_base(u).unwrap_or_else(|_| u.trim_end_matches('/').to_string());
    let st = norm(state);
    for (root, what) in [
        (Some(replica), "the replica warehouse"),
        (map_to, "the --prefix-map target"),
    ] {
        let Some(root) = root.map(norm) else { continue };
        if st == root || st.starts_with(&format!("{root}/")) {
            return Err(StateInReplica {
                state: state.to_string(),
                inside: root,
                what,
            });
        }
    }
    Ok(())
}

pub async fn open_state(url: &str) -> Result<Arc<dyn ObjectStore>, RunError> {
    store::open_or_create(url).await.map_err(|source| RunError::Open {
        url: url.to_string(),
        source,
    })
}

/// Runs the follower; `on_cycle` sees each state as written. Returns the last state.
pub async fn run(
    opts: &FollowOptions,
    handle: &CatalogHandle,
    state_store: Arc<dyn ObjectStore>,
    limits: RunLimits,
    clock: &dyn Clock,
    on_cycle: &mut (dyn FnMut(&FollowerState) + Send),
) -> Result<FollowerState, RunError> {
    // Refused before the lease is even taken: nothing changes on a catalog it cannot write.
    follow::require_capabilities(handle).map_err(FollowError::from)?;
    let catalog = handle.reference().to_string();
    let mut lease = Lease::acquire(state_store.clone(), &opts.holder, &catalog, limits.lease_ttl, clock).await?;
    let mut states = StateStore::new(state_store);
    let mut previous = states.load().await?;
    let mut n = 0;
    loop {
        n += 1;
        let state = follow::cycle(opts, handle, &lease, previous.as_ref(), n, clock).await?;
        states.save(&state, &lease).await?;
        tidemark_journal::failpoint::hit("follow:after-state");
        on_cycle(&state);
        previous = Some(state);
        if limits.max_cycles.is_some_and(|m| n >= m) {
            break;
        }
        tokio::time::sleep(limits.interval).await;
        lease.renew(limits.lease_ttl, clock).await?;
    }
    lease.release(clock).await?;
    Ok(previous.expect("at least one cycle ran"))
}
