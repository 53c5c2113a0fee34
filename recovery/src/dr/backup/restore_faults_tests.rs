//! `catalog restore` with the warehouse read through the seeded fault wrapper
//! (`tidemark_journal::store::faulty`): under 503s on its reads it either restores every table
//! or stops with an error before anything is registered, never a refusal that calls a readable
//! object missing or changed; a plain re-run then restores the catalog.

use std::sync::Arc;

use tidemark_journal::store::faulty::{Fault, FaultyStore, Op, Rule};

use super::super::{BackupError, restore_through};
use super::*;

#[tokio::test]
async fn restore_through_faults_on_every_warehouse_read_then_a_clean_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let ids = SeededIds::new(73);
    let handle = catalog_in(dir.path()).await;
    table_with(&handle, "shop.orders", &ids, 1..=2).await;
    table_with(&handle, "shop.customers", &ids, 9..=9).await;
    let store = LocalStore::create(dir.path().join("backups")).unwrap();
    let id = backup(&handle, None, &store).await.unwrap().id;
    let b = load(&store, &id).await.unwrap();
    let base = crate::dr::rebuild::warehouse_base(handle.warehouse()).unwrap();
    let inner = tidemark_journal::store::open(&base).await.unwrap();
    let (mut injected, mut stopped) = (0, 0);
    for seed in 1..=8u64 {
        let fresh = open_catalog(&CatalogConfig {
            uri: dir.path().join(format!("catalog-f{seed}.db")).display().to_string(),
            warehouse: handle.warehouse().to_string(),
            name: "tidemark".into(),
        })
        .await
        .unwrap();
        let faulty = Arc::new(FaultyStore::new(
            inner.clone(),
            seed,
            vec![
                Rule::new(Op::Get, Fault::Unavailable).probability(0.5),
                Rule::new(Op::Head, Fault::Unavailable).probability(0.5),
                Rule::new(Op::List, Fault::Unavailable).probability(0.5),
            ],
        ));
        match restore_through(&fresh, &b, &Expected::Empty, false, Some(faulty.clone())).await {
            Ok(r) => assert!(
                r.applied,
                "seed {seed}: a fault is not a missing or changed object: {r:?}"
            ),
            Err(e) => {
                stopped += 1;
                assert!(matches!(e, BackupError::Dr(_)), "seed {seed}: {e}");
                assert!(
                    e.to_string().contains("503"),
                    "seed {seed}: names the failed request: {e}"
                );
                assert!(
                    fresh.pointers(None).await.unwrap().is_empty(),
                    "seed {seed}: nothing registered before every check passed"
                );
            }
        }
        injected += faulty.injected();
        let r = restore(&fresh, &b, &Expected::Empty, false).await.unwrap();
        assert!(r.applied, "seed {seed}: {r:?}");
        for t in &b.tables {
            assert_eq!(
                pointer(&fresh, &t.table).await.as_deref(),
                Some(t.metadata_location.as_str()),
                "seed {seed}"
            );
        }
    }
    assert!(
        injected > 0 && stopped > 0,
        "the faults must hit: {injected} injected, {stopped} stopped"
    );
}
