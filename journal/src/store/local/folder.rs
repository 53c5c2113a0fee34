//! [`LocalStore`]: a folder as a versioned object store (see the [`local`](super) documentation):
//! the version folder of each key, the per-key `flock` of conditional writes, the current version
//! hard-linked into place, and the contract's operations on them.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;

use super::files::{
    DELETE_SUFFIX, META_DIR, NULL_VERSION, absolute, decode_key, encode_key, is_version_id, mtime, plain_meta,
    tmp_path, validate_key, version_etag, write_atomic,
};
use crate::store::error::{Result, StoreError};
use crate::store::object::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, PutResult, VersionEntry};

/// A folder used as a versioned object store.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// Opens an existing folder; a missing folder is [`StoreError::NoSuchStore`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let root = path.as_ref().to_path_buf();
        match fs::metadata(&root) {
            Ok(m) if m.is_dir() => Ok(LocalStore { root: absolute(&root) }),
            Ok(_) => Err(StoreError::NoSuchStore {
                store: root.display().to_string(),
                detail: "not a folder".into(),
            }),
            Err(e) => Err(StoreError::NoSuchStore {
                store: root.display().to_string(),
                detail: e.to_string(),
            }),
        }
    }

    /// Creates the folder (and parents) if needed, then opens it.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        fs::create_dir_all(path.as_ref()).map_err(|e| StoreError::Io {
            store: path.as_ref().display().to_string(),
            key: String::new(),
            source: e,
        })?;
        Self::open(path)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn io(&self, key: &str) -> impl FnOnce(io::Error) -> StoreError + '_ {
        let key = key.to_string();
        move |source| StoreError::Io {
            store: self.url(),
            key,
            source,
        }
    }

    fn not_found(&self, key: &str, version_id: Option<&str>) -> StoreError {
        StoreError::NotFound {
            store: self.url(),
            key: key.to_string(),
            version_id: version_id.map(str::to_string),
        }
    }

    fn object_path(&self, key: &str) -> Result<PathBuf> {
        validate_key(key).map_err(|reason| StoreError::InvalidUrl {
            url: key.to_string(),
            reason,
        })?;
        Ok(self.root.join(key))
    }

    fn versions_dir(&self, key: &str) -> PathBuf {
        self.root.join(META_DIR).join("versions").join(encode_key(key))
    }

    /// Versions of one key, newest first: (id, is_delete_marker, path).
    fn read_versions(&self, key: &str) -> Result<Vec<(String, bool, PathBuf)>> {
        let dir = self.versions_dir(key);
        let mut out = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(self.io(key)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(self.io(key))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if let Some(id) = name.strip_suffix(DELETE_SUFFIX) {
                if is_version_id(id) {
                    out.push((id.to_string(), true, entry.path()));
                }
            } else if is_version_id(&name) {
                out.push((name, false, entry.path()));
            }
        }
        out.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(out)
    }

    /// The current state of a key: versioned (newest entry) or a plain file with no history.
    fn current(&self, key: &str) -> Result<Option<(ObjectMeta, PathBuf)>> {
        let versions = self.read_versions(key)?;
        if let Some((id, deleted, path)) = versions.into_iter().next() {
            if deleted {
                return Ok(None);
            }
            let meta = self.meta_of(key, &id, &path)?;
            return Ok(Some((meta, path)));
        }
        let path = self.object_path(key)?;
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Some((plain_meta(key, &path, &m).map_err(self.io(key))?, path))),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(key)(e)),
        }
    }

    fn meta_of(&self, key: &str, id: &str, path: &Path) -> Result<ObjectMeta> {
        let m = fs::metadata(path).map_err(self.io(key))?;
        Ok(ObjectMeta {
            key: key.to_string(),
            size: m.len(),
            etag: version_etag(id),
            version_id: Some(id.to_string()),
            last_modified: mtime(&m),
        })
    }

    fn find_version(&self, key: &str, version_id: &str) -> Result<(ObjectMeta, PathBuf)> {
        if version_id == NULL_VERSION && self.read_versions(key)?.is_empty() {
            return self.current(key)?.ok_or_else(|| self.not_found(key, Some(version_id)));
        }
        if !is_version_id(version_id) {
            return Err(self.not_found(key, Some(version_id)));
        }
        let path = self.versions_dir(key).join(version_id);
        match fs::metadata(&path) {
            Ok(_) => Ok((self.meta_of(key, version_id, &path)?, path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(self.not_found(key, Some(version_id))),
            Err(e) => Err(self.io(key)(e)),
        }
    }

    /// Runs `f` holding the key's exclusive lock (between processes too).
    fn with_lock<T>(&self, key: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let dir = self.versions_dir(key);
        fs::create_dir_all(&dir).map_err(self.io(key))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".lock"))
            .map_err(self.io(key))?;
        lock.lock().map_err(self.io(key))?;
        let result = f();
        drop(lock); // closing the file releases the lock
        result
    }

    /// Allocates the key's next version id (ids are never reused, even after `delete_version`).
    fn next_version_id(&self, key: &str) -> Result<String> {
        let counter = self.versions_dir(key).join(".next");
        let last: u64 = match fs::read_to_string(&counter) {
            Ok(s) => s.trim().parse().unwrap_or(0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(self.io(key)(e)),
        };
        let highest = self
            .read_versions(key)?
            .first()
            .and_then(|v| v.0.parse::<u64>().ok())
            .unwrap_or(0);
        let next = last.max(highest) + 1;
        write_atomic(&counter, next.to_string().as_bytes()).map_err(self.io(key))?;
        Ok(format!("{next:020}"))
    }

    /// Makes `<root>/<key>` match the newest version (link it, or remove it after a delete).
    fn sync_plain(&self, key: &str) -> Result<()> {
        let path = self.object_path(key)?;
        match self.read_versions(key)?.into_iter().next() {
            Some((id, false, version_path)) => {
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent).map_err(self.io(key))?;
                }
                let tmp = tmp_path(&path, &id);
                let _ = fs::remove_file(&tmp);
                fs::hard_link(&version_path, &tmp).map_err(self.io(key))?;
                fs::rename(&tmp, &path).map_err(self.io(key))?;
            }
            _ => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(self.io(key)(e)),
            },
        }
        Ok(())
    }

    fn put_blocking(&self, key: &str, body: &[u8], mode: &PutMode) -> Result<PutResult> {
        self.object_path(key)?;
        self.with_lock(key, || {
            let current = self.current(key)?;
            match (mode, &current) {
                (PutMode::Create, Some((meta, _))) => {
                    return Err(StoreError::Conflict {
                        store: self.url(),
                        key: key.to_string(),
                        reason: format!(
                            "create-only (If-None-Match: *) but version {} exists",
                            meta.version_id.as_deref().unwrap_or(NULL_VERSION)
                        ),
                    });
                }
                (PutMode::Update { etag }, Some((meta, _))) if &meta.etag != etag => {
                    return Err(StoreError::Conflict {
                        store: self.url(),
                        key: key.to_string(),
                        reason: format!("If-Match {etag} but the current ETag is {}", meta.etag),
                    });
                }
                (PutMode::Update { etag }, None) => {
                    return Err(StoreError::Conflict {
                        store: self.url(),
                        key: key.to_string(),
                        reason: format!("If-Match {etag} but the object does not exist"),
                    });
                }
                _ => {}
            }
            let id = self.next_version_id(key)?;
            let version_path = self.versions_dir(key).join(&id);
            write_atomic(&version_path, body).map_err(self.io(key))?;
            self.sync_plain(key)?;
            Ok(PutResult {
                etag: version_etag(&id),
                version_id: Some(id),
            })
        })
    }

    fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        // Walk only the part of the tree the prefix can reach.
        let start_dir = match prefix.rfind('/') {
            Some(i) => self.root.join(&prefix[..i]),
            None => self.root.clone(),
        };
        let mut stack = vec![start_dir];
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::NotADirectory => continue,
                Err(e) => return Err(self.io(prefix)(e)),
            };
            for entry in entries {
                let entry = entry.map_err(self.io(prefix))?;
                let path = entry.path();
                let rel = match path.strip_prefix(&self.root) {
                    Ok(r) => r.to_string_lossy().to_string(),
                    Err(_) => continue,
                };
                // Bookkeeping at any depth (a store opened on a subfolder keeps its own there)
                // is never an object: no key may have a `.tidemark` segment.
                if entry.file_name() == META_DIR || rel.contains(".tidemark-tmp-") {
                    continue;
                }
                let ft = entry.file_type().map_err(self.io(&rel))?;
                if ft.is_dir() {
                    let as_prefix = format!("{rel}/");
                    if as_prefix.starts_with(prefix) || prefix.starts_with(&as_prefix) {
                        stack.push(path);
                    }
                } else if ft.is_file() && rel.starts_with(prefix) {
                    keys.push(rel);
                }
            }
        }
        // Keys whose newest version exists but whose plain file is missing (crash before linking).
        let vdir = self.root.join(META_DIR).join("versions");
        if let Ok(entries) = fs::read_dir(&vdir) {
            for entry in entries.flatten() {
                let key = decode_key(&entry.file_name().to_string_lossy());
                if key.starts_with(prefix) && !keys.contains(&key) && self.current(&key)?.is_some() {
                    keys.push(key);
                }
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    fn url(&self) -> String {
        format!("file://{}", self.root.display())
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        let this = self.clone();
        let key = key.to_string();
        tokio::task::spawn_blocking(move || this.put_blocking(&key, &body, &mode))
            .await
            .expect("local put task panicked")
    }

    async fn get(&self, key: &str, version_id: Option<&str>) -> Result<GetResult> {
        let (meta, path) = match version_id {
            Some(v) => self.find_version(key, v)?,
            None => self.current(key)?.ok_or_else(|| self.not_found(key, None))?,
        };
        let body = tokio::fs::read(&path).await.map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                self.not_found(key, version_id)
            } else {
                self.io(key)(e)
            }
        })?;
        Ok(GetResult {
            meta,
            body: Bytes::from(body),
        })
    }

    async fn head(&self, key: &str, version_id: Option<&str>) -> Result<ObjectMeta> {
        match version_id {
            Some(v) => Ok(self.find_version(key, v)?.0),
            None => Ok(self.current(key)?.ok_or_else(|| self.not_found(key, None))?.0),
        }
    }

    async fn list_page(&self, prefix: &str, token: Option<&str>, max: usize) -> Result<ListPage> {
        let keys = self.list_keys(prefix)?;
        let start = match token {
            Some(t) => keys.partition_point(|k| k.as_str() <= t),
            None => 0,
        };
        let mut objects = Vec::new();
        for key in keys[start..].iter() {
            if objects.len() == max.max(1) {
                break;
            }
            if let Some((meta, _)) = self.current(key)? {
                objects.push(meta);
            }
        }
        let next = match objects.last() {
            Some(last) if keys.last().is_some_and(|k| k > &last.key) => Some(last.key.clone()),
            _ => None,
        };
        Ok(ListPage { objects, next })
    }

    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>> {
        let mut keys: Vec<String> = self.list_keys(prefix)?;
        let vdir = self.root.join(META_DIR).join("versions");
        if let Ok(entries) = fs::read_dir(&vdir) {
            for entry in entries.flatten() {
                let key = decode_key(&entry.file_name().to_string_lossy());
                if key.starts_with(prefix) {
                    keys.push(key);
                }
            }
        }
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        for key in keys {
            let versions = self.read_versions(&key)?;
            if versions.is_empty() {
                if let Some((meta, _)) = self.current(&key)? {
                    out.push(VersionEntry {
                        key: key.clone(),
                        version_id: NULL_VERSION.into(),
                        size: meta.size,
                        etag: Some(meta.etag),
                        is_latest: true,
                        is_delete_marker: false,
                        last_modified: meta.last_modified,
                    });
                }
                continue;
            }
            for (i, (id, deleted, path)) in versions.iter().enumerate() {
                let m = fs::metadata(path).map_err(self.io(&key))?;
                out.push(VersionEntry {
                    key: key.clone(),
                    version_id: id.clone(),
                    size: if *deleted { 0 } else { m.len() },
                    etag: (!deleted).then(|| version_etag(id)),
                    is_latest: i == 0,
                    is_delete_marker: *deleted,
                    last_modified: mtime(&m),
                });
            }
        }
        Ok(out)
    }

    async fn delete(&self, key: &str) -> Result<()> {
        let this = self.clone();
        let key = key.to_string();
        tokio::task::spawn_blocking(move || {
            this.object_path(&key)?;
            this.with_lock(&key, || {
                if this.read_versions(&key)?.is_empty() {
                    // An unversioned plain file: removing it is all there is to do.
                    return match fs::remove_file(this.object_path(&key)?) {
                        Ok(()) => Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                        Err(e) => Err(this.io(&key)(e)),
                    };
                }
                let id = this.next_version_id(&key)?;
                let marker = this.versions_dir(&key).join(format!("{id}{DELETE_SUFFIX}"));
                write_atomic(&marker, b"").map_err(this.io(&key))?;
                this.sync_plain(&key)
            })
        })
        .await
        .expect("local delete task panicked")
    }

    async fn delete_version(&self, key: &str, version_id: &str) -> Result<()> {
        let this = self.clone();
        let key = key.to_string();
        let version_id = version_id.to_string();
        tokio::task::spawn_blocking(move || {
            this.with_lock(&key, || {
                let versions = this.read_versions(&key)?;
                let found = versions.iter().find(|v| v.0 == version_id);
                match found {
                    Some((_, _, path)) => fs::remove_file(path).map_err(this.io(&key))?,
                    None if version_id == NULL_VERSION && versions.is_empty() => {
                        fs::remove_file(this.object_path(&key)?).map_err(this.io(&key))?
                    }
                    None => return Err(this.not_found(&key, Some(&version_id))),
                }
                this.sync_plain(&key)
            })
        })
        .await
        .expect("local delete_version task panicked")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[tokio::test]
    async fn a_plain_files_etag_follows_its_bytes_not_its_inode() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let path = dir.path().join("t/metadata/00001.metadata.json");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"{\"format-version\":2}").unwrap();
        let key = "t/metadata/00001.metadata.json";
        let before = store.head(key, None).await.unwrap();
        let ino = fs::metadata(&path).unwrap().ino();
        // A byte-identical copy: another inode and mtime (as a restore from backup media gives).
        let copy = dir.path().join("copy");
        fs::copy(&path, &copy).unwrap();
        fs::rename(&copy, &path).unwrap();
        assert_ne!(fs::metadata(&path).unwrap().ino(), ino);
        let after = store.head(key, None).await.unwrap();
        assert_eq!(after.etag, before.etag, "same bytes, same ETag");
        assert_eq!(store.get(key, None).await.unwrap().meta.etag, before.etag);
        // Any change of content changes it, even with the same size.
        fs::write(&path, b"{\"format-version\":3}").unwrap();
        assert_ne!(store.head(key, None).await.unwrap().etag, before.etag);
    }
}
