//! The drill history: one create-only record per drill of a real table
//! ([`crate::rehearse::table_drill`]), under the location the operator names with `--history`.
//!
//! Layout of a history location (a folder or `s3://bucket/prefix`):
//!
//! - `drills/<started_at>-<drill_id>.json`: a [`DrillRecord`] (schemas/json/drill-record.json),
//!   written once with If-None-Match; `<started_at>` is the UTC start time as `YYYYMMDDTHHMMSSZ`,
//!   so the listing is in time order;
//! - `audits/<table uuid>/<snapshot>.json`: the drill's audit records (the audit of
//!   [`crate::audit`] keeps them here, never under the production journal).
//!
//! `tidemark drill history` reads the records back ([`load_records`]) and draws the trend
//! ([`crate::rehearse::trend`]).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidemark_journal::store::{ObjectStore, PutMode, StoreError, list_all};

/// Where the records are, under a history location.
pub const DRILLS_PREFIX: &str = "drills/";

/// One step of a drill, as the trend charts it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordStep {
    /// `scratch`, `audit`, `journal`, `route`, `choose snapshot`, `boundary`, `seed`, `replay`,
    /// `validate`, `cleanup`.
    pub step: String,
    /// When the step started, in milliseconds from the drill's start.
    pub start_ms: u64,
    pub ms: u64,
    pub ok: bool,
    pub detail: String,
}

/// A check of a drill: its name, whether it held, and what was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordCheck {
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

/// One drill of a real table: what the weekly drill proved, and how long each step took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrillRecord {
    pub format_version: u32,
    pub drill_id: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    /// RFC 3339, UTC.
    pub finished_at: String,
    /// The version of the tidemark that ran the drill.
    pub tidemark_version: String,
    /// The production table (`namespace.name`), or the replica's table location (its metadata
    /// file's folder's parent: the same from one commit to the next).
    pub source: String,
    pub journal: String,
    /// Every check held and every step finished.
    pub ok: bool,
    /// `pass`, or what failed (the failed checks, or the step that failed and its error).
    pub verdict: String,
    /// The recovery's steps end to end (audit to validation), in milliseconds.
    pub rto_ms: u64,
    /// `--rto-budget`, in milliseconds.
    pub rto_budget_ms: Option<u64>,
    /// Journal positions beyond the trusted snapshot's (what a recovery now would replay).
    pub rpo_positions: Option<u64>,
    /// Seconds from the trusted snapshot's commit to the drill's journal step (when the journal
    /// head was read).
    pub rpo_seconds: Option<f64>,
    /// Rows of the recovered (scratch) table.
    pub rows: u64,
    pub events_replayed: u64,
    /// Bytes the drill's process read, local files and network alike (`/proc/self/io` `rchar`;
    /// 0 where it cannot be read).
    pub bytes_read: u64,
    /// The process's peak resident memory, in bytes (0 where it cannot be read).
    pub peak_memory_bytes: u64,
    pub trusted_snapshot_id: Option<i64>,
    pub trusted_position: Option<u64>,
    /// The journal boundary the drill recovered to.
    pub h: Option<u64>,
    pub steps: Vec<RecordStep>,
    pub checks: Vec<RecordCheck>,
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("drill record {key} is not a drill record: {message}")]
    Format { key: String, message: String },
}

/// `2026-12-03T17:26:39Z` → `20261203T172639Z` (the record key's time part).
fn compact_time(rfc3339: &str) -> String {
    rfc3339
        .chars()
        .take_while(|c| *c != '.' && *c != '+')
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        + "Z"
}

/// The record's key under the history location.
pub fn record_key(r: &DrillRecord) -> String {
    format!("{DRILLS_PREFIX}{}-{}.json", compact_time(&r.started_at), r.drill_id)
}

/// Stores `r` once (If-None-Match); returns its key.
pub async fn store_record(store: &dyn ObjectStore, r: &DrillRecord) -> Result<String, HistoryError> {
    let key = record_key(r);
    let body = serde_json::to_vec_pretty(r).expect("a drill record serializes");
    store.put(&key, Bytes::from(body), PutMode::Create).await?;
    Ok(key)
}

/// Every record of the history, oldest first.
pub async fn load_records(store: &dyn ObjectStore) -> Result<Vec<DrillRecord>, HistoryError> {
    let mut out = Vec::new();
    for meta in list_all(store, DRILLS_PREFIX).await? {
        if !meta.key.ends_with(".json") {
            continue;
        }
        let body = store.get(&meta.key, None).await?.body;
        let r: DrillRecord = serde_json::from_slice(&body).map_err(|e| HistoryError::Format {
            key: meta.key.clone(),
            message: e.to_string(),
        })?;
        out.push(r);
    }
    out.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.drill_id.cmp(&b.drill_id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_sort_by_start_time() {
        assert_eq!(compact_time("2026-12-03T17:26:39Z"), "20261203T172639Z");
        assert_eq!(compact_time("2026-12-03T17:26:39.123456Z"), "20261203T172639Z");
        assert_eq!(compact_time("2026-12-03T17:26:39+00:00"), "20261203T172639Z");
    }
}
