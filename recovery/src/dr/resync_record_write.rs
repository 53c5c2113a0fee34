//! Writing a resync record (`<table>/metadata/tidemark-resync-<id>.json`, one per walk,
//! [`super::resync_record`]) so that no walk is ever lost, whoever else writes it at the same time.
//!
//! Each walk has its own record, named by the walk ([`record_name`]), so two resyncs that walk a
//! table back differently write two records, and a replication never has to overwrite one. At
//! one key (the same walk, or a record written by hand) the record is read with its ETag and
//! written back conditionally through the store layer's [`put_resolved`]: create-only
//! (`If-None-Match: *`) the first time, `If-Match` on the ETag read after that. Two writers of the
//! same key both read, both append their walk, and one write wins; the other gets a conflict,
//! reads the record again, finds its walk there (done) or appends it to the winner's record and
//! writes again, at most [`ATTEMPTS`] times, then refuses ([`RecordError::Contended`], exit 5)
//! with nothing of its table moved. A write whose reply was lost (or that the backend's own retry
//! saw as a `412`) is resolved by reading back: the record holding exactly our bytes, or our walk,
//! is our success, never a conflict.
//!
//! The store is the record's folder, reached as the demoted catalog's FileIO reaches it
//! ([`record_store`]): on S3 with the catalog's endpoint, region, path style and keys.

use std::collections::HashMap;
use std::sync::Arc;

#[cfg(feature = "remote")]
use tidemark_journal::store::s3::{S3Options, S3Store, StaticCredentials};
use tidemark_journal::store::{self, ObjectStore, PutMode, StoreError, put_resolved};

use super::rebuild::file_name;
use super::resync_record::{FORMAT_VERSION, ResyncRecord, Walk, is_record_name, names, parse, record_location};

/// Writes of the record tried before a run refuses (each after reading the other writer's).
pub const ATTEMPTS: usize = 5;

/// Why a walk could not be recorded; nothing of the table has moved.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot reach the resync record {record} of {table} (nothing of it moved): {source}")]
    Open {
        record: String,
        table: String,
        #[source]
        source: StoreError,
    },
    #[error("cannot read the resync record {record} of {table} (nothing of it moved): {source}")]
    Read {
        record: String,
        table: String,
        #[source]
        source: StoreError,
    },
    #[error("{detail} (nothing of {table} moved)")]
    Invalid { table: String, detail: String },
    #[error("cannot write the resync record {record} of {table} (nothing of it moved): {source}")]
    Write {
        record: String,
        table: String,
        #[source]
        source: StoreError,
    },
    #[error(
        "the resync record {record} of {table} changed under each of {attempts} writes (another replica resync of \
         this table runs at the same time): nothing of {table} moved; run the resync again once the other one ends"
    )]
    Contended {
        record: String,
        table: String,
        attempts: usize,
    },
}

impl RecordError {
    /// Another writer kept winning: the caller reports a conflict (exit 5), not a failure.
    pub fn is_contended(&self) -> bool {
        matches!(self, RecordError::Contended { .. })
    }

    /// The storage refused the credentials for the record's key (SeaweedFS's table buckets, which
    /// hold a REST catalog's tables, take only Iceberg-shaped object names, and answer 403 to a
    /// read of a missing key).
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            RecordError::Open { source, .. } | RecordError::Read { source, .. } | RecordError::Write { source, .. }
                if matches!(source, StoreError::AccessDenied { .. })
        )
    }
}

/// The store of the folder that holds `location` (a record's full location) and the record's key
/// in it. `props` are the demoted catalog's FileIO properties: an `s3://` folder is reached with
/// their `s3.endpoint`, `s3.region`, `s3.path-style-access` and keys (`s3.access-key-id`,
/// `s3.secret-access-key`, `s3.session-token`), each falling back to the environment's; a local
/// folder (a path or `file://`) as it is.
pub async fn record_store(
    location: &str,
    props: &HashMap<String, String>,
) -> Result<(Arc<dyn ObjectStore>, String), StoreError> {
    let (folder, name) = location.rsplit_once('/').unwrap_or((".", location));
    let rest = folder.strip_prefix("s3://").or_else(|| folder.strip_prefix("s3a://"));
    let Some(rest) = rest else {
        return Ok((store::open(folder).await?, name.to_string()));
    };
    Ok((s3_store(rest, props).await?, name.to_string()))
}

#[cfg(not(feature = "remote"))]
async fn s3_store(rest: &str, _props: &HashMap<String, String>) -> Result<Arc<dyn ObjectStore>, StoreError> {
    Err(StoreError::NotBuilt {
        url: format!("s3://{rest}"),
    })
}

#[cfg(feature = "remote")]
async fn s3_store(rest: &str, props: &HashMap<String, String>) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let prop = |k: &str| props.get(k).filter(|v| !v.trim().is_empty()).cloned();
    let mut opts = S3Options::from_env();
    if let Some(e) = prop("s3.endpoint") {
        opts.endpoint = Some(e);
    }
    if let Some(r) = prop("s3.region").or_else(|| prop("client.region")) {
        opts.region = Some(r);
    }
    if let Some(p) = prop("s3.path-style-access") {
        opts.path_style = Some(p.eq_ignore_ascii_case("true"));
    }
    if let (Some(k), Some(s)) = (prop("s3.access-key-id"), prop("s3.secret-access-key")) {
        opts.credentials = Some(StaticCredentials {
            access_key_id: k,
            secret_access_key: s,
            session_token: prop("s3.session-token"),
        });
    }
    Ok(Arc::new(S3Store::from_url(rest, opts).await?))
}

/// Records `walk` (from the demoted pointer `walk.from` back to `walk.walked_back_to`) in its own
/// record beside `walk.from` ([`record_location`]), created if absent, unless every file it walks
/// over is recorded there already (a re-run after a crash, or our own write whose reply was
/// lost). `demoted` names the demoted catalog (whose walk it is). Called before the pointer
/// moves. Returns the record's location, `None` when nothing was walked over. `props`: see
/// [`record_store`].
pub async fn record(
    props: &HashMap<String, String>,
    table: &str,
    demoted: &str,
    walk: &Walk,
) -> Result<Option<String>, RecordError> {
    if walk.walked_over.is_empty() {
        return Ok(None);
    }
    let location = record_location(walk);
    let (store, key) = record_store(&location, props)
        .await
        .map_err(|source| RecordError::Open {
            record: location.clone(),
            table: table.to_string(),
            source,
        })?;
    record_in(store.as_ref(), &key, &location, table, demoted, walk).await?;
    Ok(Some(location))
}

/// [`record`] on an open store: `key` is the record's key in it, `location` its full location
/// (for messages).
pub async fn record_in(
    store: &dyn ObjectStore,
    key: &str,
    location: &str,
    table: &str,
    demoted: &str,
    walk: &Walk,
) -> Result<(), RecordError> {
    debug_assert!(is_record_name(file_name(key)), "{key}");
    for _ in 0..ATTEMPTS {
        let (mut rec, mode) = match store.get(key, None).await {
            Ok(got) => {
                let rec = parse(location, &got.body).map_err(|detail| RecordError::Invalid {
                    table: table.to_string(),
                    detail,
                })?;
                (rec, PutMode::Update { etag: got.meta.etag })
            }
            Err(e) if e.is_not_found() => (
                ResyncRecord {
                    format_version: FORMAT_VERSION,
                    table: table.to_string(),
                    demoted_catalog: Some(demoted.to_string()),
                    walks: Vec::new(),
                },
                PutMode::Create,
            ),
            Err(source) => {
                return Err(RecordError::Read {
                    record: location.to_string(),
                    table: table.to_string(),
                    source,
                });
            }
        };
        let known = names(&rec);
        if walk.walked_over.iter().all(|w| known.contains(file_name(w))) {
            return Ok(());
        }
        rec.walks.push(walk.clone());
        let body = serde_json::to_vec_pretty(&rec).expect("a resync record serializes");
        // Where a test lands another resync's write between this read and this write.
        tidemark_journal::failpoint::pause("resync:before-record");
        match put_resolved(store, key, body.into(), mode).await {
            Ok(_) => return Ok(()),
            // Another writer's record: read it and add this walk to it.
            Err(e) if e.is_conflict() => continue,
            Err(source) => {
                return Err(RecordError::Write {
                    record: location.to_string(),
                    table: table.to_string(),
                    source,
                });
            }
        }
    }
    Err(RecordError::Contended {
        record: location.to_string(),
        table: table.to_string(),
        attempts: ATTEMPTS,
    })
}

#[cfg(test)]
#[path = "resync_record_write_tests.rs"]
mod tests;
