//! Reading a journal's events by position: the one place events are read.
//!
//! Every boundary tidemark records or takes is a **position**, any position, also one inside a
//! batch: a consumer that applied up to P resumes with P + 1, which may be in the middle of the
//! batch that holds P ([`crate::verify::ChainPoint::holding`] anchors the verified chain before
//! that batch, and the readers here drop the positions at or below P).
//!
//! Two readers:
//! * [`read_events`] / [`read_manifest_events`]: the events `(after, to]` of manifests the
//!   verifier already checked (the applier, the replay), sliced by offset (a verified object's
//!   positions are contiguous from its first).
//! * [`ByPosition`]: the validation's own reader. It shares nothing with the replay's choice of
//!   manifests: it lists the journal's manifests, finds those holding `(after, to]` by their
//!   recorded positions, checks that they follow each other (sequence, positions, previous
//!   digest), reads each event object at its recorded version, checks its sha256 against the
//!   manifest, and selects rows by the value of their `journal_position` column, requiring every
//!   position of the range exactly once. A replay that skipped or repeated events is then
//!   compared against the events it should have read, never against its own selection.

use arrow::array::{Array, Int64Array, RecordBatch};

use crate::codec;
use crate::error::{JournalError, Result};
use crate::journal::{Journal, StoredManifest};
use crate::resolution::Resolutions;

/// Reads the events of `manifests` with positions in `(after, to]`, without the events a
/// recorded resolution voids ([`crate::resolution`]).
pub async fn read_events(
    journal: &Journal,
    manifests: &[&StoredManifest],
    after: u64,
    to: u64,
) -> Result<Vec<RecordBatch>> {
    let resolutions = Resolutions::load(journal).await?;
    let mut out = Vec::new();
    for m in manifests {
        out.extend(read_manifest_events(journal, &resolutions, m, after, to).await?);
    }
    Ok(out)
}

/// [`read_events`] of one verified manifest, with the resolutions already loaded (for a reader
/// that streams the range one manifest at a time).
pub async fn read_manifest_events(
    journal: &Journal,
    resolutions: &Resolutions,
    m: &StoredManifest,
    after: u64,
    to: u64,
) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let got = journal
        .store
        .get(&m.manifest.object_key, Some(&m.manifest.object_version_id))
        .await?;
    // The decoding runs on a blocking thread, so that the two objects a streaming reader keeps
    // in flight decode on both cores (futures polled in one task share one).
    let (spec, key) = (journal.spec.clone(), m.manifest.object_key.clone());
    let decoded = tokio::task::spawn_blocking(move || codec::decode_parquet(&spec, &key, got.body))
        .await
        .map_err(|e| task_failed(&m.manifest.object_key, e))??;
    let mut first = m.manifest.first_position;
    for b in decoded {
        let rows = b.num_rows() as u64;
        // Batches are position-contiguous from the manifest's first (verified), so offsets are
        // positions: this decoded batch holds `first..first + rows`.
        let lo = (after + 1).saturating_sub(first).min(rows) as usize;
        let hi = (to + 1).saturating_sub(first).min(rows) as usize;
        if hi > lo {
            out.push(resolutions.filter(journal, b.slice(lo, hi - lo))?);
        }
        first += rows;
    }
    Ok(out)
}

/// The error of a reading task that panicked or was cancelled.
fn task_failed(key: &str, e: tokio::task::JoinError) -> JournalError {
    JournalError::Format {
        context: format!("reading event object {key}"),
        message: format!("the reading task failed: {e}"),
    }
}

fn range_error(after: u64, to: u64, message: String) -> JournalError {
    JournalError::Format {
        context: format!("the journal's events at positions {}..={to}", after + 1),
        message,
    }
}

/// The validation's own reader of the events `(after, to]` (see the module documentation).
#[derive(Debug, Clone)]
pub struct ByPosition {
    pub after: u64,
    pub to: u64,
    /// The manifests that hold the range, in order, checked to follow each other.
    pub manifests: Vec<StoredManifest>,
    resolutions: Resolutions,
}

impl ByPosition {
    /// Finds the manifests holding `(after, to]` from the journal's own listing: a binary search
    /// by recorded positions for the first, then each next sequence until `to`. Refuses a range
    /// the manifests do not hold whole, or manifests that do not follow each other.
    pub async fn select(journal: &Journal, after: u64, to: u64) -> Result<ByPosition> {
        let resolutions = Resolutions::load(journal).await?;
        if to <= after {
            return Ok(ByPosition {
                after,
                to,
                manifests: Vec::new(),
                resolutions,
            });
        }
        let seqs = journal.manifest_sequences().await?;
        // The first manifest whose last position is above `after`.
        let (mut lo, mut hi) = (0usize, seqs.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let m = journal.read_manifest(seqs[mid], None).await?;
            if m.manifest.last_position > after {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let mut manifests: Vec<StoredManifest> = Vec::new();
        for &seq in &seqs[lo..] {
            let m = journal.read_manifest(seq, None).await?;
            match manifests.last() {
                None if m.manifest.first_position > after + 1 => {
                    return Err(range_error(
                        after,
                        to,
                        format!(
                            "no manifest holds position {}: the first one after it ({}) starts at {}",
                            after + 1,
                            m.key,
                            m.manifest.first_position
                        ),
                    ));
                }
                None => {}
                Some(prev) => {
                    let (p, n) = (&prev.manifest, &m.manifest);
                    if n.sequence != p.sequence + 1
                        || n.first_position != p.last_position + 1
                        || n.previous_digest.as_deref() != Some(prev.digest.as_str())
                    {
                        return Err(range_error(
                            after,
                            to,
                            format!(
                                "manifest {} (sequence {}, positions {}..={}) does not follow {} (sequence {}, positions {}..={}, digest {})",
                                m.key,
                                n.sequence,
                                n.first_position,
                                n.last_position,
                                prev.key,
                                p.sequence,
                                p.first_position,
                                p.last_position,
                                prev.digest
                            ),
                        ));
                    }
                }
            }
            let last = m.manifest.last_position;
            manifests.push(m);
            if last >= to {
                break;
            }
        }
        let held = manifests.last().map(|m| m.manifest.last_position).unwrap_or(after);
        if held < to {
            return Err(range_error(
                after,
                to,
                format!("the journal's manifests end at position {held}"),
            ));
        }
        Ok(ByPosition {
            after,
            to,
            manifests,
            resolutions,
        })
    }

    /// The events the range holds (before resolutions void any).
    pub fn events(&self) -> u64 {
        self.to.saturating_sub(self.after)
    }

    /// The events of the `i`-th selected manifest within the range: its event object read at
    /// the recorded version, its sha256 checked, its rows chosen by their position values (each
    /// position of the manifest's part of the range exactly once, in order), then resolutions.
    pub async fn read(&self, journal: &Journal, i: usize) -> Result<Vec<RecordBatch>> {
        let m = &self.manifests[i];
        let (key, version) = (&m.manifest.object_key, &m.manifest.object_version_id);
        let got = journal.store.get(key, Some(version)).await?;
        let body = got.body;
        let spec = journal.spec.clone();
        let (after, to) = (self.after, self.to);
        let (want_first, want_last) = (
            m.manifest.first_position.max(after + 1),
            m.manifest.last_position.min(to),
        );
        let (expected_sha, key_owned, version_owned) = (m.manifest.object_sha256.clone(), key.clone(), version.clone());
        let batches = tokio::task::spawn_blocking(move || -> Result<Vec<RecordBatch>> {
            let actual = crate::sha256_digest(&body);
            if actual != expected_sha {
                return Err(JournalError::Format {
                    context: format!("event object {key_owned} version {version_owned}"),
                    message: format!("its sha256 is {actual}, its manifest records {expected_sha}"),
                });
            }
            let mut next = want_first;
            let mut out = Vec::new();
            for b in codec::decode_parquet(&spec, &key_owned, body)? {
                let positions =
                    b.column(0)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .ok_or_else(|| JournalError::Format {
                            context: format!("event object {key_owned}"),
                            message: "its first column is not the int64 journal_position".into(),
                        })?;
                let mut keep = Vec::new();
                for row in 0..positions.len() {
                    let p = positions.value(row) as u64;
                    if p <= after || p > to {
                        continue;
                    }
                    if p != next {
                        return Err(JournalError::Format {
                            context: format!("event object {key_owned}"),
                            message: format!("expected position {next}, found {p}"),
                        });
                    }
                    next += 1;
                    keep.push(row as u64);
                }
                if keep.len() == b.num_rows() {
                    out.push(b);
                } else if !keep.is_empty() {
                    let idx = arrow::array::UInt64Array::from(keep);
                    out.push(
                        arrow::compute::take_record_batch(&b, &idx).map_err(|e| JournalError::Format {
                            context: format!("event object {key_owned}"),
                            message: e.to_string(),
                        })?,
                    );
                }
            }
            if next != want_last + 1 {
                return Err(JournalError::Format {
                    context: format!("event object {key_owned}"),
                    message: format!(
                        "positions {want_first}..={want_last} expected, it holds them up to {}",
                        next - 1
                    ),
                });
            }
            Ok(out)
        })
        .await
        .map_err(|e| task_failed(key, e))??;
        batches
            .into_iter()
            .map(|b| self.resolutions.filter(journal, b))
            .collect()
    }
}
