//! The layout of a local store on disk: keys checked and encoded as one file name, version ids
//! and their ETags, the metadata and content ETag of a plain file, atomic writes.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::store::object::ObjectMeta;

pub(super) const META_DIR: &str = ".tidemark";
pub(super) const NULL_VERSION: &str = "null";
pub(super) const DELETE_SUFFIX: &str = ".deleted";

pub(super) fn absolute(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

pub(super) fn validate_key(key: &str) -> std::result::Result<(), String> {
    if key.is_empty() || key.starts_with('/') || key.ends_with('/') {
        return Err("a key is a non-empty relative path".into());
    }
    if key
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == ".." || seg == META_DIR)
    {
        return Err(format!("key segments may not be empty, '.', '..' or '{META_DIR}'"));
    }
    Ok(())
}

pub(super) fn is_version_id(s: &str) -> bool {
    s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn version_etag(id: &str) -> String {
    format!("\"v{id}\"")
}

pub(super) fn plain_meta(key: &str, path: &Path, m: &fs::Metadata) -> io::Result<ObjectMeta> {
    Ok(ObjectMeta {
        key: key.to_string(),
        size: m.len(),
        etag: content_etag(path, m)?,
        version_id: Some(NULL_VERSION.into()),
        last_modified: mtime(m),
    })
}

/// The ETag of a plain file (one another tool wrote, such as Iceberg metadata and data files):
/// a digest of its bytes, so that a byte-identical copy (`cp -a`, a restore from backup media,
/// another inode and perhaps another mtime) keeps its ETag and any change of content changes it.
/// Digests are kept per file while its inode, size, mtime and ctime stay the same (a write
/// changes ctime), so a file is read once per process, not on every listing.
fn content_etag(path: &Path, m: &fs::Metadata) -> io::Result<String> {
    use sha2::{Digest, Sha256};
    use std::collections::HashMap;
    use std::io::Read;
    use std::sync::{Mutex, OnceLock};
    type Stat = (u64, u64, u64, i64, i64, i64, i64);
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, (Stat, String)>>> = OnceLock::new();
    let stat: Stat = (
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some((s, etag)) = cache.lock().expect("etag cache").get(path)
        && *s == stat
    {
        return Ok(etag.clone());
    }
    let mut hasher = Sha256::new();
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let etag = format!("\"c{}\"", &hex::encode(hasher.finalize())[..32]);
    let mut cache = cache.lock().expect("etag cache");
    if cache.len() > 100_000 {
        cache.clear();
    }
    cache.insert(path.to_path_buf(), (stat, etag.clone()));
    Ok(etag)
}

pub(super) fn mtime(m: &fs::Metadata) -> Option<DateTime<Utc>> {
    m.modified().ok().map(DateTime::<Utc>::from)
}

/// `%` and `/` escaped so that a whole key is one file name.
pub(super) fn encode_key(key: &str) -> String {
    key.replace('%', "%25").replace('/', "%2F")
}

pub(super) fn decode_key(name: &str) -> String {
    name.replace("%2F", "/").replace("%25", "%")
}

pub(super) fn tmp_path(path: &Path, tag: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    path.with_file_name(format!("{name}.tidemark-tmp-{tag}-{}", std::process::id()))
}

/// Writes a file so that it appears whole or not at all: temp file, fsync, rename.
pub(super) fn write_atomic(path: &Path, body: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path, "w");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_encode_to_one_file_name_and_back() {
        for key in ["a", "a/b/c.json", "odd%2Fname/x", "100%/y"] {
            let enc = encode_key(key);
            assert!(!enc.contains('/'));
            assert_eq!(decode_key(&enc), key);
        }
    }

    #[test]
    fn bad_keys_are_refused() {
        for key in ["", "/abs", "a//b", "a/../b", "dir/", ".tidemark/x"] {
            assert!(validate_key(key).is_err(), "{key:?} must be refused");
        }
        assert!(validate_key("events/00000000000000000001.parquet").is_ok());
    }
}
