//! The steps both engines share (the local one, [`super::local`], and the Ballista one,
//! [`super::ballista`]): the boundary H, the validation against the independent reference and
//! the journal reference, and the steps' detail lines.

use iceberg::table::Table;
use tidemark_journal::Journal;

pub(crate) use crate::apply::spill::spill_dir_for;

use super::audited::SourceAudit;
use super::error::RecoverError;
use super::options::RecoverOptions;
use super::report::{RecoveryReport, StepTiming};
use super::snapshot::{self, SnapshotSource, TrustedSnapshot};
use super::validate::{self, ValidationReport};
use super::{replay, seed, trust};
use crate::catalog::CatalogHandle;
use crate::merge::MergeStats;

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

/// Steps "audit" and "choose snapshot" (both engines): the audit of the source's history, the
/// snapshot it leads to (or the one asked for), and the audit's verdict on that snapshot.
/// `fits` refuses a snapshot the engine cannot recover, before the step is logged done.
pub(crate) async fn audit_and_choose(
    log: &mut StepLog<'_>,
    journal: &Journal,
    opts: &RecoverOptions,
    fits: impl FnOnce(&TrustedSnapshot) -> Result<(), RecoverError>,
) -> Result<(TrustedSnapshot, crate::audit::AuditReport, String), RecoverError> {
    let t = std::time::Instant::now();
    let (choice, audit) = super::audited::resolve(journal, opts).await?;
    log.done("audit", t, super::audited::detail(&audit));

    let t = std::time::Instant::now();
    let snap = snapshot::choose(journal, &opts.source, &choice).await?;
    let verdict = super::audited::check(journal, opts, snap.snapshot_id, &audit).await?;
    fits(&snap)?;
    log.done("choose snapshot", t, snapshot_detail(&snap));
    Ok((snap, audit, verdict))
}

/// The "replay" step's detail (both engines): positions `first..=h`, on `engine` when named,
/// the merge's counts, then `note`.
pub(crate) fn replay_detail(first: u64, h: u64, engine: Option<&str>, stats: &MergeStats, note: &str) -> String {
    format!(
        "positions {first}..={h}{}: {} events, {} inserted, {} updated{note}",
        engine.map(|e| format!(" on {e}")).unwrap_or_default(),
        stats.events,
        stats.inserted,
        stats.updated
    )
}

/// The boundary H (both engines) and the journal verified up to it, once for the whole recovery
/// ([`replay::verify_range`]): `to`, or else the end of the journal's verified range when the job
/// starts; refused when it lies before the snapshot's position. A resumed recovery (its table
/// exists, seeded under this recovery id) keeps what its seed and replay record, so another
/// snapshot, journal or boundary is refused before anything is written, and without `--to` it
/// keeps the H it replayed to.
pub(crate) async fn resumed_boundary(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
) -> Result<replay::VerifiedRange, RecoverError> {
    let resumed = seed::resumed(handle, &opts.into, &opts.recovery_id).await?;
    let verified = replay::verify_range(journal, snap, opts.to.or(resumed.as_ref().and_then(|r| r.h))).await?;
    if let Some(r) = &resumed {
        r.check(
            &opts.recovery_id,
            &opts.into,
            snap,
            &journal.header.journal_id,
            verified.h,
        )?;
    }
    Ok(verified)
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

/// `--reference journal`, when the options ask for it (both engines), logged as its step:
/// `table` against the fold of the whole journal from position 1 to H, read by the validation's
/// own reader — no snapshot involved, so it proves the seed as well as the replay (it reads the
/// whole journal: its cost grows with the journal, not with the range). A mismatch marks
/// `opts.into` refused.
pub(crate) async fn journal_reference_step(
    log: &mut StepLog<'_>,
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
    table: &Table,
    h: u64,
) -> Result<Option<ValidationReport>, RecoverError> {
    if !opts.trust.reference_journal {
        return Ok(None);
    }
    let t = std::time::Instant::now();
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
    let r = validate_by_position(
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
    .await?;
    log.done("validate against the journal", t, validation_detail(&r));
    Ok(Some(r))
}

/// What the steps after the choice produced (both engines), for [`report`].
pub(crate) struct Results {
    pub(crate) h: u64,
    pub(crate) seed_resumed: bool,
    pub(crate) replay_resumed: bool,
    pub(crate) replay: MergeStats,
    pub(crate) audit: SourceAudit,
    pub(crate) validation: ValidationReport,
    pub(crate) journal_reference: Option<ValidationReport>,
}

/// The recovery's report (both engines): the recovered `table`, the chosen `snap`, the steps'
/// `results` and timings, the total time since `started`.
pub(crate) fn report(
    opts: &RecoverOptions,
    table: &Table,
    snap: &TrustedSnapshot,
    results: Results,
    log: StepLog<'_>,
    started: std::time::Instant,
) -> RecoveryReport {
    RecoveryReport {
        format_version: tidemark_schemas::FORMAT_VERSION,
        recovery_id: opts.recovery_id.clone(),
        into: opts.into.clone(),
        table_uuid: table.metadata().uuid().to_string(),
        metadata_location: table.metadata_location().unwrap_or_default().to_string(),
        source_snapshot_id: snap.snapshot_id,
        source_table_uuid: snap.table_uuid.clone(),
        snapshot_position: snap.position,
        h: results.h,
        seed_rows: snap.record_count,
        seed_resumed: results.seed_resumed,
        replay_resumed: results.replay_resumed,
        replay: results.replay,
        audit: results.audit,
        validation: results.validation,
        journal_reference: results.journal_reference,
        steps: log.steps,
        total_ms: started.elapsed().as_millis() as u64,
    }
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

/// The steps of a recovery as they end: each told to `progress` and kept for the report.
pub(crate) struct StepLog<'p> {
    pub(crate) steps: Vec<StepTiming>,
    progress: &'p mut dyn FnMut(&StepTiming),
}

impl<'p> StepLog<'p> {
    pub(crate) fn new(progress: &'p mut dyn FnMut(&StepTiming)) -> Self {
        StepLog {
            steps: Vec::new(),
            progress,
        }
    }

    /// Step `name`, begun at `started`, has ended.
    pub(crate) fn done(&mut self, name: &str, started: std::time::Instant, detail: String) {
        let s = StepTiming {
            step: name.into(),
            ms: started.elapsed().as_millis() as u64,
            detail,
        };
        (self.progress)(&s);
        self.steps.push(s);
    }
}
