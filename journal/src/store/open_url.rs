//! Opening a store from its URL (a folder, `file://` or `s3://bucket/prefix`), and the S3
//! request counts of the process (zero in a build without S3).

use std::sync::Arc;

use super::error::{Result, StoreError};
use super::local;
use super::object::ObjectStore;
#[cfg(feature = "s3")]
use super::s3;

/// Opens a store from a URL: a plain path or `file://` URL (local folder) or `s3://bucket/prefix`.
pub async fn open(url: &str) -> Result<Arc<dyn ObjectStore>> {
    if let Some(rest) = url.strip_prefix("s3://") {
        open_s3(url, rest).await
    } else if url.contains("://") && !url.starts_with("file://") {
        Err(StoreError::InvalidUrl {
            url: url.to_string(),
            reason: "supported schemes are s3:// and file:// (or a plain path)".into(),
        })
    } else {
        let path = url.strip_prefix("file://").unwrap_or(url);
        Ok(Arc::new(local::LocalStore::open(path)?))
    }
}

#[cfg(feature = "s3")]
async fn open_s3(_url: &str, rest: &str) -> Result<Arc<dyn ObjectStore>> {
    Ok(Arc::new(s3::S3Store::from_url(rest, s3::S3Options::from_env()).await?))
}

#[cfg(not(feature = "s3"))]
async fn open_s3(url: &str, _rest: &str) -> Result<Arc<dyn ObjectStore>> {
    Err(StoreError::NotBuilt { url: url.to_string() })
}

/// The S3 requests tidemark's own S3 client made in this process (zero in a build without S3).
pub fn s3_request_stats() -> tidemark_schemas::RequestCounts {
    #[cfg(feature = "s3")]
    return s3::request_stats();
    #[cfg(not(feature = "s3"))]
    tidemark_schemas::RequestCounts::default()
}

/// [`open`], creating a local folder first when it does not exist (an S3 bucket is never
/// created: it must exist, with versioning, before tidemark writes to it).
pub async fn open_or_create(url: &str) -> Result<Arc<dyn ObjectStore>> {
    if url.starts_with("s3://") || (url.contains("://") && !url.starts_with("file://")) {
        return open(url).await;
    }
    let path = url.strip_prefix("file://").unwrap_or(url);
    Ok(Arc::new(local::LocalStore::create(path)?))
}
