//! Steps 4–6: the verified events staged as Parquet, the distributed merge plan, the written
//! files' manifests, the distributed check and the commit.

use std::collections::HashMap;
use std::sync::Arc;

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
use tidemark_journal::clock::Clock;

use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::{self, MergeError, MergeStats};
use crate::recover::engine::{self, Engine, EngineError};
use crate::recover::snapshot::TrustedSnapshot;
use crate::recover::validate::DistributedCheck;
use crate::recover::{RecoverError, distributed_check};
use crate::table::{self, CommitStamp, commit_overwrite};

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
pub(super) async fn distributed_replay(
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
        plain(&crate::recover::seed::snapshot_arrow_schema(snap)?),
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
    let partitions = crate::recover::partition::plan(meta.default_partition_spec(), meta.current_schema())?;
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
    let added = crate::recover::footer::data_files_under(
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
        match summary.get(crate::recover::seed::PROP_RECOVERY_ID) {
            Some(id) if id.starts_with(PREFIX) => sql.replacen(" DESC, ", " ASC, ", 1),
            _ => sql,
        }
    }
}
