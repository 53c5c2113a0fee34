//! `recover --engine ballista-standalone | ballista://HOST:PORT`: the replay's merge as one
//! distributed DataFusion plan on a Ballista cluster; tidemark keeps the control.
//!
//! The steps, beside the local ones in [`super::recover`]:
//! 1. choose the trusted snapshot and the boundary H exactly as the local engine does: the
//!    events after the snapshot are read by their object version ids and verified (chain and
//!    sha256) before anything runs, and the voids of recorded resolutions are applied;
//! 2. refuse what the plan cannot carry: a snapshot with delete files (the listing would read
//!    deleted rows as live) or a partition transform SQL cannot compute (bucket; see
//!    [`super::partition`]);
//! 3. create the new table (same ownership rules as the seed: a table of this recovery or a
//!    refused attempt of it is replaced, anything else is refused);
//! 4. stage the verified events as one Parquet file in the new table's location
//!    (`tidemark-staging/<attempt>/`), so that executors read exactly the bytes tidemark
//!    verified, never a newer version of a journal object;
//! 5. register the snapshot's data files and the staged events as Parquet listings (the only
//!    tables that serialize to the scheduler) and run, distributed, the local merge's own SQL
//!    ([`crate::merge::conflicts_in_events_sql`], [`crate::merge::conflicts_with_table_sql`],
//!    [`crate::merge::decided_sql`]): a conflict stops the job and nothing is committed; the new
//!    table's rows (winners that insert or update, tombstones included, and every snapshot row
//!    whose key no winner updates) are written as Parquet into `data/tidemark-<attempt>/`, by
//!    partition folder when the table is partitioned ([`super::partition`]);
//! 6. build the manifests from the written files' footers ([`super::footer`]), check every key
//!    of the written files on the cluster against a second, differently formulated plan
//!    ([`super::distributed_check`]; a difference stops here, nothing committed), and commit them
//!    through the catalog contract in one snapshot whose summary carries the seed's and the
//!    replay's provenance (step `replay`, source snapshot and metadata, journal range, H,
//!    manifest digest, and `tidemark.recovery-engine`);
//! 7. validate with the local engine's independent reference ([`crate::reference`], no
//!    DataFusion) recomputed from the snapshot and the events, against the rows read back from
//!    the committed table's files, on a sample of the key partitions ([`REFERENCE_ONE_IN`]; every
//!    key when the table fits one validation partition, or when the recovery was already
//!    committed). docs/scale-out.md says what the two prove together and what they do not.
//!
//! Before anything is created, a snapshot whose files name a column otherwise than its schema
//! (by Parquet field id) is refused: the listings match columns by name
//! ([`super::footer::check_field_names`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::JoinType;
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::functions_aggregate::expr_fn::{count, sum};
use datafusion::prelude::{SessionContext, cast, ident, lit};
use iceberg::table::Table;
use object_store::ObjectStoreExt;
use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;
use tidemark_schemas::FORMAT_VERSION;

use super::engine::{self, Engine, EngineError};
use super::seed::{
    PROP_RECOVERY_ID, PROP_REFUSED, PROP_SOURCE_METADATA, PROP_SOURCE_SNAPSHOT, PROP_STEP, mark_refused,
};
use super::snapshot::{self, TrustedSnapshot};
use super::validate::DistributedCheck;
use super::{RecoverError, RecoverOptions, RecoveryReport, StepTiming, distributed_check, replay, validate};
use crate::apply::{
    PROP_FIRST_POSITION, PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_MANIFEST_DIGEST, PROP_MANIFEST_SEQUENCE,
};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::{self, MergeError, MergeStats};
use crate::table::{self, CommitStamp, commit_overwrite, parse_ident};

/// The reference validation of a distributed recovery compares about one key partition in this
/// many (the distributed check covers every key).
pub const REFERENCE_ONE_IN: usize = 8;

/// The summary key naming the engine that produced a recovery's commit.
pub const PROP_ENGINE: &str = "tidemark.recovery-engine";

fn job<'a>(
    engine: &'a Engine,
    stage: &'static str,
) -> impl Fn(datafusion::error::DataFusionError) -> RecoverError + 'a {
    move |e| {
        RecoverError::Engine(EngineError::JobFailed {
            engine: engine.to_string(),
            stage,
            message: e.to_string(),
        })
    }
}

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
    let (choice, audit) = super::audited::resolve(journal, opts).await?;
    step("audit", t, super::audited::detail(&audit), &mut steps);

    let t = Instant::now();
    let snap = snapshot::choose(journal, &opts.source, &choice).await?;
    let source_verdict = super::audited::check(journal, opts, snap.snapshot_id, &audit).await?;
    if !snap.deletes.is_empty() {
        return Err(RecoverError::Unsupported {
            reason: format!(
                "snapshot {} has delete files (position or equality deletes of another writer); the distributed engine reads data files as plain Parquet and would bring deleted rows back: recover it with --engine local, or compact the source first",
                snap.snapshot_id
            ),
        });
    }
    // A partition spec the plan cannot compute in SQL (bucket) is refused before anything runs.
    super::partition::plan(snap.metadata.default_partition_spec(), &snap.schema)?;
    step("choose snapshot", t, super::snapshot_detail(&snap), &mut steps);

    let t = Instant::now();
    let h = super::resumed_boundary(journal, handle, opts, &snap).await?;
    let (events, sequence, digest) = replay::verified_events(journal, &snap, h).await?;
    // By current names only: the cluster's plans name columns, so a spec column another
    // writer renamed is refused here (exit 3); `--engine local` matches it by field id.
    table::check_schema(&journal.spec, &snap.schema)?;
    step("boundary", t, format!("H = {h}"), &mut steps);

    let t = Instant::now();
    // The cluster first: an unreachable scheduler is reported before anything is created.
    let mut buckets: Vec<String> = snap.data_files.iter().filter_map(|p| engine::bucket_of(p)).collect();
    buckets.sort();
    buckets.dedup();
    let ctx = engine::session(engine, &buckets, &opts.source.file_io_props).await?;
    // The listings match Parquet columns by name: refuse files whose field ids name another
    // column than the snapshot's schema does, before anything is created.
    super::footer::check_field_names(&ctx.runtime_env(), &snap).await?;
    let (table, resumed) = prepare_target(handle, opts, &snap, &journal.header.journal_id, h).await?;
    let (table, stats, distributed) = if resumed {
        (table, MergeStats::default(), None)
    } else {
        let mut summary = HashMap::new();
        summary.insert(PROP_STEP.to_string(), "replay".to_string());
        summary.insert(PROP_RECOVERY_ID.to_string(), opts.recovery_id.clone());
        summary.insert(PROP_SOURCE_SNAPSHOT.to_string(), snap.snapshot_id.to_string());
        summary.insert(PROP_SOURCE_METADATA.to_string(), snap.metadata_location.clone());
        summary.insert(
            crate::provenance::PROP_SOURCE_VERDICT.to_string(),
            source_verdict.clone(),
        );
        summary.insert(PROP_JOURNAL_ID.to_string(), journal.header.journal_id.clone());
        summary.insert(PROP_FIRST_POSITION.to_string(), (snap.position + 1).to_string());
        summary.insert(PROP_LAST_POSITION.to_string(), h.to_string());
        summary.insert(PROP_MANIFEST_SEQUENCE.to_string(), sequence.to_string());
        summary.insert(PROP_MANIFEST_DIGEST.to_string(), digest);
        summary.insert("tidemark.boundary-h".to_string(), h.to_string());
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
    step(
        "replay",
        t,
        format!(
            "positions {}..={h} on {engine}: {} events, {} inserted, {} updated{}",
            snap.position + 1,
            stats.events,
            stats.inserted,
            stats.updated,
            if resumed { " (already committed)" } else { "" }
        ),
        &mut steps,
    );

    let t = Instant::now();
    // Every key was checked on the cluster before the commit (`distributed_check`); the
    // independent reference rereads the snapshot and the journal here on a sample of the key
    // partitions (all of them when the table fits one partition).
    // (A resumed recovery ran no distributed check in this process: every key then.)
    let sample = distributed.is_some().then(|| validate::SampleRequest {
        seed: opts.recovery_id.clone(),
        one_in: REFERENCE_ONE_IN,
    });
    let mut validation = super::validate_step(journal, handle, opts, &snap, &table, h, sample.as_ref()).await?;
    validation.distributed = distributed;
    step("validate", t, super::validation_detail(&validation), &mut steps);
    let journal_reference = if opts.trust.reference_journal {
        let t = Instant::now();
        let r = super::journal_reference_step(journal, handle, opts, &snap, &table, h).await?;
        step(
            "validate against the journal",
            t,
            super::validation_detail(&r),
            &mut steps,
        );
        Some(r)
    } else {
        None
    };
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
        seed_resumed: resumed,
        replay_resumed: resumed,
        replay: stats,
        audit: super::audited::SourceAudit {
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

/// The new table, created afresh, or the committed one of this recovery at `h` (`true`).
async fn prepare_target(
    handle: &CatalogHandle,
    opts: &RecoverOptions,
    snap: &TrustedSnapshot,
    journal_id: &str,
    h: u64,
) -> Result<(Table, bool), RecoverError> {
    let into = &opts.into;
    let ident = parse_ident(into)?;
    let iceberg = |context: String| {
        move |e: iceberg::Error| RecoverError::Iceberg {
            context,
            message: e.to_string(),
        }
    };
    if handle
        .catalog()
        .table_exists(&ident)
        .await
        .map_err(iceberg(format!("look up {into}")))?
    {
        let existing = table::load_table(handle, into).await?;
        let meta = existing.metadata();
        let owner = meta.properties().get(PROP_RECOVERY_ID).cloned();
        let ours = owner.as_deref() == Some(opts.recovery_id.as_str());
        let refused_attempt = meta.properties().contains_key(PROP_REFUSED)
            && meta.snapshots().any(|s| {
                let p = &s.summary().additional_properties;
                p.get(PROP_SOURCE_SNAPSHOT) == Some(&snap.snapshot_id.to_string())
                    && p.get(PROP_JOURNAL_ID).map(String::as_str) == Some(journal_id)
            });
        if !ours && !refused_attempt {
            return Err(RecoverError::TargetExists {
                table: into.to_string(),
                owner,
            });
        }
        let committed = meta.snapshots().any(|s| {
            let p = &s.summary().additional_properties;
            p.get(PROP_STEP).map(String::as_str) == Some("replay")
                && p.get(PROP_LAST_POSITION).map(String::as_str) == Some(h.to_string().as_str())
        });
        if ours && committed && !meta.properties().contains_key(PROP_REFUSED) {
            return Ok((existing, true));
        }
        // Anything else of this recovery is unconfirmed (one commit makes it whole): start fresh.
        handle
            .catalog()
            .drop_table(&ident)
            .await
            .map_err(iceberg(format!("drop unconfirmed recovery table {into}")))?;
    }
    let props = HashMap::from([(PROP_RECOVERY_ID.to_string(), opts.recovery_id.clone())]);
    let t = table::create_table_like(handle, into, &snap.metadata, &snap.schema, props).await?;
    // The job's files carry column names, not Iceberg field ids: the default name mapping lets
    // every Iceberg reader (Java, PyIceberg, iceberg-rust) resolve them.
    let mapping = name_mapping(t.metadata().current_schema());
    let props = HashMap::from([("schema.name-mapping.default".to_string(), mapping)]);
    let t = table::commit_properties(handle, &t, props).await?;
    Ok((t, false))
}

/// The Iceberg name mapping (`schema.name-mapping.default`) of a flat schema.
fn name_mapping(schema: &iceberg::spec::Schema) -> String {
    let fields: Vec<serde_json::Value> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| serde_json::json!({"field-id": f.id, "names": [f.name]}))
        .collect();
    serde_json::Value::Array(fields).to_string()
}

/// `schema` without field metadata (the listing tables' and the output's schema).
fn plain(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), f.is_nullable()))
            .collect::<Vec<_>>(),
    ))
}

async fn register_parquet(
    ctx: &SessionContext,
    name: &str,
    locations: &[String],
    schema: SchemaRef,
    engine: &Engine,
) -> Result<(), RecoverError> {
    let bad = job(engine, "register the Parquet listings");
    let paths = locations
        .iter()
        .map(|l| ListingTableUrl::parse(engine::listing_url(l)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(&bad)?;
    let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(paths)
        .with_listing_options(options)
        .with_schema(schema);
    let table = ListingTable::try_new(config).map_err(&bad)?;
    ctx.register_table(name, Arc::new(table)).map_err(&bad)?;
    Ok(())
}

/// Writes `events` as one Parquet object at `location` through the table's file IO.
async fn stage_events(
    table: &Table,
    location: &str,
    schema: &SchemaRef,
    events: &[RecordBatch],
) -> Result<(), RecoverError> {
    let fail = |message: String| RecoverError::Iceberg {
        context: format!("stage the verified events at {location}"),
        message,
    };
    let mut buf = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut buf, schema.clone(), None).map_err(|e| fail(e.to_string()))?;
    for b in events {
        let b = RecordBatch::try_new(schema.clone(), b.columns().to_vec()).map_err(|e| fail(e.to_string()))?;
        writer.write(&b).map_err(|e| fail(e.to_string()))?;
    }
    writer.close().map_err(|e| fail(e.to_string()))?;
    table
        .file_io()
        .new_output(location)
        .map_err(|e| fail(e.to_string()))?
        .write(buf.into())
        .await
        .map_err(|e| fail(e.to_string()))
}

/// Steps 4–6: stage, run the plan, commit the written files.
#[allow(clippy::too_many_arguments)]
async fn distributed_replay(
    ctx: &SessionContext,
    handle: &CatalogHandle,
    table: Table,
    spec: &tidemark_journal::spec::CompiledSpec,
    snap: &TrustedSnapshot,
    events: &[RecordBatch],
    engine: &Engine,
    s3_props: &HashMap<String, String>,
    summary: HashMap<String, String>,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<(Table, MergeStats, DistributedCheck), RecoverError> {
    let attempt = ids.uuid();
    let location = table.metadata().location().trim_end_matches('/').to_string();
    let staged = format!("{location}/tidemark-staging/{attempt}/events.parquet");
    let ev_schema = plain(&spec.event_schema);
    stage_events(&table, &staged, &ev_schema, events).await?;

    // The new table's bucket, when the snapshot's files are elsewhere (the runtime is shared
    // with the standalone executor; a cluster's executors are given it with --s3-bucket).
    if let Some(bucket) = engine::bucket_of(&location)
        && let Ok(url) = url::Url::parse(&bucket)
        && ctx
            .runtime_env()
            .object_store(ObjectStoreUrl::parse(&bucket).map_err(job(engine, "register the table's store"))?)
            .is_err()
    {
        ctx.runtime_env()
            .register_object_store(&url, engine::s3_store(&bucket, s3_props)?);
    }
    let output = plain(&table::arrow_schema(&table)?);
    register_parquet(ctx, "ev", std::slice::from_ref(&staged), ev_schema, engine).await?;
    register_parquet(
        ctx,
        "cur",
        &snap.data_files,
        plain(&super::seed::snapshot_arrow_schema(snap)?),
        engine,
    )
    .await?;

    // Conflicts stop the job before anything is written.
    let run = |sql: String, stage: &'static str| async move {
        ctx.sql(&sql)
            .await
            .map_err(job(engine, stage))?
            .collect()
            .await
            .map_err(job(engine, stage))
    };
    for b in run(merge::conflicts_in_events_sql(spec), "conflicts among events").await? {
        if let Some(e) = merge::conflict_in_events(&b) {
            return Err(RecoverError::Merge(e));
        }
    }
    for b in run(merge::conflicts_with_table_sql(spec), "conflicts with the snapshot").await? {
        if let Some(e) = merge::conflict_with_table(&b) {
            return Err(RecoverError::Merge(e));
        }
    }

    let decided_sql = merge::decided_sql(spec, &output, "");
    #[cfg(test)]
    let decided_sql = sabotage::merge_sql(&summary, decided_sql);
    let decided = ctx.sql(&decided_sql).await.map_err(job(engine, "plan the merge"))?;
    let as_output = || -> Vec<_> {
        output
            .fields()
            .iter()
            .map(|f| cast(ident(f.name()), f.data_type().clone()).alias(f.name()))
            .collect()
    };
    let key = spec.spec.key_column.as_str();
    let upserts = decided
        .clone()
        .filter(ident("_op").not_eq(lit("keep")))
        .and_then(|d| d.select(as_output()))
        .map_err(job(engine, "plan the merge"))?;
    let updated = decided
        .clone()
        .filter(ident("_op").eq(lit("update")))
        .and_then(|d| d.select(vec![ident(key).alias("_tidemark_updated_key")]))
        .map_err(job(engine, "plan the merge"))?;
    let kept = ctx
        .table("cur")
        .await
        .and_then(|c| c.join(updated, JoinType::LeftAnti, &[key], &["_tidemark_updated_key"], None))
        .and_then(|d| d.select(as_output()))
        .map_err(job(engine, "plan the merge"))?;
    let rows = upserts.union(kept).map_err(job(engine, "plan the merge"))?;

    // The counts of the report, from the same decision.
    let delete = spec.spec.delete_column.as_str();
    let counts = decided
        .aggregate(
            vec![ident("_op")],
            vec![
                count(lit(1)).alias("n"),
                sum(cast(ident(delete), DataType::Int64)).alias("tombstones"),
            ],
        )
        .map_err(job(engine, "count the decisions"))?
        .collect()
        .await
        .map_err(job(engine, "count the decisions"))?;
    let mut stats = MergeStats {
        events: events.iter().map(|b| b.num_rows() as u64).sum(),
        ..Default::default()
    };
    for b in &counts {
        let op = arrow::compute::cast(b.column(0), &DataType::Utf8).map_err(|e| MergeError::Input(e.to_string()))?;
        let n = arrow::compute::cast(b.column(1), &DataType::Int64).map_err(|e| MergeError::Input(e.to_string()))?;
        let tomb = arrow::compute::cast(b.column(2), &DataType::Int64).map_err(|e| MergeError::Input(e.to_string()))?;
        let (op, n, tomb) = (
            op.as_string::<i32>(),
            n.as_primitive::<arrow::datatypes::Int64Type>(),
            tomb.as_primitive::<arrow::datatypes::Int64Type>(),
        );
        for r in 0..b.num_rows() {
            let (count, t) = (
                n.value(r) as u64,
                if tomb.is_null(r) { 0 } else { tomb.value(r) as u64 },
            );
            match op.value(r) {
                "insert" => stats.inserted += count,
                "update" => stats.updated += count,
                _ => {
                    stats.unchanged += count;
                    continue;
                }
            }
            stats.tombstones_written += t;
        }
    }
    stats.rows_kept = snap.record_count - stats.updated;

    // A partitioned table: the computed partition columns, written as folders.
    let meta = table.metadata();
    let partitions = super::partition::plan(meta.default_partition_spec(), meta.current_schema())?;
    let mut rows = rows;
    for c in &partitions.columns {
        let expr = rows
            .parse_sql_expr(&c.sql)
            .map_err(job(engine, "plan the partition columns"))?;
        rows = rows
            .with_column(&c.name, expr)
            .map_err(job(engine, "plan the partition columns"))?;
    }
    let by = partitions.columns.iter().map(|c| c.name.clone()).collect();
    let data = format!("{location}/data/tidemark-{attempt}");
    rows.write_parquet(
        &format!("{}/", engine::listing_url(&data)),
        DataFrameWriteOptions::new().with_partition_by(by),
        None,
    )
    .await
    .map_err(job(engine, "write the recovered table's files"))?;

    // The manifests come from what is there now, read from the files' footers.
    let url = url::Url::parse(&engine::listing_url(&data)).map_err(|e| EngineError::Store {
        location: data.clone(),
        message: e.to_string(),
    })?;
    let store_url =
        ObjectStoreUrl::parse(&url[..url::Position::BeforePath]).map_err(job(engine, "list the written files"))?;
    let store = ctx
        .runtime_env()
        .object_store(&store_url)
        .map_err(job(engine, "list the written files"))?;
    let prefix = object_store::path::Path::from_url_path(url.path()).map_err(|e| EngineError::Store {
        location: data.clone(),
        message: e.to_string(),
    })?;
    let partition_of = |relative: &str, entry: &iceberg::spec::DataFile| {
        partitions.partition_of(entry, partitions.values_of(relative)?)
    };
    let added = super::footer::data_files_under(
        &store,
        &prefix,
        &data,
        meta.current_schema(),
        meta.default_partition_spec_id(),
        &partition_of,
    )
    .await?;
    let written: u64 = added.iter().map(|f| f.record_count()).sum();
    let expected = snap.record_count + stats.inserted;
    if written != expected {
        return Err(RecoverError::Validation {
            message: format!(
                "the distributed job wrote {written} rows under {data}, but the snapshot's {} rows plus {} inserted keys make {expected}; nothing was committed",
                snap.record_count, stats.inserted
            ),
        });
    }
    // Every key checked on the cluster, before anything is committed.
    let paths: Vec<String> = added.iter().map(|f| f.file_path().to_string()).collect();
    register_parquet(ctx, "rec", &paths, output.clone(), engine).await?;
    let check = distributed_check::check(ctx, spec, &output, &|stage, e| job(engine, stage)(e)).await?;
    if !check.ok {
        return Err(RecoverError::Validation {
            message: format!(
                "the distributed validation found the written table different from the expected one ({} expected rows missing or different, {} written rows extra or different, {} duplicate keys; first keys {:?}); nothing was committed",
                check.missing_or_different, check.extra_or_different, check.duplicate_keys, check.first_keys
            ),
        });
    }
    stats.files_rewritten = 0;
    let stamp = CommitStamp {
        id: ids.uuid(),
        at: clock.now(),
    };
    let table = commit_overwrite(handle, &table, &[], added, summary, stamp).await?;
    // The staged events are not part of the table; what cannot be removed stays as a stray
    // object under tidemark-staging/ (harmless, and named in no metadata).
    if let Ok(u) = url::Url::parse(&engine::listing_url(&staged))
        && let Ok(p) = object_store::path::Path::from_url_path(u.path())
    {
        let _ = store.delete(&p).await;
    }
    Ok((table, stats, check))
}

/// A deliberately broken merge for the tests (only in the test build): a recovery whose id
/// starts with [`sabotage::PREFIX`] picks the oldest version of each key instead of the newest.
#[cfg(test)]
pub(crate) mod sabotage {
    pub const PREFIX: &str = "sabotage-";

    pub fn merge_sql(summary: &std::collections::HashMap<String, String>, sql: String) -> String {
        match summary.get(super::PROP_RECOVERY_ID) {
            Some(id) if id.starts_with(PREFIX) => sql.replacen(" DESC, ", " ASC, ", 1),
            _ => sql,
        }
    }
}
