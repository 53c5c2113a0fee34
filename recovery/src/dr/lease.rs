//! The follower's lease: one object that says who may write a DR catalog, so that two followers
//! of the same catalog never run at once and a fenced follower writes nothing more.
//!
//! # Contract
//! The lease is `lease.json` under the follower's state location (a folder or `s3://…`). It is
//! written only through the store's conditional writes, resolved by reading back
//! ([`store::put_resolved`]):
//! - **acquire**: create-only when there is none; otherwise `If-Match` on the ETag read, and only
//!   when the lease was released, has expired, or is already this holder's. A lease another holder
//!   holds and that has not expired is refused with [`LeaseError::Held`], naming the holder and
//!   when it expires. Of two followers acquiring at once exactly one wins (the store's
//!   compare-and-swap); the other gets `Held`.
//! - **renew** and **release** write `If-Match` on the ETag this holder last wrote: when anyone
//!   else wrote the lease since (a takeover after expiry, a failover's fence), the write fails and
//!   the holder gets [`LeaseError::Lost`] or [`LeaseError::Fenced`].
//! - **check**: a read; `Ok` only while the lease is still the very version this holder wrote. A
//!   follower checks before every catalog write and before writing its state. As with the route
//!   fence, a fence that lands between the check and the write is not seen: that window is one
//!   catalog write long.
//! - **fence** (failover): marks the lease `fenced` (`If-Match`, retried against a holder that
//!   renews in between). A fenced or promoted lease is never acquired again by a follower: the
//!   catalog it guarded is the primary now.
//!
//! Times are the injected clock's; an expiry is the holder's promise, so followers on hosts whose
//! clocks disagree by more than the TTL can overlap by that much (the conditional writes still
//! keep each catalog write based on what its writer read).

use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tidemark_journal::clock::Clock;
use tidemark_journal::store::{ObjectStore, PutMode, StoreError, put_resolved};

/// Version of the lease object.
pub const FORMAT_VERSION: u32 = 1;

/// The lease's key under the state location.
pub const LEASE_KEY: &str = "lease.json";

/// What the lease says about its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// A follower holds it until `expires_at` (renewed every cycle).
    Held,
    /// The follower stopped and gave it up (`--once` does at its end).
    Released,
    /// A failover stopped the follower: nothing may follow into this catalog again.
    Fenced,
}

/// The lease object (`lease.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeaseRecord {
    pub format_version: u32,
    /// Who holds (or last held) it: a follower's `--holder`, or the failover that fenced it.
    pub holder: String,
    /// The DR catalog it guards (no secrets).
    pub catalog: String,
    pub state: LeaseState,
    pub acquired_at: String,
    pub renewed_at: String,
    /// RFC 3339; after it another follower may take the lease over.
    pub expires_at: String,
    /// The holder the lease was taken from, when a failover fenced it.
    pub fenced_holder: Option<String>,
    pub reason: Option<String>,
}

impl LeaseRecord {
    /// The holder a fence by `by` takes this lease from: its holder, or, when `by` fenced it
    /// already (a re-run of the same failover), the holder `by` took it from then.
    pub fn taken_by(&self, by: &str) -> Option<String> {
        if self.state == LeaseState::Fenced && self.holder == by {
            self.fenced_holder.clone()
        } else {
            Some(self.holder.clone())
        }
    }

    pub fn expires(&self) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(&self.expires_at)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// Held and not yet expired at `now`.
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.state == LeaseState::Held && self.expires().is_some_and(|e| e > now)
    }
}

/// Why a lease could not be taken or kept.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(
        "another follower, {holder}, holds the lease {lease} until {expires_at}; stop it first (or wait for the lease to expire)"
    )]
    Held {
        lease: String,
        holder: String,
        expires_at: String,
    },
    #[error("the lease {lease} was fenced by {by} ({reason}): this catalog was promoted; nothing follows into it")]
    Fenced { lease: String, by: String, reason: String },
    #[error("the lease {lease} was taken over by {holder} since this follower ({me}) last wrote it; stopping")]
    Lost { lease: String, me: String, holder: String },
    #[error("the lease {lease} is not a valid lease object: {reason}")]
    Format { lease: String, reason: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A lease this process holds.
#[derive(Debug, Clone)]
pub struct Lease {
    store: Arc<dyn ObjectStore>,
    record: LeaseRecord,
    etag: String,
}

fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn encode(record: &LeaseRecord) -> Bytes {
    Bytes::from(serde_json::to_vec_pretty(record).expect("a lease serializes"))
}

fn url(store: &dyn ObjectStore) -> String {
    format!("{}/{LEASE_KEY}", store.url().trim_end_matches('/'))
}

/// The current lease with its ETag, or `None` when none was ever written.
pub async fn read(store: &dyn ObjectStore) -> Result<Option<(LeaseRecord, String)>, LeaseError> {
    let got = match store.get(LEASE_KEY, None).await {
        Ok(got) => got,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let record: LeaseRecord = serde_json::from_slice(&got.body).map_err(|e| LeaseError::Format {
        lease: url(store),
        reason: e.to_string(),
    })?;
    Ok(Some((record, got.meta.etag)))
}

impl Lease {
    /// Takes the lease for `holder` for `ttl` (see the module documentation).
    pub async fn acquire(
        store: Arc<dyn ObjectStore>,
        holder: &str,
        catalog: &str,
        ttl: Duration,
        clock: &dyn Clock,
    ) -> Result<Lease, LeaseError> {
        let now = clock.now();
        let current = read(store.as_ref()).await?;
        let mode = match &current {
            None => PutMode::Create,
            Some((rec, _)) if rec.state == LeaseState::Fenced => return Err(fenced(store.as_ref(), rec)),
            Some((rec, _)) if rec.is_live(now) && rec.holder != holder => {
                return Err(LeaseError::Held {
                    lease: url(store.as_ref()),
                    holder: rec.holder.clone(),
                    expires_at: rec.expires_at.clone(),
                });
            }
            Some((_, etag)) => PutMode::Update { etag: etag.clone() },
        };
        let record = LeaseRecord {
            format_version: FORMAT_VERSION,
            holder: holder.to_string(),
            catalog: catalog.to_string(),
            state: LeaseState::Held,
            acquired_at: at(now),
            renewed_at: at(now),
            expires_at: at(now + ttl),
            fenced_holder: None,
            reason: None,
        };
        match put_resolved(store.as_ref(), LEASE_KEY, encode(&record), mode).await {
            Ok(put) => Ok(Lease {
                store,
                record,
                etag: put.put.etag,
            }),
            // Lost the race: whoever won holds it now.
            Err(e) if e.is_conflict() || e.is_not_found() => Err(match read(store.as_ref()).await? {
                Some((rec, _)) if rec.state == LeaseState::Fenced => fenced(store.as_ref(), &rec),
                Some((rec, _)) => LeaseError::Held {
                    lease: url(store.as_ref()),
                    holder: rec.holder,
                    expires_at: rec.expires_at,
                },
                None => e.into(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    pub fn record(&self) -> &LeaseRecord {
        &self.record
    }

    /// `Ok` while the stored lease is the version this holder last wrote.
    pub async fn check(&self) -> Result<(), LeaseError> {
        match read(self.store.as_ref()).await? {
            Some((_, etag)) if etag == self.etag => Ok(()),
            Some((rec, _)) => Err(self.lost(&rec)),
            None => Err(LeaseError::Lost {
                lease: url(self.store.as_ref()),
                me: self.record.holder.clone(),
                holder: "(deleted)".into(),
            }),
        }
    }

    /// Extends the lease by `ttl` from now.
    pub async fn renew(&mut self, ttl: Duration, clock: &dyn Clock) -> Result<(), LeaseError> {
        let now = clock.now();
        let mut next = self.record.clone();
        next.renewed_at = at(now);
        next.expires_at = at(now + ttl);
        self.write(next).await
    }

    /// Gives the lease up (the next follower may take it at once).
    pub async fn release(mut self, clock: &dyn Clock) -> Result<(), LeaseError> {
        let mut next = self.record.clone();
        next.state = LeaseState::Released;
        next.renewed_at = at(clock.now());
        next.expires_at = next.renewed_at.clone();
        self.write(next).await
    }

    async fn write(&mut self, next: LeaseRecord) -> Result<(), LeaseError> {
        let mode = PutMode::Update {
            etag: self.etag.clone(),
        };
        match put_resolved(self.store.as_ref(), LEASE_KEY, encode(&next), mode).await {
            Ok(put) => {
                self.etag = put.put.etag;
                self.record = next;
                Ok(())
            }
            Err(e) if e.is_conflict() || e.is_not_found() => match read(self.store.as_ref()).await? {
                Some((rec, _)) => Err(self.lost(&rec)),
                None => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    fn lost(&self, rec: &LeaseRecord) -> LeaseError {
        if rec.state == LeaseState::Fenced {
            fenced(self.store.as_ref(), rec)
        } else {
            LeaseError::Lost {
                lease: url(self.store.as_ref()),
                me: self.record.holder.clone(),
                holder: rec.holder.clone(),
            }
        }
    }
}

fn fenced(store: &dyn ObjectStore, rec: &LeaseRecord) -> LeaseError {
    LeaseError::Fenced {
        lease: url(store),
        by: rec.holder.clone(),
        reason: rec.reason.clone().unwrap_or_default(),
    }
}

/// How often [`fence`] rewrites against a holder that renews in between.
const FENCE_ATTEMPTS: usize = 5;

/// Fences the lease for `by` (a failover): from then on the follower that held it fails its next
/// check, renewal or release, and no follower acquires it again. Returns the fencing lease (held
/// by `by`, for the failover's own final writes) and the lease as it was before (`None`: there
/// was none; the fence is written all the same).
pub async fn fence(
    store: Arc<dyn ObjectStore>,
    by: &str,
    catalog: &str,
    reason: &str,
    clock: &dyn Clock,
) -> Result<(Lease, Option<LeaseRecord>), LeaseError> {
    let mut last_err = None;
    for _ in 0..FENCE_ATTEMPTS {
        let now = at(clock.now());
        let current = read(store.as_ref()).await?;
        let (mode, before) = match current {
            None => (PutMode::Create, None),
            Some((rec, etag)) => (PutMode::Update { etag }, Some(rec)),
        };
        let record = LeaseRecord {
            format_version: FORMAT_VERSION,
            holder: by.to_string(),
            catalog: catalog.to_string(),
            state: LeaseState::Fenced,
            acquired_at: now.clone(),
            renewed_at: now.clone(),
            expires_at: now,
            fenced_holder: before.as_ref().and_then(|r| r.taken_by(by)),
            reason: Some(reason.to_string()),
        };
        match put_resolved(store.as_ref(), LEASE_KEY, encode(&record), mode).await {
            Ok(put) => {
                let lease = Lease {
                    store,
                    record,
                    etag: put.put.etag,
                };
                return Ok((lease, before));
            }
            Err(e) if e.is_conflict() || e.is_not_found() => last_err = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last_err.expect("a failed attempt").into())
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
