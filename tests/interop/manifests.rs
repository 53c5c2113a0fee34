//! Issue 11, defect 10's manifests: every manifest and manifest list tidemark writes into a
//! PyIceberg table (apply, fault delete, recover) has the Avro codec of
//! `write.avro.compression-codec` in its header (default `gzip` = Avro `deflate`, as Java and
//! PyIceberg write), every `manifest_length` is the object's real size, and PyIceberg reads the
//! tables row for row.

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::assert_same_rows;
use super::super::support::python::{assert_lengths_are_sizes as lengths_are_sizes, new_codecs};
use super::{Shared, ev};

fn manifests(t: &Shared, table: &str) -> Vec<Value> {
    t.py.manifests(table)
}

fn codecs(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn manifests_follow_the_avro_codec_property_in_apply_fault_delete_and_recover() {
    let Some(mut t) = Shared::new() else { return };
    let first: String = (1..=6).map(|i| ev(i, &format!("o-{i}"), 1, "placed", "EUR")).collect();
    // tidemark creates the table and applies: Java's default codec, deflate.
    t.apply(&first);
    let snaps = manifests(&t, "shop.orders");
    assert_eq!(
        new_codecs(&snaps, 0),
        codecs(&["list deflate", "manifest deflate"]),
        "{snaps:?}"
    );
    lengths_are_sizes(&snaps);
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&[]));

    // Another writer asks for zstd: an update (a rewrite: added, deleted and existing entries)
    // and a fault delete write zstandard lists and manifests.
    t.py("set-property", &["write.avro.compression-codec", "zstd"]);
    let before = manifests(&t, "shop.orders").len();
    t.apply(&(ev(7, "o-1", 2, "paid", "EUR") + &ev(8, "o-7", 1, "placed", "USD")));
    t.s.fault_delete(&t.catalog, "shop.orders", "order_id = 'o-3'");
    let snaps = manifests(&t, "shop.orders");
    assert_eq!(snaps.len(), before + 2);
    assert_eq!(
        new_codecs(&snaps, before),
        codecs(&["list zstandard", "manifest zstandard"]),
        "{snaps:?}"
    );
    lengths_are_sizes(&snaps);
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-3"]));

    // A recovery into a new table keeps the source's properties: its seed and replay are zstd
    // (and it brings back the row the fault deleted: the journal's state).
    let r = t.recover("shop.recovered", None);
    assert_eq!(r["validation"]["ok"], true, "{r}");
    let rec = manifests(&t, "shop.recovered");
    assert_eq!(
        new_codecs(&rec, 0),
        codecs(&["list zstandard", "manifest zstandard"]),
        "{rec:?}"
    );
    lengths_are_sizes(&rec);
    assert_same_rows(&t.py.read("shop.recovered"), &t.expected(&[]));

    // uncompressed is honoured too; PyIceberg still reads every snapshot's files.
    t.py("set-property", &["write.avro.compression-codec", "uncompressed"]);
    let before = manifests(&t, "shop.orders").len();
    t.apply(&ev(9, "o-2", 2, "paid", "EUR"));
    let snaps = manifests(&t, "shop.orders");
    assert_eq!(
        new_codecs(&snaps, before),
        codecs(&["list null", "manifest null"]),
        "{snaps:?}"
    );
    lengths_are_sizes(&snaps);
    assert_same_rows(&t.py.read("shop.orders"), &t.expected(&["o-3"]));
}

/// A PyIceberg table (PyIceberg's own manifests are deflate): tidemark's zstd commits between
/// PyIceberg's keep every length right, PyIceberg appends after them and tidemark reads
/// PyIceberg's. (snappy is covered by the library tests: PyIceberg needs python-snappy, which
/// the interop venv does not have, to read or write it.)
#[test]
fn tidemark_and_pyiceberg_commits_interleave_with_compressed_manifests() {
    let Some(mut t) = Shared::new() else { return };
    super::defects::pyiceberg_table(&t);
    t.py("set-property", &["write.avro.compression-codec", "zstd"]);
    t.apply(&ev(1, "o-3", 1, "placed", "EUR"));
    let snaps = manifests(&t, "shop.orders");
    let last = snaps.last().unwrap();
    assert!(last["tidemark"].as_bool().unwrap(), "{last}");
    assert_eq!(last["list"]["codec"], "zstandard", "{last}");
    let row = serde_json::json!({
        "order_id": "o-4", "order_version": 1, "customer_id": "c-o-4", "status": "placed", "amount": "4.00",
        "currency": "EUR", "is_deleted": false, "event_time": "2026-11-01T10:00:00Z", "journal_position": 0,
    });
    let rows = t.s.write("o4.jsonl", &format!("{row}\n"));
    t.py("append", &[rows.to_str().unwrap()]);
    t.apply(&ev(2, "o-4", 2, "paid", "EUR"));
    let snaps = manifests(&t, "shop.orders");
    lengths_are_sizes(&snaps);
    let found = t.py.read("shop.orders");
    let keys: Vec<_> = found.iter().map(|r| r["order_id"].as_str().unwrap()).collect();
    assert_eq!(keys, ["o-1", "o-2", "o-3", "o-4"]);
    assert_eq!(found[3]["order_version"], 2, "{:?}", found[3]);
}

/// A manifest codec this build does not write (bzip2: PyIceberg writes it, Java does not) is
/// refused with exit 3 by apply, fault delete and recover, before anything is written: no new
/// snapshot, no recovered table; the table's other readers are not affected.
#[test]
fn a_manifest_codec_this_build_does_not_write_is_refused_before_anything_is_written() {
    let Some(mut t) = Shared::new() else { return };
    t.apply(&(ev(1, "o-1", 1, "placed", "EUR") + &ev(2, "o-2", 1, "placed", "EUR")));
    t.py("set-property", &["write.avro.compression-codec", "bzip2"]);
    let before = manifests(&t, "shop.orders").len();
    let input = t.s.write("more.ndjson", &ev(3, "o-3", 1, "placed", "EUR"));
    t.s.append(&t.journal, input.to_str().unwrap());
    let says = ["write.avro.compression-codec", "bzip2"];
    t.story().run("apply", &[]).fails(3, &says);
    t.fault_delete(&["--where", "order_id = 'o-1'"]).fails(3, &says);
    t.story().recover("shop.recovered", &[]).fails(3, &says);
    assert_eq!(manifests(&t, "shop.orders").len(), before);
    let state =
        t.s.run(&["catalog", "state", "--catalog", &t.catalog, "--json"])
            .ok()
            .json();
    assert!(state["tables"].get("shop.recovered").is_none(), "{state}");
    let rows = t.py.read("shop.orders");
    assert_eq!(rows.len(), 2, "{rows:?}");
}
