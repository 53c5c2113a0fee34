//! Where the follower (and `replica resync`) publishes: the DR catalog's kind ([`Way`]) and what
//! it can write ([`require_capabilities`]), the publish's [`Target`], and the properties the
//! follower carries over.

use std::collections::HashMap;

use iceberg::spec::TableProperties;

use super::step::Step;
use crate::catalog::{CatalogHandle, CatalogKind, INSTEAD_OF_REGISTER};
use crate::dr::lease::Lease;
use crate::table::TableError;
use crate::table::source::PrefixMap;

/// Set on a table the follower created (S3 Tables, REST): the replica table's uuid, so that a
/// run killed after the create and before the first move recognises the table as its own.
pub const SOURCE_UUID_PROP: &str = "tidemark.follower.source-uuid";

/// Where a table is published and from what: the catalog written, the folder the source's
/// metadata keys are under and how its files are read, and the lease checked before every write
/// (the follower's; `None` for `replica resync`, which an operator runs by hand).
pub(in crate::dr) struct Target<'a> {
    pub(in crate::dr) handle: &'a CatalogHandle,
    pub(in crate::dr) base: &'a str,
    pub(in crate::dr) prefix_map: Option<&'a PrefixMap>,
    pub(in crate::dr) file_io_props: &'a HashMap<String, String>,
    pub(in crate::dr) lease: Option<&'a Lease>,
}

impl Target<'_> {
    /// `Ok` while the lease (if any) is still held.
    pub(in crate::dr) async fn guard(&self) -> Result<(), Step> {
        match self.lease {
            Some(lease) => lease.check().await.map_err(Step::Lease),
            None => Ok(()),
        }
    }
}

/// How a DR catalog's table is moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// Register, then swap the pointer between metadata files (SQL).
    Pointer,
    /// Create, then swap the pointer to copies written in the table's warehouse (S3 Tables).
    S3Tables,
    /// Create, then commit the new snapshots (REST).
    Commit,
}

pub(crate) fn way(handle: &CatalogHandle) -> Way {
    match handle.kind() {
        CatalogKind::S3tables => Way::S3Tables,
        CatalogKind::Rest => Way::Commit,
        CatalogKind::Sqlite | CatalogKind::Postgres => Way::Pointer,
    }
}

/// Refuses a catalog the follower cannot write, before anything changes.
pub fn require_capabilities(handle: &CatalogHandle) -> Result<(), TableError> {
    let command = "follow a replica (replica follow)";
    match way(handle) {
        Way::Pointer => handle.require(true, true, command, INSTEAD_OF_REGISTER),
        Way::S3Tables => handle.require(false, true, command, INSTEAD_OF_REGISTER),
        Way::Commit => Ok(()),
    }
}

/// The properties the follower carries over to a REST DR table (not the reserved ones, nor its
/// own marker).
pub(in crate::dr) fn ours(k: &str) -> bool {
    !TableProperties::RESERVED_PROPERTIES.contains(&k) && k != SOURCE_UUID_PROP
}
