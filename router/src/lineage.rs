//! A route's lineage: the current version must be the newest decision of its own history.
//!
//! Generations order decisions, but a generation number alone can be repeated: put an older
//! version of `route.json` back as the current one (a restore from the store's version history,
//! a sync tool, a mistake) and the next flip writes a second, different "generation N + 1", which
//! a writer fenced on the number alone would take for its own. So:
//! * readers, writers acquiring a fence, and `flip` refuse a current route when an older version
//!   in its history has a higher generation, or when the first version that claimed its
//!   generation is a different route ([`RouteError::NotNewest`], exit 4): the route was rolled
//!   back, or a generation was written twice, and the decision it shows is not the newest one.
//!   Nothing routes through it until an operator puts the newest decision back (a copy of the
//!   first version of the highest generation, which this check accepts) and decides again;
//! * because `flip` refuses such a route, it never writes a generation that already exists;
//! * a writer's [`crate::Fence`] holds the route version's identity (ETag and version id), not
//!   only its generation.
//!
//! Versions newer than the current one that was read (flips that landed since) are not judged
//! here, and versions that are not valid routes are skipped (they claim no generation). Stored
//! versions never change, so each is read once per [`RouteStore`] and kept in its cache.

use tidemark_schemas::Route;

use crate::error::{Result, RouteError};
use crate::paths;
use crate::route::RouteStore;

impl RouteStore {
    /// `Ok` when `current` (read as version `version_id`) is above every older version of the
    /// route (see the module documentation).
    pub async fn check_lineage(&self, current: &Route, version_id: &str) -> Result<()> {
        let versions = self.store().list_versions(paths::ROUTE_KEY).await?;
        let older = match versions.iter().position(|v| v.version_id == version_id) {
            Some(i) => &versions[i + 1..],
            None => &versions[..],
        };
        // The highest generation must be the current one, and of the versions that claim it,
        // the first (oldest) is the decision: a later copy of it is fine, another route is not.
        let mut first_twin: Option<(Route, String)> = None;
        for v in older {
            if !paths::is_route_key(&v.key) || v.is_delete_marker || v.version_id == version_id {
                continue;
            }
            let Some(other) = self.cached_version(&v.version_id).await? else {
                continue;
            };
            if other.generation > current.generation {
                return Err(self.not_newest(current, version_id, &other, &v.version_id));
            }
            if other.generation == current.generation {
                first_twin = Some((other, v.version_id.clone())); // newest first: the last one wins
            }
        }
        match first_twin {
            Some((first, first_version)) if &first != current => {
                Err(self.not_newest(current, version_id, &first, &first_version))
            }
            _ => Ok(()),
        }
    }

    fn not_newest(&self, current: &Route, version_id: &str, other: &Route, other_version: &str) -> RouteError {
        RouteError::NotNewest {
            route: self.url(),
            current_generation: current.generation,
            current_version: version_id.to_string(),
            other_generation: other.generation,
            other_version: other_version.to_string(),
        }
    }

    /// The route stored as `version_id`, or `None` when that version is not a valid route.
    async fn cached_version(&self, version_id: &str) -> Result<Option<Route>> {
        if let Some(r) = self.version_cache().lock().expect("route cache").get(version_id) {
            return Ok(r.clone());
        }
        let got = match self.store().get(paths::ROUTE_KEY, Some(version_id)).await {
            Ok(got) => got,
            Err(e) if e.is_not_found() => return Ok(None), // removed since the listing
            Err(e) => return Err(e.into()),
        };
        let route = crate::route::decode(&self.store().url(), &got.body, Some(version_id)).ok();
        self.version_cache()
            .lock()
            .expect("route cache")
            .insert(version_id.to_string(), route.clone());
        Ok(route)
    }
}
