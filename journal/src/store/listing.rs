//! Whole-prefix helpers over a store's pages: every current object under a prefix, and deleting
//! them.

use super::error::Result;
use super::object::{ObjectMeta, ObjectStore};

/// Every current object under `prefix`, all pages.
pub async fn list_all(store: &dyn ObjectStore, prefix: &str) -> Result<Vec<ObjectMeta>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = store.list_page(prefix, token.as_deref(), 1000).await?;
        out.extend(page.objects);
        match page.next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// Deletes every current object under `prefix` (a delete marker on a versioned store); how many.
pub async fn delete_all(store: &dyn ObjectStore, prefix: &str) -> Result<usize> {
    let objects = list_all(store, prefix).await?;
    for o in &objects {
        store.delete(&o.key).await?;
    }
    Ok(objects.len())
}
