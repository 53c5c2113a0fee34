//! Step 3: seed a *new* table with the trusted snapshot's rows, in files the new table owns (no
//! metadata-only clone that points at another table's files).
//!
//! The seed is one commit, so it is all or nothing. The table is created with the property
//! `tidemark.recovery-id`; a table of this recovery that exists without its seed commit is a seed
//! that stopped before it was confirmed: it is dropped and seeded afresh, never appended to. A
//! table of that name that belongs to something else is refused.

use std::collections::HashMap;

use futures::StreamExt;
use iceberg::table::Table;
use tidemark_journal::clock::Clock;
use tidemark_journal::spec::CompiledSpec;

use super::RecoverError;
use super::snapshot::TrustedSnapshot;
use crate::apply::{PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_MANIFEST_DIGEST, PROP_MANIFEST_SEQUENCE, ROWS_PER_FILE};
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::table::read::read_paths;
use crate::table::{self, CommitStamp, arrow_schema, commit_overwrite, parse_ident, write_data_file};

pub const PROP_RECOVERY_ID: &str = "tidemark.recovery-id";
pub const PROP_STEP: &str = "tidemark.recovery-step";
pub const PROP_SOURCE_SNAPSHOT: &str = "tidemark.source-snapshot";
pub const PROP_SOURCE_METADATA: &str = "tidemark.source-metadata";

/// Seeds `into`; returns the table and whether the seed was already there (resumed).
#[allow(clippy::too_many_arguments)]
pub async fn seed(
    handle: &CatalogHandle,
    into: &str,
    spec: &CompiledSpec,
    journal_id: &str,
    snap: &TrustedSnapshot,
    recovery_id: &str,
    clock: &dyn Clock,
    ids: &dyn Ids,
) -> Result<(Table, bool), RecoverError> {
    let ident = parse_ident(into)?;
    if handle
        .catalog()
        .table_exists(&ident)
        .await
        .map_err(|e| RecoverError::Iceberg {
            context: format!("look up {into}"),
            message: e.to_string(),
        })?
    {
        let existing = table::load_table(handle, into).await?;
        let owner = existing.metadata().properties().get(PROP_RECOVERY_ID).cloned();
        if owner.as_deref() != Some(recovery_id) {
            return Err(RecoverError::TargetExists {
                table: into.to_string(),
                owner,
            });
        }
        let seeded = existing
            .metadata()
            .snapshots()
            .any(|s| s.summary().additional_properties.get(PROP_STEP).map(String::as_str) == Some("seed"));
        if seeded {
            return Ok((existing, true));
        }
        // An unconfirmed seed of this recovery: start fresh.
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
    let t = table::create_table_with_properties(handle, into, spec, props).await?;
    let schema = arrow_schema(&t)?;
    // One source file at a time (two in flight), so memory follows the file size, not the
    // table's; each is rewritten as files of at most ROWS_PER_FILE rows.
    let copy_file = |path: String| {
        let (t, schema) = (&t, &schema);
        async move {
            let batches = read_paths(&snap.file_io, &snap.metadata_location, &[path.as_str()], schema, None).await?;
            let mut added = Vec::new();
            let (mut group, mut rows) = (Vec::new(), 0);
            for batch in batches {
                let mut offset = 0;
                while offset < batch.num_rows() {
                    let len = (ROWS_PER_FILE - rows).min(batch.num_rows() - offset);
                    group.push(batch.slice(offset, len));
                    (rows, offset) = (rows + len, offset + len);
                    if rows == ROWS_PER_FILE {
                        added.extend(write_data_file(t, &std::mem::take(&mut group), ids.uuid()).await?);
                        rows = 0;
                    }
                }
            }
            if !group.is_empty() {
                added.extend(write_data_file(t, &group, ids.uuid()).await?);
            }
            Ok::<_, RecoverError>(added)
        }
    };
    let mut added = Vec::new();
    let mut copies = futures::stream::iter(snap.data_files.clone())
        .map(copy_file)
        .buffered(2);
    while let Some(files) = copies.next().await {
        added.extend(files?);
    }
    let mut summary = HashMap::new();
    summary.insert(PROP_STEP.to_string(), "seed".to_string());
    summary.insert(PROP_RECOVERY_ID.to_string(), recovery_id.to_string());
    summary.insert(PROP_SOURCE_SNAPSHOT.to_string(), snap.snapshot_id.to_string());
    summary.insert(PROP_SOURCE_METADATA.to_string(), snap.metadata_location.clone());
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
    Ok((t, false))
}
