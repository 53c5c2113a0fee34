//! [`FollowTarget`]: what the follower follows (replica warehouse, DR catalog, namespace,
//! prefix map, state location, holder), shared by `follow` and `failover`: the follow options,
//! the state location it decides, and the DR catalog it opens.

use clap::Args;
use tidemark_recovery::catalog::config::{resolve, sqlite_file};
use tidemark_recovery::catalog::{CatalogConfig, CatalogKind, Definitions, open_catalog, s3_props};
use tidemark_recovery::dr::follow::FollowOptions;
use tidemark_recovery::dr::follow_state::FollowMode;
use tidemark_recovery::dr::follower;
use tidemark_recovery::exit::exit_error;
use tidemark_recovery::recover::snapshot::PrefixMap;

use crate::cli::common::default_writer_id;

/// What the follower follows; shared by `follow` and `failover`.
#[derive(Debug, Clone, Args)]
pub struct FollowTarget {
    /// The replica warehouse: a folder or s3://bucket/prefix, as replication fills it.
    #[arg(long)]
    pub warehouse: String,
    /// The DR catalog the follower keeps in step (SQLite file, postgres://…, or a defined name).
    #[arg(long)]
    pub catalog: String,
    #[arg(long)]
    pub catalog_name: Option<String>,
    /// Only the tables directly in this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// FROM=TO: the replica holds under TO what its metadata names under FROM; what is registered
    /// is metadata rewritten to TO.
    #[arg(long)]
    pub prefix_map: Option<String>,
    /// Where the lease and state objects live (a folder or s3://…); default, for a SQLite DR
    /// catalog, the folder <catalog file>.follower beside it; required for other catalogs.
    #[arg(long)]
    pub state: Option<String>,
    /// Allow --state inside the replica warehouse or the --prefix-map target (refused otherwise:
    /// a replication that mirrors deletions would remove it).
    #[arg(long)]
    pub state_in_replica: bool,
    /// This follower's id in the lease; default host and process.
    #[arg(long)]
    pub holder: Option<String>,
}

impl FollowTarget {
    pub(super) fn options(&self, mode: FollowMode, interval_ms: Option<u64>) -> anyhow::Result<FollowOptions> {
        let prefix_map = match &self.prefix_map {
            Some(m) => Some(
                PrefixMap::parse(m)
                    .ok_or_else(|| exit_error(tidemark_recovery::exit::BAD_INPUT, "--prefix-map is FROM=TO"))?,
            ),
            None => None,
        };
        Ok(FollowOptions {
            warehouse: self.warehouse.clone(),
            namespace: self.namespace.clone(),
            mode,
            prefix_map,
            file_io_props: s3_props(|k| std::env::var(k).ok()),
            holder: self.holder.clone().unwrap_or_else(default_writer_id),
            interval_ms,
        })
    }

    /// The DR catalog as its definition resolves it, without opening it (`None`: it does not
    /// resolve; opening it then says why).
    pub(super) fn resolved(&self) -> anyhow::Result<Option<tidemark_recovery::catalog::Resolved>> {
        let name = self.catalog_name.as_deref().filter(|n| !n.trim().is_empty());
        Ok(resolve(&self.catalog, name, None, &Definitions::load()?).ok())
    }

    /// The state location: `--state`, or beside a SQLite DR catalog; refused inside the replica
    /// (see [`follower::check_state_location`]) unless `--state-in-replica`. Decided before the
    /// catalog is opened (opening a SQLite file creates it).
    pub(super) fn state_url(&self) -> anyhow::Result<String> {
        let url = match (&self.state, self.resolved()?) {
            (Some(s), _) => s.clone(),
            (None, Some(r)) if r.kind == CatalogKind::Sqlite => {
                let file = sqlite_file(r.props.get("uri").map_or(self.catalog.as_str(), String::as_str));
                follower::default_state_url(&file.display().to_string())
            }
            (None, _) => {
                return Err(exit_error(
                    tidemark_recovery::exit::USAGE,
                    format!(
                        "give --state (a folder or s3://… outside the replica warehouse) for the follower's lease \
                         and state: only a SQLite DR catalog has a default place beside it, and {} is not one",
                        self.catalog
                    ),
                ));
            }
        };
        if !self.state_in_replica {
            let map_to = self
                .prefix_map
                .as_deref()
                .and_then(|m| m.split_once('='))
                .map(|(_, to)| to);
            follower::check_state_location(&url, &self.warehouse, map_to)
                .map_err(|e| exit_error(tidemark_recovery::exit::USAGE, e.to_string()))?;
        }
        Ok(url)
    }

    /// The DR catalog; its warehouse (where tables it creates go, e.g. `recover --into` after a
    /// failover) is the replica's unless the catalog's definition names one. A REST catalog's
    /// warehouse selects the server's catalog (SeaweedFS: its table bucket), so a defined one is
    /// never replaced by the replica's location.
    pub(super) async fn open(&self) -> anyhow::Result<tidemark_recovery::catalog::CatalogHandle> {
        let own = self.resolved()?.is_some_and(|r| {
            r.kind == CatalogKind::Rest && r.props.get("warehouse").is_some_and(|w| !w.trim().is_empty())
        });
        Ok(open_catalog(&CatalogConfig {
            uri: self.catalog.clone(),
            warehouse: if own { String::new() } else { self.warehouse.clone() },
            name: self.catalog_name.clone().unwrap_or_default(),
        })
        .await?)
    }
}
