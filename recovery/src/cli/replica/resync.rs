//! `replica resync`: failback, the demoted old primary walked back to the newest versions the
//! new primary holds; the report printed, and the exit code of what could not be resynced.

use std::path::PathBuf;

use anyhow::Context;
use tidemark_recovery::catalog::{CatalogConfig, open_catalog};
use tidemark_recovery::dr::follow_state::StateStore;
use tidemark_recovery::dr::follower;
use tidemark_recovery::dr::resync::{self, ResyncAction};
use tidemark_recovery::exit::exit_error;

use crate::cli::common::Common;
use crate::cli::output::print_json;

pub(super) async fn run_resync(
    demote: String,
    primary: String,
    namespace: Option<String>,
    follower_state: Option<String>,
    dry_run: bool,
    report: Option<PathBuf>,
    common: Common,
) -> anyhow::Result<()> {
    let open = |uri: String| async move {
        open_catalog(&CatalogConfig {
            uri,
            warehouse: String::new(),
            name: String::new(),
        })
        .await
    };
    let (demoted, new_primary) = (open(demote).await?, open(primary).await?);
    let follower = match follower_state {
        Some(url) => StateStore::new(follower::open_state(&url).await?).load().await?,
        None => None,
    };
    let r = resync::resync(&demoted, &new_primary, namespace.as_deref(), follower.as_ref(), dry_run).await?;
    if let Some(path) = &report {
        std::fs::write(path, serde_json::to_string_pretty(&r)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if common.json {
        print_json(&r)?;
    } else {
        for t in &r.tables {
            println!("{:<32} {:<18} {}", t.table, format!("{:?}", t.action), t.reason);
            if let Some(a) = &t.kept_aside {
                println!("{:<32}   kept aside as table {} at {}", "", a.table, a.location);
            }
            for f in &t.kept_files {
                println!("{:<32}   kept {} {}", "", f.what, f.path);
            }
        }
        if r.dry_run {
            println!("dry run: nothing changed");
        }
    }
    // Exit 4 when a table cannot be resynced as it is (or failed), else 5 when another writer moved
    // a table while the resync ran (nothing of it moved; a re-run once that writer stops resyncs it).
    let of = |actions: &[ResyncAction]| -> Vec<String> {
        r.tables
            .iter()
            .filter(|t| actions.contains(&t.action))
            .map(|t| {
                let action = serde_json::to_value(t.action).unwrap_or_default();
                format!("{} ({})", t.table, action.as_str().unwrap_or_default())
            })
            .collect()
    };
    let held = of(&[ResyncAction::NoCommonVersion, ResyncAction::Failed]);
    let moved = of(&[ResyncAction::Conflict]);
    if !held.is_empty() {
        let all: Vec<String> = held.into_iter().chain(moved).collect();
        return Err(exit_error(
            tidemark_recovery::exit::VERIFY_FAILED,
            format!("not resynced: {}", all.join(", ")),
        ));
    }
    if !moved.is_empty() {
        return Err(exit_error(
            tidemark_recovery::exit::CONFLICT,
            format!(
                "not resynced: {} moved while the resync ran (another writer); nothing of them moved: run the resync \
                 again once that writer stops",
                moved.join(", ")
            ),
        ));
    }
    Ok(())
}
