//! `replica status --audit TABLE=JOURNAL` (issue 30, item 6): the DR copy a follower registered
//! for a table, audited against the table's journal ([`crate::audit`]), so that a bad write the
//! replication already copied shows where people look (the status, its exit code 12 and the
//! `tidemark_replica_table_divergence` gauge) before anyone fails over to it.
//!
//! The copy audited is the follower's verified version (the metadata file the DR catalog holds),
//! read under the replica's warehouse through the follower's prefix map. The audit's records go
//! under the follower's state location (`audits/…`), so that the next status audits only the
//! snapshots the replication added since.

use std::sync::Arc;

use serde::Serialize;
use tidemark_journal::Journal;
use tidemark_journal::store::ObjectStore;

use super::follow_state::{FollowerState, TableState};
use crate::audit::{self, AuditOptions, Divergence, TrustedPoint};
use crate::table::source::{PrefixMap, SnapshotSource};

/// The audit of one table's DR copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ReplicaAudit {
    /// The journal the copy was audited against.
    pub journal: String,
    /// The metadata file audited (the follower's verified version); `None` when it holds none.
    pub metadata_location: Option<String>,
    /// `trusted` (no open divergence), `divergence`, or `not_audited` (see `error`).
    pub verdict: String,
    /// Snapshots this audit read (0 when it resumed at the newest).
    pub audited: u64,
    /// The newest recorded snapshot this audit resumed after, if any.
    pub resumed_from: Option<i64>,
    pub first_divergence: Option<Divergence>,
    /// The newest trusted snapshot of the copy: where a recovery from the DR side would start.
    pub trusted: Option<TrustedPoint>,
    /// Why the copy could not be audited (a journal or file that cannot be read).
    pub error: Option<String>,
}

impl ReplicaAudit {
    pub const TRUSTED: &'static str = "trusted";
    pub const DIVERGENCE: &'static str = "divergence";
    pub const NOT_AUDITED: &'static str = "not_audited";

    fn not_audited(journal: &Journal, metadata_location: Option<String>, error: String) -> Self {
        ReplicaAudit {
            journal: journal.url(),
            metadata_location,
            verdict: Self::NOT_AUDITED.into(),
            audited: 0,
            resumed_from: None,
            first_divergence: None,
            trusted: None,
            error: Some(error),
        }
    }
}

/// The copy of `table` the follower verified, as an audit reads it: the metadata file under
/// the replica's warehouse, the environment's S3 settings, the follower's prefix map.
fn copy_of(state: &FollowerState, table: &TableState) -> Result<SnapshotSource, String> {
    let key = table
        .verified_metadata
        .as_deref()
        .ok_or_else(|| format!("the follower has registered no version of {} yet", table.table))?;
    let base = super::rebuild::warehouse_base(&state.warehouse).map_err(|e| e.to_string())?;
    let prefix_map = match &state.prefix_map {
        Some(m) => Some(PrefixMap::parse(m).ok_or_else(|| format!("the follower's prefix map {m:?} is not FROM=TO"))?),
        None => None,
    };
    Ok(SnapshotSource {
        metadata_location: format!("{}/{key}", base.trim_end_matches('/')),
        file_io_props: crate::catalog::s3_props(|k| std::env::var(k).ok()),
        prefix_map,
    })
}

/// Audits the DR copy of `table` against `journal`, records under `records`.
pub async fn audit_copy(
    state: &FollowerState,
    table: &TableState,
    journal: &Journal,
    records: Arc<dyn ObjectStore>,
) -> ReplicaAudit {
    let source = match copy_of(state, table) {
        Ok(s) => s,
        Err(e) => return ReplicaAudit::not_audited(journal, None, e),
    };
    let opts = AuditOptions {
        records: Some(records),
        ..Default::default()
    };
    match audit::audit(journal, &source, &opts, &mut |_| {}).await {
        Ok(r) => ReplicaAudit {
            journal: journal.url(),
            metadata_location: Some(source.metadata_location),
            verdict: if r.first_divergence.is_some() {
                ReplicaAudit::DIVERGENCE
            } else {
                ReplicaAudit::TRUSTED
            }
            .into(),
            audited: r.audited,
            resumed_from: r.resumed_from,
            first_divergence: r.first_divergence,
            trusted: r.trusted,
            error: None,
        },
        Err(e) => ReplicaAudit::not_audited(journal, Some(source.metadata_location), format!("{e:#}")),
    }
}
