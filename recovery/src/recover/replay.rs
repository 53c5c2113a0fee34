//! Step 4: replay the verified journal events after the snapshot's position up to H into the
//! seeded table, as one unit of the merge rules (versioned upserts are order-independent, so the
//! whole range is one commit; conflicts are still caught). The commit's summary records the
//! provenance: recovery id, source snapshot, journal range, H and the digest of the manifest that
//! holds H.
//!
//! Memory does not grow with the range: the events are read one manifest at a time and, beyond
//! a bound ([`super::RecoverOptions::partition_rows`], default
//! [`super::validate::PARTITION_ROWS`]), spilled to disk and merged in key ranges of about that
//! many events ([`crate::apply::spill`]).

use std::collections::HashMap;

use futures::StreamExt;
use iceberg::table::Table;
use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;
use tidemark_journal::verify::{ChainPoint, VerifiedChain, VerifyOptions, verify};

use super::RecoverError;
use super::seed::{PROP_RECOVERY_ID, PROP_SOURCE_SNAPSHOT, PROP_STEP};
use super::snapshot::TrustedSnapshot;
use crate::apply::spill::EventSpill;
use crate::apply::{
    PROP_FIRST_POSITION, PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_MANIFEST_DIGEST, PROP_MANIFEST_SEQUENCE, UnitEvents,
    merge_and_commit, read_events, read_manifest_events,
};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::MergeStats;

/// The verified events `(snap.position, h]` and the manifest that holds H (sequence, digest): in
/// memory while they are at most `in_memory`, else spilled under `spill_dir` (the spill folder
/// is removed when the events are dropped).
pub async fn verified_replay_events(
    journal: &Journal,
    verified: &VerifiedRange,
    snap: &TrustedSnapshot,
    spill_dir: &std::path::Path,
    in_memory: u64,
) -> Result<(UnitEvents, u64, String), RecoverError> {
    let (h, (sequence, digest)) = (verified.h, verified.holder(snap));
    let mut stream = events_of(journal, &verified.chain, snap.position, h).await?;
    let (mut held, mut rows, mut spill) = (Vec::new(), 0u64, None::<EventSpill>);
    while let Some(batches) = stream.next().await {
        for b in batches? {
            rows += b.num_rows() as u64;
            match &mut spill {
                Some(s) => s.write(&b).map_err(RecoverError::from_apply)?,
                None => {
                    held.push(b);
                    if rows > in_memory {
                        let mut s = EventSpill::create(&journal.spec, spill_dir).map_err(RecoverError::from_apply)?;
                        for b in held.drain(..) {
                            s.write(&b).map_err(RecoverError::from_apply)?;
                        }
                        spill = Some(s);
                    }
                }
            }
        }
    }
    let events = match spill {
        Some(s) => UnitEvents::Spilled(s.finish().map_err(RecoverError::from_apply)?),
        None => UnitEvents::Batches(held),
    };
    Ok((events, sequence, digest))
}

/// The verified events `(snap.position, h]` in memory and the manifest that holds H (sequence,
/// digest), for an engine that takes them whole.
pub async fn verified_events(
    journal: &Journal,
    verified: &VerifiedRange,
    snap: &TrustedSnapshot,
) -> Result<(Vec<arrow::array::RecordBatch>, u64, String), RecoverError> {
    let (h, (sequence, digest)) = (verified.h, verified.holder(snap));
    let manifests: Vec<_> = verified.chain.range(snap.position, h).collect();
    let events = read_events(journal, &manifests, snap.position, h).await?;
    Ok((events, sequence, digest))
}

/// The journal verified once for a recovery: from the snapshot's batch up to H, and H itself.
/// The replay reads its events from this chain; the validation reads them again on its own
/// ([`tidemark_journal::events::ByPosition`]), never through it.
pub struct VerifiedRange {
    pub chain: VerifiedChain,
    pub h: u64,
}

impl VerifiedRange {
    /// The manifest that holds H (sequence, digest); the snapshot's own when H is its position.
    pub fn holder(&self, snap: &TrustedSnapshot) -> (u64, String) {
        self.chain
            .range(snap.position, self.h)
            .last()
            .map(|m| (m.manifest.sequence, m.digest.clone()))
            .unwrap_or((snap.manifest_sequence, snap.manifest_digest.clone()))
    }
}

/// Verifies the journal once, from the snapshot's recorded manifest: up to `to` when given (all
/// of it must verify), else to the end of what verifies when the job starts, which is H. The
/// batches the snapshot already holds are not read. Its events are read with [`events_of`] or
/// [`verified_events`].
pub async fn verify_range(
    journal: &Journal,
    snap: &TrustedSnapshot,
    to: Option<u64>,
) -> Result<VerifiedRange, RecoverError> {
    if let Some(h) = to
        && h < snap.position
    {
        return Err(before_snapshot(h, snap));
    }
    // After the manifest holding the snapshot's position, or the one before it when the position
    // lies inside its batch (the rest of that batch is replayed).
    let after = ChainPoint::holding(journal, snap.manifest_sequence, &snap.manifest_digest, snap.position).await?;
    let chain = verify(
        journal,
        &VerifyOptions {
            to,
            after,
            ..Default::default()
        },
        &mut |_| {},
    )
    .await?;
    let Some(h) = to else {
        // Without `--to`, H is the end of the verified range (a break after it ends the range).
        let h = chain
            .report
            .verified_last_position
            .unwrap_or(snap.position)
            .max(snap.position);
        return Ok(VerifiedRange { chain, h });
    };
    if let Some(b) = &chain.report.first_break {
        if b.kind == "boundary" {
            let range = match (
                chain.report.verified_first_position,
                chain.report.verified_last_position,
            ) {
                (_, Some(last)) => format!("{}..={last}", snap.position + 1),
                _ => format!("nothing after {}", snap.position),
            };
            return Err(RecoverError::BeyondVerified { h, range });
        }
        return Err(RecoverError::ChainBroken {
            kind: b.kind.clone(),
            key: b.key.clone(),
            message: b.message.clone(),
        });
    }
    Ok(VerifiedRange { chain, h })
}

/// The refusal of an H before the snapshot's position.
pub(crate) fn before_snapshot(h: u64, snap: &TrustedSnapshot) -> RecoverError {
    RecoverError::Validation {
        message: format!("H = {h} is before the snapshot's position {}", snap.position),
    }
}

/// The events `(after, h]` of a verified chain as a stream, one manifest's batches at a time
/// (two manifests read at once), so that a reader holds only what it keeps.
pub async fn events_of<'a>(
    journal: &'a Journal,
    chain: &'a VerifiedChain,
    after: u64,
    h: u64,
) -> Result<EventStream<'a>, RecoverError> {
    let resolutions = std::sync::Arc::new(
        tidemark_journal::resolution::Resolutions::load(journal)
            .await
            .map_err(RecoverError::Journal)?,
    );
    let stream = futures::stream::iter(chain.range(after, h))
        .map(move |m| {
            let resolutions = resolutions.clone();
            async move {
                let read = read_manifest_events(journal, &resolutions, m, after, h)
                    .await
                    .map_err(RecoverError::Journal);
                #[cfg(test)]
                let read = read.map(|batches| skipped_for_test(journal, batches));
                read
            }
        })
        .buffered(2);
    Ok(Box::pin(stream))
}

/// Tests only: the positions `(a, b]` of the journal with this id that the replay's reader
/// leaves out, as a replay that skipped the tail of a batch would; the validation, which reads
/// its events on its own, must catch it.
#[cfg(test)]
pub(crate) static SKIP_FOR_TEST: std::sync::Mutex<Option<(String, u64, u64)>> = std::sync::Mutex::new(None);

#[cfg(test)]
fn skipped_for_test(journal: &Journal, batches: Vec<arrow::array::RecordBatch>) -> Vec<arrow::array::RecordBatch> {
    use arrow::array::{Array, BooleanArray, Int64Array};
    let skip = SKIP_FOR_TEST.lock().unwrap().clone();
    let Some((_, a, b)) = skip.filter(|(id, ..)| *id == journal.header.journal_id) else {
        return batches;
    };
    batches
        .into_iter()
        .map(|batch| {
            let p = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("positions");
            let keep: BooleanArray = (0..p.len())
                .map(|i| Some(!(p.value(i) as u64 > a && p.value(i) as u64 <= b)))
                .collect();
            arrow::compute::filter_record_batch(&batch, &keep).expect("filter")
        })
        .collect()
}

/// Batches of events, one manifest's at a time.
pub type EventStream<'a> = futures::stream::BoxStream<'a, Result<Vec<arrow::array::RecordBatch>, RecoverError>>;

/// Replays `verified` (what [`verified_replay_events`] returned for `snap` and `h`) into `table`:
/// the merge reads at most about `chunk_rows` table rows at a time, and spilled events are
/// merged in key ranges of about `range_events` events.
#[allow(clippy::too_many_arguments)]
pub async fn replay(
    journal: &Journal,
    handle: &CatalogHandle,
    table: Table,
    snap: &TrustedSnapshot,
    h: u64,
    verified: (UnitEvents, u64, String),
    recovery_id: &str,
    clock: &dyn Clock,
    ids: &dyn Ids,
    chunk_rows: u64,
    range_events: u64,
) -> Result<(Table, MergeStats, bool), RecoverError> {
    let done = table.metadata().snapshots().any(|s| {
        let p = &s.summary().additional_properties;
        p.get(PROP_STEP).map(String::as_str) == Some("replay")
            && p.get(PROP_LAST_POSITION).map(String::as_str) == Some(h.to_string().as_str())
    });
    if done {
        return Ok((table, MergeStats::default(), true));
    }
    let (events, sequence, digest) = verified;
    // The recovered table has the snapshot's schema; a spec column another writer renamed is
    // found in the snapshot's schema history.
    let renames = crate::table::check_schema_in(&journal.spec, &snap.schema, snap.metadata.schemas_iter())?;
    let summary = replay_summary(recovery_id, snap, &journal.header.journal_id, h, sequence, digest);
    let (table, stats, _, _) = merge_and_commit(
        handle,
        table,
        &journal.spec,
        events,
        summary,
        clock,
        ids,
        3,
        None,
        None,
        chunk_rows,
        range_events,
        Some(&renames),
    )
    .await
    .map_err(RecoverError::from_apply)?;
    Ok((table, stats, false))
}

/// The snapshot summary of a replay's commit (both engines): the step, the recovery, the source
/// snapshot, and the journal range replayed (positions, the last manifest's sequence and digest).
pub(crate) fn replay_summary(
    recovery_id: &str,
    snap: &TrustedSnapshot,
    journal_id: &str,
    h: u64,
    sequence: u64,
    digest: String,
) -> HashMap<String, String> {
    HashMap::from([
        (PROP_STEP.to_string(), "replay".to_string()),
        (PROP_RECOVERY_ID.to_string(), recovery_id.to_string()),
        (PROP_SOURCE_SNAPSHOT.to_string(), snap.snapshot_id.to_string()),
        (PROP_JOURNAL_ID.to_string(), journal_id.to_string()),
        (PROP_FIRST_POSITION.to_string(), (snap.position + 1).to_string()),
        (PROP_LAST_POSITION.to_string(), h.to_string()),
        (PROP_MANIFEST_SEQUENCE.to_string(), sequence.to_string()),
        (PROP_MANIFEST_DIGEST.to_string(), digest),
        ("tidemark.boundary-h".to_string(), h.to_string()),
    ])
}
