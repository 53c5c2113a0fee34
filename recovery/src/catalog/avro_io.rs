//! Compresses the manifests and manifest lists iceberg-rust writes, at the storage seam
//! (issue 11, defect 10): iceberg-rust 0.10.1's writers have no codec setting.
//!
//! [`AvroCodecStorage`] wraps the storage every tidemark FileIO uses (see
//! [`super::counted_io::CountingStorageFactory`]). A write of an `*.avro` object directly in a
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
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use iceberg::io::{FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

use super::counted_io::{deserialize_storage, serialize_storage};
use crate::table::avro_codec::{AvroCodec, Kind, recode};

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
