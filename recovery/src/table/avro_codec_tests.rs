//! Tests of the manifest codec: re-encoded manifests and lists read back the same through
//! iceberg-rust with every codec, their headers keep Iceberg's metadata, and tidemark's commits
//! (through the storage wrapper) write the table's codec with real sizes in the lists.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{FormatVersion, Manifest, ManifestList};
use iceberg::table::Table;

use super::*;
use crate::catalog::CatalogHandle;
use crate::dr::test_support::{append, row_count, try_append};
use crate::ids::SeededIds;
use crate::table::TableError;
use crate::table::commit_properties;
use crate::table::test_support::catalog_in;

fn props(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn read(io: &FileIO, path: &str) -> Vec<u8> {
    io.new_input(path).unwrap().read().await.unwrap().to_vec()
}

/// (list path, list bytes, [(manifest path, manifest_length, manifest bytes)]) of every snapshot.
type Files = Vec<(String, Vec<u8>, Vec<(String, i64, Vec<u8>)>)>;

async fn files(table: &Table) -> Files {
    let io = table.file_io();
    let mut out = Vec::new();
    let mut snaps: Vec<_> = table.metadata().snapshots().collect();
    snaps.sort_by_key(|s| s.sequence_number());
    for s in snaps {
        let list = read(io, s.manifest_list()).await;
        let mut manifests = Vec::new();
        for m in ManifestList::parse_with_version(&list, FormatVersion::V2)
            .unwrap()
            .entries()
        {
            manifests.push((
                m.manifest_path.clone(),
                m.manifest_length,
                read(io, &m.manifest_path).await,
            ));
        }
        out.push((s.manifest_list().to_string(), list, manifests));
    }
    out
}

/// `name` (the orders spec) with `codec` set before its first commit (the DR test tables commit
/// at fixed times in 2027, after which a property commit is refused), then `appends`.
async fn table_in(
    handle: &CatalogHandle,
    name: &str,
    codec: Option<&str>,
    ids: &SeededIds,
    appends: impl IntoIterator<Item = u64>,
) -> Table {
    let mut t = crate::table::create_or_load_table(handle, name, &tidemark_journal::spec::CompiledSpec::orders())
        .await
        .unwrap();
    if let Some(codec) = codec {
        t = commit_properties(handle, &t, props(&[(PROP_AVRO_CODEC, codec)]))
            .await
            .unwrap();
    }
    for n in appends {
        t = append(handle, &t, ids, n).await;
    }
    t
}

#[test]
fn the_codec_comes_from_the_table_properties_as_java_reads_them() {
    let codec = |pairs: &[(&str, &str)]| AvroCodec::from_properties(&props(pairs));
    assert_eq!(codec(&[]), Ok(AvroCodec::Deflate { level: 9 }));
    assert_eq!(
        codec(&[(PROP_AVRO_CODEC, " GZIP ")]),
        Ok(AvroCodec::Deflate { level: 9 })
    );
    assert_eq!(codec(&[(PROP_AVRO_CODEC, "zstd")]), Ok(AvroCodec::Zstd { level: 1 }));
    assert_eq!(
        codec(&[(PROP_AVRO_CODEC, "zstd"), (PROP_AVRO_LEVEL, "7")]),
        Ok(AvroCodec::Zstd { level: 7 })
    );
    assert_eq!(
        codec(&[(PROP_AVRO_CODEC, "gzip"), (PROP_AVRO_LEVEL, "1")]),
        Ok(AvroCodec::Deflate { level: 1 })
    );
    assert_eq!(
        codec(&[(PROP_AVRO_CODEC, "snappy"), (PROP_AVRO_LEVEL, "3")]),
        Ok(AvroCodec::Snappy)
    );
    assert_eq!(codec(&[(PROP_AVRO_CODEC, "uncompressed")]), Ok(AvroCodec::Uncompressed));
    // Avro's own names, which PyIceberg also writes.
    assert_eq!(
        codec(&[(PROP_AVRO_CODEC, "deflate")]),
        Ok(AvroCodec::Deflate { level: 9 })
    );
    assert_eq!(
        codec(&[(PROP_AVRO_CODEC, "zstandard")]),
        Ok(AvroCodec::Zstd { level: 1 })
    );
    assert_eq!(codec(&[(PROP_AVRO_CODEC, "null")]), Ok(AvroCodec::Uncompressed));
    for (pairs, says) in [
        (&[(PROP_AVRO_CODEC, "bzip2")][..], "\"bzip2\""),
        (&[(PROP_AVRO_CODEC, "gzip"), (PROP_AVRO_LEVEL, "10")][..], "\"10\""),
        (&[(PROP_AVRO_CODEC, "zstd"), (PROP_AVRO_LEVEL, "-1")][..], "\"-1\""),
    ] {
        let err = codec(pairs).unwrap_err();
        assert!(err.contains(says), "{err}");
    }
}

#[tokio::test]
async fn recoded_manifests_and_lists_read_back_the_same_with_each_codec() {
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let ids = SeededIds::new(3);
    let t = table_in(&handle, "shop.plain", Some("uncompressed"), &ids, 0..=2).await;
    let all = files(&t).await;
    let (_, list, manifests) = all.last().unwrap();
    // One data manifest (added and existing entries) per snapshot of this table.
    assert_eq!(manifests.len(), 1);
    assert_eq!(codec_of(list).as_deref(), Some("null"));
    let (first_path, _, manifest) = &manifests[0];
    assert_eq!(codec_of(manifest).as_deref(), Some("null"));
    let none = |_: &str| None;

    for codec in [
        AvroCodec::Deflate { level: 9 },
        AvroCodec::Deflate { level: 0 },
        AvroCodec::Zstd { level: 1 },
        AvroCodec::Zstd { level: 19 },
        AvroCodec::Snappy,
    ] {
        let (kind, out) = recode(manifest, codec, &none).unwrap().unwrap();
        assert_eq!(kind, Kind::Manifest);
        assert_eq!(codec_of(&out).as_deref(), Some(codec.avro_name()));
        assert_eq!(
            Manifest::parse_avro(&out).unwrap(),
            Manifest::parse_avro(manifest).unwrap(),
            "{codec:?}"
        );
        // The header keeps Iceberg's metadata (and the schema JSON) byte for byte, in order.
        let (a, b) = (parse(manifest).unwrap().unwrap(), parse(&out).unwrap().unwrap());
        let others = |c: &Container<'_>| -> Vec<(String, Vec<u8>)> {
            c.meta
                .iter()
                .filter(|(k, _)| k != CODEC_KEY)
                .map(|(k, v)| (k.clone(), v.to_vec()))
                .collect()
        };
        assert_eq!(others(&a), others(&b));
        assert!(others(&a).iter().any(|(k, _)| k == "partition-spec"));
        assert_eq!(a.sync, b.sync);

        // A list with a new length for one manifest: the same entries but that length.
        let new = |p: &str| (p == first_path.as_str()).then_some(123);
        let (kind, out) = recode(list, codec, &new).unwrap().unwrap();
        assert_eq!(kind, Kind::ManifestList);
        assert_eq!(codec_of(&out).as_deref(), Some(codec.avro_name()));
        let mut want = ManifestList::parse_with_version(list, FormatVersion::V2)
            .unwrap()
            .entries()
            .to_vec();
        let got = ManifestList::parse_with_version(&out, FormatVersion::V2).unwrap();
        want[0].manifest_length = 123;
        assert_eq!(got.entries(), &want[..], "{codec:?}");
    }

    // Nothing to do: uncompressed with no new length, not Avro, another writer's codec.
    assert!(recode(list, AvroCodec::Uncompressed, &none).unwrap().is_none());
    assert!(
        recode(b"{\"not\": \"avro\"}", AvroCodec::Snappy, &none)
            .unwrap()
            .is_none()
    );
    let (_, deflated) = recode(manifest, AvroCodec::default(), &none).unwrap().unwrap();
    assert!(recode(&deflated, AvroCodec::Snappy, &none).unwrap().is_none());
    // A torn file is an error that says where.
    let err = recode(&manifest[..manifest.len() - 20], AvroCodec::Snappy, &none).unwrap_err();
    assert!(err.contains("ends inside") || err.contains("sync marker"), "{err}");
}

#[tokio::test]
async fn commits_write_the_table_codec_with_the_real_length_of_each_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let ids = SeededIds::new(4);
    // Default: gzip (deflate), from the first commit on.
    for (table, codec, want) in [
        ("shop.orders", None, "deflate"),
        ("shop.zstd", Some("zstd"), "zstandard"),
        ("shop.snappy", Some("snappy"), "snappy"),
        ("shop.plain", Some("uncompressed"), "null"),
    ] {
        let t = table_in(&handle, table, codec, &ids, 1..=3).await;
        let all = files(&t).await;
        assert_eq!(all.len(), 3, "{table}");
        let io = t.file_io();
        for (list_path, list, manifests) in &all {
            assert_eq!(codec_of(list).as_deref(), Some(want), "{list_path}");
            for (path, length, bytes) in manifests {
                let size = io.new_input(path).unwrap().metadata().await.unwrap().size;
                assert_eq!(*length as u64, size, "{path} in {list_path}");
                assert_eq!(bytes.len() as u64, size);
                assert_eq!(codec_of(bytes).as_deref(), Some(want), "{path}");
            }
        }
        // iceberg-rust reads every snapshot's files.
        assert_eq!(row_count(&t).await.unwrap(), 30, "{table}");
    }

    // A codec this build does not write is refused before anything is written.
    let t = table_in(&handle, "shop.bzip", Some("bzip2"), &ids, []).await;
    let before = std::fs::read_dir(dir.path().join("warehouse/shop/bzip/metadata"))
        .unwrap()
        .count();
    let err = try_append(&handle, &t, &ids, 6).await.unwrap_err();
    assert!(
        matches!(&err, TableError::Unsupported { reason, .. } if reason.contains("bzip2")),
        "{err}"
    );
    let after = std::fs::read_dir(dir.path().join("warehouse/shop/bzip/metadata"))
        .unwrap()
        .count();
    assert_eq!(before, after);
}
