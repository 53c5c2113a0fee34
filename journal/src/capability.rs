//! Probes a store for what the journal relies on. Behaviour is probed, not configuration read:
//! a server can report versioning enabled and still ignore `If-None-Match: *` in a versioned
//! bucket (Ceph RGW 16 does), or refuse every quoted `If-Match`.
//!
//! `tidemark store check` runs [`check`] (all probes, races included). Every journal append runs
//! [`require_journal_capabilities`] (versioning and create-only, a few requests) and refuses a
//! store that fails, naming the capability.
//!
//! Every probe write goes through [`put_resolved`]: a lost reply on a probe object is resolved by
//! reading it back, so the probe never takes its own write for the server's refusal.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tidemark_schemas::{Capability, FORMAT_VERSION, StoreCheckReport};

use crate::clock::Clock;
use crate::error::{JournalError, Result};
use crate::paths;
use crate::store::{ObjectStore, PutMode, StoreError, put_resolved};

pub const VERSIONING: &str = "versioning";
pub const CREATE_ONLY: &str = "create-only in a versioned bucket";
pub const CAS: &str = "compare-and-swap (If-Match)";
pub const CREATE_RACE: &str = "create-only under a race";
pub const CAS_RACE: &str = "compare-and-swap under a race";
pub const VERSION_LISTING: &str = "version listing and version delete";

fn cap(name: &str, required: bool, outcome: std::result::Result<String, String>) -> Capability {
    let (ok, detail) = match outcome {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    Capability {
        name: name.into(),
        required,
        ok,
        detail,
    }
}

async fn probe_versioning(
    store: &dyn ObjectStore,
    key: &str,
) -> Result<std::result::Result<String, String>, StoreError> {
    let a = put_resolved(store, key, Bytes::from_static(b"probe-1"), PutMode::Overwrite)
        .await?
        .put;
    let b = put_resolved(store, key, Bytes::from_static(b"probe-2"), PutMode::Overwrite)
        .await?
        .put;
    let (Some(va), Some(vb)) = (a.version_id, b.version_id) else {
        return Ok(Err("writes return no version id: enable bucket versioning".into()));
    };
    if va == vb || va == "null" || vb == "null" {
        return Ok(Err(format!(
            "two writes returned version ids {va} and {vb}: enable bucket versioning"
        )));
    }
    let old = store.get(key, Some(&va)).await?;
    if &old.body[..] != b"probe-1" {
        return Ok(Err(format!("version {va} does not return the bytes written")));
    }
    Ok(Ok(format!("distinct version ids, old version readable ({va}, {vb})")))
}

async fn probe_create_only(
    store: &dyn ObjectStore,
    prefix: &str,
    rounds: usize,
) -> Result<std::result::Result<String, String>, StoreError> {
    for round in 0..rounds {
        let key = format!("{prefix}/create-{round}");
        put_resolved(store, &key, Bytes::from_static(b"first"), PutMode::Create).await?;
        match put_resolved(store, &key, Bytes::from_static(b"second"), PutMode::Create).await {
            Err(e) if e.is_conflict() => {}
            Err(e) => return Err(e),
            Ok(_) => {
                return Ok(Err(format!(
                    "a second If-None-Match: * write of {key} succeeded (round {}): the server ignores create-only",
                    round + 1
                )));
            }
        }
        let now = store.get(&key, None).await?;
        if &now.body[..] != b"first" {
            return Ok(Err(format!("{key} changed after a refused create-only write")));
        }
    }
    Ok(Ok(format!("second create refused in {rounds} of {rounds} rounds")))
}

async fn probe_cas(store: &dyn ObjectStore, key: &str) -> Result<std::result::Result<String, String>, StoreError> {
    let first = put_resolved(store, key, Bytes::from_static(b"1"), PutMode::Overwrite)
        .await?
        .put;
    // A put If-Match the first write's ETag: current for the second put, stale for the third.
    let put_if_first = |body: &'static [u8]| {
        let etag = first.etag.clone();
        put_resolved(store, key, Bytes::from_static(body), PutMode::Update { etag })
    };
    match put_if_first(b"2").await {
        Ok(_) => {}
        Err(e) if e.is_conflict() => {
            return Ok(Err(format!(
                "If-Match with the current ETag {} was refused",
                first.etag
            )));
        }
        Err(e) => return Err(e),
    }
    match put_if_first(b"3").await {
        Err(e) if e.is_conflict() => Ok(Ok("current ETag accepted, stale ETag refused".into())),
        Err(e) => Err(e),
        Ok(_) => Ok(Err(format!("If-Match with the stale ETag {} succeeded", first.etag))),
    }
}

async fn probe_race(
    store: Arc<dyn ObjectStore>,
    key: String,
    writers: usize,
    cas: bool,
) -> Result<std::result::Result<String, String>, StoreError> {
    let mode = if cas {
        let base = put_resolved(store.as_ref(), &key, Bytes::from_static(b"base"), PutMode::Overwrite).await?;
        PutMode::Update { etag: base.put.etag }
    } else {
        PutMode::Create
    };
    let tasks: Vec<_> = (0..writers)
        .map(|i| {
            let (store, key, mode) = (store.clone(), key.clone(), mode.clone());
            tokio::spawn(async move { put_resolved(store.as_ref(), &key, Bytes::from(format!("w{i}")), mode).await })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        match t.await.expect("probe task panicked") {
            Ok(_) => wins += 1,
            Err(e) if e.is_conflict() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(if wins == 1 {
        Ok(format!("1 of {writers} concurrent writers won"))
    } else {
        Err(format!("{wins} of {writers} concurrent writers won"))
    })
}

async fn probe_version_listing(
    store: &dyn ObjectStore,
    prefix: &str,
) -> Result<std::result::Result<String, String>, StoreError> {
    let versions = store.list_versions(&format!("{prefix}/")).await?;
    if versions.is_empty() {
        return Ok(Err("listing versions returned nothing for the probe's objects".into()));
    }
    for v in &versions {
        store.delete_version(&v.key, &v.version_id).await?;
    }
    let left = store.list_versions(&format!("{prefix}/")).await?;
    if left.is_empty() {
        Ok(Ok(format!("{} versions listed and removed", versions.len())))
    } else {
        Ok(Err(format!("{} versions remain after deleting them", left.len())))
    }
}

/// Unique per probe: time, process, and a counter (two probes in one process never share keys).
fn nonce(clock: &dyn Clock) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}-{}-{n}",
        clock.now().timestamp_nanos_opt().unwrap_or_default(),
        std::process::id()
    )
}

/// Every probe. Probe objects are written under `_probe/` and removed at the end.
pub async fn check(store: Arc<dyn ObjectStore>, writer_id: &str, clock: &dyn Clock) -> Result<StoreCheckReport> {
    let prefix = paths::probe_key(writer_id, &nonce(clock));
    let s = store.as_ref();
    let caps = vec![
        cap(
            VERSIONING,
            true,
            probe_versioning(s, &format!("{prefix}/versioning")).await?,
        ),
        cap(CREATE_ONLY, true, probe_create_only(s, &prefix, 3).await?),
        cap(CAS, true, probe_cas(s, &format!("{prefix}/cas")).await?),
        cap(
            CREATE_RACE,
            true,
            probe_race(store.clone(), format!("{prefix}/race-create"), 8, false).await?,
        ),
        cap(
            CAS_RACE,
            true,
            probe_race(store.clone(), format!("{prefix}/race-cas"), 8, true).await?,
        ),
        cap(VERSION_LISTING, true, probe_version_listing(s, &prefix).await?),
    ];
    let ok = caps.iter().all(|c| c.ok || !c.required);
    Ok(StoreCheckReport {
        s3_requests: None,
        format_version: FORMAT_VERSION,
        store: store.url(),
        ok,
        capabilities: caps,
    })
}

/// The quick probe before a journal write: versioning and create-only. Cleans up after itself.
pub async fn require_journal_capabilities(store: &dyn ObjectStore, writer_id: &str, clock: &dyn Clock) -> Result<()> {
    let prefix = paths::probe_key(writer_id, &nonce(clock));
    let results = [
        (
            VERSIONING,
            probe_versioning(store, &format!("{prefix}/versioning")).await?,
        ),
        (CREATE_ONLY, probe_create_only(store, &prefix, 2).await?),
    ];
    // Best effort: a probe object left behind (a lost reply on its delete) is harmless, and the
    // probe's verdict does not depend on it.
    if let Ok(versions) = store.list_versions(&format!("{prefix}/")).await {
        for v in versions {
            let _ = store.delete_version(&v.key, &v.version_id).await;
        }
    }
    for (name, outcome) in results {
        if let Err(detail) = outcome {
            return Err(JournalError::Capability {
                store: store.url(),
                capability: name.into(),
                detail,
            });
        }
    }
    Ok(())
}
