//! The routing record on a versioned object store: created once (create-only), then replaced
//! only by compare-and-swap on the ETag that was read, one generation at a time.
//!
//! A flip re-reads the route, checks that it is still the one the caller decided on (ETag and
//! generation), builds generation + 1 with `previous` pointing at it, and writes it with
//! `If-Match` on that ETag. The store's conditional write is the only arbiter: of any number of
//! controllers that read the same route and flip, exactly one write lands; every other gets
//! [`RouteError::StaleRoute`] and has changed nothing. The early check only turns an obvious
//! loser away before it writes; it is not what makes the flip safe.

use std::sync::Arc;

use bytes::Bytes;
use tidemark_journal::clock::Clock;
use tidemark_journal::store::{self, ObjectStore, PutMode};
use tidemark_schemas::{CatalogRef, FORMAT_VERSION, Route, RoutePointer};

use crate::error::{Result, RouteError};
use crate::paths;

/// What a flip (or the first route) points at. Generation, `previous` and `written_at` are
/// filled in by the router, never by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlipRequest {
    /// `namespace.table` readers query.
    pub table_name: String,
    /// The catalog of the routed table, as readers open it: no secrets (a URI with a password
    /// is refused).
    pub catalog: CatalogRef,
    pub metadata_location: String,
    pub table_uuid: String,
    /// The journal position the table holds; the next writer starts after it.
    pub applied_position: u64,
    /// Why the route changes, in the operator's words (recorded in the route).
    pub reason: String,
    /// The recovery that produced the table, if any.
    pub recovery_id: Option<String>,
}

/// The route of one table: `route.json` under a route URL (see [`paths`]).
#[derive(Debug, Clone)]
pub struct RouteStore {
    store: Arc<dyn ObjectStore>,
}

impl RouteStore {
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        RouteStore { store }
    }

    /// Opens the route at a URL: a folder, a `file://` URL or `s3://bucket/prefix`.
    pub async fn open(url: &str) -> Result<Self> {
        Ok(Self::new(store::open(url).await?))
    }

    /// [`RouteStore::open`] for a writer of the route: a local folder that does not exist yet is
    /// created (as `journal init` creates its folder); a bucket must exist.
    pub async fn open_or_create(url: &str) -> Result<Self> {
        Ok(Self::new(store::open_or_create(url).await?))
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The full location of the routing object, for messages.
    pub fn url(&self) -> String {
        paths::route_object_url(&self.store.url())
    }

    /// The current route with its ETag and version id, or `None` when no route was ever written
    /// (or the object was deleted). A body that is not a valid route is a [`RouteError::Format`]
    /// naming the object and version.
    pub async fn read(&self) -> Result<Option<(Route, String, String)>> {
        let got = match self.store.get(paths::ROUTE_KEY, None).await {
            Ok(got) => got,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let version_id = got.meta.version_id.unwrap_or_else(|| "null".into());
        let route = decode(&self.store.url(), &got.body, Some(&version_id))?;
        Ok(Some((route, got.meta.etag, version_id)))
    }

    /// The route readers use, read afresh on every call: readers call this per query, so a flip
    /// is visible to the next query without any cache to invalidate.
    pub async fn resolve(&self) -> Result<Route> {
        match self.read().await? {
            Some((route, _, _)) => Ok(route),
            None => Err(RouteError::NotFound { route: self.url() }),
        }
    }

    /// Writes generation 1, create-only. A route that already exists is never replaced:
    /// [`RouteError::AlreadyExists`] (also for the losers of concurrent inits).
    pub async fn init(&self, first: FlipRequest, clock: &dyn Clock) -> Result<(Route, String)> {
        check_request(&first).map_err(|reason| self.invalid(reason))?;
        let route = build(first, 1, None, clock.now_rfc3339());
        match self.store.put(paths::ROUTE_KEY, encode(&route), PutMode::Create).await {
            Ok(put) => Ok((route, put.etag)),
            Err(e) if e.is_conflict() => Err(RouteError::AlreadyExists { route: self.url() }),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces the route whose ETag and generation the caller read with generation
    /// `expected_generation + 1`, pointing back at it. Written with `If-Match: expected_etag`,
    /// so a controller that read an older route cannot overwrite a newer decision: it gets
    /// [`RouteError::StaleRoute`] (with the generation found on a re-read) and nothing changes.
    pub async fn flip(
        &self,
        expected_etag: &str,
        expected_generation: u64,
        next: FlipRequest,
        clock: &dyn Clock,
    ) -> Result<(Route, String)> {
        check_request(&next).map_err(|reason| self.invalid(reason))?;
        if expected_generation == 0 || expected_generation == u64::MAX {
            return Err(self.invalid(format!(
                "expected generation {expected_generation} is not one a route can be flipped from"
            )));
        }
        let generation = expected_generation + 1;
        let Some((current, etag, _)) = self.read().await? else {
            return Err(RouteError::NotFound { route: self.url() });
        };
        if etag != expected_etag {
            return Err(self.stale(expected_etag, expected_generation, Some(current.generation)));
        }
        if current.generation != expected_generation {
            // Same object, different generation: the caller paired an ETag with the wrong
            // generation. Writing would not produce current + 1, so refuse.
            return Err(self.invalid(format!(
                "expected generation {expected_generation}, but the route with ETag {etag} is at generation {}; \
                 pass the generation that was read with that ETag",
                current.generation
            )));
        }
        let previous = RoutePointer {
            generation: current.generation,
            table_name: current.table_name,
            metadata_location: current.metadata_location,
            etag: etag.clone(),
        };
        let route = build(next, generation, Some(previous), clock.now_rfc3339());
        let mode = PutMode::Update { etag };
        match self.store.put(paths::ROUTE_KEY, encode(&route), mode).await {
            Ok(put) => Ok((route, put.etag)),
            // If-Match refused (or the object vanished in between): another controller decided.
            Err(e) if e.is_conflict() || e.is_not_found() => {
                let current_generation = self.read().await.ok().flatten().map(|(r, _, _)| r.generation);
                Err(self.stale(expected_etag, expected_generation, current_generation))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Reads the current route and flips from it (still `If-Match` on the ETag read, so a flip
    /// by someone else in between is a [`RouteError::StaleRoute`], not an overwrite). For a CLI
    /// whose operator decided on "whatever is current"; a controller that decided on a specific
    /// route calls [`RouteStore::flip`] with what it read.
    pub async fn flip_from_current(&self, next: FlipRequest, clock: &dyn Clock) -> Result<(Route, String)> {
        let Some((current, etag, _)) = self.read().await? else {
            return Err(RouteError::NotFound { route: self.url() });
        };
        self.flip(&etag, current.generation, next, clock).await
    }

    /// Every stored version of the route with its version id, newest first (the store's version
    /// order). Delete markers are skipped; a version that is not a valid route is a
    /// [`RouteError::Format`] naming it.
    pub async fn history(&self) -> Result<Vec<(Route, String)>> {
        let versions = self.store.list_versions(paths::ROUTE_KEY).await?;
        let mut out = Vec::new();
        for v in versions {
            if !paths::is_route_key(&v.key) || v.is_delete_marker {
                continue;
            }
            let got = self.store.get(paths::ROUTE_KEY, Some(&v.version_id)).await?;
            let route = decode(&self.store.url(), &got.body, Some(&v.version_id))?;
            out.push((route, v.version_id));
        }
        Ok(out)
    }

    fn stale(&self, expected_etag: &str, expected_generation: u64, current_generation: Option<u64>) -> RouteError {
        RouteError::StaleRoute {
            route: self.url(),
            expected_etag: expected_etag.to_string(),
            expected_generation,
            current_generation,
        }
    }

    fn invalid(&self, reason: String) -> RouteError {
        RouteError::InvalidFlip {
            route: self.url(),
            reason,
        }
    }
}

fn build(req: FlipRequest, generation: u64, previous: Option<RoutePointer>, written_at: String) -> Route {
    Route {
        format_version: FORMAT_VERSION,
        table_name: req.table_name,
        catalog: req.catalog,
        metadata_location: req.metadata_location,
        table_uuid: req.table_uuid,
        generation,
        applied_position: req.applied_position,
        previous,
        written_at,
        reason: req.reason,
        recovery_id: req.recovery_id,
    }
}

fn encode(route: &Route) -> Bytes {
    Bytes::from(serde_json::to_vec_pretty(route).expect("route serializes"))
}

/// A route must name what readers need; an empty field would route queries nowhere.
fn check_request(req: &FlipRequest) -> std::result::Result<(), String> {
    let required = [
        ("table_name", &req.table_name),
        ("catalog uri", &req.catalog.uri),
        ("catalog name", &req.catalog.name),
        ("metadata_location", &req.metadata_location),
        ("table_uuid", &req.table_uuid),
        ("reason", &req.reason),
    ];
    for (name, value) in required {
        if value.trim().is_empty() {
            return Err(format!("{name} is empty"));
        }
    }
    if has_password(&req.catalog.uri) {
        // The route is stored in every version, readable by every reader: never a secret.
        return Err("the catalog reference holds a password; record the URI without it".into());
    }
    if req.recovery_id.as_deref().is_some_and(|id| id.trim().is_empty()) {
        return Err("recovery_id is empty (omit it instead)".into());
    }
    Ok(())
}

/// Whether `scheme://user:password@host…` carries a password.
fn has_password(uri: &str) -> bool {
    let Some((_, rest)) = uri.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// Parses and checks one stored route. `format_version` is checked before the fields, so that a
/// route written by a newer tidemark is reported as such rather than as an unknown field.
fn decode(store_url: &str, body: &[u8], version_id: Option<&str>) -> Result<Route> {
    let format = |message: String| RouteError::Format {
        store: store_url.to_string(),
        key: paths::ROUTE_KEY.to_string(),
        version_id: version_id.map(str::to_string),
        message,
    };
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| format(format!("not JSON ({e})")))?;
    match value.get("format_version").map(serde_json::Value::as_u64) {
        Some(Some(v)) if v == u64::from(FORMAT_VERSION) => {}
        Some(Some(v)) => {
            return Err(format(format!(
                "format_version {v} is not supported (this tidemark reads {FORMAT_VERSION})"
            )));
        }
        _ => return Err(format("no numeric format_version".into())),
    }
    let route: Route = serde_json::from_value(value).map_err(|e| format(e.to_string()))?;
    check_stored(&route).map_err(format)?;
    Ok(route)
}

fn check_stored(route: &Route) -> std::result::Result<(), String> {
    if route.generation == 0 {
        return Err("generation 0 (the first route is generation 1)".into());
    }
    if route.table_name.trim().is_empty() || route.metadata_location.trim().is_empty() {
        return Err("empty table_name or metadata_location".into());
    }
    if let Some(p) = &route.previous
        && p.generation >= route.generation
    {
        return Err(format!(
            "previous generation {} is not below generation {}",
            p.generation, route.generation
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str) -> FlipRequest {
        FlipRequest {
            table_name: name.into(),
            catalog: CatalogRef {
                kind: tidemark_schemas::CatalogKind::Sqlite,
                uri: "/tmp/c.db".into(),
                warehouse: Some("file:///tmp/warehouse".into()),
                name: "tidemark".into(),
            },
            metadata_location: format!("file:///w/{name}/metadata/00001.metadata.json"),
            table_uuid: "u-1".into(),
            applied_position: 10,
            reason: "test".into(),
            recovery_id: None,
        }
    }

    fn decode_str(s: &str) -> Result<Route> {
        decode("file:///r", s.as_bytes(), Some("7"))
    }

    #[test]
    fn a_built_route_round_trips() {
        let route = build(request("ns.t"), 1, None, "2026-01-01T00:00:00.000000Z".into());
        let back = decode("file:///r", &encode(&route), None).unwrap();
        assert_eq!(back, route);
    }

    #[test]
    fn empty_fields_are_refused() {
        assert!(check_request(&request("ns.t")).is_ok());
        let mut r = request("ns.t");
        r.metadata_location = " ".into();
        assert_eq!(check_request(&r).unwrap_err(), "metadata_location is empty");
        let mut r = request("ns.t");
        r.recovery_id = Some(String::new());
        assert!(check_request(&r).is_err());
        let mut r = request("ns.t");
        r.catalog.kind = tidemark_schemas::CatalogKind::Postgres;
        r.catalog.uri = "postgres://tm:SECRET@db/cat".into();
        let err = check_request(&r).unwrap_err();
        assert!(err.contains("password") && !err.contains("SECRET"), "{err}");
    }

    #[test]
    fn a_legacy_route_with_a_uri_string_is_read() {
        let mut v = serde_json::to_value(build(request("ns.t"), 1, None, "t".into())).unwrap();
        v["catalog"] = "sqlite:///tmp/old.db".into();
        let route = decode_str(&v.to_string()).unwrap();
        assert_eq!(route.catalog.uri, "/tmp/old.db");
        assert_eq!(route.catalog.kind, tidemark_schemas::CatalogKind::Sqlite);
        assert_eq!(route.catalog.warehouse, None);
    }

    #[test]
    fn decode_names_the_object_and_the_problem() {
        let err = decode_str("not json").unwrap_err();
        match err {
            RouteError::Format {
                key,
                version_id,
                message,
                ..
            } => {
                assert_eq!(key, "route.json");
                assert_eq!(version_id.as_deref(), Some("7"));
                assert!(message.starts_with("not JSON"), "{message}");
            }
            other => panic!("expected Format, got {other:?}"),
        }
        let mut v = serde_json::to_value(build(request("ns.t"), 2, None, "t".into())).unwrap();
        v["format_version"] = 2.into();
        v["new_field"] = true.into();
        let err = decode_str(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains("format_version 2 is not supported"), "{err}");
    }

    #[test]
    fn decode_refuses_impossible_generations() {
        let zero = build(request("ns.t"), 0, None, "t".into());
        let err = decode_str(&serde_json::to_string(&zero).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("generation 0"), "{err}");
        let back = RoutePointer {
            generation: 3,
            table_name: "ns.t".into(),
            metadata_location: "m".into(),
            etag: "e".into(),
        };
        let loop_ = build(request("ns.t"), 3, Some(back), "t".into());
        let err = decode_str(&serde_json::to_string(&loop_).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("previous generation 3 is not below generation 3"), "{err}");
    }
}
