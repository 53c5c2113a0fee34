//! Every key the router writes, in one place. A route lives under its own prefix: the route URL
//! is a folder or `s3://bucket/prefix`, and the store opened on it holds one object.
//!
//! ```text
//! route.json   the current route; every flip is a new version of this one key, so the store's
//!              version history is the route's history
//! ```

/// The key of the routing object, relative to the route URL.
pub const ROUTE_KEY: &str = "route.json";

/// Whether a key (relative to the route URL) is the routing object. Listings by prefix also
/// return keys such as `route.json.bak`, which are not the route.
pub fn is_route_key(key: &str) -> bool {
    key == ROUTE_KEY
}

/// The full location of the routing object, for messages: `s3://bucket/prefix/route.json` or
/// `file:///folder/route.json`.
pub fn route_object_url(store_url: &str) -> String {
    let base = store_url.trim_end_matches('/');
    if base.is_empty() {
        ROUTE_KEY.to_string()
    } else {
        format!("{base}/{ROUTE_KEY}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_object_url_joins_with_one_slash() {
        assert_eq!(
            route_object_url("s3://bucket/routes/orders"),
            "s3://bucket/routes/orders/route.json"
        );
        assert_eq!(
            route_object_url("s3://bucket/routes/orders/"),
            "s3://bucket/routes/orders/route.json"
        );
        assert_eq!(route_object_url("file:///tmp/r"), "file:///tmp/r/route.json");
        assert_eq!(route_object_url(""), "route.json");
    }

    #[test]
    fn only_the_exact_key_is_the_route() {
        assert!(is_route_key("route.json"));
        assert!(!is_route_key("route.json.bak"));
        assert!(!is_route_key("old/route.json"));
    }
}
