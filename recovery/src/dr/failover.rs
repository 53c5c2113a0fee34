//! `tidemark replica failover`: promote the DR catalog.
//!
//! In order, each step only after the one before succeeded:
//! 1. **fence the follower** through its lease ([`lease::fence`]): from then on the follower fails
//!    its next lease check and writes nothing more, and no follower starts on this catalog again;
//! 2. **one final strict scan** ([`follow::cycle`] in strict mode, under the failover's own hold
//!    of the lease), so the DR catalog holds the newest version whose every file is present;
//! 3. **check every route** given: it reads, and the DR catalog has its table; nothing is flipped
//!    unless all of them can be;
//! 4. **flip each route** to the DR table (`If-Match` on the ETag read, generation + 1; the route
//!    records the failover id as its `recovery_id`). A writer started under the old generation is
//!    fenced by the route fence (`apply --route`). A route whose history already holds this
//!    failover's flip (a re-run after a stop before step 5) is not flipped again;
//! 5. **record the promotion** (`promotions/<id>.json`, create-only) with what the DR side holds
//!    versus the newest version the replica saw of the primary: commits and journal positions
//!    behind, per table. `recover` from the DR table with the journal closes that gap.
//!
//! A failover whose id is already recorded (of this catalog) does nothing again: the recorded
//! promotion is the result (`already_recorded`), as a finished recovery's id gives its result.
//! Another catalog's promotion under the same id is refused.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidemark_journal::Journal;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::clock::Clock;
use tidemark_journal::store::{ObjectStore, PutMode, StoreError, put_resolved};
use tidemark_router::{FlipRequest, RouteError, RouteStore};

use super::follow::{self, FollowError, FollowOptions, position_of};
use super::follow_state::{FollowMode, FollowerState, StateError, StateStore, TableStatus};
use super::lease::{self, LeaseError};
use crate::catalog::CatalogHandle;
use crate::table::{TableError, parse_ident};

/// Version of the promotion record.
pub const FORMAT_VERSION: u32 = 1;

/// One route flipped to the DR side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RouteFlip {
    pub route: String,
    pub table: String,
    pub from_generation: u64,
    pub to_generation: u64,
    /// What readers read before (the primary's table).
    pub from_metadata: String,
    pub to_metadata: String,
    /// The journal position the DR table holds; the next writer starts after it.
    pub applied_position: u64,
}

/// One table: what the DR side holds versus the newest the replica saw of the primary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PromotedTable {
    pub table: String,
    pub status: TableStatus,
    pub dr_metadata: Option<String>,
    pub dr_snapshot_id: Option<i64>,
    pub dr_position: Option<u64>,
    pub primary_latest_metadata: Option<String>,
    pub primary_latest_position: Option<u64>,
    /// Commits on the primary's chain the DR side lacks (RPO in commits).
    pub commits_behind: Option<usize>,
    /// Journal positions to replay (`recover` from the DR table with the journal): from the DR
    /// table's position to the newest the primary is known to hold — the newest version the
    /// replica saw, or with `--journal` the primary's newest checkpoint of the table, whichever
    /// is later (the primary may have committed after the last replication).
    pub positions_behind: Option<u64>,
    /// The position of the newest checkpoint the primary recorded in the journal for this table
    /// (same table uuid), with `--journal`.
    #[serde(default)]
    pub journal_checkpoint_position: Option<u64>,
    /// The journal's newest position, with `--journal`.
    #[serde(default)]
    pub journal_head_position: Option<u64>,
    /// Whether the DR table must be recovered (`recover` from it with the journal, then flip the
    /// route) before the writer continues: the primary's checkpoints are ahead of it, so
    /// `apply --route` would refuse (exit 3). `None` without `--journal`.
    #[serde(default)]
    pub recover_needed: Option<bool>,
    pub behind_ms: Option<i64>,
    pub missing_count: usize,
}

/// The promotion record (`promotions/<id>.json`; printed by `replica failover --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Promotion {
    pub format_version: u32,
    pub failover_id: String,
    pub at: String,
    pub catalog: String,
    pub reason: String,
    /// The follower the lease was taken from.
    pub fenced_holder: Option<String>,
    pub routes: Vec<RouteFlip>,
    pub tables: Vec<PromotedTable>,
    pub ms: u64,
    /// `true` when this run found the promotion already recorded under its id and did nothing
    /// again (the record itself says `false`).
    #[serde(default)]
    pub already_recorded: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    #[error(transparent)]
    Lease(#[from] LeaseError),
    #[error(transparent)]
    Follow(#[from] FollowError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("route {route}: {source}")]
    Route {
        route: String,
        #[source]
        source: RouteError,
    },
    #[error("route {route} routes {table}, which the DR catalog does not have; nothing was flipped")]
    NoDrTable { route: String, table: String },
    #[error(
        "route {route}: the DR table {table} records no journal position (tidemark.last-position); nothing was flipped"
    )]
    NoPosition { route: String, table: String },
    #[error("route {route}: {source}")]
    Table {
        route: String,
        #[source]
        source: TableError,
    },
    #[error(
        "a promotion with id {id} is already recorded at {url} for catalog {recorded}, not {catalog}; give this \
         promotion an id of its own (--failover-id)"
    )]
    RecordedForAnother {
        id: String,
        url: String,
        recorded: String,
        catalog: String,
    },
    #[error("the promotion record {url} is not a valid promotion: {reason}")]
    BadRecord { url: String, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The journal given with `--journal` could not be read.
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
}

/// Promotes the DR catalog `handle` (see the module documentation). `opts` is what the follower
/// followed (its mode is overridden: the final scan is strict); `routes` are route URLs.
#[allow(clippy::too_many_arguments)]
pub async fn failover(
    opts: &FollowOptions,
    handle: &CatalogHandle,
    state_store: Arc<dyn ObjectStore>,
    routes: &[String],
    failover_id: &str,
    reason: &str,
    journal: Option<&Journal>,
    clock: &dyn Clock,
) -> Result<Promotion, FailoverError> {
    let started = std::time::Instant::now();
    follow::require_capabilities(handle).map_err(FollowError::from)?;
    let catalog = handle.reference().to_string();
    let promotion_key = format!("promotions/{failover_id}.json");
    if let Some(recorded) = recorded(state_store.as_ref(), &promotion_key).await? {
        if recorded.catalog != catalog {
            return Err(FailoverError::RecordedForAnother {
                id: failover_id.into(),
                url: format!("{}/{promotion_key}", state_store.url()),
                recorded: recorded.catalog,
                catalog,
            });
        }
        return Ok(Promotion {
            already_recorded: true,
            ..recorded
        });
    }
    // 1. The follower writes nothing more.
    let (hold, before) = lease::fence(state_store.clone(), failover_id, &catalog, reason, clock).await?;
    // 2. The final strict scan.
    let mut states = StateStore::new(state_store.clone());
    let previous = states.load().await?;
    let strict = FollowOptions {
        mode: FollowMode::Strict,
        holder: failover_id.to_string(),
        ..opts.clone()
    };
    let cycle_no = previous.as_ref().map_or(1, |p| p.cycle + 1);
    let state = follow::cycle(&strict, handle, &hold, previous.as_ref(), cycle_no, clock).await?;
    states.save(&state, &hold).await?;

    // 3. Every route must be flippable before any is flipped.
    let mut plans = Vec::new();
    for url in routes {
        let route_err = |source| FailoverError::Route {
            route: url.clone(),
            source,
        };
        let store = RouteStore::open(url).await.map_err(route_err)?;
        let Some((current, etag, version_id)) = store.read().await.map_err(route_err)? else {
            return Err(route_err(RouteError::NotFound { route: store.url() }));
        };
        store.check_lineage(&current, &version_id).await.map_err(route_err)?;
        let ident = parse_ident(&current.table_name).map_err(|source| FailoverError::Table {
            route: url.clone(),
            source,
        })?;
        let table = match handle.catalog().load_table(&ident).await {
            Ok(t) => t,
            Err(_) => {
                return Err(FailoverError::NoDrTable {
                    route: url.clone(),
                    table: current.table_name.clone(),
                });
            }
        };
        let json = serde_json::to_value(table.metadata()).unwrap_or_default();
        let Some(position) = position_of(&json) else {
            return Err(FailoverError::NoPosition {
                route: url.clone(),
                table: current.table_name.clone(),
            });
        };
        plans.push((url.clone(), store, current, etag, table, position));
    }
    // 4. Flip, unless the route's history holds this failover's own flip (a re-run after a stop
    // between the flip and the record): flipping again could take readers back from a decision
    // made after it.
    let mut flips = Vec::new();
    for (url, store, current, etag, table, position) in plans {
        let table_uuid = table.metadata().uuid().to_string();
        let own = own_flip(&store, &url, failover_id, &table_uuid)
            .await
            .map_err(|source| FailoverError::Route {
                route: url.clone(),
                source,
            })?;
        if let Some(flip) = own {
            flips.push(flip);
            continue;
        }
        let next = FlipRequest {
            table_name: current.table_name.clone(),
            catalog: handle.reference().clone(),
            metadata_location: table.metadata_location().unwrap_or_default().to_string(),
            table_uuid,
            applied_position: position,
            reason: format!("failover {failover_id}: {reason}"),
            // The failover's id marks its flip, as a recovery's id marks the recovery's.
            recovery_id: Some(failover_id.to_string()),
        };
        let (route, _) = store
            .flip(&etag, current.generation, next, clock)
            .await
            .map_err(|source| FailoverError::Route {
                route: url.clone(),
                source,
            })?;
        flips.push(RouteFlip {
            route: url,
            table: route.table_name,
            from_generation: current.generation,
            to_generation: route.generation,
            from_metadata: current.metadata_location,
            to_metadata: route.metadata_location,
            applied_position: position,
        });
    }
    tidemark_journal::failpoint::hit("failover:after-flip");
    // 5. Record.
    let promotion = Promotion {
        format_version: FORMAT_VERSION,
        failover_id: failover_id.to_string(),
        at: clock.now_rfc3339(),
        catalog,
        reason: reason.to_string(),
        // On a re-run the lease is already this failover's: the follower is the one it fenced.
        fenced_holder: before.and_then(|b| b.taken_by(failover_id)),
        routes: flips,
        tables: promoted_tables(&state, handle, journal).await?,
        ms: started.elapsed().as_millis() as u64,
        already_recorded: false,
    };
    let body = Bytes::from(serde_json::to_vec_pretty(&promotion).expect("a promotion serializes"));
    put_resolved(state_store.as_ref(), &promotion_key, body, PutMode::Create).await?;
    Ok(promotion)
}

/// The promotion recorded at `key`, if any.
async fn recorded(store: &dyn ObjectStore, key: &str) -> Result<Option<Promotion>, FailoverError> {
    let got = match store.get(key, None).await {
        Ok(got) => got,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    serde_json::from_slice(&got.body)
        .map(Some)
        .map_err(|e| FailoverError::BadRecord {
            url: format!("{}/{key}", store.url().trim_end_matches('/')),
            reason: e.to_string(),
        })
}

/// The flip failover `failover_id` made of the route at `url` to the DR table `table_uuid`, from
/// the route's history (with the version before it), if there is one.
async fn own_flip(
    store: &RouteStore,
    url: &str,
    failover_id: &str,
    table_uuid: &str,
) -> Result<Option<RouteFlip>, RouteError> {
    let history = store.history().await?;
    let Some(i) = history
        .iter()
        .position(|(r, _)| r.recovery_id.as_deref() == Some(failover_id) && r.table_uuid == table_uuid)
    else {
        return Ok(None);
    };
    let flipped = &history[i].0;
    // Newest first: the version before the flip is the next one.
    let before = history.get(i + 1).map(|(r, _)| r);
    Ok(Some(RouteFlip {
        route: url.to_string(),
        table: flipped.table_name.clone(),
        from_generation: before.map_or(flipped.generation.saturating_sub(1), |b| b.generation),
        to_generation: flipped.generation,
        from_metadata: before.map(|b| b.metadata_location.clone()).unwrap_or_default(),
        to_metadata: flipped.metadata_location.clone(),
        applied_position: flipped.applied_position,
    }))
}

/// What each table of `state` lacks; with the journal, also what the primary recorded in it
/// (its newest checkpoint of the table, found by the table's uuid, which the DR table shares).
async fn promoted_tables(
    state: &FollowerState,
    handle: &CatalogHandle,
    journal: Option<&Journal>,
) -> Result<Vec<PromotedTable>, FailoverError> {
    let head = match journal {
        Some(j) => Some(j.head().await?.map_or(0, |m| m.manifest.last_position)),
        None => None,
    };
    let mut out = Vec::new();
    for t in &state.tables {
        let checkpoint = match journal {
            Some(j) => {
                let uuid = match parse_ident(&t.table) {
                    Ok(ident) => handle
                        .catalog()
                        .load_table(&ident)
                        .await
                        .ok()
                        .map(|table| table.metadata().uuid().to_string()),
                    Err(_) => None,
                };
                match uuid {
                    Some(uuid) => {
                        let filter = CheckpointFilter {
                            table_uuid: Some(uuid),
                            table_name: None,
                        };
                        checkpoint::newest_at_or_before(j.store.as_ref(), &filter, None)
                            .await?
                            .map(|c| c.position)
                    }
                    None => None,
                }
            }
            None => None,
        };
        let known = t.latest_position.max(checkpoint);
        let positions_behind = known.zip(t.verified_position).map(|(l, v)| l.saturating_sub(v));
        out.push(PromotedTable {
            table: t.table.clone(),
            status: t.status,
            dr_metadata: t.registered_metadata.clone(),
            dr_snapshot_id: t.verified_snapshot_id,
            dr_position: t.verified_position,
            primary_latest_metadata: t.latest_metadata.clone(),
            primary_latest_position: t.latest_position,
            commits_behind: t.versions_behind,
            positions_behind,
            journal_checkpoint_position: checkpoint,
            journal_head_position: head,
            recover_needed: journal.map(|_| checkpoint.zip(t.verified_position).is_some_and(|(c, v)| c > v)),
            behind_ms: t.behind_ms,
            missing_count: t.missing_count,
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "failover_tests.rs"]
mod tests;
