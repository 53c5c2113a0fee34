//! `tidemark audit`: a table's history (the ancestry of its current snapshot, oldest first)
//! held against the journal, snapshot by snapshot, so that the bad write is found and recovery
//! never starts from a damaged snapshot.
//!
//! Each snapshot gets a verdict ([`Verdict`]):
//! * an **applier commit** (its summary records a journal id and the positions it applied, see
//!   [`crate::provenance`]: tidemark's applier or any engine that follows the protocol) must
//!   continue its parent's position with no gap and no overlap, from this journal; with `deep`,
//!   its rows must also be the merge rules applied to its parent's rows and its events
//!   ([`deep`]);
//! * a recovery's **seed** starts a recovered table's history from the source snapshot it was
//!   seeded from (its summary records that snapshot's verdict);
//! * any **other commit** is diffed on the journal's columns, key by key, from the data files it
//!   removed and added and the data files whose deletes changed ([`diff`]; never from summary
//!   counters): one that leaves every journal column of every key as it was is **neutral** (a
//!   compaction, a same-rows rewrite, a schema change, values only in columns outside the spec);
//!   one that removes a key, changes a journal column, or adds a key or version is a
//!   **divergence**, with counts and sample keys.
//!
//! A snapshot is **trusted** when no divergence in its ancestry since the audit's start is open;
//! an applier commit that records an operator's acceptance of earlier divergent snapshots
//! ([`crate::provenance::PROP_ACCEPTED_DIVERGENCE`]) closes them. A history whose oldest retained
//! snapshot has an expired parent is started by certifying that snapshot once against the fold of
//! the journal up to its position ([`deep::certify`]).
//!
//! Incremental: with a records store ([`AuditOptions::records`]; `tidemark audit` uses the
//! journal's `audits/` prefix) each audited snapshot gets a create-only record with the state of
//! the audit after it ([`records`]), and the next audit starts after the newest recorded snapshot
//! of the ancestry, reading only the files later commits touched.

pub mod deep;
pub mod diff;
pub mod records;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use iceberg::io::FileIO;
use iceberg::spec::{SnapshotRef, TableMetadata};
use serde::{Deserialize, Serialize};
use tidemark_journal::Journal;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::store::{ObjectStore, StoreError};
use tidemark_schemas::FORMAT_VERSION;

use crate::provenance::{
    PROP_ACCEPTED_DIVERGENCE, PROP_FAULT, PROP_FIRST_POSITION, PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_RECOVERY_ID,
    PROP_SOURCE_VERDICT, PROP_STEP,
};
use crate::table::TableError;
use crate::table::source::{PrefixMap, SnapshotSource, SourceError};
use diff::Loaded;
use records::AuditRecord;

/// A snapshot's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// An applier commit continuing its parent's position.
    Applied,
    /// A recovery's seed (the first snapshot of a recovered table).
    Seed,
    /// Another writer's commit that left every journal column of every key as it was.
    Neutral,
    /// A change the journal does not explain, or positions that do not follow.
    Divergence,
    /// A divergence an operator accepted (named by a later applier commit, or a seed made with
    /// `--accept-divergence`).
    Accepted,
    /// The oldest retained snapshot, whose parent expired, checked against the journal's fold.
    Certified,
}

/// Keys a commit removed, changed (a journal column) or added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    pub removed: u64,
    pub changed: u64,
    pub added: u64,
}

impl Counts {
    pub fn is_zero(&self) -> bool {
        self.removed == 0 && self.changed == 0 && self.added == 0
    }
}

/// One snapshot of the timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotAudit {
    pub snapshot_id: i64,
    pub parent_id: Option<i64>,
    /// The commit time (RFC 3339, from the snapshot's timestamp).
    pub committed_at: String,
    /// The summary's operation (`append`, `overwrite`, `delete`, `replace`).
    pub operation: String,
    /// Who wrote it, from the summary (tidemark's marks, or the engine/app fields other engines
    /// write); `unknown` when it names none.
    pub writer: String,
    /// The journal position the snapshot holds (its own record or its newest ancestor's).
    pub position: Option<u64>,
    /// `applier`, `recovery seed`, `recovery replay`, `other` or `start`.
    pub kind: String,
    pub verdict: Verdict,
    pub counts: Counts,
    /// A few keys of what it removed, changed or added (`removed K`, …).
    pub sample_keys: Vec<String>,
    pub detail: String,
    /// No open divergence in its ancestry since the audit's start.
    pub trusted: bool,
}

/// The first open divergence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Divergence {
    pub snapshot_id: i64,
    pub committed_at: String,
    pub operation: String,
    pub writer: String,
    pub counts: Counts,
    pub sample_keys: Vec<String>,
    /// The journal position the table held when it was committed.
    pub position: Option<u64>,
    pub detail: String,
}

/// The newest trusted snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrustedPoint {
    pub snapshot_id: i64,
    pub position: Option<u64>,
    /// The checkpoint that names it, if any (its key under the journal).
    pub checkpoint: Option<String>,
}

/// `tidemark audit --json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AuditReport {
    pub format_version: u32,
    pub journal: String,
    pub table_uuid: String,
    pub metadata_location: String,
    /// The snapshot whose ancestry was audited (main's current one by default).
    pub head_snapshot_id: Option<i64>,
    /// Where this audit started: the table's first snapshot, a record of an earlier audit, the
    /// applier's own last commit, or a certified snapshot whose parent expired.
    pub start: String,
    /// The newest recorded snapshot this audit resumed after, if any.
    pub resumed_from: Option<i64>,
    /// Snapshots audited by this run (the timeline's length).
    pub audited: u64,
    /// Data and delete files read (an applier commit reads none unless `deep`).
    pub files_read: u64,
    pub records_written: u64,
    /// The snapshots audited by this run, oldest first.
    pub timeline: Vec<SnapshotAudit>,
    pub first_divergence: Option<Divergence>,
    /// Every divergence of the history no operator accepted, oldest first.
    pub open_divergences: Vec<Divergence>,
    pub trusted: Option<TrustedPoint>,
    /// No open divergence in the history.
    pub ok: bool,
    pub elapsed_ms: u64,
}

/// What the audit carries from one snapshot to the next (and keeps in each record).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditState {
    /// The journal position the snapshot holds.
    pub position: Option<u64>,
    /// The divergences in its ancestry no operator accepted, oldest first.
    pub open: Vec<Divergence>,
    /// The newest trusted snapshot of its ancestry (itself when trusted).
    pub newest_trusted: Option<TrustedPoint>,
}

#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// Also check each applier commit's rows against its parent's rows and its events.
    pub deep: bool,
    /// Where audit records are read and written (create-only); `None`: none. An audit with
    /// `trust_from` reads them but writes none.
    pub records: Option<Arc<dyn ObjectStore>>,
    /// Audit the ancestry of this snapshot (default: main's current one).
    pub head: Option<i64>,
    /// Take this snapshot as trusted and audit only after it (the applier's own last commit).
    pub trust_from: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("snapshot {snapshot_id} is not in the table metadata {metadata}")]
    UnknownSnapshot { snapshot_id: i64, metadata: String },
    #[error("the history of table {table_uuid} cannot be audited: {reason}")]
    Undecidable { table_uuid: String, reason: String },
    #[error("audit record {key}: {reason}")]
    BadRecord { key: String, reason: String },
}

/// What every step of an audit reads through.
pub(crate) struct Ctx<'a> {
    pub journal: &'a Journal,
    pub meta: &'a TableMetadata,
    pub io: &'a FileIO,
    pub map: Option<PrefixMap>,
    /// The metadata file, for error messages.
    pub name: String,
}

impl Ctx<'_> {
    pub fn mapped(&self, path: &str) -> String {
        PrefixMap::apply(self.map.as_ref(), path)
    }
}

fn writer_of(props: &HashMap<String, String>) -> String {
    if props.contains_key(PROP_FAULT) {
        return "tidemark fault delete".into();
    }
    if let Some(id) = props.get(PROP_RECOVERY_ID) {
        return format!("tidemark recover ({id})");
    }
    let named: Vec<String> = [
        "engine-name",
        "engine-version",
        "app-id",
        "spark.app.id",
        "flink.job-id",
        "changed-by",
        "tidemark.writer",
    ]
    .iter()
    .filter_map(|k| props.get(*k).map(|v| format!("{k}={v}")))
    .collect();
    match (named.is_empty(), props.contains_key(PROP_LAST_POSITION)) {
        (false, _) => named.join(" "),
        (true, true) => "an applier (tidemark.* positions)".into(),
        (true, false) => "unknown".into(),
    }
}

fn entry_of(snap: &SnapshotRef) -> SnapshotAudit {
    let props = &snap.summary().additional_properties;
    SnapshotAudit {
        snapshot_id: snap.snapshot_id(),
        parent_id: snap.parent_snapshot_id(),
        committed_at: chrono::DateTime::from_timestamp_millis(snap.timestamp_ms())
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default(),
        operation: format!("{:?}", snap.summary().operation).to_lowercase(),
        writer: writer_of(props),
        position: None,
        kind: String::new(),
        verdict: Verdict::Neutral,
        counts: Counts::default(),
        sample_keys: Vec::new(),
        detail: String::new(),
        trusted: false,
    }
}

fn divergence_of(e: &SnapshotAudit, position_then: Option<u64>) -> Divergence {
    Divergence {
        snapshot_id: e.snapshot_id,
        committed_at: e.committed_at.clone(),
        operation: e.operation.clone(),
        writer: e.writer.clone(),
        counts: e.counts,
        sample_keys: e.sample_keys.clone(),
        position: position_then,
        detail: e.detail.clone(),
    }
}

/// Reads the table metadata at `source`, and the sha256 of its bytes.
async fn load(source: &SnapshotSource) -> Result<(TableMetadata, FileIO, String), AuditError> {
    let io = crate::table::source::file_io(&source.file_io_props);
    let path = PrefixMap::apply(source.prefix_map.as_ref(), &source.metadata_location);
    let bytes = crate::table::source::read(&io, &path, "table metadata").await?;
    let meta: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| SourceError::Iceberg {
        context: format!("parse {path}"),
        message: e.to_string(),
    })?;
    Ok((meta, io, tidemark_journal::sha256_digest(&bytes)))
}

/// The ancestry of `head`, oldest first, and the expired parent of its oldest snapshot if any.
fn ancestry(meta: &TableMetadata, head: i64, name: &str) -> Result<(Vec<SnapshotRef>, Option<i64>), AuditError> {
    let mut chain = Vec::new();
    let mut expired = None;
    let mut next = Some(
        meta.snapshot_by_id(head)
            .cloned()
            .ok_or_else(|| AuditError::UnknownSnapshot {
                snapshot_id: head,
                metadata: name.to_string(),
            })?,
    );
    while let Some(s) = next {
        next = match s.parent_snapshot_id() {
            Some(p) => match meta.snapshot_by_id(p) {
                Some(ps) => Some(ps.clone()),
                None => {
                    expired = Some(p);
                    None
                }
            },
            None => None,
        };
        chain.push(s);
    }
    chain.reverse();
    Ok((chain, expired))
}

/// Audits the history of the table at `source` against `journal`. `progress` sees each snapshot
/// as it is audited.
pub async fn audit(
    journal: &Journal,
    source: &SnapshotSource,
    opts: &AuditOptions,
    progress: &mut dyn FnMut(&SnapshotAudit),
) -> Result<AuditReport, AuditError> {
    let started = Instant::now();
    let (meta, io, digest) = load(source).await?;
    let uuid = meta.uuid().to_string();
    let mut report = AuditReport {
        format_version: FORMAT_VERSION,
        journal: journal.url(),
        table_uuid: uuid.clone(),
        metadata_location: source.metadata_location.clone(),
        head_snapshot_id: opts.head.or(meta.current_snapshot_id()),
        start: "the table's first snapshot".into(),
        resumed_from: None,
        audited: 0,
        files_read: 0,
        records_written: 0,
        timeline: Vec::new(),
        first_divergence: None,
        open_divergences: Vec::new(),
        trusted: None,
        ok: true,
        elapsed_ms: 0,
    };
    let Some(head) = report.head_snapshot_id else {
        report.start = "the table has no snapshot".into();
        return Ok(report);
    };
    let ctx = Ctx {
        journal,
        meta: &meta,
        io: &io,
        map: source.prefix_map.clone(),
        name: source.metadata_location.clone(),
    };
    let (chain, expired) = ancestry(&meta, head, &ctx.name)?;
    let mut state = AuditState::default();
    let mut from = 0usize;
    // Where to start: after the snapshot taken as trusted, or after the newest recorded one,
    // whichever is later in the ancestry.
    if let Some(t) = opts.trust_from
        && let Some(i) = chain.iter().position(|s| s.snapshot_id() == t)
    {
        let position = crate::provenance::recorded_position(&meta, &chain[i]).map(|r| r.position);
        state.position = position;
        state.newest_trusted = Some(TrustedPoint {
            snapshot_id: t,
            position,
            checkpoint: None,
        });
        from = i + 1;
        report.start = format!("after snapshot {t}, taken as trusted");
    }
    if let Some(store) = &opts.records {
        let recorded = records::list(store.as_ref(), &uuid).await?;
        if let Some(i) = chain.iter().rposition(|s| recorded.contains(&s.snapshot_id()))
            && i + 1 > from
        {
            let id = chain[i].snapshot_id();
            let rec = records::read(store.as_ref(), &uuid, id).await?;
            state = rec.state;
            from = i + 1;
            report.resumed_from = Some(id);
            report.start = format!("after snapshot {id}, audited before (its record)");
        }
    }
    let mut parent: Option<Loaded> = None;
    // The oldest retained snapshot's parent expired: named but gone, or not even named (an
    // expiry may drop the reference) while the snapshot applied positions after the first.
    let expired = expired.map(|e| e.to_string()).or_else(|| {
        let p = &chain[0].summary().additional_properties;
        let first = p.get(PROP_FIRST_POSITION).and_then(|v| v.parse::<u64>().ok());
        (chain[0].parent_snapshot_id().is_none() && first.is_some_and(|f| f > 1) && p.get(PROP_STEP).is_none())
            .then(|| "(no longer named)".to_string())
    });
    if from == 0
        && let Some(expired) = expired
    {
        // The oldest retained snapshot: certified once against the journal's fold.
        let first = &chain[0];
        let (mut entry, loaded) = deep::certify(&ctx, first, &expired).await?;
        report.files_read += loaded.files_read;
        report.start = format!(
            "snapshot {} certified against the journal's fold (its parent {expired} expired)",
            first.snapshot_id()
        );
        state.position = entry.position;
        if entry.verdict == Verdict::Divergence {
            state.open.push(divergence_of(&entry, entry.position));
        }
        entry.trusted = state.open.is_empty();
        finish(&mut state, &mut entry);
        write_record(opts, &ctx, &uuid, &digest, &entry, &state, &mut report).await?;
        progress(&entry);
        report.timeline.push(entry);
        parent = Some(loaded.loaded);
        from = 1;
    }
    // Consecutive commits of other writers that together leave every journal column as it was
    // (PyIceberg's overwrite is a delete and an append, two snapshots of one commit) are neutral
    // together: each is then neutral.
    let mut neutral_run_until: Option<usize> = None;
    // A run that diverges: its end, first snapshot, counts and keys (reported on its first).
    let mut divergent_run: Option<(usize, i64, Counts, Vec<String>)> = None;
    for i in from..chain.len() {
        let snap = &chain[i];
        let previous = if i == 0 { None } else { Some(&chain[i - 1]) };
        let mut entry = entry_of(snap);
        let props = snap.summary().additional_properties.clone();
        let position_then = state.position;
        if neutral_run_until.is_none_or(|end| i > end)
            && divergent_run.as_ref().is_none_or(|r| i > r.0)
            && let Some(end) = other_run_end(&chain, i)
            && end > i
        {
            let before = diff::loaded_or(&ctx, parent.take(), previous).await?;
            let after = diff::load(&ctx, &chain[end]).await?;
            let d = diff::diff(&ctx, before.as_ref(), &after).await?;
            report.files_read += d.files_read;
            if d.counts.is_zero() && d.schema_problem.is_none() {
                neutral_run_until = Some(end);
            } else {
                divergent_run = Some((end, snap.snapshot_id(), d.counts, d.samples));
            }
            parent = Some(after);
        }
        if let Some((end, first, counts, samples)) = divergent_run.as_ref().filter(|r| i <= r.0) {
            entry.kind = "other".into();
            entry.verdict = Verdict::Divergence;
            if *first == snap.snapshot_id() {
                entry.counts = *counts;
                entry.sample_keys = samples.clone();
                entry.detail = format!(
                    "{} keys removed, {} changed, {} added on the journal's columns, with the next {} commits of other writers (diffed together, up to snapshot {})",
                    counts.removed,
                    counts.changed,
                    counts.added,
                    end - i,
                    chain[*end].snapshot_id()
                );
            } else {
                entry.detail = format!("diffed together with snapshot {first} (the first of these commits)");
            }
        } else if neutral_run_until.is_some_and(|end| i <= end) {
            entry.kind = "other".into();
            entry.verdict = Verdict::Neutral;
            entry.detail = "one of consecutive commits of other writers that together leave every journal column of every key as it was".into();
        } else {
            classify(
                &ctx,
                snap,
                previous,
                &mut parent,
                &state,
                opts.deep,
                &props,
                &mut entry,
                &mut report,
            )
            .await?;
        }
        // An applier commit that records the operator's acceptance closes the divergences it names.
        if let Some(ids) = props.get(PROP_ACCEPTED_DIVERGENCE) {
            let accepted: Vec<i64> = ids.split(',').filter_map(|s| s.trim().parse().ok()).collect();
            state.open.retain(|d| !accepted.contains(&d.snapshot_id));
            for e in report.timeline.iter_mut().filter(|e| accepted.contains(&e.snapshot_id)) {
                e.verdict = Verdict::Accepted;
            }
        }
        if entry.verdict == Verdict::Divergence {
            state.open.push(divergence_of(&entry, position_then));
        }
        entry.trusted = state.open.is_empty();
        finish(&mut state, &mut entry);
        write_record(opts, &ctx, &uuid, &digest, &entry, &state, &mut report).await?;
        progress(&entry);
        report.timeline.push(entry);
    }
    report.audited = report.timeline.len() as u64;
    report.first_divergence = state.open.first().cloned();
    report.open_divergences = state.open.clone();
    report.ok = state.open.is_empty();
    report.trusted = match state.newest_trusted.clone() {
        Some(mut t) => {
            let filter = CheckpointFilter {
                table_uuid: Some(uuid.clone()),
                table_name: None,
            };
            t.checkpoint = checkpoint::list(journal.store.as_ref(), &filter)
                .await?
                .iter()
                .rev()
                .find(|c| c.snapshot_id == t.snapshot_id)
                .map(|c| tidemark_journal::paths::checkpoint_key(&c.table_uuid, c.position));
            Some(t)
        }
        None => None,
    };
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Whether `snap` is another writer's commit: no applier record, not a recovery's first commit.
fn is_other(snap: &SnapshotRef, first: bool) -> bool {
    let p = &snap.summary().additional_properties;
    let step = p.get(PROP_STEP).map(String::as_str);
    !p.contains_key(PROP_LAST_POSITION) && step != Some("seed") && !(first && step == Some("replay"))
}

/// The last index of the run of other writers' commits that starts at `i`, if `chain[i]` is one.
fn other_run_end(chain: &[SnapshotRef], i: usize) -> Option<usize> {
    if !is_other(&chain[i], i == 0) {
        return None;
    }
    let mut end = i;
    while end + 1 < chain.len() && is_other(&chain[end + 1], false) {
        end += 1;
    }
    Some(end)
}

/// The state after `entry`: its position, and the newest trusted snapshot.
fn finish(state: &mut AuditState, entry: &mut SnapshotAudit) {
    if entry.position.is_none() {
        entry.position = state.position;
    }
    state.position = entry.position;
    if entry.trusted {
        state.newest_trusted = Some(TrustedPoint {
            snapshot_id: entry.snapshot_id,
            position: entry.position,
            checkpoint: None,
        });
    }
}

async fn write_record(
    opts: &AuditOptions,
    ctx: &Ctx<'_>,
    uuid: &str,
    digest: &str,
    entry: &SnapshotAudit,
    state: &AuditState,
    report: &mut AuditReport,
) -> Result<(), AuditError> {
    // An audit that took a snapshot as trusted without auditing its ancestry writes no record:
    // a record's state must be the whole ancestry's (it reads the ones a full audit wrote).
    let (Some(store), None) = (&opts.records, opts.trust_from) else {
        return Ok(());
    };
    let rec = AuditRecord {
        format_version: records::FORMAT_VERSION,
        table_uuid: uuid.to_string(),
        journal_id: ctx.journal.header.journal_id.clone(),
        metadata_location: ctx.name.clone(),
        metadata_digest: digest.to_string(),
        entry: entry.clone(),
        state: state.clone(),
    };
    if records::write(store.as_ref(), &rec).await? {
        report.records_written += 1;
    }
    Ok(())
}

/// Classifies `snap` (its parent `previous`; `parent` holds the parent's loaded files when an
/// earlier step loaded them, and is left holding `snap`'s when this step loaded them).
#[allow(clippy::too_many_arguments)]
async fn classify(
    ctx: &Ctx<'_>,
    snap: &SnapshotRef,
    previous: Option<&SnapshotRef>,
    parent: &mut Option<Loaded>,
    state: &AuditState,
    deep: bool,
    props: &HashMap<String, String>,
    entry: &mut SnapshotAudit,
    report: &mut AuditReport,
) -> Result<(), AuditError> {
    let own_last = props.get(PROP_LAST_POSITION).and_then(|v| v.parse::<u64>().ok());
    let step = props.get(PROP_STEP).map(String::as_str);
    // A recovered table starts at its seed; the distributed engine seeds and replays in one
    // commit, the table's first.
    if step == Some("seed") || (step == Some("replay") && previous.is_none()) {
        entry.kind = "recovery seed".into();
        entry.position = own_last;
        let verdict = props.get(PROP_SOURCE_VERDICT).cloned().unwrap_or_default();
        entry.verdict = if verdict.starts_with("divergence accepted") {
            Verdict::Accepted
        } else {
            Verdict::Seed
        };
        entry.detail = format!(
            "seeded from snapshot {} at position {}{}",
            props
                .get(crate::provenance::PROP_SOURCE_SNAPSHOT)
                .map_or("?", String::as_str),
            own_last.map_or("?".into(), |p| p.to_string()),
            if verdict.is_empty() {
                String::new()
            } else {
                format!(" ({verdict})")
            }
        );
        *parent = None;
        return Ok(());
    }
    if let Some(last) = own_last {
        entry.kind = if step == Some("replay") {
            "recovery replay".into()
        } else {
            "applier".into()
        };
        entry.position = Some(last);
        let journal_id = props.get(PROP_JOURNAL_ID).cloned().unwrap_or_default();
        let expected_first = state.position.unwrap_or(0) + 1;
        let first = props.get(PROP_FIRST_POSITION).and_then(|v| v.parse::<u64>().ok());
        // One applier commit made as several snapshots (a delete, then an append, as PyIceberg's
        // overwrite does), each carrying the same record: the later ones continue the first.
        let same_as_parent = previous.is_some_and(|p| {
            let pp = &p.summary().additional_properties;
            [PROP_JOURNAL_ID, PROP_FIRST_POSITION, PROP_LAST_POSITION]
                .iter()
                .all(|k| pp.get(*k).is_some() && pp.get(*k) == props.get(*k))
        });
        let bad = if journal_id != ctx.journal.header.journal_id {
            Some(format!(
                "records journal {journal_id:?}, not this journal ({})",
                ctx.journal.header.journal_id
            ))
        } else {
            match first {
                None => Some(format!("records last position {last} but no {PROP_FIRST_POSITION}")),
                Some(f) if same_as_parent => {
                    entry.detail = format!("applied positions {f}..={last} (the same commit as its parent)");
                    None
                }
                Some(f) if f > expected_first => Some(format!(
                    "applied {f}..={last}: positions {expected_first}..={} were never applied (a gap)",
                    f - 1
                )),
                Some(f) if f < expected_first => Some(format!(
                    "applied {f}..={last}, but its parent already held up to {} (an overlap)",
                    expected_first - 1
                )),
                Some(_) if last + 1 < expected_first => Some(format!("records last position {last} below its first")),
                Some(f) => {
                    entry.detail = format!("applied positions {f}..={last}");
                    None
                }
            }
        };
        if let Some(why) = bad {
            entry.verdict = Verdict::Divergence;
            entry.detail = why;
            *parent = None;
            return Ok(());
        }
        entry.verdict = Verdict::Applied;
        if deep {
            let first = first.expect("checked");
            let (checked, loaded, files_read) =
                deep::check_applied(ctx, previous, parent.take(), snap, first, last).await?;
            report.files_read += files_read;
            if !checked.counts.is_zero() || !checked.detail.is_empty() {
                entry.verdict = Verdict::Divergence;
                entry.counts = checked.counts;
                entry.sample_keys = checked.samples;
                entry.detail = if checked.detail.is_empty() {
                    format!(
                        "its rows are not the merge rules applied to its parent's rows and positions {first}..={last}"
                    )
                } else {
                    checked.detail
                };
            } else {
                entry.detail.push_str("; rows checked (deep)");
            }
            *parent = Some(loaded);
        } else {
            *parent = None;
        }
        return Ok(());
    }
    // Another writer's commit: diffed on the journal's columns.
    entry.kind = "other".into();
    let before = diff::loaded_or(ctx, parent.take(), previous).await?;
    let after = diff::load(ctx, snap).await?;
    let d = diff::diff(ctx, before.as_ref(), &after).await?;
    report.files_read += d.files_read;
    entry.counts = d.counts;
    entry.sample_keys = d.samples;
    if let Some(why) = d.schema_problem {
        entry.verdict = Verdict::Divergence;
        entry.detail = why;
    } else if d.counts.is_zero() {
        entry.verdict = Verdict::Neutral;
        entry.detail = format!(
            "no journal column of any key changed ({} data files read of {} removed, {} added, {} with changed deletes)",
            d.files_read, d.removed_files, d.added_files, d.touched_files
        );
    } else {
        entry.verdict = Verdict::Divergence;
        entry.detail = format!(
            "{} keys removed, {} changed, {} added on the journal's columns",
            d.counts.removed, d.counts.changed, d.counts.added
        );
    }
    *parent = Some(after);
    Ok(())
}
