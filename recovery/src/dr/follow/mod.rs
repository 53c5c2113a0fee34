//! The warm follower (`tidemark replica follow`): keeps a DR catalog in step with a replicated
//! warehouse whose objects arrive by any replication, in any order.
//!
//! One cycle ([`cycle`]), per table folder of the replica ([`super::rebuild::discover`]):
//! 1. the head is chosen by the metadata-log chain ([`super::rebuild::choose_head`], hinted by the
//!    newest file the last cycle saw); strays and forks are reported, an undecidable table is
//!    held and named. The follower's own rewrites (`rewrite_name`) are never candidates, nor
//!    the metadata files a `replica resync` walked over and their descendants (the records it
//!    leaves beside them, one per walk, [`super::resync_record`]): they are strays, and a pointer on
//!    one is held, as is a table with a record that cannot be read;
//! 2. the target: `strict`, the newest file on the head's chain whose current snapshot has every
//!    referenced file (manifest list, manifests, data and delete files); `eventual`, the head,
//!    with its missing files listed;
//! 3. never backwards: the search stops at the version the DR catalog already holds, and a head
//!    whose chain does not pass through it (a fork, a primary rolled back) is held, not followed;
//! 4. the DR pointer must be what this follower last wrote (or, the first time, absent or one of
//!    the chain's files): anything else is someone else's change, a conflict, and the table is not
//!    touched;
//! 5. with a prefix map the target is rewritten to the replica's paths
//!    ([`super::rewrite::rewrite_paths`], new files beside the old) and that file is registered,
//!    so DR readers never read from the primary;
//! 6. the lease is checked, then the table is registered (first time) or its pointer swapped from
//!    the pointer read (compare-and-swap: a concurrent change is a conflict, never overwritten).
//!
//! Tables are independent: each one is consistent on its own (strict: a version whose files are
//! all there), but two tables are not promised to be at versions the primary held at the same
//! moment. The catalog must register and swap pointers (SQL catalogs); others are refused before
//! anything changes.
//!
//! `cycle.rs`: the cycle ([`cycle`]) and its options ([`FollowOptions`]); `publish.rs`: the move
//! of a DR table to the version chosen, per kind of DR catalog; `recognise.rs`: what a DR table
//! holds when its pointer is not the one the state records; `target.rs`: where and how a table is
//! published; `step.rs`: what the cycle and the publish share.

mod cycle;
pub mod publish;
mod recognise;
mod step;
mod target;

pub(crate) use cycle::position_of;
#[cfg(test)]
pub(crate) use cycle::tests;
pub use cycle::{FollowError, FollowOptions, cycle, require_capabilities};
pub(in crate::dr) use step::Step;
#[cfg(test)]
pub(in crate::dr) use step::ensure_namespace;
pub(in crate::dr) use target::Target;
pub(crate) use target::{SOURCE_UUID_PROP, Way, way};
