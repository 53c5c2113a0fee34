//! The storage of every FileIO tidemark makes ([`CountingStorageFactory`]): one module for the
//! two forwarding wrappers it stacks, the request counting ([`CountingStorage`]) and the Avro
//! codec of manifests ([`AvroCodecStorage`], around the counting storage).
//!
//! # Request counting
//!
//! Counts the table-file S3 requests (Iceberg metadata, manifests, data files), which go through
//! iceberg-rust's FileIO and not through tidemark's own S3 client, for `s3_requests` in `--json`
//! reports.
//!
//! [`CountingStorageFactory`] wraps the crate's `OpenDalResolvingStorageFactory`: every call its
//! storages make on an `s3://` or `s3a://` path is a request (each range read of a reader, each
//! writer once), every error one returns is a failed request. The operator's RetryLayer reports
//! each retry only as a `log` record (target `opendal::layers::retry`): [`install_retry_counter`]
//! installs a logger that counts those and prints nothing, as before, when no logger was set.
//!
//! A build without the `remote` feature (the embedded drill's, `sandbox/drill.sh`) has no S3 and
//! no opendal: its table files go through iceberg's own local-file storage, and any path with
//! another scheme is refused by name ([`refuse_remote`]) rather than taken for a relative path.
//!
//! The storages it builds also compress the manifests and manifest lists written through them
//! ([`AvroCodecStorage`] around the counting storage, below), so every FileIO tidemark makes
//! writes them with the table's `write.avro.compression-codec`.
//!
//! # Avro codec of manifests
//!
//! Compresses the manifests and manifest lists iceberg-rust writes, at the storage seam
//! (issue 11, defect 10): iceberg-rust 0.10.1's writers have no codec setting.
//!
//! [`AvroCodecStorage`] wraps the storage every tidemark FileIO uses (see
//! [`CountingStorageFactory`]). A write of an `*.avro` object directly in a
//! table's `metadata/` folder is buffered and re-encoded before it is stored
//! ([`crate::table::avro_codec::recode`]) with the codec of that table:
//!
//! - the codec per table is what its properties asked for when tidemark last committed to it in
//!   this process ([`set_table_codec`], called by every commit and path rewrite with the table's
//!   location before it writes a manifest), else Java's default (`gzip`);
//! - a manifest's new size is remembered by its path, and a manifest list written afterwards
//!   carries it as that manifest's `manifest_length` (the writers compute the length from the
//!   bytes they hand over, before compression). A manifest list names every manifest by path, and
//!   a manifest tidemark did not re-encode keeps the length its list already had.
//!
//! The object is written once, compressed: a reader never sees the uncompressed bytes. Other
//! objects, and Avro files that are not Iceberg manifests or are already compressed, pass through
//! unchanged; copies of table files (`replica copy`) do not go through FileIO at all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use iceberg::io::{FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig, StorageFactory};
use iceberg::{Error, ErrorKind, Result};
#[cfg(feature = "remote")]
use iceberg_storage_opendal::OpenDalResolvingStorageFactory as Inner;

#[cfg(not(feature = "remote"))]
use iceberg::io::LocalFsStorageFactory as Inner;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tidemark_schemas::RequestCounts;

use crate::table::avro_codec::{AvroCodec, Kind, recode};

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static RETRIED: AtomicU64 = AtomicU64::new(0);

/// The target of the records opendal's RetryLayer logs, one per retry.
const RETRY_TARGET: &str = "opendal::layers::retry";

/// Table-file S3 requests of this process so far: calls, retries (as the RetryLayer logged them,
/// once [`install_retry_counter`] ran) and calls that returned an error.
pub fn request_stats() -> RequestCounts {
    RequestCounts {
        requests: REQUESTS.load(Ordering::Relaxed),
        retried: RETRIED.load(Ordering::Relaxed),
        failed: FAILED.load(Ordering::Relaxed),
    }
}

/// Counts the RetryLayer's retry records; every other record is dropped, as without a logger.
struct RetryCounter;

impl log::Log for RetryCounter {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target() == RETRY_TARGET
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.target() == RETRY_TARGET {
            RETRIED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&self) {}
}

static RETRY_COUNTER: RetryCounter = RetryCounter;

/// Installs the retry-counting logger (once per process; a second call, or a logger set by
/// someone else first, leaves things as they are).
pub fn install_retry_counter() {
    if log::set_logger(&RETRY_COUNTER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// A build without `remote` refuses a table file that is not a local path (`file:` or none).
fn refuse_remote(path: &str) -> Result<()> {
    if cfg!(feature = "remote") || !path.contains("://") || path.starts_with("file:") {
        return Ok(());
    }
    Err(
        iceberg::Error::new(iceberg::ErrorKind::FeatureUnsupported, format!("table file {path}"))
            .with_source(tidemark_journal::store::StoreError::NotBuilt { url: path.to_string() }),
    )
}

fn is_s3(path: &str) -> bool {
    path.starts_with("s3://") || path.starts_with("s3a://") || path.starts_with("s3n://")
}

/// Counts one request on `path` (when on S3) and its error, if any.
fn count<T>(path: &str, result: Result<T>) -> Result<T> {
    if is_s3(path) { count_s3(result) } else { result }
}

fn count_s3<T>(result: Result<T>) -> Result<T> {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    if result.is_err() {
        FAILED.fetch_add(1, Ordering::Relaxed);
    }
    result
}

/// `OpenDalResolvingStorageFactory` (without `remote`: iceberg's `LocalFsStorageFactory`) whose
/// storages count their S3 requests (and compress the manifests written through them, see
/// [`AvroCodecStorage`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CountingStorageFactory {
    inner: Inner,
}

impl CountingStorageFactory {
    pub fn new() -> Self {
        Self::default()
    }
}

#[typetag::serde]
impl StorageFactory for CountingStorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        let counting = CountingStorage {
            inner: self.inner.build(config)?,
        };
        Ok(Arc::new(AvroCodecStorage::new(Arc::new(counting))))
    }
}

/// A storage counting the S3 requests of the one it wraps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountingStorage {
    #[serde(serialize_with = "serialize_storage", deserialize_with = "deserialize_storage")]
    inner: Arc<dyn Storage>,
}

impl CountingStorage {
    /// The error of a failed HEAD (`exists`, `metadata`) on S3, or the refusal behind it. A
    /// HEAD's reply has no body, so refused credentials answered with a 400 (`InvalidToken`)
    /// name no code there: a failed HEAD that is not already a refusal reads one byte of the
    /// file (one more request) to learn it, so that every caller sees the refusal, exit 8
    /// ([`crate::table::refused`]). Anything else keeps the HEAD's own error.
    async fn refusal_behind(&self, path: &str, head: Error) -> Error {
        if !is_s3(path) || crate::table::refused::refused_code(&head).is_some() {
            return head;
        }
        let probe = async { self.inner.reader(path).await?.read(0..1).await };
        match count(path, probe.await) {
            Err(e) if crate::table::refused::refused_code(&e).is_some() => e,
            _ => head,
        }
    }
}

fn serialize_storage<S: Serializer>(storage: &Arc<dyn Storage>, s: S) -> std::result::Result<S::Ok, S::Error> {
    storage.as_ref().serialize(s)
}

fn deserialize_storage<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Arc<dyn Storage>, D::Error> {
    Box::<dyn Storage>::deserialize(d).map(Arc::from)
}

#[async_trait]
#[typetag::serde]
impl Storage for CountingStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        refuse_remote(path)?;
        match count(path, self.inner.exists(path).await) {
            Err(e) => Err(self.refusal_behind(path, e).await),
            found => found,
        }
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        refuse_remote(path)?;
        match count(path, self.inner.metadata(path).await) {
            Err(e) => Err(self.refusal_behind(path, e).await),
            found => found,
        }
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        refuse_remote(path)?;
        count(path, self.inner.read(path).await)
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        refuse_remote(path)?;
        let reader = self.inner.reader(path).await;
        if !is_s3(path) {
            return reader;
        }
        // Opening asks nothing of the server; each range read is a request.
        match reader {
            Ok(inner) => Ok(Box::new(CountingReader { inner })),
            Err(e) => count_s3(Err(e)),
        }
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        refuse_remote(path)?;
        count(path, self.inner.write(path, bs).await)
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        refuse_remote(path)?;
        let writer = count(path, self.inner.writer(path).await)?;
        if !is_s3(path) {
            return Ok(writer);
        }
        Ok(Box::new(CountingWriter { inner: writer }))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        refuse_remote(path)?;
        count(path, self.inner.delete(path).await)
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        refuse_remote(path)?;
        count(path, self.inner.delete_prefix(path).await)
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        let on_s3 = Arc::new(AtomicBool::new(false));
        let seen = on_s3.clone();
        let refused = Arc::new(std::sync::Mutex::new(None));
        let first_refused = refused.clone();
        let paths = paths
            .inspect(move |p| {
                if is_s3(p) {
                    seen.store(true, Ordering::Relaxed);
                }
            })
            // A path refused ends the stream there: nothing after it is deleted.
            .take_while(move |p| {
                let ok = refuse_remote(p)
                    .map_err(|e| *first_refused.lock().unwrap() = Some(e))
                    .is_ok();
                std::future::ready(ok)
            })
            .boxed();
        let result = self.inner.delete_stream(paths).await;
        if let Some(e) = refused.lock().unwrap().take() {
            return Err(e);
        }
        if on_s3.load(Ordering::Relaxed) {
            count_s3(result)
        } else {
            result
        }
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        refuse_remote(path)?;
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        refuse_remote(path)?;
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// A reader on S3: each range read is a request.
struct CountingReader {
    inner: Box<dyn FileRead>,
}

#[async_trait]
impl FileRead for CountingReader {
    async fn read(&self, range: std::ops::Range<u64>) -> Result<Bytes> {
        count_s3(self.inner.read(range).await)
    }
}

/// A writer on S3 (counted once when opened): its errors are failed requests.
struct CountingWriter {
    inner: Box<dyn FileWrite>,
}

fn count_error<T>(result: Result<T>) -> Result<T> {
    if result.is_err() {
        FAILED.fetch_add(1, Ordering::Relaxed);
    }
    result
}

#[async_trait]
impl FileWrite for CountingWriter {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        count_error(self.inner.write(bs).await)
    }

    async fn close(&mut self) -> Result<()> {
        count_error(self.inner.close().await)
    }
}

// The Avro codec of manifests (see the module documentation).

/// Codec by table location (no trailing `/`), as the last commit to the table in this process
/// registered it.
static CODECS: LazyLock<Mutex<HashMap<String, AvroCodec>>> = LazyLock::new(Default::default);
/// Size of each manifest re-encoded in this process, by path (a few bytes per manifest).
static LENGTHS: LazyLock<Mutex<HashMap<String, u64>>> = LazyLock::new(Default::default);

/// Manifests and manifest lists written under `location/metadata/` from now on use `codec`.
pub fn set_table_codec(location: &str, codec: AvroCodec) {
    let mut codecs = CODECS.lock().unwrap_or_else(|p| p.into_inner());
    codecs.insert(location.trim_end_matches('/').to_string(), codec);
}

/// The codec for `path` when it is an Avro file in a table's metadata folder.
fn codec_for(path: &str) -> Option<AvroCodec> {
    let (location, name) = path.rsplit_once("/metadata/")?;
    if name.contains('/') || !name.ends_with(".avro") {
        return None;
    }
    let codecs = CODECS.lock().unwrap_or_else(|p| p.into_inner());
    Some(codecs.get(location.trim_end_matches('/')).copied().unwrap_or_default())
}

fn new_length(path: &str) -> Option<u64> {
    LENGTHS.lock().unwrap_or_else(|p| p.into_inner()).get(path).copied()
}

/// `bytes` to store at `path`: re-encoded with the table's codec when it is a manifest or a
/// manifest list (see the module documentation).
fn encode(path: &str, codec: AvroCodec, bytes: Bytes) -> Result<Bytes> {
    match recode(&bytes, codec, &new_length) {
        Ok(None) => Ok(bytes),
        Ok(Some((kind, out))) => {
            if kind == Kind::Manifest {
                LENGTHS
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(path.to_string(), out.len() as u64);
            }
            Ok(Bytes::from(out))
        }
        Err(reason) => Err(Error::new(
            ErrorKind::DataInvalid,
            format!("cannot write {path} with Avro codec {}: {reason}", codec.avro_name()),
        )),
    }
}

/// A storage that compresses the manifests and manifest lists written through it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AvroCodecStorage {
    #[serde(serialize_with = "serialize_storage", deserialize_with = "deserialize_storage")]
    inner: Arc<dyn Storage>,
}

impl AvroCodecStorage {
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        AvroCodecStorage { inner }
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for AvroCodecStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        self.inner.metadata(path).await
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.inner.read(path).await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        self.inner.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        match codec_for(path) {
            Some(codec) => self.inner.write(path, encode(path, codec, bs)?).await,
            None => self.inner.write(path, bs).await,
        }
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        match codec_for(path) {
            Some(codec) => Ok(Box::new(RecodingWriter {
                inner: self.inner.clone(),
                path: path.to_string(),
                codec,
                buf: Some(Vec::new()),
            })),
            None => self.inner.writer(path).await,
        }
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.inner.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> Result<()> {
        self.inner.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Collects a manifest or manifest list (iceberg-rust hands over the whole file in one write)
/// and stores it re-encoded, in one write, on close.
struct RecodingWriter {
    inner: Arc<dyn Storage>,
    path: String,
    codec: AvroCodec,
    /// `None` once closed.
    buf: Option<Vec<u8>>,
}

impl RecodingWriter {
    fn closed(&self) -> Error {
        Error::new(ErrorKind::Unexpected, format!("{} is already closed", self.path))
    }
}

#[async_trait]
impl FileWrite for RecodingWriter {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        let err = self.closed();
        self.buf.as_mut().ok_or(err)?.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        let err = self.closed();
        let bytes = Bytes::from(self.buf.take().ok_or(err)?);
        let bytes = encode(&self.path, self.codec, bytes)?;
        self.inner.write(&self.path, bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback HTTP server answering `503 Slow Down` to every request; returns its URL.
    fn always_503() -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        });
        url
    }

    #[tokio::test]
    async fn s3_calls_their_errors_and_retries_are_counted() {
        install_retry_counter();
        let dir = std::env::temp_dir().join(format!("tm-counted-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // An S3 endpoint answering 503 to everything: the read fails after the RetryLayer's retries.
        let endpoint = always_503();
        let io = iceberg::io::FileIOBuilder::new(Arc::new(CountingStorageFactory::new()))
            .with_prop("s3.endpoint", endpoint)
            .with_prop("s3.path-style-access", "true")
            .with_prop("s3.region", "us-east-1")
            .with_prop("s3.access-key-id", "k")
            .with_prop("s3.secret-access-key", "s")
            .build();
        let path = format!("file://{}/x", dir.display());
        io.new_output(&path)
            .unwrap()
            .write(Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert_eq!(io.new_input(&path).unwrap().read().await.unwrap().as_ref(), b"x");
        let before = request_stats();
        let s3 = io.new_input("s3://tidemark-nobody/x").unwrap().read().await;
        let after = request_stats();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(s3.is_err());
        assert!(after.requests > before.requests, "{before:?} {after:?}");
        assert!(after.failed > before.failed, "{before:?} {after:?}");
        assert!(after.retried > before.retried, "{before:?} {after:?}");
    }

    #[test]
    fn only_avro_files_directly_in_a_metadata_folder_are_recoded() {
        set_table_codec("s3://b/wh/shop/zstd_orders/", AvroCodec::Zstd { level: 1 });
        assert_eq!(
            codec_for("s3://b/wh/shop/zstd_orders/metadata/snap-1-1-x.avro"),
            Some(AvroCodec::Zstd { level: 1 })
        );
        assert_eq!(
            codec_for("file:///t/shop/other/metadata/x-m0.avro"),
            Some(AvroCodec::default())
        );
        for path in [
            "s3://b/wh/shop/zstd_orders/data/x.avro",
            "s3://b/wh/shop/zstd_orders/metadata/00001-x.metadata.json",
            "s3://b/wh/shop/zstd_orders/metadata/sub/x.avro",
        ] {
            assert_eq!(codec_for(path), None, "{path}");
        }
    }
}
