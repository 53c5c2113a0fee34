//! What the follower's cycle and its publish step share (and `replica resync` with them): a
//! table step's failure ([`Step`]), the names of the follower's rewrites ([`rewrite_name`]), a
//! metadata file's current snapshot, and the DR namespace, made when missing.

use serde_json::Value;

use crate::catalog::CatalogHandle;
use crate::dr::lease::LeaseError;
use crate::dr::warehouse::file_name;

pub(in crate::dr) enum Step {
    Lease(LeaseError),
    Other(String),
}

impl<T: std::fmt::Display> From<T> for Step {
    fn from(e: T) -> Self {
        Step::Other(e.to_string())
    }
}

pub(in crate::dr) fn snapshot_id_of(json: &Value) -> Option<i64> {
    json.get("current-snapshot-id")
        .and_then(Value::as_i64)
        .filter(|id| *id >= 0)
}

/// The name the follower gives the rewrite of metadata file `source` (`NNNNN-<uuid>.metadata.json`,
/// as iceberg-rust requires of a table it commits to): the next version number and a uuid derived
/// from the source's name (RFC 9562 version 8), so the follower recognises its own rewrites
/// without any state, and a rewrite interrupted before its registration is found and reused.
pub(crate) fn rewrite_name(source: &str) -> Option<String> {
    use sha2::Digest;
    let name = file_name(source);
    let version: u64 = name.split_once('-')?.0.parse().ok()?;
    let digest = sha2::Sha256::digest(format!("tidemark-follower-rewrite:{name}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Some(format!(
        "{:05}-{}.metadata.json",
        version + 1,
        uuid::Uuid::from_bytes(bytes)
    ))
}

pub(in crate::dr) async fn ensure_namespace(handle: &CatalogHandle, ident: &iceberg::TableIdent) -> Result<(), String> {
    let ns = ident.namespace();
    let exists = handle.catalog().namespace_exists(ns).await.map_err(|e| e.to_string())?;
    if !exists {
        crate::table::create_namespace(handle, ns)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The folder of a metadata location.
pub(in crate::dr) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}
