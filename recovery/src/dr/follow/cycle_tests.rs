//! Tests of the warm follower on local folders: a replica whose metadata arrives before its data
//! (the hostile order), strict and eventual, never backwards, conflicts, leases.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use tidemark_journal::clock::StepClock;
use tidemark_journal::store::ObjectStore;
use tidemark_journal::store::local::LocalStore;

use super::*;
use crate::catalog::CatalogHandle;
use crate::dr::follow_state::{STATE_KEY, StateStore};
use crate::dr::follower::{RunError, RunLimits, run};
use crate::dr::lease::{self, Lease};
use crate::dr::test_support::{append, row_count, table_with};
use crate::ids::SeededIds;
use crate::table::live_data_files;
use crate::table::test_support::catalog_in;

/// Copies the files under `src` into `dst` that `dst` lacks and `pick` accepts.
fn copy_where(src: &Path, dst: &Path, pick: &dyn Fn(&Path) -> bool) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let target = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_where(&entry.path(), &target, pick);
        } else if pick(&entry.path()) && !target.exists() {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn metadata_only(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "metadata")
}

pub(crate) struct Site {
    pub dir: tempfile::TempDir,
    pub src: CatalogHandle,
    pub ids: SeededIds,
}

impl Site {
    pub async fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        let src = crate::dr::test_support::source_catalog(dir.path()).await;
        Site {
            dir,
            src,
            ids: SeededIds::new(13),
        }
    }
    pub fn replica(&self) -> std::path::PathBuf {
        self.dir.path().join("replica")
    }
    /// The replication: everything (`all`) or only metadata folders, object by object.
    pub fn replicate(&self, all: bool) {
        let pick: &dyn Fn(&Path) -> bool = if all { &|_| true } else { &metadata_only };
        copy_where(&self.dir.path().join("src/warehouse"), &self.replica(), pick);
    }
    pub fn opts(&self, mode: FollowMode, holder: &str) -> FollowOptions {
        let to = warehouse_base(&self.replica().display().to_string()).unwrap();
        FollowOptions {
            warehouse: self.replica().display().to_string(),
            namespace: None,
            mode,
            prefix_map: Some(PrefixMap {
                from: self.src.warehouse().to_string(),
                to,
            }),
            file_io_props: HashMap::new(),
            holder: holder.into(),
            interval_ms: None,
        }
    }
    pub async fn dr(&self, name: &str) -> (CatalogHandle, Arc<dyn ObjectStore>) {
        let d = self.dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let state: Arc<dyn ObjectStore> = Arc::new(LocalStore::create(d.join("state")).unwrap());
        (catalog_in(&d).await, state)
    }
}

pub(crate) fn clock() -> StepClock {
    StepClock::new(Utc.timestamp_opt(1_900_000_000, 0).unwrap(), Duration::seconds(1))
}

pub(crate) async fn once(
    opts: &FollowOptions,
    dr: &CatalogHandle,
    state: &Arc<dyn ObjectStore>,
    c: &StepClock,
) -> Result<FollowerState, RunError> {
    run(opts, dr, state.clone(), RunLimits::once(), c, &mut |_| {}).await
}

fn name_of(location: &str) -> &str {
    location.rsplit('/').next().unwrap()
}

#[tokio::test]
async fn strict_never_registers_a_version_with_a_missing_file_and_eventual_lists_them() {
    let site = Site::new().await;
    let mut t = table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    site.replicate(true);
    let consistent = t.metadata_location().unwrap().to_string();
    for n in 3..=4 {
        t = append(&site.src, &t, &site.ids, n).await;
    }
    // Metadata arrives before its data.
    site.replicate(false);
    let c = clock();

    let (strict_dr, strict_state) = site.dr("strict").await;
    let opts = site.opts(FollowMode::Strict, "f-strict");
    let s = once(&opts, &strict_dr, &strict_state, &c).await.unwrap();
    let ts = s.table("shop.orders").unwrap();
    assert_eq!(ts.status, TableStatus::MissingFiles, "{ts:?}");
    assert_eq!(name_of(ts.verified_metadata.as_deref().unwrap()), name_of(&consistent));
    assert_eq!(ts.versions_behind, Some(2));
    assert_eq!(ts.behind_ms, Some(2_000));
    assert_eq!(ts.missing_count, 2);
    assert!(ts.missing.iter().all(|m| m.what == "data file"), "{:?}", ts.missing);
    assert_eq!(
        name_of(ts.latest_metadata.as_deref().unwrap()),
        name_of(t.metadata_location().unwrap())
    );
    let registered = ts.registered_metadata.clone().unwrap();
    // A rewrite to the replica's paths, named as iceberg-rust requires (NNNNN-<uuid>).
    assert_eq!(name_of(&registered), rewrite_name(&consistent).unwrap());
    let dr_table = strict_dr
        .catalog()
        .load_table(&parse_ident("shop.orders").unwrap())
        .await
        .unwrap();
    assert_eq!(row_count(&dr_table).await.unwrap(), 20);
    let replica_base = &opts.prefix_map.as_ref().unwrap().to;
    for f in live_data_files(&dr_table).await.unwrap() {
        assert!(f.file_path().starts_with(replica_base.as_str()), "{}", f.file_path());
    }
    let first_since = ts.missing[0].missing_since.clone();

    // Still missing on the next scan: same age origin, nothing moved.
    let s = once(&opts, &strict_dr, &strict_state, &c).await.unwrap();
    let ts2 = s.table("shop.orders").unwrap();
    assert_eq!(ts2.registered_metadata.as_deref(), Some(registered.as_str()));
    assert_eq!(ts2.missing[0].missing_since, first_since);
    assert!(ts2.last_scan_at > ts.last_scan_at);

    let (ev_dr, ev_state) = site.dr("eventual").await;
    let s = once(&site.opts(FollowMode::Eventual, "f-ev"), &ev_dr, &ev_state, &c)
        .await
        .unwrap();
    let te = s.table("shop.orders").unwrap();
    assert_eq!(te.status, TableStatus::MissingFiles);
    assert_eq!(te.versions_behind, Some(0));
    assert_eq!(te.verified_metadata, te.latest_metadata);
    assert_eq!(te.missing_count, 2);

    // The data arrives; the source is then lost: the DR table reads from the replica alone.
    site.replicate(true);
    let s = once(&opts, &strict_dr, &strict_state, &c).await.unwrap();
    let ts = s.table("shop.orders").unwrap();
    assert_eq!(ts.status, TableStatus::Ok, "{ts:?}");
    assert_eq!(ts.versions_behind, Some(0));
    assert!(ts.missing.is_empty());
    assert_eq!(s.cycle, 1);
    std::fs::remove_dir_all(site.dir.path().join("src/warehouse")).unwrap();
    let dr_table = strict_dr
        .catalog()
        .load_table(&parse_ident("shop.orders").unwrap())
        .await
        .unwrap();
    assert_eq!(row_count(&dr_table).await.unwrap(), 40);
}

#[tokio::test]
async fn nothing_moves_backwards_and_someone_elses_pointer_is_a_conflict() {
    let site = Site::new().await;
    let mut t = table_with(&site.src, "shop.orders", &site.ids, 1..=3).await;
    let _other = table_with(&site.src, "shop.other", &site.ids, 1..=1).await;
    site.replicate(true);
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "f1");
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    let at_head = s.table("shop.orders").unwrap().clone();
    assert_eq!(at_head.status, TableStatus::Ok);
    let ident = parse_ident("shop.orders").unwrap();
    let pointer = dr.metadata_pointer(&ident).await.unwrap().unwrap();

    // The replica loses its newest metadata file (a replica rolled back): held, not moved.
    let head_file = site.replica().join(at_head.verified_metadata.as_deref().unwrap());
    std::fs::remove_file(&head_file).unwrap();
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    let held = s.table("shop.orders").unwrap();
    assert_eq!(held.status, TableStatus::Held, "{held:?}");
    assert!(held.reason.contains("does not pass through"), "{}", held.reason);
    assert_eq!(
        dr.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(pointer.as_str())
    );
    assert_eq!(held.verified_metadata, at_head.verified_metadata);

    // Someone else moves the DR pointer: the next cycle leaves the table alone.
    let v1 = std::fs::read_dir(site.replica().join("shop/orders/metadata"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("00001-"))
        .unwrap();
    let v1_url = format!("file://{}", v1.display());
    assert!(dr.swap_metadata_pointer(&ident, &pointer, &v1_url).await.unwrap());
    t = append(&site.src, &t, &site.ids, 4).await;
    site.replicate(true);
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    let conflict = s.table("shop.orders").unwrap();
    assert_eq!(conflict.status, TableStatus::Conflict, "{conflict:?}");
    assert!(conflict.reason.contains(&v1_url), "{}", conflict.reason);
    assert_eq!(
        dr.metadata_pointer(&ident).await.unwrap().as_deref(),
        Some(v1_url.as_str())
    );
    assert_eq!(
        name_of(conflict.latest_metadata.as_deref().unwrap()),
        name_of(t.metadata_location().unwrap())
    );
    // The other table is independent of it.
    assert_eq!(s.table("shop.other").unwrap().status, TableStatus::Ok);
}

#[tokio::test]
async fn two_followers_never_run_at_once_and_a_fenced_follower_writes_nothing() {
    let site = Site::new().await;
    table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    site.replicate(true);
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let ident = parse_ident("shop.orders").unwrap();

    let first = Lease::acquire(state.clone(), "follower-a", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
    let err = once(&site.opts(FollowMode::Strict, "follower-b"), &dr, &state, &c)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("follower-a"), "{err}");
    assert!(dr.metadata_pointer(&ident).await.unwrap().is_none());
    assert!(state.get(STATE_KEY, None).await.unwrap_err().is_not_found());

    // follower-a is fenced (a failover) before its cycle writes: it changes nothing.
    lease::fence(state.clone(), "failover-1", "dr", "drill", &c)
        .await
        .unwrap();
    let opts = site.opts(FollowMode::Strict, "follower-a");
    let err = cycle(&opts, &dr, &first, None, 1, &c).await.unwrap_err();
    assert!(matches!(err, FollowError::Lease(LeaseError::Fenced { .. })), "{err:?}");
    assert!(dr.metadata_pointer(&ident).await.unwrap().is_none());
    let mut states = StateStore::new(state.clone());
    assert!(states.load().await.unwrap().is_none());
    // Nor does any follower start on it again.
    let err = once(&opts, &dr, &state, &c).await.unwrap_err();
    assert!(matches!(err, RunError::Lease(LeaseError::Fenced { .. })), "{err:?}");
}

#[tokio::test]
async fn an_undecidable_head_is_held_and_named_and_a_hint_from_the_last_scan_decides() {
    let site = Site::new().await;
    let t = table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    site.replicate(true);
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "f1");
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    let head = s.table("shop.orders").unwrap().latest_metadata.clone().unwrap();
    assert_eq!(name_of(&head), name_of(t.metadata_location().unwrap()));

    // A commit that lost its race against the head leaves a file at the head's version with the
    // same predecessor: two equally long chains.
    let head_path = site.replica().join(&head);
    let (version, _) = name_of(&head).split_once('-').unwrap();
    let stray = head_path.with_file_name(format!("{version}-00000000-0000-4000-8000-000000000001.metadata.json"));
    std::fs::copy(&head_path, &stray).unwrap();
    // The follower that saw the head before is told by its own state which one it is.
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    let ts = s.table("shop.orders").unwrap();
    assert_eq!(ts.status, TableStatus::Ok, "{ts:?}");
    assert_eq!(ts.strays.len(), 1, "{ts:?}");
    assert!(ts.strays[0].ends_with(name_of(stray.to_str().unwrap())));
    assert!(ts.head_choice.contains("hint"), "{}", ts.head_choice);
    // A new follower without that state holds the table and names both files.
    let (dr2, state2) = site.dr("dr2").await;
    let s = once(&opts, &dr2, &state2, &c).await.unwrap();
    let held = s.table("shop.orders").unwrap();
    assert_eq!(held.status, TableStatus::Held, "{held:?}");
    assert!(held.reason.contains(name_of(&head)) && held.reason.contains(name_of(stray.to_str().unwrap())));
    assert!(
        dr2.metadata_pointer(&parse_ident("shop.orders").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}

/// A resync record listed beside a table's metadata files that cannot be read (here: not a
/// record at all) may name the very file that would be chosen as the head: the table is held,
/// naming the record, nothing registered; the other tables are followed.
#[tokio::test]
async fn a_resync_record_that_cannot_be_read_holds_its_table() {
    let site = Site::new().await;
    table_with(&site.src, "shop.orders", &site.ids, 1..=2).await;
    table_with(&site.src, "shop.other", &site.ids, 1..=1).await;
    site.replicate(true);
    let bad = site
        .replica()
        .join("shop/orders/metadata/tidemark-resync-0000000000000000.json");
    std::fs::write(&bad, b"{\"torn").unwrap();
    let c = clock();
    let (dr, state) = site.dr("dr").await;
    let opts = site.opts(FollowMode::Strict, "f1");
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    let held = s.table("shop.orders").unwrap();
    assert_eq!(held.status, TableStatus::Held, "{held:?}");
    assert!(
        held.reason.contains("tidemark-resync-0000000000000000.json") && held.reason.contains("nothing moved"),
        "{}",
        held.reason
    );
    let orders = parse_ident("shop.orders").unwrap();
    assert!(dr.metadata_pointer(&orders).await.unwrap().is_none());
    assert_eq!(s.table("shop.other").unwrap().status, TableStatus::Ok);
    // Once it is readable (here: removed), the table is followed.
    std::fs::remove_file(&bad).unwrap();
    let s = once(&opts, &dr, &state, &c).await.unwrap();
    assert_eq!(s.table("shop.orders").unwrap().status, TableStatus::Ok, "{s:?}");
}
