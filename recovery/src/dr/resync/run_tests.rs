//! Failback on local folders: the demoted old primary has a commit the new primary never got.

use super::*;
use crate::dr::follow::tests::{Site, clock};
use crate::dr::follow_state::FollowMode;
use crate::dr::follower::{RunLimits, run};
use crate::dr::test_support::{append, row_count, table_with};

#[tokio::test]
async fn resync_walks_back_keeps_and_lists_every_file_and_restores_what_only_the_demoted_side_deleted() {
    let site = Site::new().await;
    let mut t = table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    table_with(&site.src, "shop.other", &site.ids, 1..=1).await;
    site.replicate(true);
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "f1");
    let followed = run(&opts, &dr, state, RunLimits::once(), &c, &mut |_| {})
        .await
        .unwrap();
    let common = t.metadata_location().unwrap().to_string();

    // The old primary commits once more, never replicated; the DR side, promoted, commits too.
    t = append(&site.src, &t, &site.ids, 3).await;
    let diverged = t.metadata().current_snapshot_id().unwrap();
    let diverged_files: Vec<String> = crate::table::live_data_files(&t)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file_path().to_string())
        .filter(|p| p.contains("/shop/orders/"))
        .collect();
    let ident = parse_ident("shop.orders").unwrap();
    let dr_table = dr.catalog().load_table(&ident).await.unwrap();
    append(&dr, &dr_table, &site.ids, 4).await;
    // Only the demoted side loses shop.other (dropped from its catalog, files kept); and it has a
    // table of its own.
    let other = parse_ident("shop.other").unwrap();
    site.src.catalog().drop_table(&other).await.unwrap();
    table_with(&site.src, "shop.local_only", &site.ids, 1..=1).await;

    let plan = resync(&site.src, &dr, None, Some(&followed), true).await.unwrap();
    assert!(plan.dry_run);
    let by = |r: &ResyncReport, n: &str| r.tables.iter().find(|t| t.table == n).unwrap().clone();
    let orders = by(&plan, "shop.orders");
    assert_eq!(orders.action, ResyncAction::WalkedBack, "{orders:?}");
    assert_eq!(orders.walked_back_to.as_deref(), Some(common.as_str()));
    assert_eq!(orders.walked_over, vec![t.metadata_location().unwrap().to_string()]);
    assert_eq!(orders.diverged_snapshots, vec![diverged]);
    // The diverged commit's data file, manifest and manifest list are kept and listed.
    let kept: Vec<&str> = orders.kept_files.iter().map(|f| f.path.as_str()).collect();
    let new_data: Vec<&String> = diverged_files
        .iter()
        .filter(|p| !kept.is_empty() && kept.contains(&p.as_str()))
        .collect();
    assert_eq!(new_data.len(), 1, "{kept:?}");
    assert!(orders.kept_files.iter().any(|f| f.what == "manifest list"));
    assert!(orders.kept_files.iter().any(|f| f.what == "manifest"));
    assert_eq!(orders.kept_files.iter().filter(|f| f.what == "data file").count(), 1);
    assert_eq!(
        site.src.metadata_pointer(&ident).await.unwrap().as_deref(),
        t.metadata_location()
    );
    assert_eq!(by(&plan, "shop.other").action, ResyncAction::Restored);
    assert_eq!(by(&plan, "shop.local_only").action, ResyncAction::OnlyOnDemoted);
    assert!(site.src.metadata_pointer(&other).await.unwrap().is_none());

    let done = resync(&site.src, &dr, None, Some(&followed), false).await.unwrap();
    assert_eq!(by(&done, "shop.orders").kept_files, orders.kept_files);
    assert_eq!(
        site.src.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(common.as_str())
    );
    for f in &orders.kept_files {
        let path = f.path.strip_prefix("file://").unwrap();
        assert!(std::path::Path::new(path).exists(), "{} was deleted", f.path);
    }
    let back = site.src.catalog().load_table(&ident).await.unwrap();
    assert_eq!(row_count(&back).await.unwrap(), 20);
    assert!(site.src.metadata_pointer(&other).await.unwrap().is_some());
    assert!(
        site.src
            .metadata_pointer(&parse_ident("shop.local_only").unwrap())
            .await
            .unwrap()
            .is_some()
    );
    // Run again: in step, nothing more to do.
    let again = resync(&site.src, &dr, None, Some(&followed), false).await.unwrap();
    assert_eq!(by(&again, "shop.orders").action, ResyncAction::InStep);
}

#[tokio::test]
async fn resync_refuses_while_the_new_primary_misses_files() {
    let site = Site::new().await;
    let t = table_with(&site.src, "shop.orders", &site.ids, 1..=1).await;
    site.replicate(true);
    append(&site.src, &t, &site.ids, 2).await;
    site.replicate(false);
    let c = clock();
    // Strict: the new primary holds a complete version; the files the newer one waits on are not
    // the new primary's. Eventual: the version it holds lacks files, and the resync refuses.
    let (strict_dr, strict_state) = site.dr("strict").await;
    let opts = site.opts(FollowMode::Strict, "f1");
    let strict = run(&opts, &strict_dr, strict_state, RunLimits::once(), &c, &mut |_| {})
        .await
        .unwrap();
    resync(&site.src, &strict_dr, None, Some(&strict), true).await.unwrap();
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Eventual, "f2");
    let followed = run(&opts, &dr, state, RunLimits::once(), &c, &mut |_| {})
        .await
        .unwrap();
    let err = resync(&site.src, &dr, None, Some(&followed), true).await.unwrap_err();
    assert!(err.to_string().contains("shop.orders"), "{err}");
}

/// A SQL table walked back, committed to again from the common version (a file with the walked-over
/// one's version number), then dropped on the demoted side only: its restore starts from its own
/// head, never from the walked-over file (which ties with it by chain length).
#[tokio::test]
async fn a_table_dropped_after_a_walk_back_is_restored_from_its_own_head() {
    let site = Site::new().await;
    let t = table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    site.replicate(true);
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "f1");
    let followed = run(&opts, &dr, state, RunLimits::once(), &clock(), &mut |_| {})
        .await
        .unwrap();
    let common = t.metadata_location().unwrap().to_string();
    let by = |r: &ResyncReport| r.tables.iter().find(|t| t.table == "shop.orders").unwrap().clone();
    let walked = append(&site.src, &t, &site.ids, 3).await;
    let done = resync(&site.src, &dr, None, Some(&followed), false).await.unwrap();
    assert_eq!(by(&done).action, ResyncAction::WalkedBack, "{done:?}");
    let ident = parse_ident("shop.orders").unwrap();
    let back = site.src.catalog().load_table(&ident).await.unwrap();
    let own = append(&site.src, &back, &site.ids, 4).await;
    let (w, o) = (walked.metadata_location().unwrap(), own.metadata_location().unwrap());
    assert_eq!(
        crate::dr::rebuild::file_name(w).split('-').next(),
        crate::dr::rebuild::file_name(o).split('-').next(),
        "the same version number: {w} {o}"
    );
    site.src.catalog().drop_table(&ident).await.unwrap();
    let r = resync(&site.src, &dr, None, Some(&followed), false).await.unwrap();
    let t = by(&r);
    assert_eq!(t.action, ResyncAction::Restored, "{t:?}");
    assert_eq!(t.walked_over, vec![o.to_string()], "{t:?}");
    assert_eq!(t.walked_back_to.as_deref(), Some(common.as_str()));
    assert_eq!(
        site.src.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(common.as_str())
    );
}
