//! Reports printed with `--json`, so that automation can read them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `tidemark journal verify --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyReport {
    pub format_version: u32,
    pub journal: String,
    pub ok: bool,
    /// Verified contiguous positions `[first, last]`; `null` when nothing verified.
    pub verified_first_position: Option<u64>,
    pub verified_last_position: Option<u64>,
    pub verified_manifests: u64,
    pub verified_events: u64,
    pub verified_bytes: u64,
    /// Digest of the last verified manifest (the chain head up to the boundary).
    pub head_digest: Option<String>,
    pub head_sequence: Option<u64>,
    /// The requested boundary (`--to`), if any.
    pub to_position: Option<u64>,
    /// The first break found; `null` when the chain is sound.
    pub first_break: Option<ChainBreak>,
    /// Event objects no manifest accepts (left by a crash between the two writes).
    pub unaccepted_objects: Vec<String>,
    pub elapsed_ms: u64,
    /// S3 requests the command made, retried and failed (absent when it made none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<RequestCounts>,
}

/// The first broken link of the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChainBreak {
    /// `gap`, `fork`, `rewritten`, `digest_mismatch`, `checksum_mismatch`, `size_mismatch`,
    /// `count_mismatch`, `position_mismatch`, `missing_object`, `malformed`, `boundary`.
    pub kind: String,
    pub sequence: Option<u64>,
    pub key: String,
    pub version_id: Option<String>,
    pub message: String,
}

/// `tidemark journal status --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusReport {
    pub format_version: u32,
    pub journal: String,
    pub journal_id: String,
    pub head_sequence: Option<u64>,
    pub last_position: Option<u64>,
    pub batches: u64,
    pub events: u64,
    pub bytes: u64,
    pub unaccepted_objects: Vec<String>,
    /// S3 requests the command made, retried and failed (absent when it made none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<RequestCounts>,
}

/// `tidemark journal append --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendReport {
    pub format_version: u32,
    pub journal: String,
    pub batches: u64,
    pub events: u64,
    pub bytes: u64,
    pub first_position: Option<u64>,
    pub last_position: Option<u64>,
    pub head_sequence: Option<u64>,
    pub unaccepted_objects: Vec<String>,
    pub elapsed_ms: u64,
    /// Events of the input at positions the journal already held, identical to the stored ones
    /// (a re-send): not appended again.
    #[serde(default)]
    pub already_present: u64,
    /// S3 requests the command made, retried and failed (absent when it made none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<RequestCounts>,
}

/// `tidemark store check --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreCheckReport {
    pub format_version: u32,
    pub store: String,
    /// True when every required capability passed.
    pub ok: bool,
    pub capabilities: Vec<Capability>,
    /// S3 requests the command made, retried and failed (absent when it made none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3_requests: Option<RequestCounts>,
}

/// One probed capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    pub name: String,
    pub required: bool,
    pub ok: bool,
    pub detail: String,
}

/// The S3 requests of a command (tidemark's own S3 client's and the table files'): operations,
/// attempts retried after a transient failure (5xx, throttling, timeouts, resets), and operations
/// that failed (after their last attempt; a table-file call, when it returned an error).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestCounts {
    pub requests: u64,
    pub retried: u64,
    pub failed: u64,
}
