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
    /// The catalog of the routed table, as a reader opens it (no secrets). A route written by an
    /// older tidemark holds the catalog URI as a string; it is read as a SQL catalog reference.
    #[serde(deserialize_with = "catalog_or_legacy_uri")]
    #[schemars(with = "CatalogField")]
    pub catalog: CatalogRef,
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

/// The kinds of catalog tidemark supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CatalogKind {
    Sqlite,
    Postgres,
    Rest,
    S3tables,
}

/// A catalog as a reader can open it again with nothing else given, and without secrets: what a
/// route records. Credentials come from the reader's own configuration (the standard AWS chain,
/// `.pyiceberg.yaml` / `PYICEBERG_CATALOG__…` entries, or the PostgreSQL password file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogRef {
    pub kind: CatalogKind,
    /// SQLite: the absolute file path; PostgreSQL: the URI without password; REST: the base URI;
    /// S3 Tables: the table-bucket ARN.
    pub uri: String,
    /// The warehouse location (`file:///…`, `s3://…`), or the REST warehouse name when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warehouse: Option<String>,
    /// The catalog name (SQL `catalog_name`, or the PyIceberg catalog name it was defined under).
    pub name: String,
}

impl CatalogRef {
    /// A route written before catalog references: the SQL catalog URI (a SQLite path or
    /// `postgres://…`) under tidemark's default catalog name, warehouse unknown.
    pub fn from_legacy_uri(uri: &str) -> Self {
        let kind = if uri.starts_with("postgres://") || uri.starts_with("postgresql://") {
            CatalogKind::Postgres
        } else {
            CatalogKind::Sqlite
        };
        let uri = match kind {
            CatalogKind::Sqlite => uri
                .strip_prefix("sqlite://")
                .or_else(|| uri.strip_prefix("sqlite:"))
                .unwrap_or(uri)
                .to_string(),
            _ => uri.to_string(),
        };
        CatalogRef {
            kind,
            uri,
            warehouse: None,
            name: "tidemark".into(),
        }
    }
}

impl std::fmt::Display for CatalogRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            CatalogKind::Sqlite => "sqlite",
            CatalogKind::Postgres => "postgres",
            CatalogKind::Rest => "rest",
            CatalogKind::S3tables => "s3tables",
        };
        write!(f, "{kind} catalog {} at {}", self.name, self.uri)
    }
}

/// The schema of [`Route::catalog`]: a reference, or the legacy URI string.
#[derive(JsonSchema)]
#[allow(dead_code)]
#[serde(untagged)]
enum CatalogField {
    Ref(CatalogRef),
    LegacyUri(String),
}

fn catalog_or_legacy_uri<'de, D: serde::Deserializer<'de>>(d: D) -> Result<CatalogRef, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Ref(CatalogRef),
        LegacyUri(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::Ref(r) => r,
        Either::LegacyUri(uri) => CatalogRef::from_legacy_uri(&uri),
    })
}
