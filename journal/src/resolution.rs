//! Resolutions: the way past a conflict that a journal already holds.
//!
//! A journal is append-only and its chain of digests proves that no batch was changed, so a
//! conflicting event that got in (before `append` refused conflicts, or older than its window;
//! see [`crate::conflict`]) cannot be removed or edited. Instead the operator records a decision:
//! `tidemark journal resolve --key K --version V --keep-position P --reason TEXT` writes a
//! [`Resolution`] create-only at [`paths::resolution_key`]. From then on, of the events with key K
//! and version V only the one at P counts; every other one is void: [`Resolutions::filter`] drops
//! them wherever events are read for apply, recovery and validation, and the append conflict
//! check ignores them. The decision is itself versioned data in the journal's store, names who
//! decided why, and is never replaced (a second, different resolution of the same key and
//! version is refused).

use std::collections::HashMap;

use arrow_array::{Array, BooleanArray, Int32Array, Int64Array, RecordBatch};
use bytes::Bytes;
use tidemark_schemas::{FORMAT_VERSION, Resolution};

use crate::clock::Clock;
use crate::error::{JournalError, Result};
use crate::journal::Journal;
use crate::paths;
use crate::store::{PutMode, list_all};
use crate::verify::{VerifyOptions, verify};

/// Every resolution recorded in the journal, in key order.
pub async fn load(journal: &Journal) -> Result<Vec<Resolution>> {
    let mut out = Vec::new();
    for obj in list_all(journal.store.as_ref(), paths::RESOLUTIONS_PREFIX).await? {
        let got = journal.store.get(&obj.key, None).await?;
        let r: Resolution = serde_json::from_slice(&got.body).map_err(|e| JournalError::Format {
            context: format!("resolution {}", obj.key),
            message: e.to_string(),
        })?;
        if paths::resolution_key(&r.key, r.version) != obj.key || r.journal_id != journal.header.journal_id {
            return Err(JournalError::Format {
                context: format!("resolution {}", obj.key),
                message: format!(
                    "its content (key {} version {}, journal {}) does not belong at this key of journal {}",
                    r.key, r.version, r.journal_id, journal.header.journal_id
                ),
            });
        }
        out.push(r);
    }
    Ok(out)
}

/// The recorded resolutions, ready to filter event batches.
#[derive(Debug, Clone, Default)]
pub struct Resolutions {
    keep: HashMap<(String, i64), u64>,
}

impl Resolutions {
    pub async fn load(journal: &Journal) -> Result<Self> {
        Ok(Resolutions {
            keep: load(journal)
                .await?
                .into_iter()
                .map(|r| ((r.key, r.version), r.keep_position))
                .collect(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.keep.is_empty()
    }

    /// `batch` (event schema of `journal`) without the events a resolution voids.
    pub fn filter(&self, journal: &Journal, batch: RecordBatch) -> Result<RecordBatch> {
        if self.keep.is_empty() || batch.num_rows() == 0 {
            return Ok(batch);
        }
        let (k, v) = (
            journal.spec.event_column(journal.spec.key_index),
            journal.spec.event_column(journal.spec.version_index),
        );
        let positions = batch.column(0).as_any().downcast_ref::<Int64Array>();
        let mask: BooleanArray = (0..batch.num_rows())
            .map(|row| {
                let key = arrow::util::display::array_value_to_string(batch.column(k), row).unwrap_or_default();
                let version = version_at(batch.column(v).as_ref(), row);
                let position = positions.map(|p| p.value(row) as u64);
                Some(match self.keep.get(&(key, version)) {
                    Some(&keep) => position == Some(keep),
                    None => true,
                })
            })
            .collect();
        arrow::compute::filter_record_batch(&batch, &mask).map_err(|e| JournalError::Format {
            context: "applying resolutions".into(),
            message: e.to_string(),
        })
    }
}

fn version_at(col: &dyn Array, row: usize) -> i64 {
    if let Some(a) = col.as_any().downcast_ref::<Int64Array>() {
        a.value(row)
    } else if let Some(a) = col.as_any().downcast_ref::<Int32Array>() {
        i64::from(a.value(row))
    } else {
        0
    }
}

/// Records that of the events with `key` and `version`, only the one at `keep_position` counts.
/// Reads the verified journal to find every position holding that key and version; refuses when
/// there is no conflict to resolve or `keep_position` is not one of them. Writing the same
/// resolution again returns the stored one; a different one for the same key and version is
/// refused ([`JournalError::ResolutionExists`]).
pub async fn resolve(
    journal: &Journal,
    key: &str,
    version: i64,
    keep_position: u64,
    reason: &str,
    clock: &dyn Clock,
) -> Result<Resolution> {
    let invalid = |message: String| JournalError::Input {
        source_name: "resolve".into(),
        line: 0,
        message,
    };
    if reason.trim().is_empty() {
        return Err(invalid(
            "--reason is empty: say why this event is the one that counts".into(),
        ));
    }
    let chain = verify(journal, &VerifyOptions::default(), &mut |_| {}).await?;
    if let Some(b) = &chain.report.first_break {
        return Err(JournalError::ChainBroken {
            key: b.key.clone(),
            message: format!(
                "{}: {}; a journal that does not verify cannot be resolved",
                b.kind, b.message
            ),
        });
    }
    let (k, v) = (
        journal.spec.event_column(journal.spec.key_index),
        journal.spec.event_column(journal.spec.version_index),
    );
    let mut positions = Vec::new();
    for m in chain.range(0, u64::MAX) {
        let got = journal
            .store
            .get(&m.manifest.object_key, Some(&m.manifest.object_version_id))
            .await?;
        for b in crate::codec::decode_parquet(&journal.spec, &m.manifest.object_key, got.body)? {
            let pos = b.column(0).as_any().downcast_ref::<Int64Array>().expect("positions");
            for row in 0..b.num_rows() {
                if version_at(b.column(v).as_ref(), row) == version
                    && arrow::util::display::array_value_to_string(b.column(k), row).is_ok_and(|s| s == key)
                {
                    positions.push(pos.value(row) as u64);
                }
            }
        }
    }
    if !positions.contains(&keep_position) {
        return Err(invalid(format!(
            "position {keep_position} does not hold key {key} version {version} (positions that do: {positions:?})"
        )));
    }
    if positions.len() < 2 {
        return Err(invalid(format!(
            "key {key} version {version} has one event (position {keep_position}): there is no conflict to resolve"
        )));
    }
    let resolution = Resolution {
        format_version: FORMAT_VERSION,
        journal_id: journal.header.journal_id.clone(),
        key: key.to_string(),
        version,
        keep_position,
        void_positions: positions.into_iter().filter(|p| *p != keep_position).collect(),
        reason: reason.to_string(),
        written_at: clock.now_rfc3339(),
    };
    let object = paths::resolution_key(key, version);
    let body = serde_json::to_vec_pretty(&resolution).expect("resolution serializes");
    match journal.store.put(&object, Bytes::from(body), PutMode::Create).await {
        Ok(_) => Ok(resolution),
        Err(e) if e.is_conflict() => {
            let existing = load(journal)
                .await?
                .into_iter()
                .find(|r| r.key == key && r.version == version);
            match existing {
                Some(r) if r.keep_position == keep_position => Ok(r),
                Some(r) => Err(JournalError::ResolutionExists {
                    key: object,
                    kept: r.keep_position,
                    asked: keep_position,
                }),
                None => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}
