//! Fencing for writers: a writer records the route generation it started under and checks,
//! before each commit, that no controller has flipped the route since.
//!
//! # Contract
//!
//! A check is a read of the current route: it proves that no flip had landed when the check ran.
//! A flip that lands between the check and the writer's commit is not seen; that window is as
//! long as one commit. Writers therefore check immediately before every commit, and a controller
//! that flips away from a table treats the old table as possibly receiving one more commit (a
//! recovery flips to a new table and never reads the old one again). Generations only grow, so a
//! writer that passed a check at generation G never passes one after a flip to G + 1.

use tidemark_schemas::Route;

use crate::error::{Result, RouteError};
use crate::route::RouteStore;

/// The route a writer started under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub generation: u64,
    /// The ETag of that route, kept for the record and for a later flip from it.
    pub etag: String,
}

impl Fence {
    pub fn new(route: &Route, etag: impl Into<String>) -> Self {
        Fence {
            generation: route.generation,
            etag: etag.into(),
        }
    }

    /// A fence on the current route, with the route itself (what the writer should write to).
    pub async fn acquire(routes: &RouteStore) -> Result<(Fence, Route)> {
        match routes.read().await? {
            Some((route, etag, _)) => Ok((Fence::new(&route, etag), route)),
            None => Err(RouteError::NotFound { route: routes.url() }),
        }
    }

    /// `Ok` while the route is still at the generation this writer started with;
    /// [`RouteError::Fenced`] once it moved. A route that went back to a lower generation (it
    /// was deleted and created again) fences too: it is no longer the route the writer started
    /// under.
    pub async fn check(&self, routes: &RouteStore) -> Result<()> {
        let Some((route, _, _)) = routes.read().await? else {
            return Err(RouteError::NotFound { route: routes.url() });
        };
        if route.generation == self.generation {
            Ok(())
        } else {
            Err(RouteError::Fenced {
                started_generation: self.generation,
                current_generation: route.generation,
            })
        }
    }
}
