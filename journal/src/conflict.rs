//! Conflicts refused at the door: two events with the same key and version and a different
//! payload.
//!
//! The merge rules make such a pair a conflict that stops every `apply` and every recovery whose
//! range holds both, so the journal must not accept one. `append` checks every event of its input
//! against the rest of the input (the whole input, whatever its size: 32 bytes of digests per
//! event) and against the events the journal already holds in its last [`window`] positions
//! (reading those costs one GET per batch; older stored events are not read). A conflict is
//! refused with the line and position of both events ([`JournalError::ConflictingEvent`],
//! exit 3) and nothing is written. Identical retries (same key, version and payload) are not
//! conflicts.
//!
//! A journal that already holds a conflict (written before this check, or older than the window)
//! is resolved explicitly with a recorded resolution (see [`crate::resolution`]); the stored
//! events it voids are ignored here as everywhere else, and a new event is checked against the
//! one it keeps.

use std::collections::HashMap;

use arrow::row::{RowConverter, SortField};
use arrow_array::{Array, Int64Array, RecordBatch};
use sha2::{Digest, Sha256};

use crate::error::{JournalError, Result};
use crate::journal::Journal;
use crate::spec::CompiledSpec;

/// Positions of the stored journal checked by default (`TIDEMARK_CONFLICT_WINDOW` overrides it;
/// `0` checks the input only).
pub const DEFAULT_WINDOW: u64 = 100_000;

/// The window from `TIDEMARK_CONFLICT_WINDOW`, or [`DEFAULT_WINDOW`].
pub fn window() -> u64 {
    std::env::var("TIDEMARK_CONFLICT_WINDOW")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_WINDOW)
}

/// Where an event seen before came from.
#[derive(Debug, Clone, Copy)]
struct Seen {
    payload: [u8; 16],
    position: u64,
    /// Input line; `None` for an event already in the journal.
    line: Option<u64>,
}

/// Digests of `(key, version)` → payload of every event seen so far.
pub struct ConflictIndex {
    key_index: usize,
    version_index: usize,
    seen: HashMap<[u8; 16], Seen>,
    /// `(key text, version)` → the only position that counts (recorded resolutions).
    resolved: HashMap<(String, i64), u64>,
}

fn digest16(bytes: &[u8]) -> [u8; 16] {
    let d = Sha256::digest(bytes);
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

fn arrow_err(e: arrow_schema::ArrowError) -> JournalError {
    JournalError::Format {
        context: "conflict check".into(),
        message: e.to_string(),
    }
}

impl ConflictIndex {
    pub fn new(spec: &CompiledSpec) -> Self {
        ConflictIndex {
            key_index: spec.event_column(spec.key_index),
            version_index: spec.event_column(spec.version_index),
            seen: HashMap::new(),
            resolved: HashMap::new(),
        }
    }

    /// An index of the journal's stored events in its last `window` positions (and its
    /// resolutions), for checking an append.
    pub async fn for_append(journal: &Journal, window: u64) -> Result<Self> {
        let mut index = ConflictIndex::new(&journal.spec);
        index.resolved = crate::resolution::load(journal)
            .await?
            .into_iter()
            .map(|r| ((r.key, r.version), r.keep_position))
            .collect();
        if window == 0 {
            return Ok(index);
        }
        let sequences = journal.manifest_sequences().await?;
        let Some(&head) = sequences.last() else {
            return Ok(index);
        };
        let head_last = journal.read_manifest(head, None).await?.manifest.last_position;
        let from = head_last.saturating_sub(window - 1).max(1);
        for &seq in sequences.iter().rev() {
            let m = journal.read_manifest(seq, None).await?.manifest;
            let got = journal.store.get(&m.object_key, Some(&m.object_version_id)).await?;
            for b in crate::codec::decode_parquet(&journal.spec, &m.object_key, got.body)? {
                index.add(&b, None, None)?;
            }
            if m.first_position <= from {
                break;
            }
        }
        Ok(index)
    }

    /// Checks one batch of input events (`lines[i]` is the input line of row `i`) against every
    /// event seen so far, then remembers them. The first conflict is an error naming both events.
    pub fn check(&mut self, source_name: &str, batch: &RecordBatch, lines: &[u64]) -> Result<()> {
        self.add(batch, Some(lines), Some(source_name))
    }

    fn add(&mut self, batch: &RecordBatch, lines: Option<&[u64]>, source_name: Option<&str>) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let schema = batch.schema();
        let id_cols = [
            batch.column(self.key_index).clone(),
            batch.column(self.version_index).clone(),
        ];
        let payload_cols: Vec<_> = batch.columns()[1..].to_vec();
        let fields = |cols: &[arrow_array::ArrayRef]| {
            cols.iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect::<Vec<_>>()
        };
        let ids = RowConverter::new(fields(&id_cols[..]))
            .and_then(|c| c.convert_columns(&id_cols[..]))
            .map_err(arrow_err)?;
        let payloads = RowConverter::new(fields(&payload_cols))
            .and_then(|c| c.convert_columns(&payload_cols))
            .map_err(arrow_err)?;
        let positions = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| JournalError::Format {
                context: "conflict check".into(),
                message: format!("column {} is not the int64 position", schema.field(0).name()),
            })?;
        for row in 0..batch.num_rows() {
            let position = positions.value(row) as u64;
            if lines.is_none() && !self.resolved.is_empty() {
                let (key, version) = self.identity(batch, row);
                if self.resolved.get(&(key, version)).is_some_and(|&keep| keep != position) {
                    continue; // a stored event a recorded resolution voids: it never counts
                }
            }
            let id = digest16(ids.row(row).as_ref());
            let now = Seen {
                payload: digest16(payloads.row(row).as_ref()),
                position,
                line: lines.map(|l| l[row]),
            };
            match self.seen.get(&id) {
                None => {
                    self.seen.insert(id, now);
                }
                Some(first) if first.payload == now.payload => {}
                Some(first) => {
                    let Some(source_name) = source_name else {
                        continue; // two stored events: not this append's to judge
                    };
                    let (key, version) = self.identity(batch, row);
                    return Err(JournalError::ConflictingEvent {
                        source_name: source_name.to_string(),
                        key,
                        version,
                        first_line: first.line,
                        first_position: first.position,
                        second_line: now.line.unwrap_or(0),
                        second_position: now.position,
                    });
                }
            }
        }
        Ok(())
    }

    fn identity(&self, batch: &RecordBatch, row: usize) -> (String, i64) {
        let key = arrow::util::display::array_value_to_string(batch.column(self.key_index), row).unwrap_or_default();
        let v = batch.column(self.version_index);
        let version = if let Some(a) = v.as_any().downcast_ref::<Int64Array>() {
            a.value(row)
        } else if let Some(a) = v.as_any().downcast_ref::<arrow_array::Int32Array>() {
            i64::from(a.value(row))
        } else {
            0
        };
        (key, version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::NdjsonReader;

    fn ev(pos: u64, id: &str, version: i64, status: &str) -> String {
        format!(
            r#"{{"position":{pos},"order_id":"{id}","order_version":{version},"customer_id":"c","status":"{status}","amount":"1.50","currency":"EUR","is_deleted":false,"event_time":"2026-11-29T08:00:00Z"}}"#
        ) + "\n"
    }

    fn check_all(input: &str, batch_size: usize) -> Result<()> {
        let spec = CompiledSpec::orders();
        let mut index = ConflictIndex::new(&spec);
        let mut r = NdjsonReader::new(&spec, input.as_bytes(), "in", 1);
        while let Some(b) = r.next_batch(batch_size)? {
            index.check("in", &b, r.last_lines())?;
        }
        Ok(())
    }

    #[test]
    fn a_different_payload_for_one_key_and_version_names_both_lines() {
        let input = ev(1, "A", 1, "placed") + "\n" + &ev(2, "B", 1, "placed") + &ev(3, "A", 1, "paid");
        for batch in [1, 2, 10] {
            let err = check_all(&input, batch).unwrap_err();
            assert!(matches!(err, JournalError::ConflictingEvent { .. }), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains("in:4") && msg.contains("key A version 1") && msg.contains("line 1 (position 1)"),
                "{msg}"
            );
        }
    }

    #[test]
    fn retries_and_new_versions_are_not_conflicts() {
        let input = ev(1, "A", 1, "placed") + &ev(2, "A", 1, "placed") + &ev(3, "A", 2, "paid");
        check_all(&input, 2).unwrap();
    }
}
