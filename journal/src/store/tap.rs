//! A wrapper around any [`ObjectStore`] through which a test steps in before a `put` or a
//! `get` is forwarded: count reads, let another writer in between a read and a write, lose a
//! reply. The [`Tap`] says what to do on those two calls; [`Tapped`] forwards every call,
//! those two through the tap. (Faults by rule are [`faulty`](super::faulty)'s.)

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, PutResult, Result, VersionEntry};

/// What a [`Tapped`] store does on a `put` and a `get`; the defaults forward them unchanged.
#[async_trait]
pub trait Tap: Send + Sync {
    /// A `put` to `inner` (which the tap may also write to, or not forward at all).
    async fn put(&self, inner: &Arc<dyn ObjectStore>, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        inner.put(key, body, mode).await
    }

    /// Told of a `get` before it is forwarded.
    fn get(&self, _key: &str, _version_id: Option<&str>) {}
}

/// A tap that counts the `get`s of each key.
#[derive(Debug, Default)]
pub struct GetCounts(Mutex<BTreeMap<String, u32>>);

impl GetCounts {
    /// The counts so far, by key.
    pub fn counts(&self) -> BTreeMap<String, u32> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Forgets the counts so far.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Tap for GetCounts {
    fn get(&self, key: &str, _version_id: Option<&str>) {
        *self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_string())
            .or_default() += 1;
    }
}

/// `inner` with `tap` stepping in; see the module documentation.
pub struct Tapped<T> {
    inner: Arc<dyn ObjectStore>,
    tap: T,
}

impl<T: Tap> Tapped<T> {
    pub fn new(inner: Arc<dyn ObjectStore>, tap: T) -> Self {
        Tapped { inner, tap }
    }

    /// The tap (its counters).
    pub fn tap(&self) -> &T {
        &self.tap
    }
}

impl<T> fmt::Debug for Tapped<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tapped").field("inner", &self.inner).finish()
    }
}

#[async_trait]
impl<T: Tap> ObjectStore for Tapped<T> {
    fn url(&self) -> String {
        self.inner.url()
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        self.tap.put(&self.inner, key, body, mode).await
    }

    async fn get(&self, key: &str, version_id: Option<&str>) -> Result<GetResult> {
        self.tap.get(key, version_id);
        self.inner.get(key, version_id).await
    }

    async fn head(&self, key: &str, version_id: Option<&str>) -> Result<ObjectMeta> {
        self.inner.head(key, version_id).await
    }

    async fn list_page(&self, prefix: &str, token: Option<&str>, max: usize) -> Result<ListPage> {
        self.inner.list_page(prefix, token, max).await
    }

    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>> {
        self.inner.list_versions(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key).await
    }

    async fn delete_version(&self, key: &str, version_id: &str) -> Result<()> {
        self.inner.delete_version(key, version_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance;
    use crate::store::local::LocalStore;

    /// A tapped store keeps the store contract (the conformance suite every backend runs), and
    /// the tap is told of every get.
    #[tokio::test]
    async fn a_tapped_store_keeps_the_contract_and_counts_the_gets() {
        let dir = tempfile::tempdir().unwrap();
        let inner: Arc<dyn ObjectStore> = Arc::new(LocalStore::open(dir.path()).unwrap());
        let store = Arc::new(Tapped::new(inner, GetCounts::default()));
        conformance::run_all(store.clone()).await;
        assert!(store.tap().counts().values().sum::<u32>() > 0);
        store.tap().clear();
        store
            .put("k", Bytes::from_static(b"x"), PutMode::Overwrite)
            .await
            .unwrap();
        store.get("k", None).await.unwrap();
        store.get("k", None).await.unwrap();
        assert_eq!(store.tap().counts(), BTreeMap::from([("k".to_string(), 2)]));
    }
}
