//! Readers: resolve the route on every query, load the routed table, and expose it to DataFusion
//! as `<name>` (tombstones excluded) and `<name>_with_tombstones` (every row). Programs that embed
//! tidemark call [`routed_context`] per query, exactly as `tidemark query` does, so a flip is
//! visible to the next query with no cache to invalidate.

use std::sync::Arc;

use datafusion::prelude::SessionContext;
use iceberg_datafusion::IcebergStaticTableProvider;
use tidemark_router::RouteStore;
use tidemark_schemas::Route;

use crate::catalog::open_ref;
use crate::table;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Route(#[from] tidemark_router::RouteError),
    #[error(transparent)]
    Table(#[from] table::TableError),
    #[error(
        "the route names table {table} with uuid {route_uuid}, but the catalog's {table} has uuid {found_uuid}: the catalog and the route disagree; refusing to read"
    )]
    UuidMismatch {
        table: String,
        route_uuid: String,
        found_uuid: String,
    },
    #[error("query failed: {0}")]
    DataFusion(#[from] datafusion::error::DataFusionError),
}

/// Resolves the route now and returns a session with the routed table registered. The catalog
/// is the one the route records ([`open_ref`]): its kind, URI, warehouse and name; credentials
/// come from the reader's own configuration (a catalog defined under the same name, the AWS
/// chain, `PGPASSWORD` or `~/.pgpass`).
pub async fn routed_context(
    routes: &RouteStore,
    name: &str,
    delete_column: &str,
) -> Result<(SessionContext, Route), QueryError> {
    routed_context_with(routes, name, delete_column, None).await
}

/// [`routed_context`] for a program that already holds an open catalog (with its credentials):
/// when the route names that catalog, `known` is used instead of opening the reference again.
pub async fn routed_context_with(
    routes: &RouteStore,
    name: &str,
    delete_column: &str,
    known: Option<&crate::catalog::CatalogHandle>,
) -> Result<(SessionContext, Route), QueryError> {
    let route = routes.resolve().await?;
    let opened;
    let handle = match known {
        Some(h) if h.reference() == &route.catalog => h,
        _ => {
            opened = open_ref(&route.catalog).await?;
            &opened
        }
    };
    let t = table::load_table(handle, &route.table_name).await?;
    let found_uuid = t.metadata().uuid().to_string();
    if found_uuid != route.table_uuid {
        return Err(QueryError::UuidMismatch {
            table: route.table_name.clone(),
            route_uuid: route.table_uuid.clone(),
            found_uuid,
        });
    }
    let provider = IcebergStaticTableProvider::try_new_from_table(t)
        .await
        .map_err(table::iceberg_err(format!("read table {}", route.table_name)))?;
    let ctx = SessionContext::new();
    let all = format!("{name}_with_tombstones");
    ctx.register_table(all.as_str(), Arc::new(provider))?;
    ctx.sql(&format!(
        "CREATE VIEW \"{name}\" AS SELECT * FROM \"{all}\" WHERE NOT \"{delete_column}\""
    ))
    .await?;
    Ok((ctx, route))
}
