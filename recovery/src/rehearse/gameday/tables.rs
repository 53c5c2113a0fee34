//! Steps 1–2's material: the scratch tables, each with a few commits, a tag and a branch.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use iceberg::spec::{SnapshotReference, SnapshotRetention};
use iceberg::table::Table;
use tidemark_journal::clock::Clock;
use tidemark_journal::spec::CompiledSpec;

use super::place::{GamedayOptions, NAMESPACE};
use crate::benchdata::order_columns;
use crate::catalog::sql::write_stray;
use crate::catalog::{CatalogHandle, CatalogKind};
use crate::dr::rebuild::file_name;
use crate::ids::Ids;
use crate::table::{self, CommitStamp, TableError, arrow_schema, commit_overwrite, commit_refs, write_data_file};

/// Appends `rows` orders as commit `n` of a table.
pub(super) async fn commit(
    handle: &CatalogHandle,
    table: &Table,
    n: usize,
    rows: usize,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<Table, TableError> {
    let keys: Vec<u64> = (0..rows as u64).map(|j| n as u64 * 1_000_000 + j).collect();
    let mut cols = order_columns(&keys, &vec![1; rows], &vec![false; rows]);
    cols.push(Arc::new(Int64Array::from(vec![n as i64; rows])));
    let batch = RecordBatch::try_new(arrow_schema(table)?, cols).map_err(|e| TableError::BatchSchema {
        table: table.identifier().to_string(),
        detail: e.to_string(),
    })?;
    let files = write_data_file(table, &[batch], ids.uuid()).await?;
    let stamp = CommitStamp {
        id: ids.uuid(),
        at: clock.now(),
    };
    commit_overwrite(handle, table, &[], files, HashMap::new(), stamp).await
}

/// The scratch tables: `commits` commits each, tag `eod` on the first, branch `audit` on the
/// second; the first table also gets a stray metadata file from a writer that died before its
/// swap (not on a REST catalog, whose server writes the metadata files).
pub(super) async fn build_tables(
    handle: &CatalogHandle,
    opts: &GamedayOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<Vec<Table>, String> {
    let spec = CompiledSpec::orders();
    let mut out = Vec::with_capacity(opts.tables);
    for i in 0..opts.tables {
        let name = format!("{NAMESPACE}.t{i:02}");
        let mut t = table::create_or_load_table(handle, &name, &spec)
            .await
            .map_err(|e| e.to_string())?;
        let commits = opts.commits.max(3);
        for n in 1..=commits {
            let before = t.clone();
            t = commit(handle, &t, n, opts.rows_per_commit, clock, ids)
                .await
                .map_err(|e| e.to_string())?;
            if i == 0 && n == commits - 1 && handle.kind() != CatalogKind::Rest {
                // A writer holding the table as of one commit ago wrote its metadata file and
                // died before its swap: the file stays behind as a stray (a fork at one version,
                // which the next commit's longer chain decides). A commit that loses its race
                // removes its file; a crash cannot. A REST catalog's server writes the metadata
                // files (its own names, `vN.metadata.json` on SeaweedFS): its clients leave none.
                write_stray(&before, "a game day's writer that died before its swap")
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let retention = match n {
                1 => Some(("eod", SnapshotRetention::Tag { max_ref_age_ms: None })),
                2 => Some((
                    "audit",
                    SnapshotRetention::Branch {
                        min_snapshots_to_keep: None,
                        max_snapshot_age_ms: None,
                        max_ref_age_ms: None,
                    },
                )),
                _ => None,
            };
            if let Some((ref_name, retention)) = retention {
                let id = t.metadata().current_snapshot_id().expect("just committed");
                t = commit_refs(
                    handle,
                    &t,
                    vec![(ref_name.into(), SnapshotReference::new(id, retention))],
                    clock.now(),
                )
                .await
                .map_err(|e| e.to_string())?;
            }
        }
        out.push(t);
    }
    Ok(out)
}

/// Each table's metadata file name, by `namespace.name`.
pub(super) fn pointers_of(tables: &[Table]) -> HashMap<String, String> {
    tables
        .iter()
        .map(|t| {
            (
                t.identifier().to_string(),
                file_name(t.metadata_location().unwrap_or_default()).to_string(),
            )
        })
        .collect()
}
