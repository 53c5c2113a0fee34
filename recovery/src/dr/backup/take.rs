//! Taking a backup ([`backup`], [`snapshot_catalog`]), reading one back ([`load`]) and the
//! catalog's state id ([`state`]).

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};
use tidemark_journal::store::{self, ObjectStore, PutMode, StoreError};

use super::read::{describe, get_metadata, open_warehouse_err, table_err};
use super::report::{BackupError, BackupOutcome, CatalogBackup, CatalogState, FORMAT_VERSION};
use crate::catalog::CatalogHandle;
use crate::dr::rebuild::warehouse_base;

/// Reads the catalog's tables (only those directly in `namespace`, when given) into a backup.
/// Refuses when a table's referenced objects are not all there: such a backup could not be
/// restored.
pub async fn snapshot_catalog(handle: &CatalogHandle, namespace: Option<&str>) -> Result<CatalogBackup, BackupError> {
    let location = handle
        .warehouse_location("back up the catalog")
        .map_err(table_err("(all tables)"))?;
    let base = warehouse_base(location)?;
    let warehouse = store::open(&base).await.map_err(open_warehouse_err(handle))?;
    let pointers = handle.pointers(namespace).await.map_err(table_err("(all tables)"))?;
    let mut tables = Vec::with_capacity(pointers.len());
    for (table, pointer) in pointers {
        let Some(location) = pointer else {
            continue; // a view or a half-created row: nothing to restore
        };
        let got = match get_metadata(warehouse.as_ref(), &base, &location).await {
            Ok(Ok(got)) => got,
            Ok(Err(e @ StoreError::NotFound { .. })) => {
                let reason = format!("cannot read its metadata file {location}: {e}");
                return Err(BackupError::NotBackedUp { table, reason });
            }
            // Not a missing file but a failed read (refused credentials, say): its kind decides.
            Ok(Err(source)) => {
                return Err(BackupError::Unreadable {
                    table,
                    location,
                    source,
                });
            }
            Err(reason) => return Err(BackupError::NotBackedUp { table, reason }),
        };
        let (entry, missing) = describe(handle, &table, &location, &got).await?;
        if let Some(m) = missing.first() {
            return Err(BackupError::NotBackedUp {
                table,
                reason: format!(
                    "its {} {} is missing ({} objects in all)",
                    m.what,
                    m.path,
                    missing.len()
                ),
            });
        }
        tables.push(entry);
    }
    let mut backup = CatalogBackup {
        format_version: FORMAT_VERSION,
        id: String::new(),
        catalog: handle.name().to_string(),
        warehouse: base,
        namespace: namespace.map(str::to_string),
        tables,
    };
    backup.id = backup.content_id();
    Ok(backup)
}

/// Backs up the catalog into `backups` (create-only; an identical backup is found, not written).
pub async fn backup(
    handle: &CatalogHandle,
    namespace: Option<&str>,
    backups: &dyn ObjectStore,
) -> Result<BackupOutcome, BackupError> {
    let b = snapshot_catalog(handle, namespace).await?;
    let key = CatalogBackup::key(&b.id);
    let body = serde_json::to_vec_pretty(&b).expect("a backup serializes");
    // Read back on a conflict or a lost reply (the store contract): the same bytes are this
    // backup, written by this call or an earlier one.
    let already_stored = match store::put_resolved(backups, &key, body.into(), PutMode::Create).await {
        Ok(r) => r.read_back,
        Err(e) if e.is_conflict() => {
            // Same key, so the same content digest: check it, then it is the same backup.
            let stored = load(backups, &b.id).await?;
            if stored != b {
                return Err(BackupError::Invalid {
                    location: format!("{}/{key}", backups.url()),
                    reason: "a file with this backup's id holds another backup".into(),
                });
            }
            true
        }
        Err(source) => {
            return Err(BackupError::Store {
                store: backups.url(),
                source,
            });
        }
    };
    Ok(BackupOutcome {
        id: b.id,
        location: format!("{}/{key}", backups.url().trim_end_matches('/')),
        already_stored,
        tables: b.tables.len(),
    })
}

/// Reads backup `id` (`sha256:<hex>` or `<hex>`) from `backups` and checks its id.
pub async fn load(backups: &dyn ObjectStore, id: &str) -> Result<CatalogBackup, BackupError> {
    let key = CatalogBackup::key(id);
    let location = format!("{}/{key}", backups.url().trim_end_matches('/'));
    let got = backups.get(&key, None).await.map_err(|source| BackupError::Store {
        store: backups.url(),
        source,
    })?;
    let b: CatalogBackup = serde_json::from_slice(&got.body).map_err(|e| BackupError::Invalid {
        location: location.clone(),
        reason: e.to_string(),
    })?;
    if b.format_version != FORMAT_VERSION {
        return Err(BackupError::Invalid {
            location,
            reason: format!(
                "format_version {} (this tidemark reads {FORMAT_VERSION})",
                b.format_version
            ),
        });
    }
    let want = format!("sha256:{}", id.trim_start_matches("sha256:"));
    if b.content_id() != want || b.id != want {
        return Err(BackupError::Invalid {
            location,
            reason: format!(
                "its content digest is {}, not {want}: the file was changed",
                b.content_id()
            ),
        });
    }
    Ok(b)
}

/// The state of `tables` in the catalog: their pointers and the digest of them.
pub async fn state(handle: &CatalogHandle, tables: &[String]) -> Result<CatalogState, BackupError> {
    let all: HashMap<String, Option<String>> = handle
        .pointers(None)
        .await
        .map_err(table_err("(all tables)"))?
        .into_iter()
        .collect();
    let tables: BTreeMap<String, Option<String>> = tables
        .iter()
        .map(|t| (t.clone(), all.get(t).cloned().flatten()))
        .collect();
    Ok(CatalogState {
        id: state_id(&tables),
        tables,
    })
}

/// `empty` when no table has a pointer, else the digest of the `table → pointer` lines.
pub(super) fn state_id(tables: &BTreeMap<String, Option<String>>) -> String {
    if tables.values().all(Option::is_none) {
        return "empty".into();
    }
    let mut h = Sha256::new();
    for (t, p) in tables {
        h.update(format!("{t}\t{}\n", p.as_deref().unwrap_or("-")));
    }
    format!("sha256:{:x}", h.finalize())
}
