//! The REST follower's commit, as data: which snapshots it adds (never backwards or sideways),
//! and which properties it sets and removes.

use super::*;
use crate::catalog::CatalogHandle;
use crate::dr::test_support::{append, table_with};
use crate::ids::SeededIds;
use crate::table::test_support::catalog_in;

#[tokio::test]
async fn the_commit_adds_the_newer_snapshots_of_main_in_order_and_never_goes_sideways() {
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let ids = SeededIds::new(7);
    let at_one = table_with(&handle, "shop.orders", &ids, 1..=1).await;
    let mut t = at_one.clone();
    for n in 2..=3 {
        t = append(&handle, &t, &ids, n).await;
    }
    let (dr, want) = (at_one.metadata(), t.metadata());
    let added = new_snapshots(dr, want).unwrap();
    let ids_added: Vec<i64> = added.iter().map(|s| s.snapshot_id()).collect();
    let mut expected = Vec::new();
    let mut next = want.current_snapshot_id();
    while next != dr.current_snapshot_id() {
        let s = want.snapshot_by_id(next.unwrap()).unwrap();
        expected.insert(0, s.snapshot_id());
        next = s.parent_snapshot_id();
    }
    assert_eq!(ids_added, expected);
    assert_eq!(added[0].parent_snapshot_id(), dr.current_snapshot_id());
    for s in &added {
        let original = want.snapshot_by_id(s.snapshot_id()).unwrap();
        assert_eq!(s.sequence_number(), original.sequence_number());
        assert_eq!(s.manifest_list(), original.manifest_list());
        assert_eq!(s.schema_id(), Some(dr.current_schema_id()));
    }
    // Nothing new: nothing added.
    assert!(new_snapshots(want, want).unwrap().is_empty());
    // A DR table at a snapshot that is not on the replica's main ancestry: refused.
    let other = table_with(&handle, "shop.other", &ids, 1..=1).await;
    let err = new_snapshots(other.metadata(), want).unwrap_err();
    assert!(err.contains("not an ancestor"), "{err}");
    // From nothing (the table just created): the whole ancestry.
    assert_eq!(new_snapshots(&empty(&handle).await, want).unwrap().len(), 3);
}

async fn empty(handle: &CatalogHandle) -> TableMetadata {
    crate::table::create_or_load_table(handle, "shop.empty", &tidemark_journal::spec::CompiledSpec::orders())
        .await
        .unwrap()
        .metadata()
        .clone()
}

#[tokio::test]
async fn properties_set_what_changed_and_remove_only_what_the_held_version_had() {
    let dir = tempfile::tempdir().unwrap();
    let handle = catalog_in(dir.path()).await;
    let base = empty(&handle).await;
    let with = |props: &[(&str, &str)]| {
        let mut json = serde_json::to_value(&base).unwrap();
        let map = json["properties"].as_object_mut().unwrap();
        map.clear();
        for (k, v) in props {
            map.insert(k.to_string(), Value::String(v.to_string()));
        }
        (serde_json::from_value::<TableMetadata>(json.clone()).unwrap(), json)
    };
    // The DR table has a, b (from the held version), and its own marker and a server's key.
    let (dr, _) = with(&[("a", "1"), ("b", "1"), (SOURCE_UUID_PROP, "u"), ("server.key", "s")]);
    let (_, held) = with(&[("a", "1"), ("b", "1")]);
    let (want, _) = with(&[("a", "2"), ("c", "1")]);
    let updates = property_updates(&dr, &want, Some(&held));
    assert_eq!(
        updates,
        vec![
            TableUpdate::SetProperties {
                updates: HashMap::from([("a".into(), "2".into()), ("c".into(), "1".into())]),
            },
            TableUpdate::RemoveProperties {
                removals: vec!["b".into()],
            },
        ]
    );
    assert!(property_updates(&dr, &dr, Some(&held)).is_empty());
}
