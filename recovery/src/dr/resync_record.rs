//! The record `replica resync` leaves beside a walked-back table's metadata files
//! (`<table>/metadata/tidemark-resync.json`, schema `resync-record`), and how a later follower
//! into that table reads it.
//!
//! The metadata files a resync walks over stay in the demoted warehouse (nothing is deleted),
//! and their chain may be longer than the new primary's since the fork: a follower choosing a
//! head by the longest chain would choose them and move the table back. The record names them,
//! so [`exclude`] removes them and every file descending from them from the candidates before the
//! head is chosen (they are reported as strays, with the reason). No flag is needed: the follower
//! finds the record where it lists the table's metadata files.
//!
//! The record is written conditionally, so that two resyncs of one table never lose a walk
//! (`super::resync_record_write`).
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

use super::rebuild::{TableFiles, file_name};

/// The record's name, in the table's metadata folder.
pub const RECORD_NAME: &str = "tidemark-resync.json";

/// Version of the record's JSON.
pub const FORMAT_VERSION: u32 = 1;

/// Every walk back `replica resync` made on one table, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResyncRecord {
    pub format_version: u32,
    pub table: String,
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

/// `<folder of metadata_location>/tidemark-resync.json`.
pub fn location_beside(metadata_location: &str) -> String {
    match metadata_location.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{RECORD_NAME}"),
        None => RECORD_NAME.to_string(),
    }
}

pub(super) fn parse(location: &str, bytes: &[u8]) -> Result<ResyncRecord, String> {
    let rec: ResyncRecord = serde_json::from_slice(bytes)
        .map_err(|e| format!("the resync record {location} is not a resync record: {e}; inspect it by hand"))?;
    if rec.format_version != FORMAT_VERSION {
        return Err(format!(
            "the resync record {location} has format_version {} (this tidemark reads {FORMAT_VERSION})",
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

/// The record of a table folder of a warehouse, when a resync left one. Its key, for messages,
/// comes with it.
async fn read(store: &dyn ObjectStore, files: &TableFiles) -> Result<Option<(String, ResyncRecord)>, String> {
    let Some(first) = files.metadata_keys.first() else {
        return Ok(None);
    };
    let key = location_beside(first);
    match store.get(&key, None).await {
        Ok(got) => parse(&key, &got.body).map(|r| Some((key, r))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(format!("cannot read the resync record {key}: {e}")),
    }
}

/// What [`exclude_recorded`] took out of a table's candidates: their keys, sorted, and a note for
/// the head choice naming the record (empty when nothing was taken out).
pub struct Excluded {
    pub keys: Vec<String>,
    pub note: String,
    /// The current snapshots of the files taken out that no remaining file has as its current
    /// one: main on one of them is main on a walked-over branch (a REST table's pointer is always
    /// the server's newest metadata file, whose log names the walked-over files even once main
    /// is walked back, so it is judged by its snapshot).
    pub snapshots: HashSet<i64>,
}

/// Reads the record of the table folder `files` (if a resync left one) and removes from `parsed`
/// every metadata file it names and every file descending from one ([`exclude`]): what a
/// `replica resync` walked over is never a head, for the follower and for `catalog rebuild`.
pub async fn exclude_recorded(
    store: &dyn ObjectStore,
    files: &TableFiles,
    parsed: &mut Vec<(String, Value)>,
) -> Result<Excluded, String> {
    let Some((key, rec)) = read(store, files).await? else {
        return Ok(Excluded {
            keys: Vec::new(),
            note: String::new(),
            snapshots: HashSet::new(),
        });
    };
    let current = |j: &Value| {
        j.get("current-snapshot-id")
            .and_then(Value::as_i64)
            .filter(|id| *id >= 0)
    };
    let before: HashMap<String, Option<i64>> = parsed.iter().map(|(k, j)| (k.clone(), current(j))).collect();
    let keys = exclude(parsed, &names(&rec));
    let kept: HashSet<i64> = parsed.iter().filter_map(|(_, j)| current(j)).collect();
    let snapshots = keys
        .iter()
        .filter_map(|k| before.get(k).copied().flatten())
        .filter(|id| !kept.contains(id))
        .collect();
    let note = if keys.is_empty() {
        String::new()
    } else {
        format!(
            "; {} metadata files walked over by replica resync (or descending from one), recorded in {key}, are not \
             candidates (strays)",
            keys.len()
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

    #[test]
    fn the_record_lives_beside_the_metadata_file() {
        assert_eq!(
            location_beside("s3://b/wh/shop/orders/metadata/00003-x.metadata.json"),
            "s3://b/wh/shop/orders/metadata/tidemark-resync.json"
        );
    }
}
