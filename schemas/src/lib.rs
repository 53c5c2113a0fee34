//! The formats tidemark writes and reads, as Rust types. Each JSON object that tidemark writes
//! carries `format_version`; the JSON Schema of every type is checked in under `schemas/json/`
//! and a test (`tests/schemas.rs`) fails when the Rust types and the files drift apart.
//!
//! Times are RFC 3339 strings in UTC, digests are `sha256:<64 hex>` strings, positions are the
//! source-assigned journal positions (1-based, contiguous).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod reports;
pub mod route;

pub use reports::*;
pub use route::*;

/// The format version of every object defined here.
pub const FORMAT_VERSION: u32 = 1;

/// One input event of the default orders spec, as a line of NDJSON. Other specs have other
/// columns; `position` and the spec's key, version and delete-flag columns are always required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderEvent {
    /// Optional in input; when present it must be 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    /// Source-assigned journal position: the next event's is this one's plus one.
    pub position: u64,
    pub order_id: String,
    /// Source-assigned version: for one order, a higher version is a newer state.
    pub order_version: i64,
    pub customer_id: String,
    pub status: String,
    /// decimal(18,2) as a string, e.g. "12.50" (a JSON number is accepted too).
    pub amount: String,
    pub currency: String,
    /// A tombstone: the order is deleted as of this version.
    pub is_deleted: bool,
    /// Business time (RFC 3339). Never used to order or include events; positions do that.
    pub event_time: String,
}

/// A column of a table spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ColumnSpec {
    pub name: String,
    /// `string`, `long`, `int`, `double`, `boolean`, `date`, `timestamptz`, or `decimal(P,S)`.
    #[serde(rename = "type")]
    pub data_type: String,
    #[serde(default)]
    pub nullable: bool,
}

/// A keyed table: which column is the key, which the version, which the delete flag, and the
/// payload columns with types. The journal stores its spec in `journal.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    pub format_version: u32,
    /// Default table name (`namespace.table`).
    pub name: String,
    pub key_column: String,
    pub version_column: String,
    pub delete_column: String,
    /// Optional business-time column (its min and max are recorded per batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_time_column: Option<String>,
    /// Every column of the table in order, key, version and delete flag included.
    pub columns: Vec<ColumnSpec>,
}

/// The journal's header, written create-only at `journal.json` by `tidemark journal init`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JournalHeader {
    pub format_version: u32,
    pub journal_id: String,
    pub created_at: String,
    pub spec: TableSpec,
    /// `sha256:` digest of the spec's canonical JSON; every manifest repeats it.
    pub spec_digest: String,
}

/// One accepted batch. Written create-only at `manifests/<sequence:020>.json` after its event
/// object; the batch counts only once this exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format_version: u32,
    pub journal_id: String,
    /// 1 for the first batch, then +1.
    pub sequence: u64,
    /// Digest of the previous manifest's stored bytes; `null` only for sequence 1.
    pub previous_digest: Option<String>,
    pub object_key: String,
    /// The exact version of the event object this batch is.
    pub object_version_id: String,
    /// `sha256:` of the event object's bytes.
    pub object_sha256: String,
    pub object_size: u64,
    pub row_count: u64,
    pub first_position: u64,
    pub last_position: u64,
    pub min_event_time: Option<String>,
    pub max_event_time: Option<String>,
    pub writer_id: String,
    pub spec_digest: String,
    pub written_at: String,
}

/// An operator's resolution of a conflict the journal already holds: of the events with this
/// key and version, only the one at `keep_position` counts; every other is void (ignored by
/// apply, recovery, validation and the append conflict check). Written create-only at
/// `resolutions/<sha256 of key and version>.json`; never replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resolution {
    pub format_version: u32,
    pub journal_id: String,
    /// The key's value as text.
    pub key: String,
    pub version: i64,
    pub keep_position: u64,
    /// The other positions holding this key and version when the resolution was written.
    pub void_positions: Vec<u64>,
    /// Why, in the operator's words.
    pub reason: String,
    pub written_at: String,
}

/// The snapshot summary properties of an applier commit (the applier protocol): what tidemark's
/// applier writes on every commit, and what another engine's applier (a Spark or Flink job) sets
/// as snapshot properties so that `tidemark audit` and `tidemark recover` treat its commits as
/// tidemark's own. Iceberg summary values are strings; positions are decimal integers.
///
/// Rules the audit checks: `tidemark.first-position` is exactly one after the position the
/// parent snapshot holds (its own record or its newest ancestor's), `tidemark.last-position` is
/// at or after it, and `tidemark.journal-id` is the journal's id. Every position of the range is
/// applied by the merge rules in the one commit (one snapshot; a commit made as several snapshots
/// carries the same three values on each). The manifest sequence and digest are optional: with
/// them, the next applier verifies the journal's chain from that manifest instead of from the
/// journal's first one. After the commit, the applier writes a [`Checkpoint`] (optional for
/// the audit; `recover --at-or-before` chooses by checkpoints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApplierSummary {
    #[serde(rename = "tidemark.journal-id")]
    pub journal_id: String,
    /// The first position the commit applied (decimal).
    #[serde(rename = "tidemark.first-position")]
    #[schemars(regex(pattern = r"^[1-9][0-9]*$"))]
    pub first_position: String,
    /// The last position the commit applied: the table holds every position up to it (decimal).
    #[serde(rename = "tidemark.last-position")]
    #[schemars(regex(pattern = r"^[0-9]+$"))]
    pub last_position: String,
    /// The sequence of the manifest that holds the last position (decimal).
    #[serde(
        rename = "tidemark.manifest-sequence",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = r"^[0-9]+$"))]
    pub manifest_sequence: Option<String>,
    /// `sha256:<hex>` of that manifest's bytes.
    #[serde(
        rename = "tidemark.manifest-digest",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub manifest_digest: Option<String>,
    /// Other writers' divergent snapshots this commit's applier accepted (comma-separated ids),
    /// and why.
    #[serde(
        rename = "tidemark.accepted-divergence",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub accepted_divergence: Option<String>,
    #[serde(
        rename = "tidemark.accepted-reason",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub accepted_reason: Option<String>,
}

/// A pipeline checkpoint: the table was committed first, then this was written (create-only) at
/// `checkpoints/<table_uuid>/<position:020>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub format_version: u32,
    pub journal_id: String,
    pub table_uuid: String,
    pub table_name: String,
    pub snapshot_id: i64,
    /// Metadata file of the table right after the commit, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_location: Option<String>,
    /// Highest contiguous journal position contained in the snapshot.
    pub position: u64,
    pub manifest_sequence: u64,
    pub manifest_digest: String,
    pub written_at: String,
}
