//! What another writer's commit did to the journal's columns, key by key.
//!
//! The files a commit touched are what differs between its parent's live files and its own: the
//! data files it removed and added, and the data files both keep whose deletes changed (a new or
//! removed position delete file changes the positions deleted from the files it names; an
//! equality delete may apply to any older file, so one added or removed reads every kept file).
//! The parent's live rows of its side and the snapshot's live rows of its side are compared by
//! key on the journal's columns and position: a key only before was **removed**, only after
//! **added**, on both sides with other values **changed**. Summary counters are never used: other
//! engines get them wrong. Rows are read by the journal's column names (a renamed spec column by
//! its field id), so a column outside the spec, added or filled, changes nothing.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow_schema::SchemaRef;
use iceberg::spec::{DataContentType, SnapshotRef};

use super::error::AuditError;
use super::read::Ctx;
use super::report::Counts;
use crate::reference::{Cell, RefRow, rows_of};
use crate::table::deletes::{Deletes, read_paths};
use crate::table::files::{SnapshotFiles, snapshot_files};

/// A snapshot's live files, its deletes and the schema its rows are read with (the journal's
/// names); `schema_problem` when its schema lacks a journal column.
pub struct Loaded {
    pub snapshot_id: i64,
    pub files: SnapshotFiles,
    pub deletes: Deletes,
    pub schema: SchemaRef,
    pub schema_problem: Option<String>,
}

/// Loads `snap`'s files, deletes and schema.
pub(crate) async fn load(ctx: &Ctx<'_>, snap: &SnapshotRef) -> Result<Loaded, AuditError> {
    let mapped = |p: &str| ctx.mapped(p);
    let what = format!("snapshot {} of {}", snap.snapshot_id(), ctx.name);
    let files = snapshot_files(ctx.io, &what, snap.manifest_list(), &mapped).await?;
    let schema = snap
        .schema_id()
        .and_then(|id| ctx.meta.schema_by_id(id))
        .unwrap_or_else(|| ctx.meta.current_schema())
        .clone();
    let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(&schema).map_err(|e| {
        crate::table::source::SourceError::Iceberg {
            context: format!("convert the schema of {what} to Arrow"),
            message: e.to_string(),
        }
    })?);
    let (view, schema_problem) =
        match crate::table::check_schema_in(&ctx.journal.spec, &schema, ctx.meta.schemas_iter()) {
            Ok(renames) => (renames.spec_view(&arrow), None),
            Err(e) => (
                arrow.clone(),
                Some(format!("its schema no longer holds the journal's columns: {e}")),
            ),
        };
    let deletes = Deletes::load(ctx.io, &what, &files, &arrow, &mapped).await?;
    Ok(Loaded {
        snapshot_id: snap.snapshot_id(),
        files,
        deletes,
        schema: view,
        schema_problem,
    })
}

/// A key's rows (journal columns and position), sorted: a duplicate key is two rows.
pub(crate) type KeyRows = BTreeMap<Cell, Vec<(Vec<Cell>, u64)>>;

/// The live rows of `paths` in `l` (deletes applied), under the journal's column names.
pub(crate) async fn read_rows(ctx: &Ctx<'_>, l: &Loaded, paths: &[&str]) -> Result<Vec<RefRow>, AuditError> {
    let batches = read_paths(ctx.io, &ctx.name, paths, &l.schema, None, &l.deletes).await?;
    Ok(rows_of(&ctx.journal.spec, &batches))
}

/// The live rows of `paths` in `l`, by key.
pub(crate) async fn rows(ctx: &Ctx<'_>, l: &Loaded, paths: &[String]) -> Result<KeyRows, AuditError> {
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    Ok(by_key(&ctx.journal.spec, read_rows(ctx, l, &refs).await?))
}

/// `rows` by key (each key's rows sorted).
pub(crate) fn by_key(spec: &tidemark_journal::spec::CompiledSpec, rows: Vec<RefRow>) -> KeyRows {
    let mut out = KeyRows::new();
    for row in rows {
        out.entry(row.cells[spec.key_index].clone())
            .or_default()
            .push((row.cells, row.position));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// `loaded` (a snapshot's files an earlier step loaded), or else the files of `snap`; `None`
/// for no snapshot (a table's first snapshot has no parent).
pub(crate) async fn loaded_or(
    ctx: &Ctx<'_>,
    loaded: Option<Loaded>,
    snap: Option<&SnapshotRef>,
) -> Result<Option<Loaded>, AuditError> {
    Ok(match (loaded, snap) {
        (Some(l), _) => Some(l),
        (None, Some(s)) => Some(load(ctx, s).await?),
        (None, None) => None,
    })
}

/// What a comparison of two sides found.
#[derive(Debug, Default)]
pub struct Compared {
    pub counts: Counts,
    pub samples: Vec<String>,
}

/// Compares `before` and `after` key by key.
pub(crate) fn compare(before: &KeyRows, after: &KeyRows) -> Compared {
    let mut c = Compared::default();
    let sample = |what: &str, key: &Cell, c: &mut Compared| {
        if c.samples.len() < 10 {
            c.samples.push(format!("{what} {key}"));
        }
    };
    for (key, rows) in before {
        match after.get(key) {
            None => {
                c.counts.removed += 1;
                sample("removed", key, &mut c);
            }
            Some(other) if other != rows => {
                c.counts.changed += 1;
                sample("changed", key, &mut c);
            }
            Some(_) => {}
        }
    }
    for key in after.keys().filter(|k| !before.contains_key(*k)) {
        c.counts.added += 1;
        sample("added", key, &mut c);
    }
    c
}

/// What [`diff`] found.
#[derive(Debug, Default)]
pub struct Diff {
    pub counts: Counts,
    pub samples: Vec<String>,
    pub files_read: u64,
    pub removed_files: u64,
    pub added_files: u64,
    pub touched_files: u64,
    pub schema_problem: Option<String>,
}

/// The keys `after` removed, changed or added relative to its parent `before` (`None`: the
/// table's first snapshot, against nothing).
pub(crate) async fn diff(ctx: &Ctx<'_>, before: Option<&Loaded>, after: &Loaded) -> Result<Diff, AuditError> {
    let mut d = Diff {
        schema_problem: after.schema_problem.clone(),
        ..Default::default()
    };
    let paths = |l: Option<&Loaded>| -> HashSet<String> {
        l.map(|l| l.files.data.iter().map(|f| f.path.clone()).collect())
            .unwrap_or_default()
    };
    let (p_data, c_data) = (paths(before), paths(Some(after)));
    let removed: Vec<String> = p_data.difference(&c_data).cloned().collect();
    let added: Vec<String> = c_data.difference(&p_data).cloned().collect();
    let kept: Vec<String> = p_data.intersection(&c_data).cloned().collect();
    let deletes = |l: Option<&Loaded>| -> HashSet<(String, bool)> {
        l.map(|l| {
            l.files
                .deletes
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        f.file.content_type() == DataContentType::EqualityDeletes,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let (p_del, c_del) = (deletes(before), deletes(Some(after)));
    let changed_deletes: Vec<&(String, bool)> = p_del.symmetric_difference(&c_del).collect();
    let touched: Vec<String> = if changed_deletes.is_empty() {
        Vec::new()
    } else if changed_deletes.iter().any(|(_, equality)| *equality) {
        kept.clone()
    } else {
        let b = before.expect("a delete file changed, so there is a parent");
        kept.iter()
            .filter(|p| b.deletes.deleted_set(p) != after.deletes.deleted_set(p))
            .cloned()
            .collect()
    };
    d.removed_files = removed.len() as u64;
    d.added_files = added.len() as u64;
    d.touched_files = touched.len() as u64;
    if d.schema_problem.is_some() {
        return Ok(d);
    }
    let before_side: Vec<String> = removed.iter().chain(&touched).cloned().collect();
    let after_side: Vec<String> = added.iter().chain(&touched).cloned().collect();
    let before_rows = match before {
        Some(b) if !before_side.is_empty() => rows(ctx, b, &before_side).await?,
        _ => KeyRows::new(),
    };
    let after_rows = if after_side.is_empty() {
        KeyRows::new()
    } else {
        rows(ctx, after, &after_side).await?
    };
    d.files_read = (before_side.len() + after_side.len()) as u64;
    let c = compare(&before_rows, &after_rows);
    d.counts = c.counts;
    d.samples = c.samples;
    Ok(d)
}
