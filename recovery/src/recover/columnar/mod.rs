//! The validation's check, columnar: the merge rules implemented a second time over Arrow
//! arrays and sorted key runs, sharing no code with the DataFusion plan it checks
//! ([`crate::merge`]) nor with the row-by-row fold of [`crate::reference`].
//!
//! Each side (the trusted snapshot's rows, the events, the recovered table's rows) is cast to
//! the journal's column types; its keys are encoded with Arrow's row format (one byte string a
//! key). The payload (every spec column but key and version, the delete flag included) and the
//! columns outside the spec are compared in place, column by column (`sides::SameValues`): equal
//! values are equal (doubles compare by their bits, as the reference does; a null equals a null
//! and differs from every value). The three sides are sorted by key bytes and walked together,
//! one key at a time:
//!
//! * events of one key and version are one event when their payloads are equal (the lowest
//!   position represents them) and a conflict when they differ; an event whose version equals
//!   the snapshot row's but whose payload differs is a conflict too (either fails the check,
//!   as it fails the fold);
//! * the expected row of a key is its highest-version event when that is newer than the
//!   snapshot's row (keeping the snapshot row's columns outside the spec, nulls for a new key),
//!   else the snapshot's row;
//! * the table's rows of that key must be exactly one, with the same version, delete flag,
//!   payload, outside columns and journal position.
//!
//! Only a mismatch is turned into displayed values (with [`crate::reference::cell`]).
//!
//! `sides.rs`: each side's rows, cast, their keys encoded ([`Extra`] names the columns outside
//! the spec), and the comparison of values; `check.rs`: the expected rows (the fold) and the
//! walk of the sides, key by key ([`check`]); `compare.rs`: the comparison's running verdict,
//! mismatch by mismatch.

mod check;
mod compare;
mod sides;

pub use check::check;
pub use sides::Extra;
