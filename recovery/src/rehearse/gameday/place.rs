//! The game day's options ([`GamedayOptions`], its scratch [`NAMESPACE`]) and where
//! everything lives ([`Place`]: the work folder, the warehouses, the scratch catalogs).

use tidemark_journal::store;

use crate::catalog::{CatalogConfig, CatalogHandle, open_catalog};

/// The scratch namespace.
pub const NAMESPACE: &str = "gameday";

#[derive(Debug, Clone)]
pub struct GamedayOptions {
    /// A folder for catalogs (and, without `store`, for everything).
    pub work: std::path::PathBuf,
    /// `s3://bucket/prefix` for the warehouses; default: the work folder.
    pub store: Option<String>,
    pub tables: usize,
    /// Commits per table (at least 3: the tag and the branch sit on the first two).
    pub commits: usize,
    pub rows_per_commit: usize,
    /// `--catalog`: the catalog of the source tables (what `--catalog` accepts), in its scratch
    /// namespace `gameday`; default: a scratch SQLite catalog. See [`super::catalogs`].
    pub catalog: Option<String>,
    /// `--dr-catalog`: where the lost catalog is rebuilt; default: a scratch SQLite catalog.
    pub dr_catalog: Option<String>,
}

/// Where everything lives.
pub(super) struct Place {
    pub(super) work: std::path::PathBuf,
    pub(super) base: String,
}

impl Place {
    /// The work folder (made if new) and the warehouses' base.
    pub(super) fn of(opts: &GamedayOptions) -> Result<Place, String> {
        std::fs::create_dir_all(&opts.work).map_err(|e| e.to_string())?;
        let work = std::fs::canonicalize(&opts.work).map_err(|e| e.to_string())?;
        let base = opts
            .store
            .clone()
            .unwrap_or_else(|| work.display().to_string())
            .trim_end_matches('/')
            .to_string();
        Ok(Place { work, base })
    }

    pub(super) fn url(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base)
    }

    /// The warehouse as table locations spell it.
    pub(super) fn warehouse(&self, rel: &str) -> String {
        if self.base.starts_with("s3://") {
            self.url(rel)
        } else {
            format!("file://{}/{rel}", self.base)
        }
    }

    /// Deletes what a previous game day left under `rel`.
    pub(super) async fn clear(&self, rel: &str) -> Result<(), String> {
        if self.base.starts_with("s3://") {
            wipe(&self.url(rel)).await.map(|_| ())
        } else {
            let p = std::path::Path::new(&self.base).join(rel);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| format!("cannot clear {}: {e}", p.display()))?;
            }
            Ok(())
        }
    }

    /// A new SQLite catalog in `catalogs/<dir>` of the work folder.
    pub(super) async fn catalog(&self, dir: &str, warehouse: &str) -> Result<CatalogHandle, String> {
        let d = self.work.join("catalogs").join(dir);
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| e.to_string())?;
        }
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        open_catalog(&CatalogConfig {
            uri: d.join("catalog.db").display().to_string(),
            warehouse: warehouse.to_string(),
            name: "tidemark".into(),
        })
        .await
        .map_err(|e| e.to_string())
    }
}

/// Deletes every object under `url`.
pub(super) async fn wipe(url: &str) -> Result<usize, String> {
    let s = store::open(url).await.map_err(|e| e.to_string())?;
    store::delete_all(s.as_ref(), "").await.map_err(|e| e.to_string())
}
