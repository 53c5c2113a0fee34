//! A table named (`namespace.name`, [`parse_ident`]) and loaded through the catalog
//! ([`load_table`]).

use iceberg::table::Table;
use iceberg::{ErrorKind, NamespaceIdent, TableIdent};

use super::error::{TableError, from_iceberg};
use crate::catalog::CatalogHandle;

/// Parses `namespace.name`; the last dot separates the name.
pub fn parse_ident(ident: &str) -> Result<TableIdent, TableError> {
    let invalid = || TableError::InvalidIdent {
        ident: ident.to_string(),
    };
    let (ns, name) = ident.rsplit_once('.').ok_or_else(invalid)?;
    if name.is_empty() || ns.split('.').any(str::is_empty) {
        return Err(invalid());
    }
    let ns = NamespaceIdent::from_strs(ns.split('.')).map_err(|_| invalid())?;
    Ok(TableIdent::new(ns, name.to_string()))
}

/// Loads a table through the catalog.
pub async fn load_table(handle: &CatalogHandle, ident: &str) -> Result<Table, TableError> {
    let id = parse_ident(ident)?;
    handle
        .catalog()
        .load_table(&id)
        .await
        .map_err(|source| match source.kind() {
            ErrorKind::TableNotFound | ErrorKind::NamespaceNotFound => TableError::TableNotFound {
                table: ident.to_string(),
            },
            _ => from_iceberg(format!("load table {ident}"), source),
        })
}
