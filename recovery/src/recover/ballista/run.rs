//! A recovery on a Ballista engine, step by step (see the module above).

use std::time::Instant;

use iceberg::table::Table;
use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;

use super::plan::distributed_replay;
use super::target::prepare_target;
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::MergeStats;
use crate::recover::engine::{self, Engine};
use crate::recover::seed::{PROP_SOURCE_METADATA, mark_refused};
use crate::recover::steps::StepLog;
use crate::recover::{RecoverError, RecoverOptions, RecoveryReport, StepTiming, replay, validate};
use crate::table;

/// The reference validation of a distributed recovery compares about one key partition in this
/// many (the distributed check covers every key).
pub const REFERENCE_ONE_IN: usize = 8;

/// The summary key naming the engine that produced a recovery's commit.
pub const PROP_ENGINE: &str = "tidemark.recovery-engine";

/// Runs a recovery on `engine` (a Ballista one). Same report as the local engine; the seed and
/// the replay are one distributed step, reported as `replay` (`seed_resumed` and
/// `replay_resumed` are both true when the recovery was already committed).
pub async fn recover(
    journal: &Journal,
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    engine: &Engine,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&StepTiming),
) -> Result<(RecoveryReport, Table), RecoverError> {
    let started = Instant::now();
    let mut log = StepLog::new(progress);

    let (snap, audit, source_verdict) = crate::recover::steps::audit_and_choose(&mut log, journal, opts, |snap| {
        if !snap.deletes.is_empty() {
            return Err(RecoverError::Unsupported {
                reason: format!(
                    "snapshot {} has delete files (position or equality deletes of another writer); the distributed engine reads data files as plain Parquet and would bring deleted rows back: recover it with --engine local, or compact the source first",
                    snap.snapshot_id
                ),
            });
        }
        // A partition spec the plan cannot compute in SQL (bucket) is refused before anything runs.
        crate::recover::partition::plan(snap.metadata.default_partition_spec(), &snap.schema)?;
        Ok(())
    })
    .await?;

    let t = Instant::now();
    let range = crate::recover::steps::resumed_boundary(journal, handle, opts, &snap).await?;
    let h = range.h;
    let (events, sequence, digest) = replay::verified_events(journal, &range, &snap).await?;
    // By current names only: the cluster's plans name columns, so a spec column another
    // writer renamed is refused here (exit 3); `--engine local` matches it by field id.
    table::check_schema(&journal.spec, &snap.schema)?;
    log.done("boundary", t, format!("H = {h}"));

    let t = Instant::now();
    // The cluster first: an unreachable scheduler is reported before anything is created.
    let mut buckets: Vec<String> = snap.data_files.iter().filter_map(|p| engine::bucket_of(p)).collect();
    buckets.sort();
    buckets.dedup();
    let ctx = engine::session(engine, &buckets, &opts.source.file_io_props).await?;
    // The listings match Parquet columns by name: refuse files whose field ids name another
    // column than the snapshot's schema does, before anything is created.
    crate::recover::footer::check_field_names(&ctx.runtime_env(), &snap).await?;
    let (table, resumed) = prepare_target(handle, opts, &snap, &journal.header.journal_id, h).await?;
    let (table, stats, distributed) = if resumed {
        (table, MergeStats::default(), None)
    } else {
        let mut summary = replay::replay_summary(
            &opts.recovery_id,
            &snap,
            &journal.header.journal_id,
            h,
            sequence,
            digest,
        );
        summary.insert(PROP_SOURCE_METADATA.to_string(), snap.metadata_location.clone());
        summary.insert(
            crate::provenance::PROP_SOURCE_VERDICT.to_string(),
            source_verdict.clone(),
        );
        summary.insert(PROP_ENGINE.to_string(), engine.to_string());
        let run = distributed_replay(
            &ctx,
            handle,
            table,
            &journal.spec,
            &snap,
            &events,
            engine,
            &opts.source.file_io_props,
            summary,
            clock,
            ids,
        )
        .await;
        match run {
            Ok((table, stats, check)) => (table, stats, Some(check)),
            Err(e) => {
                mark_refused(handle, &opts.into, &e.to_string()).await;
                return Err(e);
            }
        }
    };
    tidemark_journal::failpoint::hit("recover:after-replay");
    let note = if resumed { " (already committed)" } else { "" };
    let detail = crate::recover::steps::replay_detail(snap.position + 1, h, Some(&engine.to_string()), &stats, note);
    log.done("replay", t, detail);

    let t = Instant::now();
    // Every key was checked on the cluster before the commit (`distributed_check`); the
    // independent reference rereads the snapshot and the journal here on a sample of the key
    // partitions (all of them when the table fits one partition).
    // (A resumed recovery ran no distributed check in this process: every key then.)
    let sample = distributed.is_some().then(|| validate::SampleRequest {
        seed: opts.recovery_id.clone(),
        one_in: REFERENCE_ONE_IN,
    });
    let mut validation =
        crate::recover::steps::validate_step(journal, handle, opts, &snap, &table, h, sample.as_ref()).await?;
    validation.distributed = distributed;
    log.done("validate", t, crate::recover::steps::validation_detail(&validation));
    let journal_reference =
        crate::recover::steps::journal_reference_step(&mut log, journal, handle, opts, &snap, &table, h).await?;
    let results = crate::recover::steps::Results {
        h,
        seed_resumed: resumed,
        replay_resumed: resumed,
        replay: stats,
        audit: crate::recover::audited::SourceAudit::of(&audit, source_verdict),
        validation,
        journal_reference,
    };
    let report = crate::recover::steps::report(opts, &table, &snap, results, log, started);
    Ok((report, table))
}
