//! The verifier: walks the manifest chain from sequence 1 and proves, link by link, that every
//! batch is present, unchanged since it was accepted, and not forked.
//!
//! Per manifest: exactly one stored version of its key (a second version means it was rewritten
//! in place or a second writer forked the chain); its sequence matches its key; its
//! `previous_digest` is the digest of the previous manifest's bytes; its first position follows
//! the previous last position. Per event object: the exact recorded version exists, its size and
//! sha256 match, it decodes with the journal's spec, and its positions are exactly
//! `first..=last`. Objects are fetched and hashed concurrently; links are checked in order.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use tidemark_schemas::{ChainBreak, FORMAT_VERSION, VerifyReport};

use crate::codec;
use crate::error::Result;
use crate::journal::{Journal, StoredManifest};
use crate::paths;
use crate::store::{StoreError, VersionEntry};

#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Verify up to the batch that contains this position; refuse if the chain ends before it.
    pub to: Option<u64>,
    /// Objects fetched and hashed at once (default 4).
    pub concurrency: Option<usize>,
    /// Start after this already-trusted link (a checkpoint's manifest) instead of sequence 1. Its
    /// manifest is re-read and must still have the recorded digest.
    pub after: Option<ChainPoint>,
}

/// A link of the chain: a manifest's sequence, digest and last position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPoint {
    pub sequence: u64,
    pub digest: String,
    pub last_position: u64,
}

impl ChainPoint {
    /// The link to verify after, for a consumer that has applied every position up to
    /// `position`, which the manifest `sequence` (recorded with `digest`) holds: the manifest
    /// itself when `position` is its last, else the manifest before it (whose digest the holder
    /// records as its previous), so that the rest of the holder's batch is verified and read
    /// (`None`: verify from sequence 1). A holder whose digest is not the recorded one is
    /// returned as the link itself, so that the verifier reports the mismatch; a holder that
    /// does not hold `position` is refused.
    pub async fn holding(
        journal: &Journal,
        sequence: u64,
        digest: &str,
        position: u64,
    ) -> crate::Result<Option<ChainPoint>> {
        if sequence == 0 {
            return Ok(None);
        }
        let stored = journal.read_manifest(sequence, None).await?;
        let m = &stored.manifest;
        if stored.digest != digest || position == m.last_position {
            return Ok(Some(ChainPoint {
                sequence,
                digest: digest.to_string(),
                last_position: m.last_position,
            }));
        }
        if position > m.last_position || position + 1 < m.first_position {
            return Err(crate::JournalError::Format {
                context: format!("manifest {}", stored.key),
                message: format!(
                    "it holds positions {}..={}, but position {position} was recorded with it",
                    m.first_position, m.last_position
                ),
            });
        }
        match (sequence, &m.previous_digest) {
            (1, _) => Ok(None),
            (_, Some(previous)) => Ok(Some(ChainPoint {
                sequence: sequence - 1,
                digest: previous.clone(),
                last_position: m.first_position - 1,
            })),
            (_, None) => Err(crate::JournalError::Format {
                context: format!("manifest {}", stored.key),
                message: format!("sequence {sequence} records no previous digest"),
            }),
        }
    }
}

/// The verified prefix of the chain and the report.
#[derive(Debug, Clone)]
pub struct VerifiedChain {
    pub manifests: Vec<StoredManifest>,
    pub report: VerifyReport,
}

impl VerifiedChain {
    /// The manifests whose positions intersect `(after, to]`.
    pub fn range(&self, after: u64, to: u64) -> impl Iterator<Item = &StoredManifest> {
        self.manifests
            .iter()
            .filter(move |m| m.manifest.last_position > after && m.manifest.first_position <= to)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct VerifyProgress {
    pub manifests: u64,
    pub total: u64,
    pub bytes: u64,
}

fn brk(kind: &str, sequence: Option<u64>, key: &str, version_id: Option<&str>, message: String) -> ChainBreak {
    ChainBreak {
        kind: kind.into(),
        sequence,
        key: key.to_string(),
        version_id: version_id.map(str::to_string),
        message,
    }
}

/// Checks one manifest and its event object on their own (no links). `Ok(Err(break))` is a
/// finding; `Err` is a failure to look (network, permissions).
async fn check_one(
    journal: &Journal,
    sequence: u64,
    versions: &[VersionEntry],
) -> Result<std::result::Result<(StoredManifest, u64), ChainBreak>> {
    let key = paths::manifest_key(sequence);
    let live: Vec<&VersionEntry> = versions.iter().filter(|v| !v.is_delete_marker).collect();
    if versions.iter().any(|v| v.is_delete_marker) {
        return Ok(Err(brk(
            "rewritten",
            Some(sequence),
            &key,
            None,
            format!("manifest {key} was deleted (a delete marker exists)"),
        )));
    }
    if live.len() != 1 {
        let ids: Vec<&str> = live.iter().map(|v| v.version_id.as_str()).collect();
        return Ok(Err(brk(
            "fork",
            Some(sequence),
            &key,
            ids.first().copied(),
            format!(
                "manifest {key} has {} versions ({}): it was rewritten in place or a second writer forked the chain",
                ids.len(),
                ids.join(", ")
            ),
        )));
    }
    let version = live[0].version_id.as_str();
    let stored = match journal.read_manifest(sequence, Some(version)).await {
        Ok(s) => s,
        Err(crate::JournalError::Format { message, .. }) => {
            return Ok(Err(brk(
                "malformed",
                Some(sequence),
                &key,
                Some(version),
                format!("manifest {key} is not a valid manifest: {message}"),
            )));
        }
        Err(e) => return Err(e),
    };
    let m = &stored.manifest;
    let bad = |kind: &str, msg: String| Ok(Err(brk(kind, Some(sequence), &key, Some(version), msg)));
    if m.format_version != FORMAT_VERSION {
        return bad(
            "malformed",
            format!("manifest {key} has format_version {}", m.format_version),
        );
    }
    if m.sequence != sequence {
        return bad("fork", format!("manifest {key} claims sequence {}", m.sequence));
    }
    if m.journal_id != journal.header.journal_id || m.spec_digest != journal.spec.digest {
        return bad(
            "malformed",
            format!(
                "manifest {key} belongs to journal {} / spec {}, not this journal",
                m.journal_id, m.spec_digest
            ),
        );
    }
    if m.last_position < m.first_position || m.row_count != m.last_position - m.first_position + 1 {
        return bad(
            "count_mismatch",
            format!(
                "manifest {key} records {} rows for positions {}..={}",
                m.row_count, m.first_position, m.last_position
            ),
        );
    }
    let obj_key = m.object_key.as_str();
    let obj_version = m.object_version_id.as_str();
    let obj_brk = |kind: &str, msg: String| Ok(Err(brk(kind, Some(sequence), obj_key, Some(obj_version), msg)));
    if paths::parse_event_key(obj_key) != Some(sequence) {
        return obj_brk(
            "malformed",
            format!("manifest {key} names {obj_key}, which is not an event object of sequence {sequence}"),
        );
    }
    let got = match journal.store.get(obj_key, Some(obj_version)).await {
        Ok(g) => g,
        Err(StoreError::NotFound { .. }) => {
            return obj_brk(
                "missing_object",
                format!("event object {obj_key} version {obj_version} (sequence {sequence}) does not exist"),
            );
        }
        Err(e) => return Err(e.into()),
    };
    let size = got.body.len() as u64;
    if size != m.object_size {
        return obj_brk(
            "size_mismatch",
            format!(
                "event object {obj_key} version {obj_version} is {size} bytes, manifest {key} records {}",
                m.object_size
            ),
        );
    }
    let body = got.body;
    let spec = journal.spec.clone();
    let (first, rows, key_owned) = (m.first_position, m.row_count, obj_key.to_string());
    let expected_sha = m.object_sha256.clone();
    let checked = tokio::task::spawn_blocking(move || -> std::result::Result<(), (String, String)> {
        let actual = crate::sha256_digest(&body);
        if actual != expected_sha {
            return Err((
                "checksum_mismatch",
                format!("event object {key_owned} sha256 is {actual}, manifest records {expected_sha}"),
            ))
            .map_err(|(k, m)| (k.to_string(), m));
        }
        let positions =
            codec::decode_positions(&spec, &key_owned, body).map_err(|e| ("malformed".to_string(), e.to_string()))?;
        match codec::check_contiguous(&positions, first) {
            Ok(n) if n == rows => Ok(()),
            Ok(n) => Err((
                "count_mismatch".into(),
                format!("event object {key_owned} holds {n} events, manifest records {rows}"),
            )),
            Err((want, got)) => Err((
                "position_mismatch".into(),
                format!("event object {key_owned}: expected position {want}, found {got}"),
            )),
        }
    })
    .await
    .expect("verify task panicked");
    if let Err((kind, msg)) = checked {
        return obj_brk(&kind, msg);
    }
    Ok(Ok((stored, size)))
}

/// Verifies the chain (up to `opts.to`) and reports the verified range or the first break.
pub async fn verify(
    journal: &Journal,
    opts: &VerifyOptions,
    progress: &mut dyn FnMut(&VerifyProgress),
) -> Result<VerifiedChain> {
    let started = Instant::now();
    let mut by_seq: BTreeMap<u64, Vec<VersionEntry>> = BTreeMap::new();
    for v in journal.store.list_versions(paths::MANIFESTS_PREFIX).await? {
        if let Some(seq) = paths::parse_manifest_key(&v.key) {
            by_seq.entry(seq).or_default().push(v);
        }
    }
    let mut report = VerifyReport {
        s3_requests: None,
        format_version: FORMAT_VERSION,
        journal: journal.url(),
        ok: true,
        verified_first_position: None,
        verified_last_position: None,
        verified_manifests: 0,
        verified_events: 0,
        verified_bytes: 0,
        head_digest: None,
        head_sequence: None,
        to_position: opts.to,
        first_break: None,
        unaccepted_objects: Vec::new(),
        elapsed_ms: 0,
    };
    // Sequences must be start..=n; the first missing one is a gap if anything follows it.
    let start = opts.after.as_ref().map_or(1, |p| p.sequence + 1);
    let present: Vec<u64> = by_seq.keys().copied().filter(|s| *s >= start).collect();
    let contiguous_end = start - 1
        + present
            .iter()
            .enumerate()
            .take_while(|(i, s)| **s == start + *i as u64)
            .count() as u64;
    let total = present.last().copied().unwrap_or(start - 1);
    let concurrency = opts.concurrency.unwrap_or(4).max(1);
    let seqs: Vec<u64> = (start..=contiguous_end).collect();
    let mut checks = futures::stream::iter(seqs.into_iter().map(|seq| {
        let versions = by_seq.get(&seq).cloned().unwrap_or_default();
        async move { check_one(journal, seq, &versions).await.map(|r| (seq, r)) }
    }))
    .buffered(concurrency);

    let mut manifests: Vec<StoredManifest> = Vec::new();
    let mut previous: Option<(String, u64)> = None;
    let mut reached_boundary = false;
    if let Some(p) = &opts.after {
        let key = paths::manifest_key(p.sequence);
        let stored = journal.read_manifest(p.sequence, None).await?;
        if stored.digest != p.digest || stored.manifest.last_position != p.last_position {
            report.first_break = Some(brk(
                "digest_mismatch",
                Some(p.sequence),
                &key,
                stored.version_id.as_deref(),
                format!(
                    "manifest {key} has digest {} (last position {}), the trusted starting point records {} (last position {})",
                    stored.digest, stored.manifest.last_position, p.digest, p.last_position
                ),
            ));
            reached_boundary = true; // nothing after a bad starting point is checked
        } else {
            previous = Some((p.digest.clone(), p.last_position));
            reached_boundary = opts.to.is_some_and(|h| p.last_position >= h);
        }
    }
    while !reached_boundary && let Some((seq, result)) = checks.try_next().await? {
        let (stored, size) = match result {
            Ok(ok) => ok,
            Err(b) => {
                report.first_break = Some(b);
                break;
            }
        };
        let m = &stored.manifest;
        let expected_prev = previous.as_ref().map(|p| p.0.clone());
        if m.previous_digest != expected_prev {
            report.first_break = Some(brk(
                "digest_mismatch",
                Some(seq),
                &stored.key,
                stored.version_id.as_deref(),
                format!(
                    "manifest {} records previous digest {}, but the previous manifest's digest is {}",
                    stored.key,
                    m.previous_digest.as_deref().unwrap_or("null"),
                    expected_prev.as_deref().unwrap_or("null (first manifest)")
                ),
            ));
            break;
        }
        let expected_first = previous.as_ref().map_or(1, |p| p.1 + 1);
        if m.first_position != expected_first {
            report.first_break = Some(brk(
                "gap",
                Some(seq),
                &stored.key,
                stored.version_id.as_deref(),
                format!(
                    "manifest {} starts at position {}, expected {expected_first}",
                    stored.key, m.first_position
                ),
            ));
            break;
        }
        previous = Some((stored.digest.clone(), m.last_position));
        report.verified_first_position.get_or_insert(m.first_position);
        report.verified_last_position = Some(m.last_position);
        report.verified_manifests += 1;
        report.verified_events += m.row_count;
        report.verified_bytes += size;
        report.head_digest = Some(stored.digest.clone());
        report.head_sequence = Some(seq);
        let last = m.last_position;
        manifests.push(stored);
        progress(&VerifyProgress {
            manifests: report.verified_manifests,
            total,
            bytes: report.verified_bytes,
        });
        if opts.to.is_some_and(|h| last >= h) {
            reached_boundary = true;
            break;
        }
    }
    drop(checks);
    if report.first_break.is_none() && !reached_boundary && contiguous_end < total {
        let missing = contiguous_end + 1;
        let key = paths::manifest_key(missing);
        report.first_break = Some(brk(
            "gap",
            Some(missing),
            &key,
            None,
            format!(
                "manifest {key} is missing but later manifests exist (up to sequence {})",
                present.last().copied().unwrap_or(missing)
            ),
        ));
    }
    if report.first_break.is_none()
        && let Some(h) = opts.to
        && !reached_boundary
    {
        let range = match (report.verified_first_position, report.verified_last_position) {
            (Some(a), Some(b)) => format!("{a}..={b}"),
            _ => "empty".into(),
        };
        report.first_break = Some(brk(
            "boundary",
            None,
            paths::MANIFESTS_PREFIX,
            None,
            format!("position {h} is beyond the verified range ({range})"),
        ));
    }
    report.ok = report.first_break.is_none();
    let accepted: BTreeMap<u64, String> = manifests
        .iter()
        .map(|m| (m.manifest.sequence, m.manifest.object_key.clone()))
        .collect();
    let head_seq = if report.ok && !reached_boundary {
        report.head_sequence.unwrap_or(0)
    } else {
        total.max(report.head_sequence.unwrap_or(0))
    };
    report.unaccepted_objects = journal
        .unaccepted_objects(head_seq, &|seq| accepted.get(&seq).cloned())
        .await?;
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(VerifiedChain { manifests, report })
}
