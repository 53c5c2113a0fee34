//! The local engine (`--engine local`, the default): the steps in order in this process, with a
//! timing per step.

use std::time::Instant;

use iceberg::table::Table;
use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;

use super::error::RecoverError;
use super::options::RecoverOptions;
use super::report::{RecoveryReport, StepTiming};
use super::steps::{
    Results, StepLog, audit_and_choose, journal_reference_step, replay_detail, report, resumed_boundary, spill_dir_for,
    validate_step, validation_detail,
};
use super::{audited, replay, seed, validate};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;

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
    let mut log = StepLog::new(progress);

    let (snap, audit, source_verdict) = audit_and_choose(&mut log, journal, opts, |_| Ok(())).await?;

    let t = Instant::now();
    let range = resumed_boundary(journal, handle, opts, &snap).await?;
    let h = range.h;
    // Everything that can be checked is checked before the seed writes anything: the events
    // after the snapshot verify from its recorded manifest digest up to H, the snapshot holds
    // the journal's columns, and its codecs are ones this build writes.
    let verified = replay::verified_replay_events(
        journal,
        &range,
        &snap,
        &spill_dir_for("replay"),
        opts.partition_rows.unwrap_or(validate::PARTITION_ROWS),
    )
    .await?;
    crate::table::check_schema_in(&journal.spec, &snap.schema, snap.metadata.schemas_iter())?;
    // The recovered table gets the snapshot's properties: a codec this build cannot write is
    // refused now, not after the seed made the table.
    crate::table::commit::check_codecs(&opts.into, &snap.metadata)?;
    log.done("boundary", t, format!("H = {h}"));

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
    log.done(
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
    log.done(
        "replay",
        t,
        replay_detail(snap.position + 1, h, None, &replay_stats, &spilled),
    );

    let t = Instant::now();
    let validation = validate_step(journal, handle, opts, &snap, &table, h, None).await?;
    log.done("validate", t, validation_detail(&validation));
    let journal_reference = journal_reference_step(&mut log, journal, handle, opts, &snap, &table, h).await?;
    tidemark_journal::failpoint::hit("recover:after-validate");

    let results = Results {
        h,
        seed_resumed,
        replay_resumed,
        replay: replay_stats,
        audit: audited::SourceAudit::of(&audit, source_verdict),
        validation,
        journal_reference,
    };
    let report = report(opts, &table, &snap, results, log, started);
    Ok((report, table))
}
