//! A journal handle: its store, header and compiled spec, and the read side of the chain (head,
//! manifests by sequence).

use std::sync::Arc;

use bytes::Bytes;
use tidemark_schemas::{FORMAT_VERSION, JournalHeader, Manifest, TableSpec};

use crate::clock::Clock;
use crate::error::{JournalError, Result};
use crate::paths;
use crate::spec::CompiledSpec;
use crate::store::{ObjectStore, PutMode, StoreError, list_all, put_resolved};

#[derive(Debug, Clone)]
pub struct Journal {
    pub store: Arc<dyn ObjectStore>,
    pub header: JournalHeader,
    pub spec: CompiledSpec,
}

/// A manifest with the digest of its stored bytes and the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredManifest {
    pub manifest: Manifest,
    pub digest: String,
    pub key: String,
    pub version_id: Option<String>,
}

impl Journal {
    /// Writes the header (create-only). Refuses a location that already holds a journal; a header
    /// with exactly these bytes is this call's own write (its reply was lost) and is accepted.
    pub async fn init(
        store: Arc<dyn ObjectStore>,
        spec: TableSpec,
        journal_id: String,
        clock: &dyn Clock,
    ) -> Result<Journal> {
        let spec = CompiledSpec::new(spec)?;
        let header = JournalHeader {
            format_version: FORMAT_VERSION,
            journal_id,
            created_at: clock.now_rfc3339(),
            spec_digest: spec.digest.clone(),
            spec: spec.spec.clone(),
        };
        let body = serde_json::to_vec_pretty(&header).expect("header serializes");
        match put_resolved(store.as_ref(), paths::HEADER, Bytes::from(body), PutMode::Create).await {
            Ok(_) => Ok(Journal { store, header, spec }),
            Err(e) if e.is_conflict() => {
                let existing = Self::open(store.clone()).await?;
                Err(JournalError::AlreadyInitialized {
                    journal: store.url(),
                    journal_id: existing.header.journal_id,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Opens an existing journal, reading and checking its header.
    pub async fn open(store: Arc<dyn ObjectStore>) -> Result<Journal> {
        let got = match store.get(paths::HEADER, None).await {
            Ok(g) => g,
            Err(StoreError::NotFound { .. }) => {
                return Err(JournalError::NotInitialized {
                    journal: store.url(),
                    key: paths::HEADER.into(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let header: JournalHeader = serde_json::from_slice(&got.body).map_err(|e| JournalError::Format {
            context: format!("{} in {}", paths::HEADER, store.url()),
            message: e.to_string(),
        })?;
        if header.format_version != FORMAT_VERSION {
            return Err(JournalError::Format {
                context: paths::HEADER.into(),
                message: format!("format_version {} is not supported", header.format_version),
            });
        }
        let spec = CompiledSpec::new(header.spec.clone())?;
        if spec.digest != header.spec_digest {
            return Err(JournalError::Format {
                context: paths::HEADER.into(),
                message: format!(
                    "spec digest {} does not match its spec ({})",
                    header.spec_digest, spec.digest
                ),
            });
        }
        Ok(Journal { store, header, spec })
    }

    pub fn url(&self) -> String {
        self.store.url()
    }

    /// Sequences of the manifests present, ascending (no checks: the verifier does those).
    pub async fn manifest_sequences(&self) -> Result<Vec<u64>> {
        let mut seqs: Vec<u64> = list_all(self.store.as_ref(), paths::MANIFESTS_PREFIX)
            .await?
            .iter()
            .filter_map(|o| paths::parse_manifest_key(&o.key))
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    /// Reads one manifest (current version, or the given one) with the digest of its bytes.
    pub async fn read_manifest(&self, sequence: u64, version_id: Option<&str>) -> Result<StoredManifest> {
        let key = paths::manifest_key(sequence);
        let got = self.store.get(&key, version_id).await?;
        let digest = crate::sha256_digest(&got.body);
        let manifest: Manifest = serde_json::from_slice(&got.body).map_err(|e| JournalError::Format {
            context: format!("manifest {key}"),
            message: e.to_string(),
        })?;
        Ok(StoredManifest {
            manifest,
            digest,
            key,
            version_id: got.meta.version_id,
        })
    }

    /// The newest manifest, if any.
    pub async fn head(&self) -> Result<Option<StoredManifest>> {
        match self.manifest_sequences().await?.last() {
            Some(&seq) => Ok(Some(self.read_manifest(seq, None).await?)),
            None => Ok(None),
        }
    }

    /// Event objects that no manifest accepts: keys of a sequence past the head, or of the head's
    /// sequence or earlier with another content suffix (a crash between the two writes, or a lost
    /// race). Cheap: one listing of `events/`; earlier sequences are matched against `accepted`.
    pub async fn unaccepted_objects(
        &self,
        head_sequence: u64,
        accepted: &dyn Fn(u64) -> Option<String>,
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for obj in list_all(self.store.as_ref(), paths::EVENTS_PREFIX).await? {
            match paths::parse_event_key(&obj.key) {
                Some(seq) if seq > head_sequence => out.push(obj.key),
                Some(seq) => {
                    if accepted(seq).is_some_and(|k| k != obj.key) {
                        out.push(obj.key)
                    }
                }
                None => out.push(obj.key),
            }
        }
        Ok(out)
    }
}
