//! The scratch namespace of the drills: only drill tables may be there; a killed drill's
//! leftovers are found, named and removed; a scratch table goes with its files.

use serde::Serialize;

use crate::catalog::CatalogHandle;
use crate::provenance::PROP_RECOVERY_ID;
use crate::table;

/// The scratch tables' name prefix.
pub const TABLE_PREFIX: &str = "tidemark_drill_";
/// The drills' recovery ids' prefix (recorded on each scratch table as its recovery id).
pub const ID_PREFIX: &str = "drill-";

/// A scratch table an earlier, killed drill left behind, removed by this one.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Leftover {
    pub table: String,
    /// The drill that made it (its recovery id), when its metadata could be read.
    pub drill_id: Option<String>,
    pub detail: String,
}

/// The scratch namespace holds a table no drill made: refused before anything is written.
#[derive(Debug, thiserror::Error)]
#[error(
    "the scratch namespace {namespace} holds {table}, which is not a tidemark drill table ({why}); nothing was written or removed: name a namespace that holds only drill tables (--scratch)"
)]
pub struct ForeignScratchTable {
    pub namespace: String,
    pub table: String,
    pub why: String,
}

/// Refuses a scratch namespace that holds a table no drill made; removes the drills' leftovers.
pub async fn clear_scratch(handle: &CatalogHandle, scratch: &str) -> anyhow::Result<Vec<Leftover>> {
    let ns = iceberg::NamespaceIdent::from_strs(scratch.split('.'))?;
    if !handle.catalog().namespace_exists(&ns).await? {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for (name, _) in handle.pointers(Some(scratch)).await? {
        let short = name.rsplit_once('.').map_or(name.as_str(), |(_, n)| n);
        let foreign = |why: String| ForeignScratchTable {
            namespace: scratch.to_string(),
            table: name.clone(),
            why,
        };
        if !short.starts_with(TABLE_PREFIX) {
            return Err(foreign(format!("its name does not start with {TABLE_PREFIX}")).into());
        }
        let drill_id = match table::load_table(handle, &name).await {
            Ok(t) => {
                let id = t.metadata().properties().get(PROP_RECOVERY_ID).cloned();
                if !id.as_deref().is_some_and(|i| i.starts_with(ID_PREFIX)) {
                    return Err(foreign(format!(
                        "its recovery id is {}, not a drill's",
                        id.as_deref().unwrap_or("absent")
                    ))
                    .into());
                }
                id
            }
            // Named as a drill's, in the drills' namespace, but unreadable: a drill killed
            // between its files and its catalog entry.
            Err(_) => None,
        };
        found.push((name, drill_id));
    }
    let mut removed = Vec::new();
    for (name, drill_id) in found {
        let removal = remove_scratch_table(handle, &name).await?;
        removed.push(Leftover {
            detail: format!(
                "left by drill {}; {}",
                drill_id
                    .as_deref()
                    .unwrap_or("unknown (its metadata could not be read)"),
                removal.describe(&name)
            ),
            table: name,
            drill_id,
        });
    }
    Ok(removed)
}

/// What [`remove_scratch_table`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Removal {
    /// No such table: the drill never made it (or a kill came before).
    NeverMade,
    /// Its files under this location deleted (S3 Tables: purged), then its entry dropped.
    Removed { location: String },
    /// Its metadata could not be read and the catalog's pointer names no location: its entry
    /// was dropped, its files (if any) are where the catalog last put them.
    EntryOnly { why: String },
}

impl Removal {
    /// How a report says it.
    pub fn describe(&self, name: &str) -> String {
        match self {
            Removal::NeverMade => format!("{name} was never made"),
            Removal::Removed { location } => format!("dropped {name} and deleted its files under {location}"),
            Removal::EntryOnly { why } => format!(
                "dropped {name}'s catalog entry; its metadata could not be read ({why}), so its files, if any, were not deleted"
            ),
        }
    }
}

/// Deletes a scratch table's files, then drops it (in this order: a kill in between leaves an
/// entry the next drill finds).
pub async fn remove_scratch_table(handle: &CatalogHandle, name: &str) -> anyhow::Result<Removal> {
    let ident = table::parse_ident(name)?;
    if !handle.catalog().table_exists(&ident).await? {
        return Ok(Removal::NeverMade);
    }
    let loaded = table::load_table(handle, name).await;
    let removal = match &loaded {
        Ok(t) => Removal::Removed {
            location: t.metadata().location().trim_end_matches('/').to_string(),
        },
        // A metadata file that cannot be read (deleted, damaged): the table's location is the
        // catalog's pointer before `/metadata/`, deleted only when it is a folder named after
        // this scratch table (the catalog's default layout for the table the drill made), never
        // a location an unverified pointer names elsewhere.
        Err(e) => match handle.metadata_pointer(&ident).await.ok().flatten() {
            Some(pointer)
                if pointer.rsplit_once("/metadata/").is_some_and(|(location, _)| {
                    location
                        .rsplit('/')
                        .next()
                        .is_some_and(|folder| folder.starts_with(ident.name()))
                }) =>
            {
                Removal::Removed {
                    location: pointer.rsplit_once("/metadata/").unwrap().0.to_string(),
                }
            }
            _ => Removal::EntryOnly { why: format!("{e:#}") },
        },
    };
    if handle.kind() == tidemark_schemas::CatalogKind::S3tables {
        // S3 Tables owns the table's storage: its purge (DeleteTable) removes the files (a
        // table bucket cannot be listed or deleted from by prefix).
        handle
            .catalog()
            .purge_table(&ident)
            .await
            .map_err(|e| anyhow::anyhow!("purge scratch table {name}: {e}"))?;
        return Ok(match removal {
            // The service removed the files with the entry.
            Removal::EntryOnly { .. } => Removal::Removed {
                location: format!("{name} (purged by S3 Tables)"),
            },
            r => r,
        });
    }
    if let Removal::Removed { location } = &removal {
        let io = match &loaded {
            Ok(t) => t.file_io().clone(),
            Err(_) => crate::table::source::file_io(handle.file_io_props()),
        };
        io.delete_prefix(format!("{location}/"))
            .await
            .map_err(|e| anyhow::anyhow!("delete the files of scratch table {name} under {location}: {e}"))?;
    }
    handle
        .catalog()
        .drop_table(&ident)
        .await
        .map_err(|e| anyhow::anyhow!("drop scratch table {name}: {e}"))?;
    Ok(removal)
}

/// The temporary folder holding a drill's audit records when it has no `--history`:
/// `$TMPDIR/tidemark-<drill id>-audits-<pid>`, the process id telling a killed drill's folder
/// from a running one's ([`remove_dead_temp_records`]).
pub fn temp_records_dir(drill_id: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tidemark-{drill_id}-audits-{}", std::process::id()))
}

/// Removes the temporary audit folders of drills that were killed (their process is gone);
/// their names, for the report. Another drill running beside this one keeps its folder.
pub fn remove_dead_temp_records() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("tidemark-")
            .filter(|rest| rest.starts_with(ID_PREFIX))
            .and_then(|rest| rest.rsplit_once("-audits-"))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = pid == std::process::id() || std::path::Path::new(&format!("/proc/{pid}")).exists();
        if !alive && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(name);
        }
    }
    removed.sort();
    removed
}
