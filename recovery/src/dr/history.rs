//! History record and compare (issue 5 item 1): what every table of a catalog looked like at one
//! moment, written down so that a later moment (after a failover, a rebuild, a restore) can be
//! checked against it.
//!
//! A record holds, per table: the row count of the current snapshot (the rows a reader sees: the
//! sum of its live data files' record counts, or, when other writers' position or equality delete
//! files apply, the rows left after them, counted by reading the files), the snapshot count, every branch and
//! tag with its snapshot id, the current schema's top-level fields, the format version, the
//! default partition spec and sort order, the table properties, the current snapshot id, the
//! metadata location and the table uuid. Tables are sorted by name and refs and fields by
//! name and id, so that two records of the same catalog state serialize byte for byte alike
//! (`recorded_at` aside, which the caller injects).
//!
//! [`compare`] names every difference between two records. A changed metadata location alone is
//! marked informational: a rebuilt or failed-over catalog legitimately points at the same table
//! state through another URL or after a metadata-only commit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use iceberg::{ErrorKind, NamespaceIdent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tidemark_journal::clock::Clock;

use super::rebuild::DrError;
use crate::catalog::CatalogHandle;
use crate::table::load_table;
use crate::table::read::{count_live_rows, live_files};

/// Version of the history record JSON.
pub const FORMAT_VERSION: u32 = 1;

/// All tables of a catalog (or of one namespace) at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryRecord {
    pub format_version: u32,
    /// When the record was taken, from the caller's clock (RFC 3339); empty when not stamped.
    pub recorded_at: String,
    /// The catalog name.
    pub catalog: String,
    /// The namespace the record was limited to, if any.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Sorted by `table`.
    pub tables: Vec<TableHistory>,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

/// One table of a [`HistoryRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableHistory {
    /// `namespace.name`.
    pub table: String,
    pub table_uuid: String,
    pub metadata_location: Option<String>,
    pub current_snapshot_id: Option<i64>,
    /// Sum of the record counts of the current snapshot's live data files.
    pub row_count: u64,
    pub snapshot_count: usize,
    /// Branches and tags, sorted by name.
    pub refs: Vec<RefHistory>,
    /// The current schema's top-level fields, sorted by id.
    pub schema_fields: Vec<FieldHistory>,
    /// The table's format version (1, 2, 3). Absent in records written before it was recorded;
    /// this and the fields below are compared only when both records have them.
    #[serde(default)]
    pub format_version: Option<u8>,
    /// The default partition spec's fields as `name=transform(source field id)`, in spec order
    /// (empty: unpartitioned).
    #[serde(default)]
    pub partition_spec: Option<Vec<String>>,
    /// The default sort order's fields as `transform(source field id) direction null-order`.
    #[serde(default)]
    pub sort_order: Option<Vec<String>>,
    /// The table properties.
    #[serde(default)]
    pub properties: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RefHistory {
    pub name: String,
    /// `branch` or `tag`.
    pub kind: String,
    pub snapshot_id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FieldHistory {
    pub id: i32,
    pub name: String,
    /// The Iceberg type as iceberg-rust prints it (`long`, `string`, `struct<…>`).
    #[serde(rename = "type")]
    pub field_type: String,
    pub required: bool,
}

/// One difference between two records; `a` and `b` are the values on each side (`None` where
/// the thing does not exist on that side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryDiff {
    pub table: String,
    pub what: String,
    pub a: Option<String>,
    pub b: Option<String>,
    /// Reported for the operator's information; not a difference in table contents.
    pub informational: bool,
}

/// Version of [`HistoryComparison`].
pub const COMPARISON_FORMAT_VERSION: u32 = 1;

/// The result of comparing two records (`tidemark history compare --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HistoryComparison {
    pub format_version: u32,
    /// The record files compared, as given.
    pub a: String,
    pub b: String,
    /// No difference other than informational ones (the command exits 0).
    pub same: bool,
    /// Every difference, table by table in name order.
    pub differences: Vec<HistoryDiff>,
}

impl HistoryComparison {
    pub fn new(a: &str, b: &str, differences: Vec<HistoryDiff>) -> Self {
        HistoryComparison {
            format_version: COMPARISON_FORMAT_VERSION,
            a: a.to_string(),
            b: b.to_string(),
            same: differences.iter().all(|d| d.informational),
            differences,
        }
    }
}

/// Errors of saving and loading a record file.
#[derive(Debug, thiserror::Error)]
pub enum HistoryFileError {
    #[error("cannot {action} history record {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("history record {path} is not valid JSON of a history record: {source}")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },

    #[error("history record {path} has format_version {found}; this tidemark reads {FORMAT_VERSION}")]
    UnsupportedVersion { path: String, found: u32 },
}

/// Records every table of the catalog (only the tables directly in `namespace` when given).
/// `recorded_at` is left empty: stamp it from the caller's clock, or use [`record_at`].
pub async fn record(handle: &CatalogHandle, namespace: Option<&str>) -> Result<HistoryRecord, DrError> {
    let catalog = handle.catalog();
    let catalog_err = |table: &str, action: &str| {
        let (table, action, name) = (table.to_string(), action.to_string(), handle.uri().to_string());
        move |source: iceberg::Error| DrError::Catalog {
            table,
            action,
            catalog: name,
            source: Box::new(source),
        }
    };
    let namespaces: BTreeSet<String> = match namespace {
        Some(ns) if ns.is_empty() || ns.split('.').any(str::is_empty) => {
            return Err(DrError::InvalidNamespace {
                namespace: ns.to_string(),
            });
        }
        Some(ns) => BTreeSet::from([ns.to_string()]),
        None => table_namespaces(handle)
            .await
            .map_err(catalog_err("(all tables)", "list the namespaces"))?,
    };
    let mut tables = Vec::new();
    for ns in &namespaces {
        let ident = NamespaceIdent::from_strs(ns.split('.'))
            .map_err(|_| DrError::InvalidNamespace { namespace: ns.clone() })?;
        let listed = catalog
            .list_tables(&ident)
            .await
            .map_err(catalog_err(ns, "list the tables"))?;
        for t in listed {
            tables.push(table_history(handle, &format!("{ns}.{}", t.name())).await?);
        }
    }
    tables.sort_by(|a, b| a.table.cmp(&b.table));
    Ok(HistoryRecord {
        format_version: FORMAT_VERSION,
        recorded_at: String::new(),
        catalog: handle.name().to_string(),
        namespace: namespace.map(str::to_string),
        tables,
        s3_requests: None,
    })
}

/// [`record`], stamped with `clock`.
pub async fn record_at(
    handle: &CatalogHandle,
    namespace: Option<&str>,
    clock: &dyn Clock,
) -> Result<HistoryRecord, DrError> {
    let mut rec = record(handle, namespace).await?;
    rec.recorded_at = clock.now_rfc3339();
    Ok(rec)
}

/// The namespaces that hold tables (on a SQL catalog read from its database: its
/// `list_namespaces` cannot reach `a.b` when `a` itself was never created).
async fn table_namespaces(handle: &CatalogHandle) -> Result<BTreeSet<String>, iceberg::Error> {
    handle
        .table_namespaces()
        .await
        .map_err(|e| iceberg::Error::new(ErrorKind::Unexpected, "list the namespaces").with_source(e))
}

async fn table_history(handle: &CatalogHandle, name: &str) -> Result<TableHistory, DrError> {
    let pointer_err = |source| DrError::Pointer {
        table: name.to_string(),
        source: Box::new(source),
    };
    let table = load_table(handle, name).await.map_err(pointer_err)?;
    let (files, deletes) = live_files(&table).await.map_err(pointer_err)?;
    let row_count = if deletes.is_empty() {
        files.iter().map(|f| f.record_count()).sum()
    } else {
        count_live_rows(&table, &files, &deletes).await.map_err(pointer_err)?
    };
    let meta = table.metadata();
    // The refs map has no accessor in iceberg-rust 0.10.1; it is read from the serialized form.
    let json = serde_json::to_value(meta).unwrap_or(Value::Null);
    let mut refs: Vec<RefHistory> = json
        .get("refs")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, r)| {
            Some(RefHistory {
                name: name.clone(),
                kind: r.get("type").and_then(Value::as_str).unwrap_or("branch").to_string(),
                snapshot_id: r.get("snapshot-id")?.as_i64()?,
            })
        })
        .collect();
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    let mut schema_fields: Vec<FieldHistory> = meta
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| FieldHistory {
            id: f.id,
            name: f.name.clone(),
            field_type: f.field_type.to_string(),
            required: f.required,
        })
        .collect();
    schema_fields.sort_by_key(|f| f.id);
    let partition_spec = meta
        .default_partition_spec()
        .fields()
        .iter()
        .map(|f| format!("{}={}({})", f.name, f.transform, f.source_id))
        .collect();
    let sort_order = meta
        .default_sort_order()
        .fields
        .iter()
        .map(|f| format!("{}({}) {} {}", f.transform, f.source_id, f.direction, f.null_order))
        .collect();
    Ok(TableHistory {
        table: name.to_string(),
        table_uuid: meta.uuid().to_string(),
        metadata_location: table.metadata_location().map(str::to_string),
        current_snapshot_id: meta.current_snapshot_id(),
        row_count,
        snapshot_count: meta.snapshots().len(),
        refs,
        schema_fields,
        format_version: Some(meta.format_version() as u8),
        partition_spec: Some(partition_spec),
        sort_order: Some(sort_order),
        properties: Some(meta.properties().clone().into_iter().collect()),
    })
}

/// Every difference between `a` and `b`, table by table in name order.
pub fn compare(a: &HistoryRecord, b: &HistoryRecord) -> Vec<HistoryDiff> {
    let ta: BTreeMap<&str, &TableHistory> = a.tables.iter().map(|t| (t.table.as_str(), t)).collect();
    let tb: BTreeMap<&str, &TableHistory> = b.tables.iter().map(|t| (t.table.as_str(), t)).collect();
    let names: BTreeSet<&str> = ta.keys().chain(tb.keys()).copied().collect();
    let mut out = Vec::new();
    for name in names {
        match (ta.get(name), tb.get(name)) {
            (Some(x), Some(y)) => compare_table(x, y, &mut out),
            (x, y) => out.push(HistoryDiff {
                table: name.to_string(),
                what: format!("table missing in {}", if x.is_none() { "A" } else { "B" }),
                a: x.map(|t| t.table_uuid.clone()),
                b: y.map(|t| t.table_uuid.clone()),
                informational: false,
            }),
        }
    }
    out
}

fn compare_table(x: &TableHistory, y: &TableHistory, out: &mut Vec<HistoryDiff>) {
    let mut push = |what: String, a: Option<String>, b: Option<String>, informational: bool| {
        out.push(HistoryDiff {
            table: x.table.clone(),
            what,
            a,
            b,
            informational,
        })
    };
    let s = |v: &dyn ToString| Some(v.to_string());
    if x.table_uuid != y.table_uuid {
        push("table uuid changed".into(), s(&x.table_uuid), s(&y.table_uuid), false);
    }
    if x.row_count != y.row_count {
        push("row count".into(), s(&x.row_count), s(&y.row_count), false);
    }
    if x.snapshot_count != y.snapshot_count {
        push(
            "snapshot count".into(),
            s(&x.snapshot_count),
            s(&y.snapshot_count),
            false,
        );
    }
    if x.current_snapshot_id != y.current_snapshot_id {
        let id = |v: Option<i64>| v.map(|i| i.to_string());
        push(
            "current snapshot id".into(),
            id(x.current_snapshot_id),
            id(y.current_snapshot_id),
            false,
        );
    }

    let ra: BTreeMap<&str, &RefHistory> = x.refs.iter().map(|r| (r.name.as_str(), r)).collect();
    let rb: BTreeMap<&str, &RefHistory> = y.refs.iter().map(|r| (r.name.as_str(), r)).collect();
    let ref_names: BTreeSet<&str> = ra.keys().chain(rb.keys()).copied().collect();
    let show = |r: &RefHistory| format!("{} {}", r.kind, r.snapshot_id);
    for n in ref_names {
        match (ra.get(n), rb.get(n)) {
            (Some(p), Some(q)) if p != q => push(format!("ref {n} moved"), Some(show(p)), Some(show(q)), false),
            (Some(_), Some(_)) => {}
            (p, q) => {
                let what = if p.is_none() { "added" } else { "removed" };
                push(format!("ref {n} {what}"), p.map(|r| show(r)), q.map(|r| show(r)), false)
            }
        }
    }

    let fa: BTreeMap<i32, &FieldHistory> = x.schema_fields.iter().map(|f| (f.id, f)).collect();
    let fb: BTreeMap<i32, &FieldHistory> = y.schema_fields.iter().map(|f| (f.id, f)).collect();
    let ids: BTreeSet<i32> = fa.keys().chain(fb.keys()).copied().collect();
    let show = |f: &FieldHistory| {
        let req = if f.required { "required" } else { "optional" };
        format!("{} {} {req}", f.name, f.field_type)
    };
    for id in ids {
        match (fa.get(&id), fb.get(&id)) {
            (Some(p), Some(q)) if p != q => push(
                format!("schema field {id} changed"),
                Some(show(p)),
                Some(show(q)),
                false,
            ),
            (Some(_), Some(_)) => {}
            (p, q) => {
                let what = if p.is_none() { "added" } else { "removed" };
                push(
                    format!("schema field {id} {what}"),
                    p.map(|f| show(f)),
                    q.map(|f| show(f)),
                    false,
                )
            }
        }
    }

    if let (Some(p), Some(q)) = (x.format_version, y.format_version)
        && p != q
    {
        push("format version".into(), s(&p), s(&q), false);
    }
    let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    if let (Some(p), Some(q)) = (&x.partition_spec, &y.partition_spec)
        && p != q
    {
        push("partition spec".into(), Some(list(p)), Some(list(q)), false);
    }
    if let (Some(p), Some(q)) = (&x.sort_order, &y.sort_order)
        && p != q
    {
        push("sort order".into(), Some(list(p)), Some(list(q)), false);
    }
    if let (Some(p), Some(q)) = (&x.properties, &y.properties) {
        let keys: BTreeSet<&String> = p.keys().chain(q.keys()).collect();
        for k in keys {
            let (a, b) = (p.get(k), q.get(k));
            if a != b {
                let what = match (a, b) {
                    (None, _) => "added",
                    (_, None) => "removed",
                    _ => "changed",
                };
                // tidemark's own bookkeeping (a recovery id, say) differs on a recovered table.
                push(
                    format!("property {k} {what}"),
                    a.cloned(),
                    b.cloned(),
                    k.starts_with("tidemark."),
                );
            }
        }
    }

    if x.metadata_location != y.metadata_location {
        push(
            "metadata location changed".into(),
            x.metadata_location.clone(),
            y.metadata_location.clone(),
            true,
        );
    }
}

/// Writes the record as pretty JSON; a temporary file renamed into place, so a crash leaves
/// either the old file or the new one.
pub fn save(record: &HistoryRecord, path: &Path) -> Result<(), HistoryFileError> {
    let shown = path.display().to_string();
    let mut json = serde_json::to_vec_pretty(record).expect("a history record serializes");
    json.push(b'\n');
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let io = |action| {
        let path = shown.clone();
        move |source| HistoryFileError::Io { action, path, source }
    };
    std::fs::write(&tmp, &json).map_err(io("write"))?;
    std::fs::rename(&tmp, path).map_err(io("rename into place"))
}

/// Reads a record written by [`save`], refusing another format version.
pub fn load(path: &Path) -> Result<HistoryRecord, HistoryFileError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| HistoryFileError::Io {
        action: "read",
        path: shown.clone(),
        source,
    })?;
    let version = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("format_version").and_then(Value::as_u64));
    if let Some(found) = version.filter(|v| *v != u64::from(FORMAT_VERSION)) {
        return Err(HistoryFileError::UnsupportedVersion {
            path: shown,
            found: found as u32,
        });
    }
    serde_json::from_slice(&bytes).map_err(|source| HistoryFileError::Parse { path: shown, source })
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
