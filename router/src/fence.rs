//! Fencing for writers: a writer records the route generation it started under and checks,
//! before each commit, that no controller has flipped the route since.
//!
//! # Contract
//!
//! A check is a read of the current route: it proves that no flip had landed when the check ran.
//! A flip that lands between the check and the writer's commit is not seen; that window is as
//! long as one commit. Writers therefore check immediately before every commit, and a controller
//! that flips away from a table treats the old table as possibly receiving one more commit (a
//! recovery flips to a new table and never reads the old one again). A check compares the
//! identity of the stored version, so a writer that passed a check never passes one after any
//! other version of the route became current.

use tidemark_schemas::Route;

use crate::error::{Result, RouteError};
use crate::route::RouteStore;

/// The route a writer started under: its generation and the identity of the stored version
/// (ETag and version id). A route with the same generation but another identity is not the one
/// the writer started under (an older version put back and flipped again repeats a number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub generation: u64,
    /// The ETag of that route, kept for the check and for a later flip from it.
    pub etag: String,
    pub version_id: String,
}

impl Fence {
    pub fn new(route: &Route, etag: impl Into<String>, version_id: impl Into<String>) -> Self {
        Fence {
            generation: route.generation,
            etag: etag.into(),
            version_id: version_id.into(),
        }
    }

    /// A fence on the current route, with the route itself (what the writer should write to).
    /// A route that is not the newest decision of its history is refused ([`crate::lineage`]).
    pub async fn acquire(routes: &RouteStore) -> Result<(Fence, Route)> {
        match routes.read().await? {
            Some((route, etag, version_id)) => {
                routes.check_lineage(&route, &version_id).await?;
                Ok((Fence::new(&route, etag, version_id), route))
            }
            None => Err(RouteError::NotFound { route: routes.url() }),
        }
    }

    /// `Ok` while the current route is still the very version this writer started under (same
    /// ETag and version id); [`RouteError::Fenced`] once it is any other, whatever its
    /// generation: a flip, a route deleted and created again, an older version put back.
    pub async fn check(&self, routes: &RouteStore) -> Result<()> {
        let Some((route, etag, version_id)) = routes.read().await? else {
            return Err(RouteError::NotFound { route: routes.url() });
        };
        if route.generation == self.generation && etag == self.etag && version_id == self.version_id {
            Ok(())
        } else {
            Err(RouteError::Fenced {
                started_generation: self.generation,
                started_version: self.version_id.clone(),
                current_generation: route.generation,
                current_version: version_id,
            })
        }
    }
}
