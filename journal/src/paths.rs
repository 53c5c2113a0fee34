//! Every key the journal writes, in one place. Sequence numbers and positions are zero-padded to
//! 20 digits so that lexicographic listing order is numeric order.
//!
//! ```text
//! journal.json                                  header: journal id, table spec
//! events/<sequence:020>-<sha256 prefix>.parquet one batch of events (content-addressed suffix)
//! manifests/<sequence:020>.json                 the batch's manifest, create-only
//! checkpoints/<table uuid>/<position:020>.json  pipeline checkpoints, create-only
//! resolutions/<sha256 of key, version>.json     an operator's resolution of a conflict, create-only
//! _probe/<writer>/<nonce>                       capability probes (removed after the probe)
//! ```

pub const HEADER: &str = "journal.json";
pub const EVENTS_PREFIX: &str = "events/";
pub const MANIFESTS_PREFIX: &str = "manifests/";
pub const CHECKPOINTS_PREFIX: &str = "checkpoints/";
pub const PROBE_PREFIX: &str = "_probe/";
pub const RESOLUTIONS_PREFIX: &str = "resolutions/";
/// Audit records (`tidemark audit`): one per table uuid and audited snapshot, create-only.
pub const AUDITS_PREFIX: &str = "audits/";

/// The key of the resolution of `key` at `version`: one per (key, version), whatever the key's
/// characters (the name is a digest of both, so any key text maps to one safe file name).
pub fn resolution_key(key: &str, version: i64) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(key.as_bytes());
    h.update([0u8]);
    h.update(version.to_string().as_bytes());
    format!("{RESOLUTIONS_PREFIX}{}.json", hex::encode(h.finalize()))
}

pub fn manifest_key(sequence: u64) -> String {
    format!("{MANIFESTS_PREFIX}{sequence:020}.json")
}

/// The sequence number of a manifest key, or `None` for any other key.
pub fn parse_manifest_key(key: &str) -> Option<u64> {
    let digits = key.strip_prefix(MANIFESTS_PREFIX)?.strip_suffix(".json")?;
    parse_padded(digits)
}

/// The event object key of a batch: its sequence plus the first 16 hex digits of its sha256, so
/// that a retried identical batch lands on the same key and a different one never does.
pub fn event_key(sequence: u64, sha256_hex: &str) -> String {
    let short = &sha256_hex[..16.min(sha256_hex.len())];
    format!("{EVENTS_PREFIX}{sequence:020}-{short}.parquet")
}

/// The sequence number of an event object key.
pub fn parse_event_key(key: &str) -> Option<u64> {
    let rest = key.strip_prefix(EVENTS_PREFIX)?.strip_suffix(".parquet")?;
    let (digits, _) = rest.split_once('-')?;
    parse_padded(digits)
}

pub fn checkpoints_prefix(table_uuid: &str) -> String {
    format!("{CHECKPOINTS_PREFIX}{table_uuid}/")
}

pub fn checkpoint_key(table_uuid: &str, position: u64) -> String {
    format!("{CHECKPOINTS_PREFIX}{table_uuid}/{position:020}.json")
}

/// `(table uuid, position)` of a checkpoint key.
pub fn parse_checkpoint_key(key: &str) -> Option<(String, u64)> {
    let rest = key.strip_prefix(CHECKPOINTS_PREFIX)?;
    let (uuid, file) = rest.split_once('/')?;
    let position = parse_padded(file.strip_suffix(".json")?)?;
    Some((uuid.to_string(), position))
}

pub fn audits_prefix(table_uuid: &str) -> String {
    format!("{AUDITS_PREFIX}{table_uuid}/")
}

/// The audit record of one snapshot of a table (snapshot ids may be negative).
pub fn audit_key(table_uuid: &str, snapshot_id: i64) -> String {
    format!("{AUDITS_PREFIX}{table_uuid}/{snapshot_id}.json")
}

/// `(table uuid, snapshot id)` of an audit record key.
pub fn parse_audit_key(key: &str) -> Option<(String, i64)> {
    let rest = key.strip_prefix(AUDITS_PREFIX)?;
    let (uuid, file) = rest.split_once('/')?;
    Some((uuid.to_string(), file.strip_suffix(".json")?.parse().ok()?))
}

pub fn probe_key(writer_id: &str, nonce: &str) -> String {
    format!("{PROBE_PREFIX}{writer_id}/{nonce}")
}

fn parse_padded(digits: &str) -> Option<u64> {
    if digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_numerically() {
        assert_eq!(parse_manifest_key(&manifest_key(42)), Some(42));
        assert!(manifest_key(9) < manifest_key(10));
        let hex = "0123456789abcdef0123";
        assert_eq!(
            event_key(7, hex),
            "events/00000000000000000007-0123456789abcdef.parquet"
        );
        assert_eq!(parse_event_key(&event_key(7, hex)), Some(7));
        let key = checkpoint_key("u-1", 1000);
        assert_eq!(parse_checkpoint_key(&key), Some(("u-1".to_string(), 1000)));
        assert!(key.starts_with(&checkpoints_prefix("u-1")));
        let key = audit_key("u-1", -42);
        assert_eq!(parse_audit_key(&key), Some(("u-1".to_string(), -42)));
        assert!(key.starts_with(&audits_prefix("u-1")));
    }

    #[test]
    fn foreign_keys_do_not_parse() {
        assert_eq!(parse_manifest_key("manifests/12.json"), None);
        assert_eq!(parse_manifest_key("manifests/0000000000000000001x.json"), None);
        assert_eq!(parse_event_key("events/readme.txt"), None);
        assert_eq!(parse_checkpoint_key("checkpoints/u/abc.json"), None);
    }
}
