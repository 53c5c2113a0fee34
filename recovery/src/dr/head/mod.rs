//! A table folder's head, chosen the one way every reader uses (`catalog rebuild`, the warm
//! follower, `replica check`, `replica copy`, `replica resync`, the game day).
//!
//! `choose.rs`: the rule, by the metadata files' chains ([`choose_head`], [`HeadChoice`]);
//! `read.rs`: a table folder read (only what the choice needs), what a `replica resync` walked
//! over taken out, and its head chosen ([`choose_folder_head`], [`FolderHead`]).

mod choose;
mod read;

pub use choose::{HeadChoice, choose_head};
#[cfg(test)]
pub(crate) use read::read_metadata;
pub(crate) use read::{FolderHead, HeadRead, choose_folder_head};
