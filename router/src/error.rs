//! The router's errors. Each carries the facts (route, generations, ETags, key) in fields, and
//! its message says what the operator does next. A CLI maps them to exit codes by kind:
//! `StaleRoute`, `Fenced` and `AlreadyExists` are conflicts (someone else decided first),
//! `NotFound` is not found, `Format` and `NotNewest` are a damaged or rolled-back route,
//! `InvalidFlip` is bad input.

use tidemark_journal::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Store(#[from] StoreError),

    #[error("no route at {route}: nothing has been routed there yet (check the route URL)")]
    NotFound { route: String },

    #[error(
        "a route already exists at {route}; see it with `tidemark route show` and change it with `tidemark route flip`"
    )]
    AlreadyExists { route: String },

    #[error("{}", stale_message(.route, .expected_etag, *.expected_generation, *.current_generation))]
    StaleRoute {
        route: String,
        expected_etag: String,
        expected_generation: u64,
        /// The generation found when re-reading after the refusal (`None`: no route, or it could
        /// not be read).
        current_generation: Option<u64>,
    },

    #[error(
        "writer fenced: the route moved from generation {started_generation} (version {started_version}, when this writer started) to generation {current_generation} (version {current_version}); another controller now owns the table, so stop writing and re-read the route with `tidemark route show`"
    )]
    Fenced {
        started_generation: u64,
        started_version: String,
        current_generation: u64,
        current_version: String,
    },

    #[error(
        "route {route} is not the newest decision of its own history: the current version {current_version} is generation {current_generation}, but the older version {other_version} is {}; an older route was put back, so nothing routes through it: put the newest version back as the current one (see `tidemark route show`), then decide again with `tidemark route flip`",
        other_is(*.current_generation, *.other_generation)
    )]
    NotNewest {
        route: String,
        current_generation: u64,
        current_version: String,
        other_generation: u64,
        other_version: String,
    },

    #[error(
        "route object {key}{} in {store} is not a valid route: {message}; restore its last good version from the store's version history",
        version_suffix(.version_id)
    )]
    Format {
        store: String,
        key: String,
        version_id: Option<String>,
        message: String,
    },

    #[error("flip of the route at {route} refused: {reason}")]
    InvalidFlip { route: String, reason: String },
}

pub type Result<T, E = RouteError> = std::result::Result<T, E>;

impl RouteError {
    /// Someone else decided first: a stale route, a fenced writer, a second init.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            RouteError::StaleRoute { .. } | RouteError::Fenced { .. } | RouteError::AlreadyExists { .. }
        )
    }
}

fn stale_message(route: &str, etag: &str, expected: u64, current: Option<u64>) -> String {
    let what = match current {
        Some(c) if c != expected => format!("another controller flipped first (the route is now at generation {c})"),
        // The store refused the write although a re-read still shows the expected route: a
        // concurrent write was in flight (S3 409) or has not become visible yet.
        Some(_) => "another controller's flip of the route was in flight".to_string(),
        None => "the route is gone or unreadable".to_string(),
    };
    format!(
        "stale route at {route}: this flip expected generation {expected} (ETag {etag}) but {what}; nothing was written: re-read the route with `tidemark route show` and decide again"
    )
}

fn other_is(current: u64, other: u64) -> String {
    if other > current {
        format!("generation {other}")
    } else {
        format!("the first version of generation {other}, a different route")
    }
}

fn version_suffix(v: &Option<String>) -> String {
    match v {
        Some(v) => format!(" (version {v})"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_route_tells_the_operator_to_re_read() {
        let e = RouteError::StaleRoute {
            route: "s3://b/r/route.json".into(),
            expected_etag: "\"abc\"".into(),
            expected_generation: 3,
            current_generation: Some(4),
        };
        let msg = e.to_string();
        assert!(msg.contains("another controller flipped first"), "{msg}");
        assert!(msg.contains("generation 4"), "{msg}");
        assert!(msg.contains("tidemark route show"), "{msg}");
        assert!(e.is_conflict());
    }

    #[test]
    fn format_error_names_the_object() {
        let e = RouteError::Format {
            store: "file:///tmp/r".into(),
            key: "route.json".into(),
            version_id: Some("00000000000000000002".into()),
            message: "expected value at line 1 column 1".into(),
        };
        let msg = e.to_string();
        assert!(
            msg.contains("route.json (version 00000000000000000002) in file:///tmp/r"),
            "{msg}"
        );
        assert!(!e.is_conflict());
    }
}
