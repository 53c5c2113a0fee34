//! How the follower tells what a DR table holds when the pointer is not the one its state
//! records ([`recognise`]: a run killed between its catalog write and its state write).

use std::collections::HashMap;

use iceberg::spec::TableMetadata;
use serde_json::Value;

use super::step::{Step, dir_of, rewrite_name, snapshot_id_of};
use super::target::{SOURCE_UUID_PROP, Target, Way, ours, way};
use crate::dr::warehouse::file_name;
use crate::table::load_table;

/// What a DR table holds, judged by what this follower writes.
pub(in crate::dr) enum Holds<'c> {
    /// A version of the replica's chain (its file name).
    At(&'c str),
    /// A table this follower created and has not moved to any version yet.
    Created,
    /// Not this follower's doing.
    Foreign,
}

/// What the DR table whose pointer is `pointer` holds. `chain` is newest first; the newest
/// version that matches is taken. `registered`: this follower's state records a version it
/// registered for this table.
pub(in crate::dr) async fn recognise<'c>(
    ctx: &Target<'_>,
    table: &str,
    pointer: &str,
    registered: bool,
    chain: &[&'c str],
    key_of: &HashMap<&str, &str>,
    by_name: &HashMap<&str, &Value>,
) -> Result<Holds<'c>, Step> {
    let key = |n: &str| key_of.get(n).copied().unwrap_or("");
    let head = chain.first().and_then(|n| by_name.get(n)).copied();
    match way(ctx.handle) {
        Way::Pointer => {
            // With a prefix map this follower registers only its rewrites, never the replica's own
            // file: once it registered one, a pointer at a replica file is someone else's (a commit
            // on the DR table writes its metadata file beside the replica's, naming the follower's
            // rewrite as its predecessor, and would pass for a replicated version). The first time,
            // a replica file (a `catalog rebuild`, a resync walked back to it) is accepted.
            let hit = chain.iter().find(|n| {
                let own = format!("{}/{}", ctx.base, key(n));
                let rewrite =
                    || dir_of(&own) == dir_of(pointer) && rewrite_name(key(n)).is_some_and(|r| r == file_name(pointer));
                match ctx.prefix_map {
                    None => own == pointer,
                    Some(_) if registered => rewrite(),
                    Some(_) => own == pointer || rewrite(),
                }
            });
            Ok(hit.map_or(Holds::Foreign, |n| Holds::At(n)))
        }
        Way::S3Tables => {
            if let Some(n) = chain
                .iter()
                .find(|n| rewrite_name(key(n)).is_some_and(|r| r == file_name(pointer)))
            {
                return Ok(Holds::At(n));
            }
            let dr = load_table(ctx.handle, table).await?;
            Ok(created_or_foreign(dr.metadata(), head))
        }
        Way::Commit => {
            let dr = load_table(ctx.handle, table).await?;
            // This follower's commit leaves the DR table at a chain version's snapshot with that
            // version's properties; someone else's commit changes the one or the other.
            let have = dr.metadata().properties();
            let same_properties = |j: &Value| {
                j.get("properties").and_then(Value::as_object).is_none_or(|o| {
                    o.iter()
                        .filter(|(k, _)| ours(k))
                        .all(|(k, v)| v.as_str().is_some_and(|v| have.get(k).is_some_and(|h| h == v)))
                })
            };
            match dr.metadata().current_snapshot_id() {
                Some(id) => Ok(chain
                    .iter()
                    .find(|n| {
                        by_name
                            .get(*n)
                            .is_some_and(|j| snapshot_id_of(j) == Some(id) && same_properties(j))
                    })
                    .map_or(Holds::Foreign, |n| Holds::At(n))),
                None => Ok(created_or_foreign(dr.metadata(), head)),
            }
        }
    }
}

fn created_or_foreign(meta: &TableMetadata, head: Option<&Value>) -> Holds<'static> {
    let source = head.and_then(|h| h.get("table-uuid")).and_then(Value::as_str);
    let marked = meta.properties().get(SOURCE_UUID_PROP).map(String::as_str);
    if meta.snapshots().next().is_none() && source.is_some() && marked == source {
        Holds::Created
    } else {
        Holds::Foreign
    }
}
