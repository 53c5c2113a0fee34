//! What a unit's merge works on, below the three ways of merging that take it (copy-on-write,
//! its spilled form and merge-on-read), so that none of them imports another for it.

use iceberg::table::Table;

use crate::ids::Ids;

/// What a unit's merge works on, whichever way it merges ([`crate::apply::cow::copy_on_write`],
/// [`crate::apply::spill::copy_on_write_spilled`], [`crate::apply::mor::merge_on_read`]): the
/// table, its spec and schemas (`schema` the table's, `cur_schema` the one its files are read
/// as), the key column's field id, the table's deletes and the ids for new files.
#[derive(Clone, Copy)]
pub(crate) struct UnitInput<'a> {
    pub(crate) table: &'a Table,
    pub(crate) spec: &'a tidemark_journal::spec::CompiledSpec,
    pub(crate) schema: &'a arrow_schema::SchemaRef,
    pub(crate) cur_schema: &'a arrow_schema::SchemaRef,
    pub(crate) key_field_id: i32,
    pub(crate) deletes: &'a crate::table::deletes::Deletes,
    pub(crate) ids: &'a dyn Ids,
}
