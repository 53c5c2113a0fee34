//! `append`: turns NDJSON events into accepted batches.
//!
//! Per batch, in this order: (1) the event object (Parquet) is written and its exact version id
//! recorded; (2) the manifest is written **create-only** at the next sequence. A batch is
//! accepted only when (2) succeeds. A crash between (1) and (2) leaves an event object that no
//! manifest names: the next append and `verify` report it, and it never counts. Two writers racing
//! for one sequence cannot both win: the loser gets [`JournalError::ConcurrentWriter`].
//!
//! The whole input is parsed and checked before the first write, so that bad input (a malformed
//! line, a wrong type, a position that does not continue the journal, a conflict: see
//! [`crate::conflict`]) writes nothing.

use std::io::BufRead;
use std::time::Instant;

use bytes::Bytes;
use sha2::{Digest, Sha256};
use tidemark_schemas::{AppendReport, FORMAT_VERSION, Manifest};

use crate::capability;
use crate::clock::Clock;
use crate::codec::{self, NdjsonReader};
use crate::conflict;
use crate::error::{JournalError, Result};
use crate::journal::Journal;
use crate::paths;
use crate::store::PutMode;

#[derive(Debug, Clone)]
pub struct AppendOptions {
    pub batch_size: usize,
    pub writer_id: String,
    /// Name of the input for messages (`orders.ndjson`, `<stdin>`).
    pub source_name: String,
}

/// Progress after each accepted batch.
#[derive(Debug, Clone, Copy)]
pub struct AppendProgress {
    pub batches: u64,
    pub total_batches: u64,
    pub events: u64,
    pub last_position: u64,
}

pub async fn append<R: BufRead>(
    journal: &Journal,
    input: R,
    opts: &AppendOptions,
    clock: &dyn Clock,
    progress: &mut dyn FnMut(&AppendProgress),
) -> Result<AppendReport> {
    append_with_window(journal, input, opts, conflict::window(), clock, progress).await
}

/// [`append`] checking conflicts against the journal's last `conflict_window` positions
/// (`0`: against the input only; see [`crate::conflict`]).
pub async fn append_with_window<R: BufRead>(
    journal: &Journal,
    input: R,
    opts: &AppendOptions,
    conflict_window: u64,
    clock: &dyn Clock,
    progress: &mut dyn FnMut(&AppendProgress),
) -> Result<AppendReport> {
    let started = Instant::now();
    if opts.batch_size == 0 {
        return Err(JournalError::Input {
            source_name: opts.source_name.clone(),
            line: 0,
            message: "batch size must be at least 1".into(),
        });
    }
    capability::require_journal_capabilities(journal.store.as_ref(), &opts.writer_id, clock).await?;

    let head = journal.head().await?;
    let (mut sequence, mut previous_digest, expected_first) = match &head {
        Some(h) => (
            h.manifest.sequence + 1,
            Some(h.digest.clone()),
            h.manifest.last_position + 1,
        ),
        None => (1, None, 1),
    };
    let head_sequence = sequence - 1;
    let head_key = head.as_ref().map(|h| h.manifest.object_key.clone());
    let unaccepted = journal
        .unaccepted_objects(head_sequence, &|seq| {
            (seq == head_sequence).then(|| head_key.clone()).flatten()
        })
        .await?;

    let mut reader = NdjsonReader::new(&journal.spec, input, opts.source_name.clone(), expected_first);
    let mut conflicts = conflict::ConflictIndex::for_append(journal, conflict_window).await?;
    let mut batches = Vec::new();
    while let Some(batch) = reader.next_batch(opts.batch_size)? {
        conflicts.check(&opts.source_name, &batch, reader.last_lines())?;
        batches.push(batch);
    }

    let mut report = AppendReport {
        format_version: FORMAT_VERSION,
        journal: journal.url(),
        batches: 0,
        events: 0,
        bytes: 0,
        first_position: None,
        last_position: None,
        head_sequence: (head_sequence > 0).then_some(head_sequence),
        unaccepted_objects: unaccepted,
        elapsed_ms: 0,
    };
    let total_batches = batches.len() as u64;
    let mut first_position = expected_first;
    for batch in batches {
        let rows = batch.num_rows() as u64;
        let last_position = first_position + rows - 1;
        let body = codec::encode_parquet(&journal.spec, &batch)?;
        let sha = hex::encode(Sha256::digest(&body));
        let object_key = paths::event_key(sequence, &sha);
        let put = journal.store.put(&object_key, body.clone(), PutMode::Overwrite).await?;
        let object_version_id = put.version_id.ok_or_else(|| JournalError::Capability {
            store: journal.url(),
            capability: "versioning".into(),
            detail: format!("no version id returned for {object_key}"),
        })?;
        let (min_event_time, max_event_time) = codec::event_time_range(&journal.spec, &batch);
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            journal_id: journal.header.journal_id.clone(),
            sequence,
            previous_digest: previous_digest.clone(),
            object_key,
            object_version_id,
            object_sha256: format!("sha256:{sha}"),
            object_size: body.len() as u64,
            row_count: rows,
            first_position,
            last_position,
            min_event_time,
            max_event_time,
            writer_id: opts.writer_id.clone(),
            spec_digest: journal.spec.digest.clone(),
            written_at: clock.now_rfc3339(),
        };
        let manifest_body = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        let manifest_key = paths::manifest_key(sequence);
        match journal
            .store
            .put(&manifest_key, Bytes::from(manifest_body.clone()), PutMode::Create)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_conflict() => {
                return Err(JournalError::ConcurrentWriter {
                    key: manifest_key,
                    sequence,
                    first: first_position,
                    last: last_position,
                });
            }
            Err(e) => return Err(e.into()),
        }
        previous_digest = Some(crate::sha256_digest(&manifest_body));
        report.batches += 1;
        report.events += rows;
        report.bytes += body.len() as u64;
        report.first_position.get_or_insert(first_position);
        report.last_position = Some(last_position);
        report.head_sequence = Some(sequence);
        progress(&AppendProgress {
            batches: report.batches,
            total_batches,
            events: report.events,
            last_position,
        });
        sequence += 1;
        first_position = last_position + 1;
    }
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}
