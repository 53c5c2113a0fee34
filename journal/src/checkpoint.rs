//! Checkpoints: create-only records that a table snapshot contains every journal position up to
//! `position`.
//!
//! **The rule: commit the table first, then write the checkpoint.** A crash in between leaves a
//! table that is ahead of its newest checkpoint; the applier detects this from the snapshot
//! summary (which records the applied range and manifest digest) and writes the missing
//! checkpoint instead of applying again. The reverse order could leave a checkpoint that names a
//! snapshot that does not exist, which recovery would then trust.

use bytes::Bytes;
use tidemark_schemas::Checkpoint;

use crate::error::{JournalError, Result};
use crate::paths;
use crate::store::{ObjectStore, PutMode, list_all, put_resolved};

/// Writes a checkpoint create-only. Writing the same checkpoint again (same table, position and
/// snapshot) is a no-op that returns the stored one; a different one at the same key is refused.
pub async fn write(store: &dyn ObjectStore, checkpoint: &Checkpoint) -> Result<Checkpoint> {
    let key = paths::checkpoint_key(&checkpoint.table_uuid, checkpoint.position);
    let body = serde_json::to_vec_pretty(checkpoint).expect("checkpoint serializes");
    match put_resolved(store, &key, Bytes::from(body), PutMode::Create).await {
        Ok(_) => Ok(checkpoint.clone()),
        Err(e) if e.is_conflict() => {
            let existing = read(store, &key).await?;
            let same = existing.snapshot_id == checkpoint.snapshot_id
                && existing.manifest_digest == checkpoint.manifest_digest
                && existing.journal_id == checkpoint.journal_id;
            if same {
                Ok(existing)
            } else {
                Err(JournalError::CheckpointConflict {
                    key,
                    existing_snapshot: existing.snapshot_id,
                    new_snapshot: checkpoint.snapshot_id,
                })
            }
        }
        Err(e) => Err(e.into()),
    }
}

async fn read(store: &dyn ObjectStore, key: &str) -> Result<Checkpoint> {
    let got = store.get(key, None).await?;
    serde_json::from_slice(&got.body).map_err(|e| JournalError::Format {
        context: format!("checkpoint {key}"),
        message: e.to_string(),
    })
}

/// Which checkpoints to consider.
#[derive(Debug, Clone, Default)]
pub struct CheckpointFilter {
    pub table_uuid: Option<String>,
    pub table_name: Option<String>,
}

/// Every checkpoint matching the filter, ascending by position (then table).
pub async fn list(store: &dyn ObjectStore, filter: &CheckpointFilter) -> Result<Vec<Checkpoint>> {
    let prefix = match &filter.table_uuid {
        Some(uuid) => paths::checkpoints_prefix(uuid),
        None => paths::CHECKPOINTS_PREFIX.to_string(),
    };
    let mut out = Vec::new();
    for obj in list_all(store, &prefix).await? {
        let Some((uuid, position)) = paths::parse_checkpoint_key(&obj.key) else {
            continue;
        };
        let cp = read(store, &obj.key).await?;
        if cp.table_uuid != uuid || cp.position != position {
            return Err(JournalError::Format {
                context: format!("checkpoint {}", obj.key),
                message: format!(
                    "its content (table {}, position {}) does not match its key",
                    cp.table_uuid, cp.position
                ),
            });
        }
        if filter.table_name.as_ref().is_some_and(|n| n != &cp.table_name) {
            continue;
        }
        out.push(cp);
    }
    out.sort_by(|a, b| a.position.cmp(&b.position).then(a.table_uuid.cmp(&b.table_uuid)));
    Ok(out)
}

/// The newest checkpoint at or before `position` (any position when `None`).
pub async fn newest_at_or_before(
    store: &dyn ObjectStore,
    filter: &CheckpointFilter,
    position: Option<u64>,
) -> Result<Option<Checkpoint>> {
    Ok(list(store, filter)
        .await?
        .into_iter()
        .rev()
        .find(|c| position.is_none_or(|p| c.position <= p)))
}
