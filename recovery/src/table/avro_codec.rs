//! The Avro codec of the manifests and manifest lists tidemark writes (issue 11, defect 10).
//!
//! iceberg-rust 0.10.1 writes every manifest and manifest list uncompressed (`avro.codec` =
//! `null`); Java and PyIceberg compress them by the table property
//! `write.avro.compression-codec` (default `gzip`, which is Avro's `deflate`). This module reads
//! that property ([`AvroCodec::from_properties`]) and re-encodes an Avro object container file
//! that iceberg-rust wrote with the codec, without changing what it says:
//!
//! - a **manifest** ([`Kind::Manifest`]) is re-blocked: each block's bytes are compressed as they
//!   are, without decoding a value, and the header (the Avro schema JSON and Iceberg's metadata:
//!   `schema`, `partition-spec`, `format-version`, `content`, …) is kept byte for byte but for
//!   `avro.codec`; the sync marker is kept;
//! - a **manifest list** ([`Kind::ManifestList`]) names each manifest with its length in bytes,
//!   which a compressed manifest changes: its entries are decoded with the file's own writer
//!   schema, `manifest_length` is replaced for the manifests [`recode`] is told the new size of,
//!   and the entries are encoded again, block by block, with the same header.
//!
//! A file that is not an Iceberg manifest or manifest list, or already has a codec other than
//! `null` (another writer's), is left as it is ([`recode`] returns `None`).

use std::collections::HashMap;
use std::io::Write;

use apache_avro::Schema;
use apache_avro::types::Value;

/// The table property naming the codec of manifests and manifest lists (Java's and PyIceberg's).
pub const PROP_AVRO_CODEC: &str = "write.avro.compression-codec";
/// The table property with the codec's level (Java's; PyIceberg ignores it).
pub const PROP_AVRO_LEVEL: &str = "write.avro.compression-level";

/// The Avro header key of the codec.
const CODEC_KEY: &str = "avro.codec";
const SCHEMA_KEY: &str = "avro.schema";
const MAGIC: &[u8; 4] = b"Obj\x01";
const SYNC_LEN: usize = 16;

/// How manifests and manifest lists are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvroCodec {
    Uncompressed,
    /// Iceberg's `gzip`: Avro's `deflate` (raw deflate blocks), level 0–9.
    Deflate {
        level: u32,
    },
    /// Iceberg's `zstd`: Avro's `zstandard`, level 0–22 (0: zstd's own default).
    Zstd {
        level: u8,
    },
    Snappy,
}

impl Default for AvroCodec {
    /// Java's default: `gzip` at level 9 (PyIceberg also writes `gzip` by default).
    fn default() -> Self {
        AvroCodec::Deflate { level: 9 }
    }
}

impl AvroCodec {
    /// The codec a table's properties ask for: `write.avro.compression-codec` (`gzip`, `zstd`,
    /// `snappy`, `uncompressed`, case-insensitive as Java reads them, or Avro's own names
    /// `deflate`, `zstandard`, `null`, which PyIceberg also accepts; default `gzip`) with
    /// `write.avro.compression-level` (Java's defaults: 9 for gzip, 1 for zstd; ignored by the
    /// others). `Err` names what is wrong (bzip2, xz and unknown names are refused: this build
    /// has no such codec).
    pub fn from_properties(properties: &HashMap<String, String>) -> Result<AvroCodec, String> {
        let name = properties
            .get(PROP_AVRO_CODEC)
            .map_or("gzip".to_string(), |c| c.trim().to_ascii_lowercase());
        let level = properties.get(PROP_AVRO_LEVEL).map(|l| l.trim());
        let parse_level = |max: u32, default: u32| -> Result<u32, String> {
            let Some(l) = level else { return Ok(default) };
            match l.parse::<u32>() {
                Ok(n) if n <= max => Ok(n),
                _ => Err(format!(
                    "{PROP_AVRO_LEVEL} = {l:?} is not a level from 0 to {max} for {name}"
                )),
            }
        };
        Ok(match name.as_str() {
            "gzip" | "deflate" => AvroCodec::Deflate {
                level: parse_level(9, 9)?,
            },
            "zstd" | "zstandard" => AvroCodec::Zstd {
                level: parse_level(22, 1)? as u8,
            },
            "snappy" => AvroCodec::Snappy,
            "uncompressed" | "null" | "none" => AvroCodec::Uncompressed,
            other => {
                return Err(format!(
                    "{PROP_AVRO_CODEC} = {other:?}: this build writes gzip, zstd, snappy or uncompressed manifests"
                ));
            }
        })
    }

    /// The codec's name in an Avro header (`avro.codec`).
    pub fn avro_name(self) -> &'static str {
        match self {
            AvroCodec::Uncompressed => "null",
            AvroCodec::Deflate { .. } => "deflate",
            AvroCodec::Zstd { .. } => "zstandard",
            AvroCodec::Snappy => "snappy",
        }
    }

    fn compress(self, data: Vec<u8>) -> Result<Vec<u8>, String> {
        let avro = |codec: apache_avro::Codec, mut data: Vec<u8>| {
            codec.compress(&mut data).map_err(|e| e.to_string())?;
            Ok(data)
        };
        match self {
            AvroCodec::Uncompressed => Ok(data),
            AvroCodec::Deflate { level } => {
                let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
                enc.write_all(&data).map_err(|e| e.to_string())?;
                enc.finish().map_err(|e| e.to_string())
            }
            AvroCodec::Zstd { level } => avro(
                apache_avro::Codec::Zstandard(apache_avro::ZstandardSettings::new(level)),
                data,
            ),
            AvroCodec::Snappy => avro(apache_avro::Codec::Snappy, data),
        }
    }
}

/// What an Avro file in a table's metadata folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Entries of data or delete files (`manifest_entry` records).
    Manifest,
    /// The manifests of a snapshot (`manifest_file` records).
    ManifestList,
}

/// An Avro object container file: its header metadata in order, sync marker and blocks.
struct Container<'a> {
    meta: Vec<(String, &'a [u8])>,
    sync: &'a [u8],
    /// (object count, block bytes as stored).
    blocks: Vec<(i64, &'a [u8])>,
}

impl Container<'_> {
    fn get(&self, key: &str) -> Option<&[u8]> {
        self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    fn kind(&self) -> Option<Kind> {
        let schema: serde_json::Value = serde_json::from_slice(self.get(SCHEMA_KEY)?).ok()?;
        match schema.get("name")?.as_str()? {
            "manifest_entry" => Some(Kind::Manifest),
            "manifest_file" => Some(Kind::ManifestList),
            _ => None,
        }
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn long(&mut self) -> Result<i64, String> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.pos).ok_or("the file ends inside a number")?;
            self.pos += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(format!("a number at byte {} is longer than 10 bytes", self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("the file ends inside {n} bytes at byte {}", self.pos))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn len(&mut self) -> Result<usize, String> {
        let n = self.long()?;
        usize::try_from(n).map_err(|_| format!("negative length {n} at byte {}", self.pos))
    }
}

/// `None` when `bytes` is not an Avro object container file.
fn parse(bytes: &[u8]) -> Result<Option<Container<'_>>, String> {
    if !bytes.starts_with(MAGIC) {
        return Ok(None);
    }
    let mut c = Cursor {
        bytes,
        pos: MAGIC.len(),
    };
    let mut meta = Vec::new();
    loop {
        let mut count = c.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            count = -count;
            c.long()?; // the block's size in bytes
        }
        for _ in 0..count {
            let n = c.len()?;
            let key = String::from_utf8(c.take(n)?.to_vec()).map_err(|_| "a header key is not UTF-8".to_string())?;
            let n = c.len()?;
            meta.push((key, c.take(n)?));
        }
    }
    let sync = c.take(SYNC_LEN)?;
    let mut blocks = Vec::new();
    while c.pos < bytes.len() {
        let count = c.long()?;
        let n = c.len()?;
        let data = c.take(n)?;
        if c.take(SYNC_LEN)? != sync {
            return Err(format!(
                "block {} does not end with the file's sync marker",
                blocks.len()
            ));
        }
        blocks.push((count, data));
    }
    Ok(Some(Container { meta, sync, blocks }))
}

fn put_long(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// The header of `c` with `avro.codec` set to `codec` (in its place, or added last).
fn header(c: &Container<'_>, codec: AvroCodec) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let has_codec = c.get(CODEC_KEY).is_some();
    put_long(&mut out, (c.meta.len() + usize::from(!has_codec)) as i64);
    for (k, v) in &c.meta {
        put_bytes(&mut out, k.as_bytes());
        put_bytes(
            &mut out,
            if k == CODEC_KEY {
                codec.avro_name().as_bytes()
            } else {
                v
            },
        );
    }
    if !has_codec {
        put_bytes(&mut out, CODEC_KEY.as_bytes());
        put_bytes(&mut out, codec.avro_name().as_bytes());
    }
    put_long(&mut out, 0);
    out.extend_from_slice(c.sync);
    out
}

/// `bytes` (an Avro file iceberg-rust wrote in a table's metadata folder) compressed with
/// `codec`; for a manifest list, with the `manifest_length` of each manifest `new_length` knows.
/// `Ok(None)`: nothing to change (not a manifest or manifest list, already compressed by its
/// writer, or uncompressed as asked with no length to change). `Err` says what is wrong with
/// the file.
pub fn recode(
    bytes: &[u8],
    codec: AvroCodec,
    new_length: &dyn Fn(&str) -> Option<u64>,
) -> Result<Option<(Kind, Vec<u8>)>, String> {
    let Some(c) = parse(bytes)? else { return Ok(None) };
    let Some(kind) = c.kind() else { return Ok(None) };
    if c.get(CODEC_KEY).is_some_and(|v| v != b"null") {
        return Ok(None);
    }
    let mut out = header(&c, codec);
    let mut changed = codec != AvroCodec::Uncompressed;
    let schema = match kind {
        Kind::Manifest => None,
        Kind::ManifestList => {
            let json = std::str::from_utf8(c.get(SCHEMA_KEY).unwrap_or_default()).map_err(|e| e.to_string())?;
            Some(Schema::parse_str(json).map_err(|e| format!("the writer schema does not parse: {e}"))?)
        }
    };
    for (n, (count, data)) in c.blocks.iter().enumerate() {
        let plain = match &schema {
            None => data.to_vec(),
            Some(schema) => {
                let (plain, patched) =
                    patch_lengths(schema, *count, data, new_length).map_err(|e| format!("block {n}: {e}"))?;
                changed |= patched;
                plain
            }
        };
        let stored = codec.compress(plain).map_err(|e| format!("block {n}: {e}"))?;
        put_long(&mut out, *count);
        put_bytes(&mut out, &stored);
        out.extend_from_slice(c.sync);
    }
    Ok(changed.then_some((kind, out)))
}

/// The `count` manifest-list entries of an uncompressed block, encoded again with the
/// `manifest_length` `new_length` gives their `manifest_path`; and whether one changed.
fn patch_lengths(
    schema: &Schema,
    count: i64,
    mut data: &[u8],
    new_length: &dyn Fn(&str) -> Option<u64>,
) -> Result<(Vec<u8>, bool), String> {
    let mut out = Vec::with_capacity(data.len());
    let mut patched = false;
    for i in 0..count {
        let mut value = apache_avro::from_avro_datum(schema, &mut data, None).map_err(|e| format!("entry {i}: {e}"))?;
        let Value::Record(fields) = &mut value else {
            return Err(format!("entry {i} is not a record"));
        };
        let path = fields.iter().find_map(|(k, v)| match (k.as_str(), v) {
            ("manifest_path", Value::String(p)) => Some(p.clone()),
            _ => None,
        });
        let path = path.ok_or_else(|| format!("entry {i} has no manifest_path"))?;
        if let Some(len) = new_length(&path) {
            for (k, v) in fields.iter_mut() {
                if k == "manifest_length" {
                    let len = i64::try_from(len).map_err(|_| format!("length {len} of {path}"))?;
                    patched |= *v != Value::Long(len);
                    *v = Value::Long(len);
                }
            }
        }
        out.extend(apache_avro::to_avro_datum(schema, value).map_err(|e| format!("entry {i}: {e}"))?);
    }
    if !data.is_empty() {
        return Err(format!("{} bytes after its {count} entries", data.len()));
    }
    Ok((out, patched))
}

/// The `avro.codec` of an Avro file's header (`null` when it has none), or `None` when `bytes`
/// is not an Avro object container file.
pub fn codec_of(bytes: &[u8]) -> Option<String> {
    let c = parse(bytes).ok()??;
    Some(
        c.get(CODEC_KEY)
            .map_or("null".to_string(), |v| String::from_utf8_lossy(v).into_owned()),
    )
}

#[cfg(test)]
#[path = "avro_codec_tests.rs"]
mod avro_codec_tests;
