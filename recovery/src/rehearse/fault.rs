//! Fault injection for drills: `tidemark fault delete` removes rows from a table directly — the
//! cleanup job that went wrong. It is committed like any other write (a copy-on-write overwrite
//! through the catalog's compare-and-swap) and bypasses the journal, so the journal still holds
//! the truth that recovery replays.

use std::sync::Arc;

use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use serde::Serialize;
use tidemark_journal::clock::Clock;
use tidemark_schemas::FORMAT_VERSION;

use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::merge::{FILE_COLUMN, current_schema};
use crate::table::read::{live_files, read_files};
use crate::table::{self, CommitStamp, TableError, arrow_schema, commit_overwrite, write_data_file};

#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("predicate {predicate:?} on {table}: {source}")]
    Predicate {
        table: String,
        predicate: String,
        #[source]
        source: datafusion::error::DataFusionError,
    },
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FaultReport {
    pub format_version: u32,
    pub table: String,
    pub predicate: String,
    pub rows_deleted: u64,
    pub files_rewritten: u64,
    pub snapshot_id: Option<i64>,
    /// The S3 requests of the command (set by the CLI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

/// Deletes the rows of `table_name` matching the SQL `predicate` (rows vanish: no tombstones).
pub async fn delete_rows(
    handle: &CatalogHandle,
    table_name: &str,
    predicate: &str,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<FaultReport, FaultError> {
    let table = table::load_table(handle, table_name).await?;
    table::check_supported(table_name, table.metadata())?;
    let schema = arrow_schema(&table)?;
    let cur = current_schema(&schema);
    // Live rows only (other writers' deletes applied): the rewritten files carry what readers see.
    let (files, deletes) = live_files(&table).await?;
    let rows = read_files(&table, &files.iter().collect::<Vec<_>>(), &schema, Some(&cur), &deletes).await?;
    let pred_err = |source| FaultError::Predicate {
        table: table_name.into(),
        predicate: predicate.into(),
        source,
    };
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    let rows: Vec<_> = rows.into_iter().filter(|b| b.num_rows() > 0).collect();
    ctx.register_table(
        "t",
        Arc::new(MemTable::try_new(cur.clone(), vec![rows]).map_err(pred_err)?),
    )
    .map_err(pred_err)?;
    let file = format!("\"{FILE_COLUMN}\"");
    // Files with at least one matching row are rewritten without those rows.
    let hit = ctx
        .sql(&format!("SELECT DISTINCT {file} FROM t WHERE {predicate}"))
        .await
        .map_err(pred_err)?
        .collect()
        .await
        .map_err(pred_err)?;
    let mut touched = Vec::new();
    for b in &hit {
        let col = arrow::compute::cast(b.column(0), &arrow::datatypes::DataType::Utf8)
            .expect("the file column casts to strings");
        let col = col.as_any().downcast_ref::<arrow::array::StringArray>().expect("utf8");
        touched.extend(col.iter().flatten().map(str::to_string));
    }
    let mut report = FaultReport {
        format_version: FORMAT_VERSION,
        table: table_name.into(),
        predicate: predicate.into(),
        rows_deleted: 0,
        files_rewritten: touched.len() as u64,
        snapshot_id: table.metadata().current_snapshot_id(),
        s3_requests: None,
    };
    if touched.is_empty() {
        return Ok(report);
    }
    let list: Vec<String> = touched.iter().map(|f| format!("'{}'", f.replace('\'', "''"))).collect();
    let cols: Vec<String> = schema.fields().iter().map(|f| format!("\"{}\"", f.name())).collect();
    let in_files = format!("{file} IN ({})", list.join(", "));
    let count = ctx
        .sql(&format!("SELECT * FROM t WHERE {in_files} AND ({predicate})"))
        .await
        .map_err(pred_err)?
        .count()
        .await
        .map_err(pred_err)?;
    report.rows_deleted = count as u64;
    let kept = ctx
        .sql(&format!(
            "SELECT {} FROM t WHERE {in_files} AND NOT coalesce(({predicate}), false)",
            cols.join(", ")
        ))
        .await
        .map_err(pred_err)?
        .collect()
        .await
        .map_err(pred_err)?;
    let kept: Vec<_> = kept
        .into_iter()
        .map(|b| crate::merge::conform(&schema, b.columns().to_vec()).expect("kept rows fit the table schema"))
        .collect();
    let stamp = CommitStamp {
        id: ids.uuid(),
        at: clock.now(),
    };
    let added = write_data_file(&table, &kept, stamp.id).await?;
    let mut summary = std::collections::HashMap::new();
    summary.insert(
        crate::provenance::PROP_FAULT.to_string(),
        format!("delete where {predicate}"),
    );
    let table = commit_overwrite(handle, &table, &touched, added, summary, stamp).await?;
    report.snapshot_id = table.metadata().current_snapshot_id();
    Ok(report)
}
