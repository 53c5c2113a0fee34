//! Audit records: one per table uuid and audited snapshot (`audits/<table uuid>/<snapshot id>.json`,
//! [`tidemark_journal::paths::audit_key`]), written create-only, each with the snapshot's verdict
//! and the state of the audit after it ([`super::AuditState`]), so that the next audit starts
//! after the newest recorded snapshot of the ancestry. `tidemark audit` keeps them under the
//! journal; a drill keeps them in its own history, never under a production journal.
//!
//! A record is never replaced: writing one that exists with the same verdict and state is a
//! no-op; one that says otherwise is refused (the table's metadata changed under the same
//! snapshot id, which Iceberg never does).

use std::collections::HashSet;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tidemark_journal::paths;
use tidemark_journal::store::{ObjectStore, PutMode, list_all, put_resolved};

use super::error::AuditError;
use super::report::{AuditState, SnapshotAudit};

/// Version of the audit record.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditRecord {
    pub format_version: u32,
    pub table_uuid: String,
    pub journal_id: String,
    /// The metadata file the snapshot was audited in, and the sha256 of its bytes.
    pub metadata_location: String,
    pub metadata_digest: String,
    pub entry: SnapshotAudit,
    pub state: AuditState,
}

/// The snapshot ids of `table_uuid` that have a record.
pub async fn list(store: &dyn ObjectStore, table_uuid: &str) -> Result<HashSet<i64>, AuditError> {
    Ok(list_all(store, &paths::audits_prefix(table_uuid))
        .await?
        .iter()
        .filter_map(|o| paths::parse_audit_key(&o.key))
        .filter(|(uuid, _)| uuid == table_uuid)
        .map(|(_, id)| id)
        .collect())
}

pub async fn read(store: &dyn ObjectStore, table_uuid: &str, snapshot_id: i64) -> Result<AuditRecord, AuditError> {
    let key = paths::audit_key(table_uuid, snapshot_id);
    let got = store.get(&key, None).await?;
    let rec: AuditRecord = serde_json::from_slice(&got.body).map_err(|e| AuditError::BadRecord {
        key: format!("{}/{key}", store.url().trim_end_matches('/')),
        reason: e.to_string(),
    })?;
    if rec.format_version != FORMAT_VERSION || rec.table_uuid != table_uuid || rec.entry.snapshot_id != snapshot_id {
        return Err(AuditError::BadRecord {
            key: format!("{}/{key}", store.url().trim_end_matches('/')),
            reason: format!(
                "it records format {} table {} snapshot {}",
                rec.format_version, rec.table_uuid, rec.entry.snapshot_id
            ),
        });
    }
    Ok(rec)
}

/// Writes `rec` create-only; `false` when the same record was already there.
pub async fn write(store: &dyn ObjectStore, rec: &AuditRecord) -> Result<bool, AuditError> {
    let key = paths::audit_key(&rec.table_uuid, rec.entry.snapshot_id);
    let body = Bytes::from(serde_json::to_vec_pretty(rec).expect("an audit record serializes"));
    match put_resolved(store, &key, body, PutMode::Create).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_conflict() => {
            let existing = read(store, &rec.table_uuid, rec.entry.snapshot_id).await?;
            if existing.entry.verdict == rec.entry.verdict && existing.state == rec.state {
                Ok(false)
            } else {
                Err(AuditError::BadRecord {
                    key: format!("{}/{key}", store.url().trim_end_matches('/')),
                    reason: format!(
                        "it records verdict {:?}, this audit found {:?} for the same snapshot",
                        existing.entry.verdict, rec.entry.verdict
                    ),
                })
            }
        }
        Err(e) => Err(e.into()),
    }
}
