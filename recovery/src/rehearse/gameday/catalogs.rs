//! The game day on the user's catalogs: `--catalog` for the source tables (in the scratch
//! namespace `gameday` of that catalog) and `--dr-catalog` for the rebuilt one.
//!
//! The catalog loss is simulated: the game day stops using the source catalog and rebuilds from
//! the DR copy of the warehouse; it never drops or damages the catalog itself. Everything it
//! cannot do on a catalog is refused by [`preflight`] before anything is created: a source in
//! S3 Tables (each table sits in a bucket of its own that cannot be listed, so there is no
//! warehouse to copy), a DR catalog that cannot register a metadata file (REST on SeaweedFS, S3
//! Tables), and a scratch namespace that already exists (it may hold someone's tables). At the
//! end [`cleanup`] drops the game day's own tables and namespace, and nothing else.

use iceberg::table::Table;
use iceberg::{NamespaceIdent, TableIdent};

use super::{GamedayOptions, NAMESPACE};
use crate::catalog::{
    CatalogConfig, CatalogHandle, CatalogKind, Definitions, INSTEAD_OF_REGISTER, config, open_catalog,
};
use crate::rehearse::drill::DrillCheck;
use crate::table::{TableError, from_iceberg};

/// What to do instead of a game day with its source in S3 Tables.
const INSTEAD_OF_S3TABLES_SOURCE: &str = "rehearse the loss of an S3 Tables catalog with `tidemark drill --catalog ARN`, \
     and keep the pointers with `tidemark catalog state --out FILE` and the contents with `tidemark history record`; \
     or run the game day with its source in a SQL or REST catalog";

/// The user's catalogs of a game day, opened and checked.
pub struct UserCatalogs {
    /// `--catalog`: where the source tables are built (namespace `gameday`).
    pub source: Option<CatalogHandle>,
    /// `--dr-catalog`: where the lost catalog is rebuilt.
    pub dr: Option<CatalogHandle>,
}

/// Opens `value` (what `--catalog` accepts); a SQL catalog keeps the game day's tables in the
/// scratch warehouse `warehouse`, the others where they put their tables.
async fn open(value: &str, warehouse: &str) -> Result<CatalogHandle, TableError> {
    // With the scratch warehouse given: a PostgreSQL URI resolves only with one.
    let given = Some(warehouse).filter(|w| !w.is_empty());
    let kind = config::resolve(value, None, given, &Definitions::load()?)
        .map(|r| r.kind)
        .ok();
    let sql = matches!(kind, Some(CatalogKind::Sqlite | CatalogKind::Postgres));
    open_catalog(&CatalogConfig {
        uri: value.to_string(),
        warehouse: if sql { warehouse.to_string() } else { String::new() },
        name: String::new(),
    })
    .await
}

/// The scratch namespace must be new: the game day never touches tables it did not create.
async fn require_new_namespace(handle: &CatalogHandle, flag: &str) -> Result<(), TableError> {
    let ns = NamespaceIdent::new(NAMESPACE.to_string());
    let exists = handle
        .catalog()
        .namespace_exists(&ns)
        .await
        .map_err(|e| from_iceberg(format!("list the namespaces of {}", handle.reference()), e))?;
    if exists {
        return Err(TableError::InvalidCatalog {
            uri: handle.reference().to_string(),
            reason: format!(
                "{flag}: the namespace `{NAMESPACE}` exists; the game day builds its scratch tables in a namespace \
                 of its own and never touches existing ones: drop it (if a game day left it) or use another catalog"
            ),
        });
    }
    Ok(())
}

/// Opens and checks `--catalog` and `--dr-catalog` before anything is created (see the module
/// documentation); `source_wh` and `dr_wh` are the scratch warehouses for SQL catalogs.
pub async fn preflight(opts: &GamedayOptions, source_wh: &str, dr_wh: &str) -> Result<UserCatalogs, TableError> {
    let source = match &opts.catalog {
        Some(c) => {
            let h = open(c, source_wh).await?;
            if h.kind() == CatalogKind::S3tables {
                return Err(TableError::MissingCapability {
                    catalog: h.reference().to_string(),
                    command: "gameday --catalog (copy the source warehouse to the DR side)".into(),
                    lacks: "a warehouse location to list and copy (each table is in a table bucket of its own)".into(),
                    instead: INSTEAD_OF_S3TABLES_SOURCE.into(),
                });
            }
            require_new_namespace(&h, "--catalog").await?;
            Some(h)
        }
        None => None,
    };
    let dr = match &opts.dr_catalog {
        Some(c) => {
            let h = open(c, dr_wh).await?;
            h.require(
                true,
                false,
                "gameday --dr-catalog (register the rebuilt tables)",
                INSTEAD_OF_REGISTER,
            )?;
            require_new_namespace(&h, "--dr-catalog").await?;
            Some(h)
        }
        None => None,
    };
    Ok(UserCatalogs { source, dr })
}

/// The warehouse the source tables are under, from their locations (`<warehouse>/gameday/tNN`).
pub fn warehouse_of(tables: &[Table]) -> Result<String, String> {
    let mut found: Option<String> = None;
    for t in tables {
        let location = t.metadata().location().trim_end_matches('/');
        let suffix = format!("/{}", t.identifier().to_string().replace('.', "/"));
        let Some(base) = location.strip_suffix(&suffix) else {
            return Err(format!(
                "table {} is at {location}, not under <warehouse>{suffix}: the game day cannot copy its warehouse",
                t.identifier()
            ));
        };
        match &found {
            Some(f) if f != base => {
                return Err(format!(
                    "the game day's tables are under two warehouses: {f} and {base}"
                ));
            }
            _ => found = Some(base.to_string()),
        }
    }
    found.ok_or_else(|| "no tables".to_string())
}

/// Drops the game day's tables (`names`) and its namespace from a user's catalog; what could
/// not be dropped, if anything.
pub async fn cleanup(handle: &CatalogHandle, names: &[String]) -> Vec<String> {
    let mut left = Vec::new();
    let ns = NamespaceIdent::new(NAMESPACE.to_string());
    for name in names {
        let ident = TableIdent::new(ns.clone(), name.rsplit('.').next().unwrap_or(name).to_string());
        if let Err(e) = handle.catalog().drop_table(&ident).await
            && e.kind() != iceberg::ErrorKind::TableNotFound
        {
            left.push(format!("{ident}: {e}"));
        }
    }
    if let Err(e) = handle.catalog().drop_namespace(&ns).await
        && e.kind() != iceberg::ErrorKind::NamespaceNotFound
    {
        left.push(format!("namespace {NAMESPACE}: {e}"));
    }
    left
}

/// The `namespace.name` of the game day's tables, for [`cleanup`] and the copy.
pub fn names(opts: &GamedayOptions) -> Vec<String> {
    (0..opts.tables).map(|i| format!("{NAMESPACE}.t{i:02}")).collect()
}

/// After a game day that failed part-way, drops its scratch namespace from the user's catalogs
/// (the preflight found it absent, so all in it is the game day's); what could not be dropped.
pub async fn drop_scratch(opts: &GamedayOptions, source_wh: &str, dr_wh: &str) -> Vec<String> {
    let mut left = Vec::new();
    let places = [(&opts.catalog, source_wh), (&opts.dr_catalog, dr_wh)];
    for (c, wh) in places.into_iter().filter_map(|(c, wh)| c.as_ref().map(|c| (c, wh))) {
        match open(c, wh).await {
            Ok(h) => left.extend(cleanup(&h, &names(opts)).await),
            Err(e) => left.push(format!("{}: {e}", crate::catalog::redact(c))),
        }
    }
    left
}

/// Drops the game day's scratch namespace from the user's catalogs; a check saying so.
pub(super) async fn catalogs_cleanup(
    opts: &GamedayOptions,
    source: Option<&CatalogHandle>,
    dr: Option<&CatalogHandle>,
) -> Option<DrillCheck> {
    let names = names(opts);
    let mut left = Vec::new();
    let mut dropped = Vec::new();
    for h in [source, dr].into_iter().flatten() {
        left.extend(cleanup(h, &names).await);
        dropped.push(h.reference().to_string());
    }
    (!dropped.is_empty()).then(|| DrillCheck {
        check: format!("the scratch namespace `{NAMESPACE}` is dropped from the user's catalogs"),
        ok: left.is_empty(),
        detail: if left.is_empty() {
            format!("dropped from {}", dropped.join(", "))
        } else {
            format!("left behind: {}", left.join("; "))
        },
    })
}
