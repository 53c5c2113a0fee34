//! What a recovery is asked to do: [`RecoverOptions`], and in it what the recovery trusts
//! ([`TrustOptions`], the audit's records: [`AuditRecords`]).

use std::sync::Arc;

use tidemark_journal::store::ObjectStore;

use super::snapshot::{SnapshotChoice, SnapshotSource};
use super::validate;

#[derive(Debug, Clone)]
pub struct RecoverOptions {
    pub recovery_id: String,
    pub source: SnapshotSource,
    pub choice: SnapshotChoice,
    /// The journal boundary; default: the end of the verified range when the job starts.
    pub to: Option<u64>,
    /// The new table, `namespace.name`.
    pub into: String,
    /// The memory bound: rows per validation partition, table rows per replay merge chunk and
    /// events the replay holds in memory (more are spilled and merged in key ranges of this
    /// many); default [`validate::PARTITION_ROWS`] for the validation and the replay's events,
    /// [`crate::apply::MERGE_CHUNK_ROWS`] for the merge chunks.
    pub partition_rows: Option<u64>,
    /// How the validation splits the keys beyond one partition (`--validation-split`): by key
    /// range when the manifests' key bounds allow it (the default), or always by key hash.
    pub validation_split: validate::Split,
    /// The audit's records, an accepted divergence, and the journal reference.
    pub trust: TrustOptions,
}

impl RecoverOptions {
    /// A recovery named `recovery_id` of `source`'s snapshot `choice` into the new table `into`,
    /// to the end of the verified range, with the default memory bound, validation split and
    /// trust.
    pub fn new(
        recovery_id: impl Into<String>,
        source: SnapshotSource,
        choice: SnapshotChoice,
        into: impl Into<String>,
    ) -> RecoverOptions {
        RecoverOptions {
            recovery_id: recovery_id.into(),
            source,
            choice,
            to: None,
            into: into.into(),
            partition_rows: None,
            validation_split: Default::default(),
            trust: Default::default(),
        }
    }
}

/// Where a recovery's audit keeps its records.
#[derive(Debug, Clone, Default)]
pub enum AuditRecords {
    /// Under the journal (`audits/`), as `tidemark audit` does.
    #[default]
    Journal,
    /// In another store (a drill's history: nothing of production is written).
    At(Arc<dyn ObjectStore>),
    /// None read or written.
    None,
}

/// What a recovery trusts, and how it proves more than the replay.
#[derive(Debug, Clone, Default)]
pub struct TrustOptions {
    pub records: AuditRecords,
    /// Start from an untrusted snapshot anyway, for this reason (recorded on the seed).
    pub accept_divergence: Option<String>,
    /// Also validate the recovered table against the fold of the whole journal from position 1
    /// (no snapshot involved): the proof of the seed, not only of the replay.
    pub reference_journal: bool,
}
