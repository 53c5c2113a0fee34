//! The contract's rule for a conditional write whose outcome is unknown: [`put_resolved`] reads
//! back, takes the write as its own when its bytes are current, retries only a write that did
//! not land.

use bytes::Bytes;

use super::error::{Result, StoreError};
use super::object::{ObjectStore, PutMode, PutResult};

/// A `put` resolved by [`put_resolved`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub put: PutResult,
    /// The write was found by reading back after a conflict or an unknown outcome: it was this
    /// writer's own (its reply had been lost, or a backend retry saw it as a conflict).
    pub read_back: bool,
}

/// How many times [`put_resolved`] writes when reading back shows that a write did not land.
const RESOLVE_ATTEMPTS: usize = 3;

/// A `put` under the contract's rule for unknown outcomes (see the [`store`](super)
/// documentation): on a conflict or [`StoreError::OutcomeUnknown`] the key is read back; its
/// current bytes equal to `body` mean the write is this writer's own (`read_back: true`). When the
/// read shows that the write did not land (a create whose key is still absent, a compare-and-swap
/// whose key still has the expected ETag, an overwrite), it is written again, at most
/// [`RESOLVE_ATTEMPTS`] times in all; the condition still guards every retry. Otherwise the
/// conflict is returned. When the read itself fails, the original error is returned (still an
/// unknown outcome: the caller re-runs).
pub async fn put_resolved(store: &dyn ObjectStore, key: &str, body: Bytes, mode: PutMode) -> Result<Resolved> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let err = match store.put(key, body.clone(), mode.clone()).await {
            Ok(put) => {
                return Ok(Resolved { put, read_back: false });
            }
            Err(e) if e.is_conflict() || e.is_outcome_unknown() => e,
            Err(e) => return Err(e),
        };
        let not_landed = match store.get(key, None).await {
            Ok(current) if current.body == body => {
                return Ok(Resolved {
                    put: PutResult {
                        etag: current.meta.etag,
                        version_id: current.meta.version_id,
                    },
                    read_back: true,
                });
            }
            // Another writer's bytes are current: a create cannot land under them; a
            // compare-and-swap did not land while the key keeps the expected ETag.
            Ok(current) => match &mode {
                PutMode::Create => false,
                PutMode::Update { etag } => &current.meta.etag == etag,
                PutMode::Overwrite => true,
            },
            // Absent: a create or overwrite did not land; a compare-and-swap's target is gone.
            Err(e) if e.is_not_found() => !matches!(mode, PutMode::Update { .. }),
            Err(_) => return Err(err),
        };
        if !not_landed {
            return Err(match err {
                StoreError::OutcomeUnknown { store, key, op, .. } => StoreError::Conflict {
                    store,
                    key,
                    reason: format!(
                        "another writer's version is current (read back after the {op}'s outcome was unknown)"
                    ),
                },
                conflict => conflict,
            });
        }
        if attempt >= RESOLVE_ATTEMPTS {
            return Err(err);
        }
    }
}
