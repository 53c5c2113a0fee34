//! Consistent replica copy (issue 5 item 4): `tidemark replica copy --from URL --to URL`.
//!
//! Bucket replication copies objects, not tables. A copy that takes data files first and
//! metadata last, each from its own listing, leaves under a live writer a metadata file naming
//! data files written after the data listing: a replica that looks current and fails at read
//! time. This copy works per table and per commit instead:
//!
//! 1. the table's head is chosen by the metadata-log chain ([`rebuild::choose_head`]; never a
//!    file a `replica resync` walked over, `super::resync_record`), and its chain is walked
//!    oldest first;
//! 2. for each metadata file of the chain, every file it references is copied first (data and
//!    delete files, then manifests, then manifest lists, for every snapshot it keeps, so branches,
//!    tags and time travel work on the replica), and the metadata file itself last;
//! 3. every object is verified after the write: its size, and with [`Verify::Sha256`] its
//!    content read back.
//!
//! So at every moment, also when the copy is cut short, the replica's newest metadata file is
//! consistent: the replica is possibly older, never broken. The copy is resumable: an object
//! already at the destination with the source's size (and checksum with `Sha256`) is skipped,
//! one with another size (a torn copy) is copied again. Files the metadata does not reference
//! (orphans, strays of failed commits) are not copied. Commits made during the copy are picked up
//! by the next run.
//!
//! Keys are kept: the replica holds each object under the same key relative to its root, and its
//! metadata still names the source's absolute paths; read it through a prefix map (`replica
//! check --prefix-map`) or rewrite it (`table rewrite-paths`).
//!
//! [`CopyOrder::DataFirst`] exists for drills only: it copies the `data/` folder of each table
//! from one listing, then the `metadata/` folder from a second, which is what an object-level
//! sync does. [`copy_phase`] runs the two phases separately so that a drill can commit between
//! them, as a live writer would.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream};
use iceberg::spec::{Manifest, ManifestList, TableMetadata};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tidemark_journal::store::{self, ObjectStore, PutMode};

use super::head::{HeadRead, choose_folder_head};
use super::rebuild::{self, DrError, TableFiles, warehouse_base};

/// Version of the JSON report.
pub const FORMAT_VERSION: u32 = 1;

/// Objects copied at the same time.
const CONCURRENCY: usize = 8;

/// In which order objects are copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CopyOrder {
    /// Per commit: referenced files before the metadata file naming them.
    Safe,
    /// `data/` from one listing, then `metadata/` from another: unsafe, for drills only.
    DataFirst,
}

/// How a copied (or already present) object is checked against the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Verify {
    /// The destination object has the source's size.
    Size,
    /// ... and its sha256 equals the source's (reads both).
    Sha256,
}

/// One of the two phases of [`CopyOrder::DataFirst`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Everything under each table's `data/`.
    Data,
    /// Everything under each table's `metadata/`.
    Metadata,
}

#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// `namespace.name` of the tables to copy; all when `None`.
    pub tables: Option<Vec<String>>,
    pub order: CopyOrder,
    pub verify: Verify,
    /// Stop after this many objects were written (a simulated crash, for tests and drills).
    pub stop_after: Option<usize>,
    /// `namespace.name` → the expected head (key, URL or file name), for a table whose chain
    /// alone cannot decide (as `catalog rebuild --hint`).
    pub hints: HashMap<String, String>,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            tables: None,
            order: CopyOrder::Safe,
            verify: Verify::Size,
            stop_after: None,
            hints: HashMap::new(),
        }
    }
}

/// One table of a [`CopyReport`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CopyTable {
    /// `namespace.name`.
    pub table: String,
    /// The source head the copy went up to (key relative to the source root); safe order only.
    pub head: Option<String>,
    /// Metadata files copied or found present, up to and including the head (safe order only).
    pub metadata_files: usize,
    /// Objects written by this run.
    pub copied: usize,
    /// Objects already at the destination and verified (a resumed or repeated copy).
    pub skipped: usize,
    /// Objects at the destination that did not match the source and were copied again.
    pub repaired: usize,
    pub bytes_copied: u64,
    /// Why the table was not copied (no head could be chosen).
    pub refused: Option<String>,
    pub error: Option<String>,
    pub ms: u64,
}

/// The result of [`copy`] (`tidemark replica copy --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CopyReport {
    pub format_version: u32,
    /// Source warehouse as its table locations spell it.
    pub from: String,
    /// Destination warehouse.
    pub to: String,
    pub order: CopyOrder,
    pub verify: Verify,
    pub tables: Vec<CopyTable>,
    pub copied: usize,
    pub skipped: usize,
    pub repaired: usize,
    pub bytes_copied: u64,
    /// The run stopped early on `stop_after`; run again to finish.
    pub interrupted: bool,
    pub ms: u64,
    /// S3 requests of the run, retried and failed (absent when none; filled in by the CLI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<tidemark_schemas::RequestCounts>,
}

impl CopyReport {
    /// Every selected table was copied up to its head.
    pub fn is_complete(&self) -> bool {
        !self.interrupted && self.tables.iter().all(|t| t.refused.is_none() && t.error.is_none())
    }
}

/// Copies the tables of warehouse `from` to warehouse `to` (see the module documentation). Errors
/// only when a warehouse cannot be opened or listed, or a selected table does not exist;
/// per-table trouble goes into the report.
pub async fn copy(
    from: &str,
    to: &str,
    opts: &CopyOptions,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CopyReport, DrError> {
    match opts.order {
        CopyOrder::Safe => run(from, to, opts, None, progress).await,
        CopyOrder::DataFirst => {
            let data = run(from, to, opts, Some(Phase::Data), progress).await?;
            let meta = run(from, to, opts, Some(Phase::Metadata), progress).await?;
            Ok(merge_reports(data, meta))
        }
    }
}

/// One phase of the unsafe data-first order (see the module documentation).
pub async fn copy_phase(
    from: &str,
    to: &str,
    opts: &CopyOptions,
    phase: Phase,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CopyReport, DrError> {
    let opts = CopyOptions {
        order: CopyOrder::DataFirst,
        ..opts.clone()
    };
    run(from, to, &opts, Some(phase), progress).await
}

fn merge_reports(mut a: CopyReport, b: CopyReport) -> CopyReport {
    // By name: a table created between the two listings is only in the second.
    for tb in b.tables {
        let Some(ta) = a.tables.iter_mut().find(|t| t.table == tb.table) else {
            a.tables.push(tb);
            continue;
        };
        ta.copied += tb.copied;
        ta.skipped += tb.skipped;
        ta.repaired += tb.repaired;
        ta.bytes_copied += tb.bytes_copied;
        ta.error = ta.error.take().or(tb.error);
        ta.ms += tb.ms;
    }
    a.copied += b.copied;
    a.skipped += b.skipped;
    a.repaired += b.repaired;
    a.bytes_copied += b.bytes_copied;
    a.interrupted |= b.interrupted;
    a.ms += b.ms;
    a
}

struct Copier<'a> {
    src: &'a dyn ObjectStore,
    dst: &'a dyn ObjectStore,
    verify: Verify,
    /// Objects written so far by this run (for `stop_after`).
    written: usize,
    stop_after: Option<usize>,
    /// Keys known to be at the destination and verified.
    done: HashSet<String>,
}

/// What happened to one object.
enum Outcome {
    Copied(u64),
    Repaired(u64),
    Present,
}

/// A copy that stopped on `stop_after`.
struct Stopped;

async fn run(
    from: &str,
    to: &str,
    opts: &CopyOptions,
    phase: Option<Phase>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<CopyReport, DrError> {
    let started = Instant::now();
    let from_base = warehouse_base(from)?;
    let to_base = warehouse_base(to)?;
    let open = |url: &str| {
        let url = url.to_string();
        async move {
            store::open_or_create(&url)
                .await
                .map_err(|source| DrError::Open { warehouse: url, source })
        }
    };
    let src = store::open(from).await.map_err(|source| DrError::Open {
        warehouse: from.to_string(),
        source,
    })?;
    let dst = open(to).await?;
    let mut found = rebuild::discover(src.as_ref(), None).await?;
    if let Some(wanted) = &opts.tables {
        for w in wanted {
            if !found.iter().any(|t| &t.ident() == w) {
                return Err(DrError::InvalidWarehouse {
                    warehouse: from.to_string(),
                    reason: format!("table {w} has no metadata files in the source warehouse"),
                });
            }
        }
        found.retain(|t| wanted.contains(&t.ident()));
    }
    let mut copier = Copier {
        src: src.as_ref(),
        dst: dst.as_ref(),
        verify: opts.verify,
        written: 0,
        stop_after: opts.stop_after,
        done: HashSet::new(),
    };
    let mut tables = Vec::with_capacity(found.len());
    let mut interrupted = false;
    for files in &found {
        let t0 = Instant::now();
        let mut out = CopyTable {
            table: files.ident(),
            ..Default::default()
        };
        if !interrupted {
            let r = match phase {
                None => {
                    let hint = opts.hints.get(&files.ident()).map(String::as_str);
                    copy_table_safe(&mut copier, &from_base, files, hint, &mut out, progress).await
                }
                Some(p) => copy_folder(&mut copier, files, p, &mut out).await,
            };
            match r {
                Ok(Ok(())) => {}
                Ok(Err(Stopped)) => interrupted = true,
                Err(e) => out.error = Some(e),
            }
        }
        out.ms = t0.elapsed().as_millis() as u64;
        progress(&format!(
            "{}: {} copied, {} already there, {} repaired, {} bytes",
            out.table, out.copied, out.skipped, out.repaired, out.bytes_copied
        ));
        tables.push(out);
    }
    Ok(CopyReport {
        format_version: FORMAT_VERSION,
        from: from_base,
        to: to_base,
        order: opts.order,
        verify: opts.verify,
        copied: tables.iter().map(|t| t.copied).sum(),
        skipped: tables.iter().map(|t| t.skipped).sum(),
        repaired: tables.iter().map(|t| t.repaired).sum(),
        bytes_copied: tables.iter().map(|t| t.bytes_copied).sum(),
        tables,
        interrupted,
        ms: started.elapsed().as_millis() as u64,
        s3_requests: None,
    })
}

impl Copier<'_> {
    /// Copies `keys` (concurrently), recording the outcomes in `out`; stops when `stop_after` is
    /// reached.
    async fn ensure(&mut self, keys: Vec<String>, out: &mut CopyTable) -> Result<Result<(), Stopped>, String> {
        let mut todo: Vec<String> = keys.into_iter().filter(|k| !self.done.contains(k)).collect();
        todo.sort();
        todo.dedup();
        let (src, dst, verify) = (self.src, self.dst, self.verify);
        for chunk in todo.chunks(CONCURRENCY) {
            let mut chunk = chunk.to_vec();
            if let Some(limit) = self.stop_after {
                chunk.truncate(limit.saturating_sub(self.written));
                if chunk.is_empty() {
                    return Ok(Err(Stopped));
                }
            }
            let results: Vec<(String, Outcome)> = stream::iter(chunk)
                .map(|key| async move { copy_object(src, dst, &key, verify).await.map(|o| (key, o)) })
                .buffer_unordered(CONCURRENCY)
                .try_collect()
                .await?;
            for (key, outcome) in results {
                match outcome {
                    Outcome::Copied(bytes) => {
                        tidemark_journal::failpoint::hit("copy:after-object");
                        out.copied += 1;
                        out.bytes_copied += bytes;
                        self.written += 1;
                    }
                    Outcome::Repaired(bytes) => {
                        out.repaired += 1;
                        out.bytes_copied += bytes;
                        self.written += 1;
                    }
                    Outcome::Present => out.skipped += 1,
                }
                self.done.insert(key);
            }
        }
        Ok(Ok(()))
    }
}

fn sha256(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

/// Copies one object unless the destination already holds it (verified), then verifies the copy.
async fn copy_object(
    src: &dyn ObjectStore,
    dst: &dyn ObjectStore,
    key: &str,
    verify: Verify,
) -> Result<Outcome, String> {
    let source = src
        .get(key, None)
        .await
        .map_err(|e| format!("cannot read source object {key}: {e}"))?;
    let size = source.body.len() as u64;
    let matches = async |body: Option<Bytes>, found_size: u64| match verify {
        Verify::Size => found_size == size,
        Verify::Sha256 => body.is_some_and(|b| b.len() as u64 == size && sha256(&b) == sha256(&source.body)),
    };
    let existing = match dst.head(key, None).await {
        Ok(meta) => Some(meta.size),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(format!("cannot look up destination object {key}: {e}")),
    };
    if let Some(found_size) = existing {
        let body = match verify {
            Verify::Sha256 if found_size == size => Some(read_back(dst, key).await?),
            _ => None,
        };
        if matches(body, found_size).await {
            return Ok(Outcome::Present);
        }
    }
    dst.put(key, source.body.clone(), PutMode::Overwrite)
        .await
        .map_err(|e| format!("cannot write destination object {key}: {e}"))?;
    let found_size = dst
        .head(key, None)
        .await
        .map_err(|e| format!("cannot look up destination object {key} after writing it: {e}"))?
        .size;
    let body = match verify {
        Verify::Sha256 => Some(read_back(dst, key).await?),
        Verify::Size => None,
    };
    if !matches(body, found_size).await {
        return Err(format!(
            "destination object {key} does not match the source after the copy ({found_size} bytes, source {size})"
        ));
    }
    Ok(if existing.is_some() {
        Outcome::Repaired(size)
    } else {
        Outcome::Copied(size)
    })
}

async fn read_back(dst: &dyn ObjectStore, key: &str) -> Result<Bytes, String> {
    Ok(dst
        .get(key, None)
        .await
        .map_err(|e| format!("cannot read back destination object {key}: {e}"))?
        .body)
}

/// The unsafe order's phase: every object under the table's `data/` or `metadata/` folder.
async fn copy_folder(
    copier: &mut Copier<'_>,
    files: &TableFiles,
    phase: Phase,
    out: &mut CopyTable,
) -> Result<Result<(), Stopped>, String> {
    let folder = match phase {
        Phase::Data => "data",
        Phase::Metadata => "metadata",
    };
    let prefix = format!("{}/{folder}/", files.prefix);
    let listed = store::list_all(copier.src, &prefix)
        .await
        .map_err(|e| format!("cannot list {prefix}: {e}"))?;
    copier.ensure(listed.into_iter().map(|o| o.key).collect(), out).await
}

/// The key of an absolute `path` under the warehouse `base`.
fn key_of(base: &str, path: &str, metadata: &str) -> Result<String, String> {
    path.strip_prefix(base)
        .and_then(|rest| rest.strip_prefix('/'))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "metadata file {metadata} references {path}, outside the source warehouse {base}; \
                 copy that location separately"
            )
        })
}

/// Files a manifest list or manifest references, by path, read once per run.
#[derive(Default)]
struct Children {
    of: HashMap<String, Vec<String>>,
}

async fn copy_table_safe(
    copier: &mut Copier<'_>,
    base: &str,
    files: &TableFiles,
    hint: Option<&str>,
    out: &mut CopyTable,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Result<(), Stopped>, String> {
    // An unparsable file cannot be a published head (see rebuild); it is not copied. Nor is
    // what a `replica resync` walked over (a stray then); a record that cannot be read refuses.
    let how = HeadRead {
        hint,
        every_file: true,
        ..HeadRead::default()
    };
    let folder = choose_folder_head(copier.src, files, how)
        .await
        .map_err(|e| e.to_string())?;
    let Some(head) = folder.choice.head.clone() else {
        out.refused = folder.choice.refused;
        return Ok(Ok(()));
    };
    let parsed = &folder.parsed;
    out.head = Some(head.clone());
    let by_name: HashMap<&str, &Value> = parsed.iter().map(|(k, j)| (rebuild::file_name(k), j)).collect();
    let key_by_name: HashMap<&str, &str> = parsed
        .iter()
        .map(|(k, _)| (rebuild::file_name(k), k.as_str()))
        .collect();
    let mut names = folder.chain_names();
    names.reverse();
    let mut children = Children::default();
    for name in names {
        let (Some(json), Some(key)) = (by_name.get(name), key_by_name.get(name)) else {
            continue; // expired from the source: nothing to copy
        };
        let meta: TableMetadata =
            serde_json::from_value((*json).clone()).map_err(|e| format!("cannot parse metadata file {key}: {e}"))?;
        let (data, manifests, lists) = referenced(copier.src, base, key, &meta, &mut children).await?;
        for group in [data, manifests, lists, vec![key.to_string()]] {
            if let Err(Stopped) = copier.ensure(group, out).await? {
                return Ok(Err(Stopped));
            }
        }
        out.metadata_files += 1;
        progress(&format!(
            "{}: {key} and the files it references are at the destination",
            out.table
        ));
    }
    Ok(Ok(()))
}

/// Keys of the data and delete files, manifests and manifest lists that the snapshots of `meta`
/// reference (plus statistics files, with the data).
async fn referenced(
    src: &dyn ObjectStore,
    base: &str,
    metadata_key: &str,
    meta: &TableMetadata,
    children: &mut Children,
) -> Result<(Vec<String>, Vec<String>, Vec<String>), String> {
    let (mut data, mut manifests, mut lists) = (Vec::new(), Vec::new(), Vec::new());
    let key = |path: &str| key_of(base, path, metadata_key);
    for stats in meta.statistics_iter() {
        data.push(key(&stats.statistics_path)?);
    }
    for snapshot in meta.snapshots() {
        let list_path = snapshot.manifest_list().to_string();
        lists.push(key(&list_path)?);
        if !children.of.contains_key(&list_path) {
            let body = src
                .get(&key(&list_path)?, None)
                .await
                .map_err(|e| format!("cannot read manifest list {list_path}: {e}"))?
                .body;
            let list = ManifestList::parse_with_version(&body, meta.format_version())
                .map_err(|e| format!("cannot parse manifest list {list_path}: {e}"))?;
            let paths = list.entries().iter().map(|m| m.manifest_path.clone()).collect();
            children.of.insert(list_path.clone(), paths);
        }
        for manifest_path in children.of[&list_path].clone() {
            manifests.push(key(&manifest_path)?);
            if !children.of.contains_key(&manifest_path) {
                let body = src
                    .get(&key(&manifest_path)?, None)
                    .await
                    .map_err(|e| format!("cannot read manifest {manifest_path}: {e}"))?
                    .body;
                let manifest =
                    Manifest::parse_avro(&body).map_err(|e| format!("cannot parse manifest {manifest_path}: {e}"))?;
                let paths = manifest
                    .entries()
                    .iter()
                    .filter(|e| e.is_alive())
                    .map(|e| e.data_file().file_path().to_string())
                    .collect();
                children.of.insert(manifest_path.clone(), paths);
            }
            for file in &children.of[&manifest_path] {
                data.push(key(file)?);
            }
        }
    }
    Ok((data, manifests, lists))
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod tests;
