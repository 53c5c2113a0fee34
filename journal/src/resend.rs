//! Idempotent re-sends: events an input repeats at positions the journal already holds.
//!
//! A producer that lost the reply to an append cannot tell what is in; it sends its batch again.
//! Each repeated event is compared with the stored one (every column, as the event object holds
//! it): identical events are a no-op, the first that differs is refused naming its position and
//! field, and nothing is appended. As message queues' idempotent producers do, this makes "send
//! again" always safe.

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::util::display::array_value_to_string;

use crate::codec;
use crate::error::{JournalError, Result};
use crate::journal::Journal;

/// The stored events at positions `first..=last` of the journal, in position order.
pub struct StoredRange {
    batches: Vec<RecordBatch>,
    /// Index of the batch and row holding the next position to compare.
    at: (usize, usize),
    pub next_position: u64,
    pub last: u64,
}

impl StoredRange {
    /// Reads the event objects of the manifests covering `first..=last` (exact versions, as the
    /// manifests record them).
    pub async fn load(journal: &Journal, first: u64, last: u64) -> Result<StoredRange> {
        let mut manifests = Vec::new();
        for seq in journal.manifest_sequences().await?.into_iter().rev() {
            let m = journal.read_manifest(seq, None).await?.manifest;
            if m.first_position > last {
                continue;
            }
            let done = m.first_position <= first;
            manifests.push(m);
            if done {
                break;
            }
        }
        manifests.reverse();
        let mut batches = Vec::new();
        for m in manifests {
            let got = journal.store.get(&m.object_key, Some(&m.object_version_id)).await?;
            batches.extend(codec::decode_parquet(&journal.spec, &m.object_key, got.body)?);
        }
        let mut range = StoredRange {
            batches,
            at: (0, 0),
            next_position: 0,
            last,
        };
        range.seek(first)?;
        Ok(range)
    }

    fn position(batch: &RecordBatch, row: usize) -> u64 {
        let col = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("position column is int64");
        col.value(row) as u64
    }

    fn seek(&mut self, first: u64) -> Result<()> {
        for (b, batch) in self.batches.iter().enumerate() {
            for row in 0..batch.num_rows() {
                if Self::position(batch, row) == first {
                    self.at = (b, row);
                    self.next_position = first;
                    return Ok(());
                }
            }
        }
        Err(JournalError::ChainBroken {
            key: "events/".into(),
            message: format!("position {first} is accepted by a manifest but not in its event object"),
        })
    }

    /// Compares the leading rows of `batch` that the journal already holds with the stored
    /// events; returns how many rows are already there (all identical), or the refusal.
    pub fn check(&mut self, source_name: &str, batch: &RecordBatch) -> Result<usize> {
        let mut row = 0;
        while row < batch.num_rows() && self.next_position <= self.last {
            let (b, r) = self.at;
            let stored = &self.batches[b];
            let position = Self::position(batch, row);
            debug_assert_eq!(position, Self::position(stored, r));
            for (c, field) in batch.schema().fields().iter().enumerate().skip(1) {
                let received = value(batch.column(c).as_ref(), row);
                let kept = value(stored.column(c).as_ref(), r);
                if received != kept {
                    return Err(JournalError::ResentEventDiffers {
                        source_name: source_name.to_string(),
                        position,
                        field: field.name().clone(),
                        stored: kept,
                        received,
                    });
                }
            }
            row += 1;
            self.next_position += 1;
            self.at = if r + 1 < stored.num_rows() {
                (b, r + 1)
            } else {
                (b + 1, 0)
            };
        }
        Ok(row)
    }
}

fn value(array: &dyn Array, row: usize) -> String {
    if array.is_null(row) {
        return "null".into();
    }
    array_value_to_string(array, row).unwrap_or_else(|e| format!("<{e}>"))
}
