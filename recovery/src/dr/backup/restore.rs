//! The restore, failing closed (see the module above): [`restore`], [`restore_through`].

use iceberg::{ErrorKind, NamespaceIdent};
use tidemark_journal::store::{self, ObjectStore};

use super::read::{describe, get_metadata, open_warehouse_err, table_err};
use super::report::{
    BackupError, BackupTable, CatalogBackup, CatalogState, FORMAT_VERSION, Refusal, RestoreAction, RestoreReport,
    RestoreTable,
};
use super::take::state;
use crate::catalog::{CatalogHandle, INSTEAD_OF_REGISTER};
use crate::dr::rebuild::{DrError, warehouse_base};
use crate::dr::replica::MissingFile;
use crate::table::{TableError, parse_ident};

/// What the caller expects the catalog to hold for the backup's tables before the restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// None of the backup's tables is in the catalog (a new or rebuilt-empty catalog).
    Empty,
    /// The pointers of a [`CatalogState`] taken earlier (`tidemark catalog state --out`).
    State(CatalogState),
}

impl Expected {
    fn pointer(&self, table: &str) -> Option<&str> {
        match self {
            Expected::Empty => None,
            Expected::State(s) => s.tables.get(table).and_then(|p| p.as_deref()),
        }
    }

    fn id(&self) -> String {
        match self {
            Expected::Empty => "empty".into(),
            Expected::State(s) => s.id.clone(),
        }
    }
}

/// Restores `backup` into the catalog of `handle` (see the module documentation). A table
/// already at the backup's pointer is left as is whatever was expected, so a restore that
/// stopped half-way is resumed by running it again. Errors are for what could not be read;
/// refusals are in the report.
pub async fn restore(
    handle: &CatalogHandle,
    backup: &CatalogBackup,
    expect: &Expected,
    allow_replace: bool,
) -> Result<RestoreReport, BackupError> {
    restore_through(handle, backup, expect, allow_replace, None).await
}

/// [`restore`], reading the warehouse through `warehouse` when given (a test's fault-injecting
/// store) instead of opening the catalog's warehouse.
pub async fn restore_through(
    handle: &CatalogHandle,
    backup: &CatalogBackup,
    expect: &Expected,
    allow_replace: bool,
    warehouse: Option<std::sync::Arc<dyn ObjectStore>>,
) -> Result<RestoreReport, BackupError> {
    let location = handle
        .warehouse_location("restore a catalog backup")
        .map_err(table_err("(all tables)"))?;
    let names: Vec<String> = backup.tables.iter().map(|t| t.table.clone()).collect();
    let current = state(handle, &names).await?;
    let mut report = RestoreReport {
        format_version: FORMAT_VERSION,
        backup_id: backup.id.clone(),
        expected_state: expect.id(),
        current_state: current.id.clone(),
        allow_replace,
        applied: false,
        refused: None,
        refusal: None,
        tables: Vec::with_capacity(backup.tables.len()),
        s3_requests: None,
    };
    let mut moved = 0;
    for t in &backup.tables {
        let now = current.tables.get(&t.table).cloned().flatten();
        let expected = expect.pointer(&t.table);
        let has_moved = now.as_deref() != expected && now.as_deref() != Some(t.metadata_location.as_str());
        moved += usize::from(has_moved);
        let action = match &now {
            Some(p) if *p == t.metadata_location => RestoreAction::Unchanged,
            _ if has_moved && !allow_replace => RestoreAction::Conflict,
            None => RestoreAction::Register,
            Some(_) => RestoreAction::Replace,
        };
        report.tables.push(RestoreTable {
            table: t.table.clone(),
            problem: has_moved.then(|| {
                format!(
                    "the catalog points at {}; expected {}; the backup has {}",
                    now.as_deref().unwrap_or("nothing"),
                    expected.unwrap_or("nothing"),
                    t.metadata_location
                )
            }),
            current: now,
            restored: t.metadata_location.clone(),
            action,
            missing: Vec::new(),
        });
    }
    if moved > 0 && !allow_replace {
        report.refused = Some(format!(
            "{moved} tables moved since the expected state {}: check them, then take a new state or pass \
             --allow-replace; nothing was changed",
            expect.id()
        ));
        report.refusal = Some(Refusal::Moved);
        return Ok(report);
    }

    // What the catalog must be able to do, before anything changes.
    let needs_register = report.tables.iter().any(|t| t.action == RestoreAction::Register);
    let needs_swap = report.tables.iter().any(|t| t.action == RestoreAction::Replace);
    handle
        .require(
            needs_register,
            needs_swap,
            "restore a catalog backup",
            INSTEAD_OF_REGISTER,
        )
        .map_err(table_err("(all tables)"))?;

    // Every referenced object, before anything changes.
    let base = warehouse_base(location)?;
    let warehouse = match warehouse {
        Some(w) => w,
        None => store::open(&base).await.map_err(open_warehouse_err(handle))?,
    };
    let mut problems = 0;
    for (t, out) in backup.tables.iter().zip(report.tables.iter_mut()) {
        if out.action == RestoreAction::Unchanged {
            continue;
        }
        match verify_table(handle, warehouse.as_ref(), &base, t).await {
            Ok((missing, problem)) => {
                if !missing.is_empty() || problem.is_some() {
                    problems += 1;
                    out.action = RestoreAction::Conflict;
                    out.problem = problem.or_else(|| Some(format!("{} referenced objects are missing", missing.len())));
                    out.missing = missing.into_iter().take(20).collect();
                }
            }
            // The warehouse could not be read (an error, not a finding about the backup):
            // nothing has changed yet, so the restore stops and a re-run checks again.
            Err(e) => return Err(e),
        }
    }
    if problems > 0 {
        report.refused = Some(format!(
            "{problems} tables of the backup are not restorable as recorded (missing or changed objects); \
             nothing was changed"
        ));
        report.refusal = Some(Refusal::Objects);
        return Ok(report);
    }

    report.applied = true;
    for out in &mut report.tables {
        let ident = parse_ident(&out.table).map_err(table_err(&out.table))?;
        match out.action {
            RestoreAction::Unchanged | RestoreAction::Conflict => {}
            RestoreAction::Register => {
                let ns: &NamespaceIdent = ident.namespace();
                crate::table::create_namespace(handle, ns)
                    .await
                    .map_err(table_err(&out.table))?;
                match handle.register_table(&ident, &out.restored).await {
                    Ok(_) => {}
                    Err(TableError::Iceberg { source, .. }) if source.kind() == ErrorKind::TableAlreadyExists => {
                        out.action = RestoreAction::Conflict;
                        out.problem = Some("registered by someone else during the restore; left alone".into());
                    }
                    Err(e) => return Err(table_err(&out.table)(e)),
                }
            }
            RestoreAction::Replace => {
                let from = out.current.clone().expect("a replaced table had a pointer");
                let won = handle
                    .swap_metadata_pointer(&ident, &from, &out.restored)
                    .await
                    .map_err(table_err(&out.table))?;
                if !won {
                    out.action = RestoreAction::Conflict;
                    out.problem = Some(format!("the table moved from {from} during the restore; left alone"));
                }
            }
        }
        tidemark_journal::failpoint::hit("restore:after-table");
    }
    Ok(report)
}

/// Missing referenced objects of a backed-up table, or what changed about it.
async fn verify_table(
    handle: &CatalogHandle,
    warehouse: &dyn ObjectStore,
    base: &str,
    t: &BackupTable,
) -> Result<(Vec<MissingFile>, Option<String>), BackupError> {
    let got = match get_metadata(warehouse, base, &t.metadata_location).await {
        Err(reason) => return Ok((Vec::new(), Some(reason))),
        Ok(Err(e)) if e.is_not_found() => {
            let m = MissingFile {
                path: t.metadata_location.clone(),
                what: "metadata file".into(),
            };
            return Ok((vec![m], None));
        }
        Ok(Err(source)) => {
            return Err(BackupError::Dr(DrError::Open {
                warehouse: base.to_string(),
                source,
            }));
        }
        Ok(Ok(got)) => got,
    };
    let m = &got.meta;
    if m.etag != t.metadata_etag || m.size != t.metadata_size {
        return Ok((
            Vec::new(),
            Some(format!(
                "metadata file {} changed since the backup (ETag {} size {}, recorded {} size {})",
                t.metadata_location, m.etag, m.size, t.metadata_etag, t.metadata_size
            )),
        ));
    }
    let (now, missing) = describe(handle, &t.table, &t.metadata_location, &got).await?;
    if !missing.is_empty() {
        return Ok((missing, None));
    }
    if now.watermark != t.watermark {
        return Ok((
            Vec::new(),
            Some(format!(
                "the referenced objects differ from the backup's watermark ({:?}, recorded {:?})",
                now.watermark, t.watermark
            )),
        ));
    }
    Ok((Vec::new(), None))
}
