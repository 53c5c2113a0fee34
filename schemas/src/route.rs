//! The routing record: which table readers and the next writer use.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The routing object (`route.json` under the route prefix), replaced only with `If-Match` on the
/// ETag that was read and `generation + 1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub format_version: u32,
    /// `namespace.table` readers query.
    pub table_name: String,
    /// Catalog URI of the routed table.
    pub catalog: String,
    pub metadata_location: String,
    pub table_uuid: String,
    /// 1 for the first route, then +1 on every flip.
    pub generation: u64,
    /// The journal position H the table holds; the next writer starts at H + 1.
    pub applied_position: u64,
    pub previous: Option<RoutePointer>,
    pub written_at: String,
    pub reason: String,
    /// The recovery that produced this route, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_id: Option<String>,
}

/// What a route replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutePointer {
    pub generation: u64,
    pub table_name: String,
    pub metadata_location: String,
    pub etag: String,
}
