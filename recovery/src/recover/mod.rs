//! Recovery to a journal boundary H, one file per step:
//! [`snapshot`] (choose the trusted snapshot, prove its files exist, and with [`trust`] that the
//! position it holds is the one it records itself, from this journal), [`seed`] (a new table owning
//! copies of its rows), [`replay`] (verified events after the snapshot's position up to H),
//! [`validate`] (every key against an independent reference), then the route flip (in
//! `tidemark_router`), done by the caller only when validation passed.
//!
//! [`recover`] runs the steps in order with a timing per step; [`engine::recover`] runs them on
//! the engine `--engine` names (a Ballista cluster: [`ballista`]). It is idempotent and resumable by
//! recovery id: a confirmed seed or replay of the same recovery is not redone.

pub mod audited;
#[cfg(feature = "ballista-engine")]
pub mod ballista;
#[cfg(all(test, feature = "ballista-engine"))]
mod ballista_partition_tests;
#[cfg(all(test, feature = "ballista-engine"))]
mod ballista_tests;
pub mod columnar;
#[cfg(test)]
mod columnar_tests;
#[cfg(feature = "ballista-engine")]
pub mod distributed_check;
#[cfg(feature = "ballista-engine")]
pub mod engine;
#[cfg(feature = "ballista-engine")]
pub(crate) mod footer;
#[cfg(feature = "ballista-engine")]
pub mod partition;
#[cfg(test)]
mod positions_tests;
pub mod replay;
pub mod seed;
pub mod snapshot;
#[cfg(test)]
pub(crate) mod tests;
pub mod trust;
pub mod validate;
mod validate_ranges;
mod validate_spill;

use std::time::Instant;

use iceberg::table::Table;
use serde::Serialize;
use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;
use tidemark_schemas::FORMAT_VERSION;

use crate::apply::ApplyError;
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::{MergeError, MergeStats};
use crate::table::TableError;
use snapshot::{SnapshotChoice, SnapshotSource, TrustedSnapshot};
use validate::ValidationReport;

#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Journal(#[from] tidemark_journal::JournalError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("{what} is missing: {path}; the snapshot cannot be trusted (choose an older one, or repair the replica)")]
    MissingFile { path: String, what: String },
    #[error("no checkpoint of table {table_uuid}{}", at_or_before.map(|p| format!(" at or before position {p}")).unwrap_or_default())]
    NoCheckpoint {
        table_uuid: String,
        at_or_before: Option<u64>,
    },
    #[error("{what} does not exist")]
    UnknownSnapshot { what: String },
    #[error(
        "snapshot {snapshot_id} has no checkpoint and no tidemark summary: the journal position it holds is unknown"
    )]
    NoPosition { snapshot_id: i64 },
    #[error(
        "snapshot {snapshot_id} holds positions of journal {found} (recorded by snapshot {recorded_by}), not of journal {expected}: those positions are other events; recover with that snapshot's own journal"
    )]
    OtherJournal {
        snapshot_id: i64,
        recorded_by: i64,
        found: String,
        expected: String,
    },
    #[error(
        "checkpoint {checkpoint} names snapshot {snapshot_id} with {field} {checkpoint_value}, but the snapshot's own summary records {snapshot_value}: the checkpoint cannot be trusted (rewritten, restored or copied from elsewhere) and nothing was written; choose the snapshot by its own record with --snapshot-id, or another --at-or-before"
    )]
    CheckpointMismatch {
        checkpoint: String,
        snapshot_id: i64,
        field: String,
        checkpoint_value: String,
        snapshot_value: String,
    },
    #[error("H = {h} is beyond the verified range of the journal ({range})")]
    BeyondVerified { h: u64, range: String },
    #[error("the journal does not verify: {kind} at {key}: {message}")]
    ChainBroken { kind: String, key: String, message: String },
    #[error("table {table} exists and is not this recovery's ({})", owner.as_deref().map(|o| format!("it belongs to recovery {o}")).unwrap_or_else(|| "not made by a recovery".into()))]
    TargetExists { table: String, owner: Option<String> },
    #[error(
        "recovery {recovery_id} already seeded {table} with {field} {recorded}, but this run chooses {field} {asked}; nothing was written: run it again with the same choice, or start another recovery (a new --recovery-id and --into)"
    )]
    ResumeMismatch {
        recovery_id: String,
        table: String,
        field: String,
        recorded: String,
        asked: String,
    },
    #[error(transparent)]
    Audit(Box<crate::audit::AuditError>),
    #[error(
        "snapshot {snapshot_id} is not trusted: its history holds a write the journal does not explain, {divergence}; nothing was written. The newest trusted snapshot is {trusted} (recover with no snapshot option to take it); to start from snapshot {snapshot_id} anyway, give --accept-divergence REASON"
    )]
    Untrusted {
        snapshot_id: i64,
        divergence: String,
        trusted: String,
    },
    #[error(
        "table {table_uuid} has no trusted snapshot: its history diverges from the journal from the start ({divergence}); nothing was written. Recover from a snapshot of your choice with --snapshot-id ID --accept-divergence REASON, or with --reference journal to prove the result against the whole journal"
    )]
    NoTrustedSnapshot { table_uuid: String, divergence: String },
    #[error("validation failed: {message}")]
    Validation { message: String },
    #[error("not supported: {reason}")]
    Unsupported { reason: String },
    /// The replay's spill files (under `$TIDEMARK_SPILL_DIR`) could not be written or read.
    #[error("replay spill {path}: {message}")]
    Spill { path: String, message: String },
    /// `error` stopped the replay after some of its files were written, and not all could be
    /// deleted: `left` names each (path: why).
    #[error("{error}; {n} file(s) written for it are in no snapshot and could not be deleted: {list}", n = .left.len(), list = .left.join("; "))]
    Uncleaned {
        error: Box<RecoverError>,
        left: Vec<String>,
    },
    #[error("{context}: {message}")]
    Iceberg { context: String, message: String },
    /// A Ballista engine's failure (`--engine`, `engine`).
    #[cfg(feature = "ballista-engine")]
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
}

impl From<crate::table::source::SourceError> for RecoverError {
    fn from(e: crate::table::source::SourceError) -> Self {
        use crate::table::source::SourceError as S;
        match e {
            S::MissingFile { path, what } => RecoverError::MissingFile { path, what },
            S::AccessDenied { context, detail } => RecoverError::Table(TableError::AccessDenied { context, detail }),
            S::Iceberg { context, message } => RecoverError::Iceberg { context, message },
        }
    }
}

impl RecoverError {
    pub fn from_apply(e: ApplyError) -> Self {
        match e {
            ApplyError::Journal(j) => RecoverError::Journal(j),
            ApplyError::Table(t) => RecoverError::Table(t),
            ApplyError::Merge(m) => RecoverError::Merge(m),
            ApplyError::Spill { path, message } => RecoverError::Spill { path, message },
            ApplyError::Uncleaned { error, left } => RecoverError::Uncleaned {
                error: Box::new(RecoverError::from_apply(*error)),
                left,
            },
            other => RecoverError::Validation {
                message: other.to_string(),
            },
        }
    }
}

#[derive(Debug, Clone)]
pub struct RecoverOptions {
    pub recovery_id: String,
    pub source: SnapshotSource,
    pub choice: SnapshotChoice,
    /// The journal boundary; default: the end of the verified range when the job starts.
    pub to: Option<u64>,
    /// The new table, `namespace.name`.
    pub into: String,
    /// The memory bound: rows per validation partition, table rows per replay merge chunk and
    /// events the replay holds in memory (more are spilled and merged in key ranges of this
    /// many); default [`validate::PARTITION_ROWS`] for the validation and the replay's events,
    /// [`crate::apply::MERGE_CHUNK_ROWS`] for the merge chunks.
    pub partition_rows: Option<u64>,
    /// How the validation splits the keys beyond one partition (`--validation-split`): by key
    /// range when the manifests' key bounds allow it (the default), or always by key hash.
    pub validation_split: validate::Split,
    /// The audit's records, an accepted divergence, and the journal reference.
    pub trust: audited::TrustOptions,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StepTiming {
    pub step: String,
    pub ms: u64,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RecoveryReport {
    pub format_version: u32,
    pub recovery_id: String,
    pub into: String,
    pub table_uuid: String,
    pub metadata_location: String,
    pub source_snapshot_id: i64,
    pub source_table_uuid: String,
    pub snapshot_position: u64,
    pub h: u64,
    pub seed_rows: u64,
    pub seed_resumed: bool,
    pub replay_resumed: bool,
    pub replay: MergeStats,
    /// The source's history held against the journal (step 0).
    pub audit: audited::SourceAudit,
    pub validation: ValidationReport,
    /// With `--reference journal`: the recovered table against the fold of the whole journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_reference: Option<ValidationReport>,
    pub steps: Vec<StepTiming>,
    pub total_ms: u64,
}

impl RecoveryReport {
    /// Both validations passed (the journal reference only when asked): the route may flip.
    pub fn ok(&self) -> bool {
        self.validation.ok && self.journal_reference.as_ref().is_none_or(|r| r.ok)
    }
}

/// Runs steps 0–5. The caller flips the route only when [`RecoveryReport::ok`].
pub async fn recover(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&StepTiming),
) -> Result<(RecoveryReport, Table), RecoverError> {
    let started = Instant::now();
    let mut steps = Vec::new();
    let mut step = |name: &str, t: Instant, detail: String, steps: &mut Vec<StepTiming>| {
        let s = StepTiming {
            step: name.into(),
            ms: t.elapsed().as_millis() as u64,
            detail,
        };
        progress(&s);
        steps.push(s);
    };

    let t = Instant::now();
    let (choice, audit) = audited::resolve(journal, opts).await?;
    step("audit", t, audited::detail(&audit), &mut steps);

    let t = Instant::now();
    let snap: TrustedSnapshot = snapshot::choose(journal, &opts.source, &choice).await?;
    let source_verdict = audited::check(journal, opts, snap.snapshot_id, &audit).await?;
    step("choose snapshot", t, snapshot_detail(&snap), &mut steps);

    let t = Instant::now();
    let h = resumed_boundary(journal, handle, opts, &snap).await?;
    // Everything that can be checked is checked before the seed writes anything: the events
    // after the snapshot verify from its recorded manifest digest up to H, the snapshot holds
    // the journal's columns, and its codecs are ones this build writes.
    let verified = replay::verified_replay_events(
        journal,
        &snap,
        h,
        &spill_dir_for("replay"),
        opts.partition_rows.unwrap_or(validate::PARTITION_ROWS),
    )
    .await?;
    crate::table::check_schema_in(&journal.spec, &snap.schema, snap.metadata.schemas_iter())?;
    // The recovered table gets the snapshot's properties: a codec this build cannot write is
    // refused now, not after the seed made the table.
    crate::table::commit::check_codecs(&opts.into, &snap.metadata)?;
    step("boundary", t, format!("H = {h}"), &mut steps);

    let t = Instant::now();
    let (table, seed_resumed, copied) = seed::seed(
        handle,
        &opts.into,
        &journal.spec,
        &journal.header.journal_id,
        &snap,
        &opts.recovery_id,
        &source_verdict,
        clock,
        ids,
    )
    .await?;
    tidemark_journal::failpoint::hit("recover:after-seed");
    step(
        "seed",
        t,
        format!(
            "{} rows into {}{}",
            snap.record_count,
            opts.into,
            if seed_resumed {
                " (already seeded)".to_string()
            } else {
                format!(", {copied} of {} files copied byte for byte", snap.data_files.len())
            }
        ),
        &mut steps,
    );

    // From here on a failure or a failed validation marks the seeded table refused, so that a
    // rerun of the same recovery drops it and starts again (see `seed`).
    let t = Instant::now();
    let spilled = match &verified.0 {
        crate::apply::UnitEvents::Spilled(s) => format!(" ({} events spilled to disk, merged in key ranges)", s.rows()),
        crate::apply::UnitEvents::Batches(_) => String::new(),
    };
    let replayed = replay::replay(
        journal,
        handle,
        table.clone(),
        &snap,
        h,
        verified,
        &opts.recovery_id,
        clock,
        ids,
        opts.partition_rows.unwrap_or(crate::apply::MERGE_CHUNK_ROWS),
        opts.partition_rows.unwrap_or(validate::PARTITION_ROWS),
    )
    .await;
    let (table, replay_stats, replay_resumed) = match replayed {
        Ok(r) => r,
        Err(e) => {
            seed::mark_refused(handle, &opts.into, &e.to_string()).await;
            return Err(e);
        }
    };
    tidemark_journal::failpoint::hit("recover:after-replay");
    step(
        "replay",
        t,
        format!(
            "positions {}..={h}: {} events, {} inserted, {} updated{spilled}",
            snap.position + 1,
            replay_stats.events,
            replay_stats.inserted,
            replay_stats.updated
        ),
        &mut steps,
    );

    let t = Instant::now();
    let validation = validate_step(journal, handle, opts, &snap, &table, h, None).await?;
    step("validate", t, validation_detail(&validation), &mut steps);
    let journal_reference = if opts.trust.reference_journal {
        let t = Instant::now();
        let r = journal_reference_step(journal, handle, opts, &snap, &table, h).await?;
        step("validate against the journal", t, validation_detail(&r), &mut steps);
        Some(r)
    } else {
        None
    };
    tidemark_journal::failpoint::hit("recover:after-validate");

    let report = RecoveryReport {
        format_version: FORMAT_VERSION,
        recovery_id: opts.recovery_id.clone(),
        into: opts.into.clone(),
        table_uuid: table.metadata().uuid().to_string(),
        metadata_location: table.metadata_location().unwrap_or_default().to_string(),
        source_snapshot_id: snap.snapshot_id,
        source_table_uuid: snap.table_uuid.clone(),
        snapshot_position: snap.position,
        h,
        seed_rows: snap.record_count,
        seed_resumed,
        replay_resumed,
        replay: replay_stats,
        audit: audited::SourceAudit {
            audited: audit.audited,
            resumed_from: audit.resumed_from,
            first_divergence: audit.first_divergence.clone(),
            trusted: audit.trusted.clone(),
            source_verdict,
            timeline: audit.timeline.clone(),
        },
        validation,
        journal_reference,
        steps,
        total_ms: started.elapsed().as_millis() as u64,
    };
    Ok((report, table))
}

/// The "choose snapshot" step's detail (both engines).
pub(crate) fn snapshot_detail(snap: &TrustedSnapshot) -> String {
    format!(
        "snapshot {} at position {}, {} files, {} rows",
        snap.snapshot_id,
        snap.position,
        snap.data_files.len(),
        snap.record_count
    )
}

/// The boundary H (both engines): `to`, or else the end of the journal's verified range when the
/// job starts; refused when it lies before the snapshot's position.
pub(crate) async fn boundary(journal: &Journal, to: Option<u64>, snap: &TrustedSnapshot) -> Result<u64, RecoverError> {
    let h = match to {
        Some(h) => h,
        None => {
            let chain = tidemark_journal::verify::verify(journal, &Default::default(), &mut |_| {}).await?;
            chain.report.verified_last_position.unwrap_or(snap.position)
        }
    };
    if h < snap.position {
        return Err(RecoverError::Validation {
            message: format!("H = {h} is before the snapshot's position {}", snap.position),
        });
    }
    Ok(h)
}

/// The boundary H (both engines) of a recovery that may be resumed: a resumed recovery (its
/// table exists, seeded under this recovery id) keeps what its seed and replay record, so another
/// snapshot, journal or boundary is refused before anything is written, and without `--to` it
/// keeps the H it replayed to.
pub(crate) async fn resumed_boundary(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
) -> Result<u64, RecoverError> {
    let resumed = seed::resumed(handle, &opts.into, &opts.recovery_id).await?;
    let h = boundary(journal, opts.to.or(resumed.as_ref().and_then(|r| r.h)), snap).await?;
    if let Some(r) = &resumed {
        r.check(&opts.recovery_id, &opts.into, snap, &journal.header.journal_id, h)?;
    }
    Ok(h)
}

/// Step 5 (both engines): `table` against the independent reference ([`validate`]), on every key
/// or on `sample`'s key partitions. A failure, or a validation that does not pass, marks `opts.into`
/// refused (a rerun of the same recovery then drops it and starts again).
pub(crate) async fn validate_step(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
    table: &Table,
    h: u64,
    sample: Option<&validate::SampleRequest>,
) -> Result<ValidationReport, RecoverError> {
    // The reference starts from the position the snapshot records itself, read again from its
    // metadata: never from what step 1 concluded, so that it cannot share a wrong premise.
    // Its events come from its own reader, by position (`tidemark_journal::events::ByPosition`):
    // never from the replay's chain anchor, so that a replay that skipped or repeated events
    // cannot be confirmed by the same mistake.
    let reference = reference_snapshot(&opts.source, snap).await?;
    validate_by_position(
        journal,
        handle,
        opts,
        &reference,
        table,
        h,
        sample,
        opts.validation_split,
        "validation",
    )
    .await
}

/// `table` against `reference` (its rows) and the journal's events after its position up to `h`,
/// read by the validation's own reader; a failure, or a validation that does not pass, marks
/// `opts.into` refused (`what` names the validation in that mark).
#[allow(clippy::too_many_arguments)]
async fn validate_by_position(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    reference: &TrustedSnapshot,
    table: &Table,
    h: u64,
    sample: Option<&validate::SampleRequest>,
    split: validate::Split,
    what: &str,
) -> Result<ValidationReport, RecoverError> {
    let range = tidemark_journal::events::ByPosition::select(journal, reference.position, h).await?;
    let range_events = range.events();
    let events = validate::events_by_position(journal, range);
    let validation = validate::validate_keys(
        &journal.spec,
        reference,
        table,
        events,
        range_events,
        &spill_dir_for("validate"),
        opts.partition_rows.unwrap_or(validate::PARTITION_ROWS),
        sample,
        split,
    )
    .await;
    match validation {
        Ok(v) => {
            if !v.ok {
                let why = format!("{what} failed ({} mismatches)", v.first_mismatches.len());
                seed::mark_refused(handle, &opts.into, &why).await;
            }
            Ok(v)
        }
        Err(e) => {
            seed::mark_refused(handle, &opts.into, &e.to_string()).await;
            Err(e)
        }
    }
}

/// `--reference journal` (both engines): `table` against the fold of the whole journal from
/// position 1 to H, read by the validation's own reader — no snapshot involved, so it proves the
/// seed as well as the replay (it reads the whole journal: its cost grows with the journal, not
/// with the range). A mismatch marks `opts.into` refused.
pub(crate) async fn journal_reference_step(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
    table: &Table,
    h: u64,
) -> Result<ValidationReport, RecoverError> {
    let empty = TrustedSnapshot {
        position: 0,
        manifest_sequence: 0,
        manifest_digest: String::new(),
        data_files: Vec::new(),
        data_entries: Vec::new(),
        record_count: 0,
        deletes: crate::table::files::Deletes::none(),
        ..snap.clone()
    };
    validate_by_position(
        journal,
        handle,
        opts,
        &empty,
        table,
        h,
        None,
        validate::Split::KeyHash,
        "validation against the whole journal",
    )
    .await
}

/// The "validate" step's detail (both engines).
pub(crate) fn validation_detail(v: &ValidationReport) -> String {
    let sample = v
        .sample
        .as_ref()
        .map(|s| format!(" (reference on {} of {} key partitions)", s.partitions.len(), s.of))
        .unwrap_or_default();
    let distributed = v
        .distributed
        .as_ref()
        .map(|d| {
            format!(
                ", distributed check of {} keys: {}",
                d.keys_expected,
                if d.ok { "all match" } else { "MISMATCH" }
            )
        })
        .unwrap_or_default();
    format!(
        "{} keys{sample}: {}{distributed}",
        v.keys_expected,
        if v.ok { "all match" } else { "MISMATCH" }
    )
}

/// `snap` with the journal position its own summary records, read afresh from the source's
/// metadata file.
pub(crate) async fn reference_snapshot(
    source: &SnapshotSource,
    snap: &TrustedSnapshot,
) -> Result<TrustedSnapshot, RecoverError> {
    let (meta, _, _) = snapshot::load_metadata(source).await?;
    let own = meta
        .snapshot_by_id(snap.snapshot_id)
        .and_then(|s| trust::recorded_position(&meta, s))
        .ok_or(RecoverError::NoPosition {
            snapshot_id: snap.snapshot_id,
        })?;
    Ok(TrustedSnapshot {
        position: own.position,
        manifest_sequence: own.manifest_sequence,
        manifest_digest: own.manifest_digest,
        ..snap.clone()
    })
}

/// A new folder name for the spill files of a step (`validate`, `replay`): under
/// `$TIDEMARK_SPILL_DIR`, or the system's temporary folder; unique per process and call.
pub(crate) fn spill_dir_for(step: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::var_os("TIDEMARK_SPILL_DIR").map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    root.join(format!("tidemark-{step}-{}-{n}", std::process::id()))
}
