//! Where a [`Shared`] table lives beyond the embedded default: a SQLite catalog over an S3
//! warehouse (moto, sandbox/moto.sh), SeaweedFS's Iceberg REST catalog (`sw`) and moto's S3
//! Tables (`st`), defined as `catalogs_remote.rs` defines them, each with its journal on the same
//! S3 server and PyIceberg on the same catalog. A remote table's namespace is this run's
//! (`catalogs_remote::ns`): the catalogs outlive the runs.

use super::super::catalogs_remote::{ns, rest_definition, s3tables_definition};
use super::super::support::python::PyIceberg;
use super::super::support::{Scratch, s3_available};
use super::Shared;

/// A place for the scenarios of `audit.rs`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Place {
    /// shop.orders in a SQLite catalog and a warehouse, both in the scratch folder.
    Local,
    /// shop.orders in a SQLite catalog in the scratch folder, its warehouse and the journal on
    /// S3 (`AWS_ENDPOINT_URL`) under `s3://tidemark/<this run's prefix>/`.
    S3,
    /// SeaweedFS's REST catalog, the journal on SeaweedFS's S3.
    Rest,
    /// moto's S3 Tables, the journal on moto's S3.
    S3Tables,
}

impl Shared {
    /// The table at `place`; `purpose` names the run's namespace and S3 prefix. `None` (after a
    /// skip line) when that place's servers or PyIceberg are skipped.
    pub(super) fn at(place: Place, purpose: &str) -> Option<Shared> {
        let ns = |tag: &str| ns(&format!("{purpose}_{tag}"));
        let journal = |ns: &str| format!("s3://tidemark/{ns}/journal");
        match place {
            Place::Local => Shared::new(),
            Place::S3 => {
                if !s3_available() {
                    return None;
                }
                let ns = ns("s3");
                let mut s = Scratch::new();
                let warehouse = format!("s3://tidemark/{ns}/warehouse");
                let py = PyIceberg::with_s3_warehouse(&s.path("catalog.db"), &warehouse)?;
                // Every command of the scratch creates and finds its tables there.
                s.env.push(("TIDEMARK_WAREHOUSE".into(), warehouse));
                let catalog = s.path_str("catalog.db");
                Some(Shared::open(s, py, journal(&ns), catalog, "shop".into()))
            }
            Place::Rest => {
                let definition = rest_definition()?;
                let mut s = Scratch::on_seaweedfs()?;
                s.env.extend(definition);
                let py = PyIceberg::on_defined("catalog:sw", s.env.clone())?;
                let ns = ns("rest");
                Some(Shared::open(s, py, journal(&ns), "sw".into(), ns))
            }
            Place::S3Tables => {
                if !s3_available() {
                    return None;
                }
                let definition = s3tables_definition()?;
                let mut s = Scratch::new();
                s.env.extend(definition);
                let py = PyIceberg::on_defined("s3tables:st", s.env.clone())?;
                let ns = ns("st");
                Some(Shared::open(s, py, journal(&ns), "st".into(), ns))
            }
        }
    }
}
