//! The records `replica resync` leaves beside a walked-back table's metadata files (schema
//! `resync-record`), and how a later follower, `catalog rebuild` or `replica check` reads them.
//!
//! The metadata files a resync walks over stay in the demoted warehouse (nothing is deleted),
//! and their chain may be longer than the new primary's since the fork: a reader choosing a
//! head by the longest chain would choose them and move the table back. The record names them,
//! so [`exclude_recorded`] removes them and every file descending from them from the candidates
//! before the head is chosen (they are reported as strays, with the reason). No flag is needed:
//! the reader finds the records where it lists the table's metadata files.
//!
//! **One record per walk** (format 2): `<table>/metadata/tidemark-resync-<id>.json`, `<id>` a
//! digest of the walk ([`record_name`]: where it started, where it went back to, what it walked
//! over), so each walk is written once, by the resync that made it, and never changed after.
//! When the roles turn twice, each warehouse holds the records of its own walks; the replication
//! back brings the other side's under their own names (it never has to overwrite a key, so even
//! a copy that skips keys present brings them), and a reader takes the **union** of every record
//! in the folder. Two records at one key hold the same walk. The single record of format 1,
//! `tidemark-resync.json` (every walk of the table in one object), is still read.
//!
//! Reading is by listing: only the records the listing shows are read, so a store that answers
//! 403 to a read of a key that is not there (SeaweedFS's table buckets, for any name Iceberg does
//! not use) costs nothing. A listed record that cannot be read or parsed is an error for its
//! table, never skipped: it may name walked-over files, and without it one of them could be
//! taken as the head, a wrong result; the follower holds that table and `catalog rebuild`
//! refuses it, naming the record.
//!
//! A record is written conditionally (`super::resync_record_write`): create-only, If-Match after
//! that, a lost race merged, so that no walk is ever lost, even at one key.
//!
//! Order of writes: the record is written **before** the pointer moves. A resync stopped between
//! the two leaves the pointer on a walked-over version: the follower holds that table and says to
//! run the resync again, which finds the record, adds nothing new and moves the pointer. A
//! resync whose move loses to another writer has recorded versions that the other writer's commit
//! descends from; the follower holds that table too, until the resync runs again.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidemark_journal::store::ObjectStore;

use super::warehouse::{TableFiles, file_name};

/// The single record of format 1 (every walk of the table in one object), in the table's
/// metadata folder: still read, no longer written.
pub const LEGACY_RECORD_NAME: &str = "tidemark-resync.json";

/// A record of format 2 is `tidemark-resync-<id>.json` ([`record_name`]).
const RECORD_PREFIX: &str = "tidemark-resync-";

/// Version of the record's JSON written (1, the single record, is read too).
pub const FORMAT_VERSION: u32 = 2;

/// The walks back `replica resync` made on one table: one walk per record (format 2); every walk
/// of the table, oldest first, in a record of format 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResyncRecord {
    /// 2 (one record per walk, `tidemark-resync-<id>.json`); 1: the single `tidemark-resync.json`.
    pub format_version: u32,
    pub table: String,
    /// Whose walk it is: the demoted catalog the resync walked back (as `replica resync` reports
    /// it, no secrets); absent in format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demoted_catalog: Option<String>,
    pub walks: Vec<Walk>,
}

/// One walk back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Walk {
    /// The demoted pointer the walk started from.
    pub from: String,
    /// The version the pointer is moved back to.
    pub walked_back_to: String,
    /// The metadata files walked over, newest first (full locations): never a follower's head.
    pub walked_over: Vec<String>,
}

/// Whether `name` (a file name) is a resync record's: `tidemark-resync.json` (format 1) or
/// `tidemark-resync-<id>.json`.
pub fn is_record_name(name: &str) -> bool {
    name == LEGACY_RECORD_NAME
        || name
            .strip_prefix(RECORD_PREFIX)
            .and_then(|rest| rest.strip_suffix(".json"))
            .is_some_and(|id| !id.is_empty() && !id.ends_with(".metadata"))
}

/// The name of the record of `walk`: `tidemark-resync-<id>.json`, `<id>` the first 16 hex digits
/// of the SHA-256 of the walk (start, target, files walked over, in order). The same walk always
/// has the same name (a re-run after a crash finds its record); two different walks, from either
/// side of a replication, never share one.
pub fn record_name(walk: &Walk) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(b"tidemark-resync-walk\n");
    for part in [&walk.from, &walk.walked_back_to].into_iter().chain(&walk.walked_over) {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    let digest = format!("{:x}", h.finalize());
    format!("{RECORD_PREFIX}{}.json", &digest[..16])
}

/// Where the record of `walk` lives: beside the metadata file it started from.
pub fn record_location(walk: &Walk) -> String {
    match walk.from.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{}", record_name(walk)),
        None => record_name(walk),
    }
}

pub(super) fn parse(location: &str, bytes: &[u8]) -> Result<ResyncRecord, String> {
    let rec: ResyncRecord = serde_json::from_slice(bytes)
        .map_err(|e| format!("the resync record {location} is not a resync record: {e}; inspect it by hand"))?;
    if !(1..=FORMAT_VERSION).contains(&rec.format_version) {
        return Err(format!(
            "the resync record {location} has format_version {} (this tidemark reads 1 to {FORMAT_VERSION})",
            rec.format_version
        ));
    }
    Ok(rec)
}

/// The file names every walk of `rec` walked over.
pub(super) fn names(rec: &ResyncRecord) -> HashSet<String> {
    rec.walks
        .iter()
        .flat_map(|w| w.walked_over.iter().map(|f| file_name(f).to_string()))
        .collect()
}

/// Every record the listing found in the table folder `files` (`files.record_keys`), read, with
/// its key. A record listed and gone when read (deleted in between) is skipped; any other
/// failure to read or parse one is an error naming it (see the module documentation).
async fn read_all(store: &dyn ObjectStore, files: &TableFiles) -> Result<Vec<(String, ResyncRecord)>, String> {
    let mut out = Vec::with_capacity(files.record_keys.len());
    for key in &files.record_keys {
        match store.get(key, None).await {
            Ok(got) => out.push((key.clone(), parse(key, &got.body)?)),
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                return Err(format!(
                    "cannot read the resync record {key} ({e}): it may name metadata files a replica resync walked \
                     over, and without it one of them could be taken as the head; give read access to it"
                ));
            }
        }
    }
    Ok(out)
}

/// What [`exclude_recorded`] took out of a table's candidates: their keys, sorted, and a note for
/// the head choice naming the records (empty when nothing was taken out).
#[derive(Default)]
pub struct Excluded {
    pub keys: Vec<String>,
    pub note: String,
    /// The current snapshots of the files taken out that no remaining file has as its current
    /// one: main on one of them is main on a walked-over branch (a REST table's pointer is always
    /// the server's newest metadata file, whose log names the walked-over files even once main
    /// is walked back, so it is judged by its snapshot).
    pub snapshots: HashSet<i64>,
}

/// Reads the records of the table folder `files` (those a resync left) and removes from `parsed`
/// every metadata file one of them names and every file descending from one ([`exclude`]): what
/// a `replica resync` walked over is never a head, for the follower, `catalog rebuild` and
/// `replica check`. An error (a listed record that cannot be read or parsed) names the record;
/// the caller holds or refuses the table.
pub async fn exclude_recorded(
    store: &dyn ObjectStore,
    files: &TableFiles,
    parsed: &mut Vec<(String, Value)>,
) -> Result<Excluded, String> {
    let records = read_all(store, files).await?;
    if records.is_empty() {
        return Ok(Excluded::default());
    }
    let current = |j: &Value| {
        j.get("current-snapshot-id")
            .and_then(Value::as_i64)
            .filter(|id| *id >= 0)
    };
    let before: HashMap<String, Option<i64>> = parsed.iter().map(|(k, j)| (k.clone(), current(j))).collect();
    let walked: HashSet<String> = records.iter().flat_map(|(_, r)| names(r)).collect();
    let keys = exclude(parsed, &walked);
    let kept: HashSet<i64> = parsed.iter().filter_map(|(_, j)| current(j)).collect();
    let snapshots = keys
        .iter()
        .filter_map(|k| before.get(k).copied().flatten())
        .filter(|id| !kept.contains(id))
        .collect();
    let note = if keys.is_empty() {
        String::new()
    } else {
        let at: Vec<&str> = records.iter().map(|(k, _)| k.as_str()).collect();
        format!(
            "; {} metadata files walked over by replica resync (or descending from one), recorded in {}, are not \
             candidates (strays)",
            keys.len(),
            at.join(", ")
        )
    };
    Ok(Excluded { keys, note, snapshots })
}

/// Removes from `files` every file named in `walked` and every file whose metadata log names one
/// of them (its descendants); returns their keys, sorted.
pub fn exclude(files: &mut Vec<(String, Value)>, walked: &HashSet<String>) -> Vec<String> {
    let descends = |json: &Value| {
        json.get("metadata-log").and_then(Value::as_array).is_some_and(|log| {
            log.iter()
                .filter_map(|e| e.get("metadata-file").and_then(Value::as_str))
                .any(|f| walked.contains(file_name(f)))
        })
    };
    let mut out = Vec::new();
    files.retain(|(key, json)| {
        let gone = walked.contains(file_name(key)) || descends(json);
        if gone {
            out.push(key.clone());
        }
        !gone
    });
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(name: &str, log: &[&str]) -> (String, Value) {
        let log: Vec<Value> = log
            .iter()
            .map(|l| json!({"metadata-file": format!("s3://b/t/metadata/{l}"), "timestamp-ms": 1}))
            .collect();
        (format!("t/metadata/{name}"), json!({"metadata-log": log}))
    }

    #[test]
    fn walked_over_files_and_their_descendants_are_removed_the_rest_kept() {
        let mut files = vec![
            file("1.metadata.json", &[]),
            file("2a.metadata.json", &["1.metadata.json"]),
            file("3a.metadata.json", &["1.metadata.json", "2a.metadata.json"]),
            file("2b.metadata.json", &["1.metadata.json"]),
        ];
        let walked: HashSet<String> = ["2a.metadata.json".to_string()].into();
        let gone = exclude(&mut files, &walked);
        assert_eq!(gone, vec!["t/metadata/2a.metadata.json", "t/metadata/3a.metadata.json"]);
        let kept: Vec<&str> = files.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kept, vec!["t/metadata/1.metadata.json", "t/metadata/2b.metadata.json"]);
    }

    fn walk(from: &str, over: &[&str]) -> Walk {
        let at = |n: &str| format!("s3://b/wh/shop/orders/metadata/{n}");
        Walk {
            from: at(from),
            walked_back_to: at("00001-a.metadata.json"),
            walked_over: over.iter().map(|&n| at(n)).collect(),
        }
    }

    #[test]
    fn a_record_is_named_by_its_walk_and_lives_beside_the_file_it_started_from() {
        let w = walk(
            "00003-x.metadata.json",
            &["00003-x.metadata.json", "00002-x.metadata.json"],
        );
        let location = record_location(&w);
        let name = file_name(&location);
        assert_eq!(location, format!("s3://b/wh/shop/orders/metadata/{name}"));
        assert!(
            name.starts_with("tidemark-resync-") && name.ends_with(".json"),
            "{name}"
        );
        assert_eq!(name.len(), "tidemark-resync-".len() + 16 + ".json".len(), "{name}");
        assert!(is_record_name(name), "{name}");
        // The same walk, the same name (a re-run finds its record); another walk, another name.
        assert_eq!(record_name(&w.clone()), name);
        let other = walk(
            "00003-y.metadata.json",
            &["00003-y.metadata.json", "00002-y.metadata.json"],
        );
        assert_ne!(record_name(&other), name);
        let shorter = walk("00003-x.metadata.json", &["00003-x.metadata.json"]);
        assert_ne!(record_name(&shorter), name);
    }

    #[test]
    fn record_names_are_told_from_metadata_files_and_other_objects() {
        assert!(is_record_name("tidemark-resync.json"));
        assert!(is_record_name("tidemark-resync-0123456789abcdef.json"));
        for other in [
            "tidemark-resync-.json",
            "tidemark-resync-00001-x.metadata.json",
            "tidemark-resync.json.tmp",
            "00001-x.metadata.json",
            "version-hint.text",
        ] {
            assert!(!is_record_name(other), "{other}");
        }
    }
}

#[cfg(test)]
#[path = "resync_record_tests.rs"]
mod read_tests;
