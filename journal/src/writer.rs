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
//! [`crate::conflict`]) writes nothing; it is streamed twice (checked while spooled to a file,
//! then written from the spool), so memory holds one batch whatever the input's size. Events at
//! positions the journal already holds are a re-send ([`crate::resend`]): identical ones are
//! skipped, a different one is refused.

use std::io::{BufRead, Read, Write};
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
use crate::resend::StoredRange;
use crate::store::{PutMode, put_resolved};

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

    // Pass 1 streams the input once, checking every line (and every re-sent event against the
    // journal) while spooling it to a file; pass 2 writes from the spool. So bad input writes
    // nothing, and memory holds one batch, whatever the input's size.
    let mut spool = Spool::create()?;
    let mut tee = Tee {
        inner: input,
        file: std::io::BufWriter::new(spool.file.take().expect("spool file")),
        error: None,
    };
    let (peeked, input_first) = peek_first_position(&mut tee, &opts.source_name)?;
    // Re-sent positions are compared, never appended again; a gap is the reader's refusal.
    let reader_first = input_first
        .filter(|p| *p >= 1 && *p < expected_first)
        .unwrap_or(expected_first);
    let mut resent = if reader_first < expected_first {
        Some(StoredRange::load(journal, reader_first, expected_first - 1).await?)
    } else {
        None
    };
    let mut conflicts = conflict::ConflictIndex::for_append(journal, conflict_window).await?;
    let mut already_present = 0u64;
    let mut new_rows = 0u64;
    {
        let mut reader = NdjsonReader::new(
            &journal.spec,
            std::io::Cursor::new(peeked).chain(&mut tee),
            opts.source_name.clone(),
            reader_first,
        );
        while let Some(batch) = reader.next_batch(opts.batch_size)? {
            // A re-sent position is compared with the stored event first: that names the field.
            let present = match &mut resent {
                Some(r) => r.check(&opts.source_name, &batch)?,
                None => 0,
            };
            conflicts.check(&opts.source_name, &batch, reader.last_lines())?;
            already_present += present as u64;
            new_rows += (batch.num_rows() - present) as u64;
        }
    }
    let Tee { file, error, .. } = tee;
    if let Some(e) = error {
        return Err(spool.error(e));
    }
    file.into_inner().map_err(|e| spool.error(e.into_error()))?;
    let mut reader = NdjsonReader::new(
        &journal.spec,
        std::io::BufReader::with_capacity(1 << 20, spool.reopen()?),
        opts.source_name.clone(),
        reader_first,
    );
    // The re-sent events, checked in pass 1: skipped, a batch at a time.
    let mut skip = already_present as usize;
    while skip > 0 {
        let n = reader
            .next_batch(skip.min(opts.batch_size))?
            .map_or(0, |b| b.num_rows());
        if n == 0 {
            break;
        }
        skip -= n;
    }

    let mut report = AppendReport {
        s3_requests: None,
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
        already_present,
    };
    let total_batches = new_rows.div_ceil(opts.batch_size as u64);
    let mut first_position = expected_first;
    while let Some(batch) = reader.next_batch(opts.batch_size)? {
        let rows = batch.num_rows() as u64;
        let last_position = first_position + rows - 1;
        let body = codec::encode_parquet(&journal.spec, &batch)?;
        let sha = hex::encode(Sha256::digest(&body));
        let object_key = paths::event_key(sequence, &sha);
        // Create-only and read back: an object already at this key (a lost reply, or a run that
        // stopped before its manifest) has these very bytes, since its key names their digest.
        let put = put_resolved(journal.store.as_ref(), &object_key, body.clone(), PutMode::Create)
            .await?
            .put;
        let object_version_id = put.version_id.ok_or_else(|| JournalError::Capability {
            store: journal.url(),
            capability: "versioning".into(),
            detail: format!("no version id returned for {object_key}"),
        })?;
        crate::failpoint::hit("append:after-event-object");
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
        // A conflict or lost reply is resolved by reading the manifest back: this writer's own
        // bytes there mean the batch is accepted (see the store contract).
        match put_resolved(
            journal.store.as_ref(),
            &manifest_key,
            Bytes::from(manifest_body.clone()),
            PutMode::Create,
        )
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
        crate::failpoint::hit("append:after-manifest");
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

/// The input's first non-blank line (with what precedes it) and the position it names, when it
/// parses (otherwise the reader reports the line).
fn peek_first_position<R: BufRead>(input: &mut R, source_name: &str) -> Result<(Vec<u8>, Option<u64>)> {
    let mut consumed = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = input.read_until(b'\n', &mut line).map_err(|e| JournalError::Input {
            source_name: source_name.to_string(),
            line: 0,
            message: format!("cannot read input: {e}"),
        })?;
        consumed.extend_from_slice(&line);
        if n == 0 {
            return Ok((consumed, None));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim().trim_start_matches('\u{feff}');
        if text.is_empty() {
            continue;
        }
        let position = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.get("position").and_then(serde_json::Value::as_u64));
        return Ok((consumed, position));
    }
}

/// Copies what its reader consumes into a file (the spool of pass 1).
struct Tee<R> {
    inner: R,
    file: std::io::BufWriter<std::fs::File>,
    error: Option<std::io::Error>,
}

impl<R: BufRead> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let avail = self.fill_buf()?;
            let n = avail.len().min(buf.len());
            buf[..n].copy_from_slice(&avail[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tee<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf()
            && let Err(e) = self.file.write_all(&buf[..amt])
        {
            self.error.get_or_insert(e);
        }
        self.inner.consume(amt);
    }
}

/// The spool file: under `$TIDEMARK_SPILL_DIR` (default the system's temporary folder), removed
/// when dropped. A process killed with SIGKILL leaves its spool behind; a later process that got
/// the same pid skips such a name rather than failing.
struct Spool {
    path: std::path::PathBuf,
    file: Option<std::fs::File>,
}

/// Spool names tried before giving up (each taken by a file another process left).
const SPOOL_NAMES_TRIED: u32 = 1000;

impl Spool {
    fn create() -> Result<Spool> {
        let root = std::env::var_os("TIDEMARK_SPILL_DIR").map_or_else(std::env::temp_dir, std::path::PathBuf::from);
        Spool::create_in(&root)
    }

    fn create_in(root: &std::path::Path) -> Result<Spool> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut tried = 0;
        loop {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = root.join(format!("tidemark-append-{}-{n}.ndjson", std::process::id()));
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => return Ok(Spool { path, file: Some(file) }),
                // Not ours: left alone (its process may still run, in another pid namespace).
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tried + 1 < SPOOL_NAMES_TRIED => tried += 1,
                Err(e) => return Err(spool_error(&path, e)),
            }
        }
    }

    fn reopen(&self) -> Result<std::fs::File> {
        std::fs::File::open(&self.path).map_err(|e| self.error(e))
    }

    fn error(&self, e: std::io::Error) -> JournalError {
        spool_error(&self.path, e)
    }
}

fn spool_error(path: &std::path::Path, e: std::io::Error) -> JournalError {
    JournalError::Input {
        source_name: path.display().to_string(),
        line: 0,
        message: format!("cannot spool the input (set TIDEMARK_SPILL_DIR to a writable folder): {e}"),
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod spool_tests {
    use super::Spool;

    /// A spool name taken by a file a killed process left (same pid, same counter) is skipped.
    #[test]
    fn a_spool_name_left_by_a_killed_process_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        // The names this process will try next (tests running in parallel may take some).
        let first = Spool::create_in(dir.path()).unwrap();
        let n: u64 = first
            .path
            .to_str()
            .unwrap()
            .rsplit('-')
            .next()
            .unwrap()
            .trim_end_matches(".ndjson")
            .parse()
            .unwrap();
        drop(first);
        let left: Vec<_> = (n + 1..=n + 5)
            .map(|k| dir.path().join(format!("tidemark-append-{pid}-{k}.ndjson")))
            .collect();
        for p in &left {
            std::fs::write(p, "left by a killed process").unwrap();
        }
        let spool = Spool::create_in(dir.path()).unwrap();
        assert!(!left.contains(&spool.path), "{}", spool.path.display());
        drop(spool);
        for p in &left {
            assert_eq!(std::fs::read_to_string(p).unwrap(), "left by a killed process");
        }
    }
}
