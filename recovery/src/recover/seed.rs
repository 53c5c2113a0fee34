//! Step 3: seed a *new* table with the trusted snapshot's rows, in files the new table owns (no
//! metadata-only clone that points at another table's files).
//!
//! The seed is one commit, so it is all or nothing. The table is created with the property
//! `tidemark.recovery-id`; a table of this recovery that exists without its seed commit is a seed
//! that stopped before it was confirmed: it is dropped and seeded afresh, never appended to. A
//! table left by a refused attempt (marked `tidemark.recovery-refused`) of the same recovery —
//! same source snapshot and journal, under another recovery id — is dropped and seeded afresh
//! too. A table of that name that belongs to something else is refused.
//!
//! The new table is a drop-in replacement for the source: the snapshot's schema (columns other
//! writers added included), the source's partition spec, sort order and properties.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use iceberg::table::Table;
use tidemark_journal::clock::Clock;
use tidemark_journal::spec::CompiledSpec;

use super::RecoverError;
use super::snapshot::TrustedSnapshot;
use crate::apply::{PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_MANIFEST_DIGEST, PROP_MANIFEST_SEQUENCE, ROWS_PER_FILE};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::table::commit::copy_data_file;
use crate::table::read::read_paths;
use crate::table::{self, CommitStamp, commit_overwrite, parse_ident, write_data_file};

/// Byte-for-byte copies of the snapshot's files in flight at once: each is a read and a write of
/// one file (the I/O of both cores locally, the round trips of S3); files that are rewritten
/// instead stay two at a time.
pub const COPIES_IN_FLIGHT: usize = 8;

/// The Arrow schema (with field ids) of the snapshot's own schema.
pub fn snapshot_arrow_schema(snap: &TrustedSnapshot) -> Result<arrow_schema::SchemaRef, RecoverError> {
    iceberg::arrow::schema_to_arrow_schema(&snap.schema)
        .map(Arc::new)
        .map_err(|e| RecoverError::Iceberg {
            context: format!("convert the schema of snapshot {} to Arrow", snap.snapshot_id),
            message: e.to_string(),
        })
}

pub use crate::provenance::{
    PROP_RECOVERY_ID, PROP_REFUSED, PROP_SOURCE_METADATA, PROP_SOURCE_SNAPSHOT, PROP_SOURCE_VERDICT, PROP_STEP,
};

/// Marks the table `into` refused, best effort: when the mark cannot be written, a rerun is
/// refused as before (the table stays for inspection and can be dropped by hand).
pub async fn mark_refused(handle: &CatalogHandle, into: &str, why: &str) {
    if let Ok(t) = table::load_table(handle, into).await {
        let props = HashMap::from([(PROP_REFUSED.to_string(), why.to_string())]);
        let _ = table::commit_properties(handle, &t, props).await;
    }
}

/// Whether `existing` is a refused attempt of the same recovery: the same source snapshot and
/// journal, marked refused.
fn refused_attempt_of(existing: &Table, snap: &TrustedSnapshot, journal_id: &str) -> bool {
    let meta = existing.metadata();
    if !meta.properties().contains_key(PROP_REFUSED) {
        return false;
    }
    meta.snapshots().any(|s| {
        let p = &s.summary().additional_properties;
        p.get(PROP_STEP).map(String::as_str) == Some("seed")
            && p.get(PROP_SOURCE_SNAPSHOT) == Some(&snap.snapshot_id.to_string())
            && p.get(PROP_JOURNAL_ID).map(String::as_str) == Some(journal_id)
    })
}

/// What an existing, seeded table of a recovery records: its seed's source snapshot, journal
/// and position, and the H of its replay when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    pub source_snapshot: String,
    pub journal_id: String,
    pub position: String,
    pub h: Option<u64>,
}

/// Whether the catalog has the table `into`.
async fn exists(handle: &CatalogHandle, into: &str) -> Result<bool, RecoverError> {
    handle
        .catalog()
        .table_exists(&parse_ident(into)?)
        .await
        .map_err(|e| RecoverError::Iceberg {
            context: format!("look up {into}"),
            message: e.to_string(),
        })
}

/// `into`'s record when it is a seeded table of `recovery_id` (a resumed recovery), else `None`.
pub async fn resumed(handle: &CatalogHandle, into: &str, recovery_id: &str) -> Result<Option<Resumed>, RecoverError> {
    if !exists(handle, into).await? {
        return Ok(None);
    }
    let table = table::load_table(handle, into).await?;
    let meta = table.metadata();
    if meta.properties().get(PROP_RECOVERY_ID).map(String::as_str) != Some(recovery_id) {
        return Ok(None);
    }
    let step = |name: &str| {
        meta.snapshots()
            .find(|s| s.summary().additional_properties.get(PROP_STEP).map(String::as_str) == Some(name))
            .map(|s| s.summary().additional_properties.clone())
    };
    let Some(seed) = step("seed") else {
        return Ok(None);
    };
    let get = |p: &HashMap<String, String>, k: &str| p.get(k).cloned().unwrap_or_default();
    Ok(Some(Resumed {
        source_snapshot: get(&seed, PROP_SOURCE_SNAPSHOT),
        journal_id: get(&seed, PROP_JOURNAL_ID),
        position: get(&seed, PROP_LAST_POSITION),
        h: step("replay").and_then(|r| r.get(PROP_LAST_POSITION).and_then(|v| v.parse().ok())),
    }))
}

impl Resumed {
    /// Refuses a run whose choice (snapshot, journal, boundary H) differs from the record.
    pub fn check(
        &self,
        recovery_id: &str,
        into: &str,
        snap: &TrustedSnapshot,
        journal_id: &str,
        h: u64,
    ) -> Result<(), RecoverError> {
        let asked = [
            (
                "source snapshot",
                self.source_snapshot.clone(),
                snap.snapshot_id.to_string(),
            ),
            ("journal", self.journal_id.clone(), journal_id.to_string()),
            ("snapshot position", self.position.clone(), snap.position.to_string()),
            (
                "boundary H",
                self.h.map(|v| v.to_string()).unwrap_or_default(),
                self.h.map(|_| h.to_string()).unwrap_or_default(),
            ),
        ];
        match asked.into_iter().find(|(_, recorded, asked)| recorded != asked) {
            None => Ok(()),
            Some((field, recorded, asked)) => Err(RecoverError::ResumeMismatch {
                recovery_id: recovery_id.to_string(),
                table: into.to_string(),
                field: field.to_string(),
                recorded,
                asked,
            }),
        }
    }
}

/// A seed task that panicked or was cancelled.
fn worker_died(e: tokio::task::JoinError) -> RecoverError {
    RecoverError::Iceberg {
        context: "a seed copy task".into(),
        message: e.to_string(),
    }
}

/// Seeds `into`; returns the table, whether the seed was already there (resumed), and how many
/// of the snapshot's files were copied byte for byte (the rest were rewritten).
#[allow(clippy::too_many_arguments)]
pub async fn seed(
    handle: &CatalogHandle,
    into: &str,
    spec: &CompiledSpec,
    journal_id: &str,
    snap: &TrustedSnapshot,
    recovery_id: &str,
    source_verdict: &str,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<(Table, bool, u64), RecoverError> {
    let ident = parse_ident(into)?;
    // The snapshot must hold the journal's columns (others may be there too).
    table::check_schema_in(spec, &snap.schema, snap.metadata.schemas_iter())?;
    if exists(handle, into).await? {
        let existing = table::load_table(handle, into).await?;
        let owner = existing.metadata().properties().get(PROP_RECOVERY_ID).cloned();
        // Same recovery id: resumed as it is (a refused one is validated again). Another id: only
        // a refused attempt of the same recovery (source snapshot, journal) is replaced.
        let ours = owner.as_deref() == Some(recovery_id);
        let refused = !ours && refused_attempt_of(&existing, snap, journal_id);
        if !ours && !refused {
            return Err(RecoverError::TargetExists {
                table: into.to_string(),
                owner,
            });
        }
        let seeded = existing
            .metadata()
            .snapshots()
            .any(|s| s.summary().additional_properties.get(PROP_STEP).map(String::as_str) == Some("seed"));
        if seeded && !refused {
            return Ok((existing, true, 0));
        }
        // An unconfirmed seed of this recovery, or a refused attempt of it: start fresh.
        handle
            .catalog()
            .drop_table(&ident)
            .await
            .map_err(|e| RecoverError::Iceberg {
                context: format!("drop unconfirmed seed {into}"),
                message: e.to_string(),
            })?;
    }
    let mut props = HashMap::new();
    props.insert(PROP_RECOVERY_ID.to_string(), recovery_id.to_string());
    // A drop-in replacement: the snapshot's schema (columns other writers added included), the
    // source's partition spec, sort order and properties.
    let t = table::create_table_like(handle, into, &snap.metadata, &snap.schema, props).await?;
    // The snapshot's rows are read by the snapshot's field ids, which the new table keeps.
    let schema = snapshot_arrow_schema(snap)?;
    // A file is copied byte for byte (no decode, no encode) when the copy is the same rows
    // under the new table: its schema has the snapshot's field ids, it is unpartitioned, no
    // delete file applies to the snapshot, and the file is at most ROWS_PER_FILE rows (the
    // merges' unit); `copy_data_file` checks the file itself. A copy is a read and a write,
    // [`COPIES_IN_FLIGHT`] at once.
    //
    // Any other file is rewritten as files of at most ROWS_PER_FILE rows, two at a time (a
    // permit of `rewrites`), so memory follows the file size, not the table's. The reads and
    // writes run as tasks of their own so that two files use both cores (futures polled in one
    // task would share one).
    let verbatim = t.metadata().current_schema().as_struct() == snap.schema.as_struct()
        && t.metadata().default_partition_spec().is_unpartitioned()
        && snap.deletes.is_empty();
    let rewrites = Arc::new(tokio::sync::Semaphore::new(2));
    let copy_file = |(path, entry): (String, iceberg::spec::DataFile)| {
        let rewrites = rewrites.clone();
        let (io, name, schema, deletes) = (
            snap.file_io.clone(),
            snap.metadata_location.clone(),
            schema.clone(),
            snap.deletes.clone(),
        );
        let t = t.clone();
        async move {
            if verbatim && entry.record_count() <= ROWS_PER_FILE as u64 && entry.partition().fields().is_empty() {
                let (t, id, io, path) = (t.clone(), ids.uuid(), io.clone(), path.clone());
                let copied = tokio::spawn(async move { copy_data_file(&t, &io, &path, &entry, id).await });
                if let Some(file) = copied.await.map_err(worker_died)?? {
                    return Ok((vec![file], true));
                }
            }
            let _rewriting = rewrites.acquire_owned().await.expect("the semaphore is never closed");
            let read =
                tokio::spawn(async move { read_paths(&io, &name, &[path.as_str()], &schema, None, &deletes).await });
            let batches = read.await.map_err(worker_died)??;
            let mut groups: Vec<Vec<arrow::array::RecordBatch>> = Vec::new();
            let (mut group, mut rows) = (Vec::new(), 0);
            for batch in batches {
                let mut offset = 0;
                while offset < batch.num_rows() {
                    let len = (ROWS_PER_FILE - rows).min(batch.num_rows() - offset);
                    group.push(batch.slice(offset, len));
                    (rows, offset) = (rows + len, offset + len);
                    if rows == ROWS_PER_FILE {
                        groups.push(std::mem::take(&mut group));
                        rows = 0;
                    }
                }
            }
            if !group.is_empty() {
                groups.push(group);
            }
            let writes: Vec<_> = groups
                .into_iter()
                .map(|g| {
                    let (t, id) = (t.clone(), ids.uuid());
                    tokio::spawn(async move { write_data_file(&t, &g, id).await })
                })
                .collect();
            let mut added = Vec::new();
            for w in writes {
                added.extend(w.await.map_err(worker_died)??);
            }
            Ok::<_, RecoverError>((added, false))
        }
    };
    let (mut added, mut copied) = (Vec::new(), 0);
    let mut copies = futures::stream::iter(snap.data_files.iter().cloned().zip(snap.data_entries.iter().cloned()))
        .map(copy_file)
        .buffered(COPIES_IN_FLIGHT);
    while let Some(files) = copies.next().await {
        let (files, verbatim) = files?;
        added.extend(files);
        copied += u64::from(verbatim);
    }
    let mut summary = HashMap::new();
    summary.insert(PROP_STEP.to_string(), "seed".to_string());
    summary.insert(PROP_RECOVERY_ID.to_string(), recovery_id.to_string());
    summary.insert(PROP_SOURCE_SNAPSHOT.to_string(), snap.snapshot_id.to_string());
    summary.insert(PROP_SOURCE_METADATA.to_string(), snap.metadata_location.clone());
    summary.insert(PROP_SOURCE_VERDICT.to_string(), source_verdict.to_string());
    summary.insert(PROP_JOURNAL_ID.to_string(), journal_id.to_string());
    summary.insert(PROP_LAST_POSITION.to_string(), snap.position.to_string());
    summary.insert(PROP_MANIFEST_SEQUENCE.to_string(), snap.manifest_sequence.to_string());
    summary.insert(PROP_MANIFEST_DIGEST.to_string(), snap.manifest_digest.clone());
    let stamp = CommitStamp {
        id: ids.uuid(),
        at: clock.now(),
    };
    if added.is_empty() {
        // An empty snapshot still needs a seed commit: write an empty file so the commit exists.
        return Err(RecoverError::Unsupported {
            reason: format!("snapshot {} holds no rows", snap.snapshot_id),
        });
    }
    let t = commit_overwrite(handle, &t, &[], added, summary, stamp).await?;
    Ok((t, false, copied))
}
