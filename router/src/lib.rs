//! The routing record: which table readers query and the next writer writes, its `If-Match` flip,
//! per-query resolution and writer fencing.
//!
//! * [`paths`] — the route key (`route.json` under the route URL), built in one place.
//! * [`route`] — [`RouteStore`]: read, init (create-only), flip (compare-and-swap), history,
//!   resolve.
//! * [`fence`] — [`Fence`]: a writer's check that the route has not moved since it started.
//! * [`lineage`] — the current route must be the newest decision of its own version history.
//! * [`error`] — [`RouteError`].
//!
//! # Contract
//!
//! * **One object, many versions.** A route is one object, `route.json`, on a versioned store.
//!   Every change is a new version of it; the version history is the route's history.
//! * **Generations.** The first route is generation 1 and is written create-only: of concurrent
//!   inits exactly one succeeds. Every later route is generation + 1 of the one it replaces and
//!   records it in `previous` (its generation, table, metadata location and ETag).
//! * **Flips are compare-and-swap.** A flip writes with `If-Match` on the ETag of the route the
//!   controller decided on. Of controllers that read the same route and flip, exactly one
//!   succeeds; every other gets [`RouteError::StaleRoute`] and the stored route is the winner's.
//!   A refused flip writes nothing.
//! * **Readers resolve per query.** [`RouteStore::resolve`] reads the current version on every
//!   call; the store's read-after-write makes a flip visible to the next query.
//! * **Writers are fenced.** A writer holds a [`Fence`] on the route version it started under
//!   (generation, ETag, version id) and checks it before each commit (see [`fence`] for the
//!   window this leaves).
//! * **No rollback.** A current route below (or beside) a generation in its own history is
//!   refused by readers, fences and flips ([`lineage`]); a flip never repeats a generation.

pub mod error;
pub mod fence;
pub mod lineage;
pub mod paths;
pub mod route;

pub use error::{Result, RouteError};
pub use fence::Fence;
pub use route::{FlipRequest, RouteStore};
