//! Rebuilding a lost catalog from the metadata files in the warehouse.
//!
//! Layout read: `<warehouse>/<ns…>/<table>/metadata/<NNNNN>-<uuid>.metadata.json`, and the resync
//! records beside them (`super::resync_record`); a nested namespace `a/b/t` is namespace `a.b`.
//!
//! Choosing a table's head: `super::head` ([`choose_head`], the rule by the files' chains, and
//! `choose_folder_head`, which reads only the files the choice needs).
//!
//! Contract of [`rebuild`]: registers each chosen head, parsed as Iceberg table metadata, with
//! `CatalogHandle::register_read` (creating the namespace if needed; the SQL catalog does not
//! read the file again). A table already registered with the same metadata file is left as
//! is; one registered with another file is reported as a conflict and never replaced. A refused
//! or failed table does not stop the others. Nothing in the warehouse is written or deleted.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use futures::{StreamExt, stream};
use iceberg::spec::TableMetadata;
use serde::Serialize;
use serde_json::Value;
use tidemark_journal::store::{self, ObjectStore};

pub use super::head::{HeadChoice, choose_head};
use super::head::{HeadRead, choose_folder_head};
pub(crate) use super::warehouse::file_name;
pub use super::warehouse::{DrError, TableFiles, warehouse_base};
use crate::catalog::{CatalogHandle, INSTEAD_OF_REGISTER};
use crate::table::parse_ident;

/// Version of the JSON report.
pub const FORMAT_VERSION: u32 = 1;

const METADATA_SUFFIX: &str = ".metadata.json";

/// Tables rebuilt at the same time.
const TABLES_AT_ONCE: usize = 8;

/// Lists the warehouse (the store is opened on its root) and groups the metadata files by table.
/// With `namespace`, only the tables directly in that namespace (`a.b`) are returned.
pub async fn discover(store: &dyn ObjectStore, namespace: Option<&str>) -> Result<Vec<TableFiles>, DrError> {
    let list_prefix = match namespace {
        None => String::new(),
        Some(ns) if ns.is_empty() || ns.split('.').any(str::is_empty) => {
            return Err(DrError::InvalidNamespace {
                namespace: ns.to_string(),
            });
        }
        Some(ns) => format!("{}/", ns.replace('.', "/")),
    };
    let objects = store::list_all(store, &list_prefix)
        .await
        .map_err(|source| DrError::List {
            warehouse: store.url(),
            source,
        })?;
    let mut tables: BTreeMap<String, TableFiles> = BTreeMap::new();
    let mut records: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for object in objects {
        let parts: Vec<&str> = object.key.split('/').collect();
        // <ns…>/<table>/metadata/<file>: at least one namespace level.
        let n = parts.len();
        if n < 4 || parts[n - 2] != "metadata" {
            continue;
        }
        let is_metadata = parts[n - 1].ends_with(METADATA_SUFFIX);
        if !is_metadata && !super::resync_record::is_record_name(parts[n - 1]) {
            continue;
        }
        let ns = parts[..n - 3].join(".");
        if parts[..n - 2].iter().any(|p| p.is_empty() || p.starts_with('.')) || namespace.is_some_and(|w| w != ns) {
            continue;
        }
        let prefix = parts[..n - 2].join("/");
        if !is_metadata {
            records.entry(prefix).or_default().push(object.key);
            continue;
        }
        tables
            .entry(prefix.clone())
            .or_insert_with(|| TableFiles {
                namespace: ns,
                name: parts[n - 3].to_string(),
                prefix,
                metadata_keys: Vec::new(),
                record_keys: Vec::new(),
            })
            .metadata_keys
            .push(object.key);
    }
    // A record in a folder without metadata files names nothing that could be a head.
    for (prefix, keys) in records {
        if let Some(t) = tables.get_mut(&prefix) {
            t.record_keys = keys;
        }
    }
    let mut out: Vec<TableFiles> = tables.into_values().collect();
    for t in &mut out {
        t.metadata_keys.sort();
        t.record_keys.sort();
    }
    Ok(out)
}

/// What happened to one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TableStatus {
    Registered,
    /// Already in the catalog with the chosen metadata file.
    AlreadyRegistered,
    /// In the catalog with another metadata file; left alone.
    Conflict,
    /// No head could be chosen without guessing.
    Refused,
    /// Reading the files or the catalog failed (see `error`).
    Failed,
}

/// One table of a [`RebuildReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TableOutcome {
    pub table: String,
    pub status: TableStatus,
    /// The chosen head as registered (full URL).
    pub metadata_file: Option<String>,
    pub reason: String,
    /// Keys (relative to the warehouse) of metadata files on no chosen chain.
    pub strays: Vec<String>,
    pub refused: Option<String>,
    /// The pointer the catalog already had, when it had one.
    pub existing_pointer: Option<String>,
    pub warning: Option<String>,
    pub error: Option<String>,
    /// Metadata files read to choose the head: their ancestors named by the head's whole log are
    /// not read (`super::head`).
    pub metadata_files_read: usize,
    pub ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RebuildTotals {
    pub tables: usize,
    pub registered: usize,
    pub already_registered: usize,
    pub conflicts: usize,
    pub refused: usize,
    pub failed: usize,
    pub strays: usize,
}

/// The result of [`rebuild`] (`tidemark catalog rebuild --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RebuildReport {
    pub format_version: u32,
    /// The warehouse as table locations spell it (`file:///…` or `s3://…`).
    pub warehouse: String,
    pub catalog: String,
    pub namespace: Option<String>,
    pub tables: Vec<TableOutcome>,
    pub totals: RebuildTotals,
    pub ms: u64,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

impl RebuildReport {
    /// Every table found is now in the catalog with its chosen head.
    pub fn is_complete(&self) -> bool {
        self.totals.refused == 0 && self.totals.conflicts == 0 && self.totals.failed == 0
    }
}

/// Registers the head of every table found in the warehouse (optionally one namespace) in the
/// catalog of `handle`. `hints` maps `namespace.name` to an expected head (key, URL or file name).
/// Errors only when the warehouse cannot be read at all; per-table trouble goes into the report.
pub async fn rebuild(
    warehouse_url: &str,
    handle: &CatalogHandle,
    namespace: Option<&str>,
    hints: &HashMap<String, String>,
) -> Result<RebuildReport, DrError> {
    let started = Instant::now();
    // A rebuild registers: a catalog that cannot is refused before anything is read or changed.
    handle
        .require(true, false, "rebuild from the warehouse", INSTEAD_OF_REGISTER)
        .map_err(|source| DrError::Pointer {
            table: "(all tables)".into(),
            source: Box::new(source),
        })?;
    let base = warehouse_base(warehouse_url)?;
    let store = store::open(warehouse_url).await.map_err(|source| DrError::Open {
        warehouse: warehouse_url.to_string(),
        source,
    })?;
    let found = discover(store.as_ref(), namespace).await?;
    // Tables are independent: several are read and registered at a time (on S3 a table is a
    // handful of sequential round trips).
    let tables: Vec<TableOutcome> = stream::iter(&found)
        .map(|files| {
            let (store, base) = (store.as_ref(), base.as_str());
            async move {
                let t0 = Instant::now();
                let hint = hints.get(&files.ident()).map(String::as_str);
                let mut outcome = match rebuild_table(store, base, handle, files, hint).await {
                    Ok(outcome) => outcome,
                    Err(e) => TableOutcome {
                        table: files.ident(),
                        status: TableStatus::Failed,
                        metadata_file: None,
                        reason: "the table could not be rebuilt".into(),
                        strays: Vec::new(),
                        refused: None,
                        existing_pointer: None,
                        warning: None,
                        error: Some(e.to_string()),
                        metadata_files_read: 0,
                        ms: 0,
                    },
                };
                outcome.ms = t0.elapsed().as_millis() as u64;
                outcome
            }
        })
        .buffered(TABLES_AT_ONCE)
        .collect()
        .await;
    let count = |s: TableStatus| tables.iter().filter(|t| t.status == s).count();
    let totals = RebuildTotals {
        tables: tables.len(),
        registered: count(TableStatus::Registered),
        already_registered: count(TableStatus::AlreadyRegistered),
        conflicts: count(TableStatus::Conflict),
        refused: count(TableStatus::Refused),
        failed: count(TableStatus::Failed),
        strays: tables.iter().map(|t| t.strays.len()).sum(),
    };
    Ok(RebuildReport {
        format_version: FORMAT_VERSION,
        warehouse: base,
        catalog: handle.name().to_string(),
        namespace: namespace.map(str::to_string),
        tables,
        totals,
        ms: started.elapsed().as_millis() as u64,
        s3_requests: None,
    })
}

async fn rebuild_table(
    store: &dyn ObjectStore,
    base: &str,
    handle: &CatalogHandle,
    files: &TableFiles,
    hint: Option<&str>,
) -> Result<TableOutcome, DrError> {
    let table = files.ident();
    let ident = parse_ident(&table).map_err(|_| DrError::InvalidTableName {
        prefix: files.prefix.clone(),
    })?;
    let existing = handle
        .metadata_pointer(&ident)
        .await
        .map_err(|source| DrError::Pointer {
            table: table.clone(),
            source: Box::new(source),
        })?;

    // An explicit hint wins over the pointer of a catalog being rebuilt into. Only the files the
    // choice needs are read (`super::head`): what a `replica resync` walked over is never a head,
    // and a record that cannot be read refuses the table rather than risk choosing such a file.
    let hint = hint.or(existing.as_deref());
    let folder = choose_folder_head(
        store,
        files,
        HeadRead {
            hint,
            ..HeadRead::default()
        },
    )
    .await?;
    let mut strays = folder.choice.strays.clone();
    strays.extend(folder.excluded.keys.iter().cloned());
    strays.sort();
    let mut outcome = TableOutcome {
        table: table.clone(),
        status: TableStatus::Refused,
        metadata_file: None,
        reason: format!("{}{}", folder.choice.reason, folder.excluded.note),
        strays,
        refused: folder.choice.refused.clone(),
        existing_pointer: existing.clone(),
        warning: None,
        error: None,
        metadata_files_read: files.metadata_keys.len() - folder.not_read,
        ms: 0,
    };
    // A file that cannot be parsed may be a newer head; it is harmless only as an ancestor.
    let unknown: Vec<String> = folder
        .unparsable_off_chain()
        .into_iter()
        .map(|(k, e)| format!("{k} ({e})"))
        .collect();
    let Some(head_key) = folder.choice.head.clone() else {
        return Ok(outcome);
    };
    if !unknown.is_empty() {
        outcome.refused = Some(format!(
            "metadata file(s) {} cannot be parsed and the chosen head {head_key} does not name them as \
             predecessors: one may be the real head; repair or remove them",
            unknown.join(", ")
        ));
        return Ok(outcome);
    }
    let head_json = folder.head_json().expect("the head is a file that was read and parsed");

    let location = format!("{base}/{head_key}");
    outcome.metadata_file = Some(location.clone());
    let expected_table_location = format!("{base}/{}", files.prefix);
    if let Some(loc) = head_json.get("location").and_then(Value::as_str)
        && loc.trim_end_matches('/') != expected_table_location
    {
        outcome.warning = Some(format!(
            "the metadata says the table lives at {loc}, not {expected_table_location}; its data files are \
             read from where the manifests say"
        ));
    }
    if let Some(p) = &existing {
        outcome.status = if p == &location || p.ends_with(&format!("/{head_key}")) {
            TableStatus::AlreadyRegistered
        } else {
            TableStatus::Conflict
        };
        return Ok(outcome);
    }

    let catalog_err = |action: &str| {
        let (table, action, catalog) = (table.clone(), action.to_string(), handle.uri().to_string());
        move |source: iceberg::Error| DrError::Catalog {
            table,
            action,
            catalog,
            source: Box::new(source),
        }
    };
    let ns = ident.namespace();
    if !handle
        .catalog()
        .namespace_exists(ns)
        .await
        .map_err(catalog_err("look up the namespace"))?
    {
        match crate::table::create_namespace(handle, ns).await {
            Ok(()) => {}
            // Tables of one namespace are rebuilt concurrently: another may have created it.
            Err(_) if handle.catalog().namespace_exists(ns).await.unwrap_or(false) => {}
            Err(e) => {
                return Err(DrError::Pointer {
                    table: table.clone(),
                    source: Box::new(e),
                });
            }
        }
    }
    // Parsed as Iceberg metadata here (what a catalog's register checks by reading it again),
    // so that the SQL catalog records the pointer without another read of the file.
    let metadata: TableMetadata = match serde_json::from_value(head_json.clone()) {
        Ok(m) => m,
        Err(e) => {
            outcome.status = TableStatus::Failed;
            outcome.error = Some(format!("the chosen head {head_key} is not Iceberg table metadata: {e}"));
            return Ok(outcome);
        }
    };
    handle
        .register_read(&ident, &location, &metadata)
        .await
        .map_err(|source| DrError::Pointer {
            table: table.clone(),
            source: Box::new(source),
        })?;
    outcome.status = TableStatus::Registered;
    Ok(outcome)
}
