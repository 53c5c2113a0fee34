//! Choosing a catalog the way users already do: what `--catalog` means, PyIceberg's catalog
//! definitions, and the FileIO settings from the environment.
//!
//! `--catalog` is, checked in this order:
//! - a URI: `postgres://…` / `postgresql://…` (also SQLAlchemy's `postgresql+psycopg2://…`),
//!   `sqlite:PATH`, `rest+http(s)://host[:port][/path]` (an Iceberg REST catalog at
//!   `http(s)://host[:port][/path]`), or an S3 Tables table-bucket ARN
//!   (`arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME`); any other scheme is refused;
//! - the NAME of a catalog defined as PyIceberg defines it: `catalog: NAME: {…}` in
//!   `.pyiceberg.yaml` (in `$PYICEBERG_HOME`, else the home folder, else the working folder; the
//!   first found), overlaid by `PYICEBERG_CATALOG__<NAME>__<KEY>` environment variables (`__` in
//!   KEY is `.`, `_` is `-`); types `sql`, `rest`, `s3tables` (inferred from `uri` when absent,
//!   as PyIceberg does);
//! - an existing file (a SQLite catalog), or plainly a new SQLite file (a `/` in it or a `.db`
//!   suffix), created on first use.
//!
//! Anything else is refused, listing the defined names, so that a mistyped name never silently
//! becomes a new SQLite file. Resolution yields a [`Resolved`]: kind, name and a property map in
//! PyIceberg's keys (`uri`, `warehouse`, `credential`, `token`, `s3.endpoint`, …), which the
//! backends open. Secrets in that map never leave it: messages show URIs through [`redact`].

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use iceberg::io::{
    S3_ACCESS_KEY_ID, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION, S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN,
};

use super::contract::{CatalogKind, CatalogRef};
use crate::table::TableError;

/// The catalog name used when none is given (the SQL `catalog_name` column).
pub const DEFAULT_NAME: &str = "tidemark";

/// A resolved `--catalog`: what kind, under which name, with which properties (PyIceberg keys).
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved {
    pub kind: CatalogKind,
    pub name: String,
    pub props: HashMap<String, String>,
}

// Manual Debug: the properties may hold passwords, tokens and keys.
impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<&String> = self.props.keys().collect();
        keys.sort();
        f.debug_struct("Resolved")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("uri", &self.props.get("uri").map(|u| redact(u)))
            .field("keys", &keys)
            .finish()
    }
}

/// Catalogs defined the PyIceberg way: name (lowercase) → properties (lowercase keys).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Definitions {
    pub catalogs: BTreeMap<String, HashMap<String, String>>,
    /// Where they came from, for messages (a file path, "PYICEBERG_CATALOG__* variables").
    pub sources: Vec<String>,
}

impl std::fmt::Debug for Definitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Definitions")
            .field("names", &self.catalogs.keys().collect::<Vec<_>>())
            .field("sources", &self.sources)
            .finish()
    }
}

impl Definitions {
    /// The definitions of this process: its `.pyiceberg.yaml` and environment.
    pub fn load() -> Result<Self, TableError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let dirs = [
            env("PYICEBERG_HOME").map(PathBuf::from),
            // PyIceberg's `expanduser("~")`.
            env("HOME").map(PathBuf::from),
            std::env::current_dir().ok(),
        ];
        let file = dirs
            .into_iter()
            .flatten()
            .map(|d| d.join(".pyiceberg.yaml"))
            .find(|p| p.is_file());
        let yaml = match file {
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|e| TableError::InvalidCatalog {
                    uri: path.display().to_string(),
                    reason: format!("cannot read the PyIceberg configuration: {e}"),
                })?;
                Some((path.display().to_string(), text))
            }
            None => None,
        };
        Self::from_sources(yaml.as_ref().map(|(p, t)| (p.as_str(), t.as_str())), std::env::vars())
    }

    /// The definitions in `yaml` (path and text of a `.pyiceberg.yaml`) overlaid by the
    /// `PYICEBERG_CATALOG__…` entries of `vars`.
    pub fn from_sources(
        yaml: Option<(&str, &str)>,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, TableError> {
        let mut defs = Definitions::default();
        if let Some((path, text)) = yaml {
            let bad = |reason: String| TableError::InvalidCatalog {
                uri: path.to_string(),
                reason,
            };
            let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| bad(format!("not valid YAML: {e}")))?;
            let catalogs = doc
                .as_mapping()
                .and_then(|m| {
                    m.iter()
                        .find(|(k, _)| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case("catalog")))
                })
                .map(|(_, v)| v);
            if let Some(catalogs) = catalogs {
                let map = catalogs
                    .as_mapping()
                    .ok_or_else(|| bad("`catalog` must map catalog names to their properties".into()))?;
                for (name, props) in map {
                    let name = scalar(name).ok_or_else(|| bad("a catalog name must be a string".into()))?;
                    let mut flat = HashMap::new();
                    flatten("", props, &mut flat)
                        .map_err(|k| bad(format!("catalog {name}: key {k:?} is not a value")))?;
                    defs.catalogs.insert(name.to_lowercase(), flat);
                }
            }
            defs.sources.push(path.to_string());
        }
        let mut from_env = false;
        for (var, value) in vars {
            let lower = var.to_lowercase();
            let Some(rest) = lower.strip_prefix("pyiceberg_catalog__") else {
                continue;
            };
            // PyIceberg: split into at most catalog / name / key; `__` → `.`, `_` → `-`.
            let Some((name, key)) = rest.split_once("__") else {
                continue;
            };
            let name = name.replace('_', "-");
            let key = key.replace("__", ".").replace('_', "-");
            if name.is_empty() || key.is_empty() {
                continue;
            }
            defs.catalogs.entry(name).or_default().insert(key, value);
            from_env = true;
        }
        if from_env {
            defs.sources.push("PYICEBERG_CATALOG__* variables".into());
        }
        Ok(defs)
    }

    pub fn get(&self, name: &str) -> Option<&HashMap<String, String>> {
        self.catalogs.get(&name.to_lowercase())
    }

    fn listing(&self) -> String {
        if self.catalogs.is_empty() {
            "no catalogs are defined (.pyiceberg.yaml in $PYICEBERG_HOME or the home folder, or \
             PYICEBERG_CATALOG__<NAME>__<KEY> variables)"
                .to_string()
        } else {
            format!(
                "defined catalogs: {} (from {})",
                self.catalogs.keys().cloned().collect::<Vec<_>>().join(", "),
                self.sources.join(", ")
            )
        }
    }
}

fn scalar(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// PyIceberg's keys are flat (`s3.endpoint`); a nested mapping is read as the dotted key.
fn flatten(prefix: &str, v: &serde_yaml::Value, out: &mut HashMap<String, String>) -> Result<(), String> {
    let Some(map) = v.as_mapping() else {
        return Err(prefix.to_string());
    };
    for (k, v) in map {
        let k = scalar(k).ok_or_else(|| prefix.to_string())?.to_lowercase();
        let key = if prefix.is_empty() { k } else { format!("{prefix}.{k}") };
        match v {
            serde_yaml::Value::Mapping(_) => flatten(&key, v, out)?,
            serde_yaml::Value::Null => {}
            other => {
                let value = scalar(other).ok_or_else(|| key.clone())?;
                out.insert(key, value);
            }
        }
    }
    Ok(())
}

/// Resolves `value` (what `--catalog` says) with the optional `--catalog-name` and
/// `--warehouse`. See the module documentation for the order.
pub fn resolve(
    value: &str,
    name: Option<&str>,
    warehouse: Option<&str>,
    defs: &Definitions,
) -> Result<Resolved, TableError> {
    let value = value.trim();
    let invalid = |reason: String| TableError::InvalidCatalog {
        uri: redact(value),
        reason,
    };
    if value.is_empty() {
        return Err(invalid("the catalog is empty".into()));
    }
    let name = name.map(str::trim).filter(|n| !n.is_empty());
    let mut props = HashMap::new();
    let kind = if let Some(def) = defs.get(value).filter(|_| !value.contains("://")) {
        let kind = defined_kind(value, def).map_err(&invalid)?;
        props = def.clone();
        if let Some(uri) = def.get("uri") {
            props.insert("uri".into(), sqlalchemy_to_tidemark(uri));
        }
        let name = name.unwrap_or(value).to_string();
        return finish(kind, name, props, warehouse, value);
    } else if let Some(kind) = uri_kind(value).map_err(&invalid)? {
        kind
    } else if Path::new(value).is_file() || value.contains('/') || value.ends_with(".db") {
        CatalogKind::Sqlite
    } else {
        return Err(invalid(format!(
            "neither a defined catalog, an existing file, a URI (postgres://, sqlite:, rest+http(s)://, an S3 \
             Tables ARN) nor a new SQLite file (a path with a `/` or ending in .db); {}",
            defs.listing()
        )));
    };
    let uri = match kind {
        CatalogKind::Rest => value.strip_prefix("rest+").unwrap_or(value).to_string(),
        CatalogKind::Postgres => sqlalchemy_to_tidemark(value),
        _ => value.to_string(),
    };
    props.insert("uri".into(), uri);
    if kind == CatalogKind::S3tables {
        props.insert("warehouse".into(), value.to_string());
    }
    finish(kind, name.unwrap_or(DEFAULT_NAME).to_string(), props, warehouse, value)
}

fn finish(
    kind: CatalogKind,
    name: String,
    mut props: HashMap<String, String>,
    warehouse: Option<&str>,
    value: &str,
) -> Result<Resolved, TableError> {
    props.insert("type".into(), kind_type(kind).into());
    // An S3 Tables catalog's warehouse is its table bucket: `--warehouse` does not move it.
    if let Some(w) = warehouse
        .map(str::trim)
        .filter(|w| !w.is_empty() && kind != CatalogKind::S3tables)
    {
        props.insert("warehouse".into(), w.to_string());
    }
    match kind {
        CatalogKind::Sqlite if !props.contains_key("warehouse") => {
            // `warehouse/` beside the catalog file.
            let file = sqlite_file(props.get("uri").map_or(value, String::as_str));
            let dir = file.parent().map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
            props.insert("warehouse".into(), dir.join("warehouse").display().to_string());
        }
        CatalogKind::Postgres if !props.contains_key("warehouse") => {
            return Err(TableError::InvalidCatalog {
                uri: redact(value),
                reason: "a PostgreSQL catalog needs a warehouse: --warehouse, or `warehouse` in its definition".into(),
            });
        }
        _ => {}
    }
    Ok(Resolved { kind, name, props })
}

/// The kind of a URI value, `None` when it is not a URI, or an error for an unknown scheme.
fn uri_kind(value: &str) -> Result<Option<CatalogKind>, String> {
    if value.starts_with("arn:") {
        return if value.starts_with("arn:aws:s3tables:") && value.contains(":bucket/") {
            Ok(Some(CatalogKind::S3tables))
        } else {
            Err("an ARN must be an S3 Tables table bucket: arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME".into())
        };
    }
    if value.starts_with("sqlite:") {
        return Ok(Some(CatalogKind::Sqlite));
    }
    let Some((scheme, _)) = value.split_once("://") else {
        return Ok(None);
    };
    match scheme.to_ascii_lowercase().as_str() {
        "postgres" | "postgresql" => Ok(Some(CatalogKind::Postgres)),
        s if s.starts_with("postgresql+") => Ok(Some(CatalogKind::Postgres)),
        "rest+http" | "rest+https" => Ok(Some(CatalogKind::Rest)),
        "http" | "https" => Err(format!(
            "an Iceberg REST catalog is written rest+{scheme}://host[:port][/path]"
        )),
        // The scheme only: the rest may hold a password.
        other => Err(format!(
            "scheme {other:?} is not supported (a SQLite file, postgres://, rest+http(s)://, an S3 Tables ARN, or a defined catalog name)"
        )),
    }
}

/// The kind of a defined catalog: its `type`, else inferred from its `uri` (as PyIceberg does).
fn defined_kind(name: &str, def: &HashMap<String, String>) -> Result<CatalogKind, String> {
    let uri = def.get("uri").map(String::as_str).unwrap_or("");
    let from_uri = || {
        if uri.starts_with("postgres") {
            Some(CatalogKind::Postgres)
        } else if uri.starts_with("sqlite") {
            Some(CatalogKind::Sqlite)
        } else {
            None
        }
    };
    match def.get("type").map(|t| t.to_lowercase()).as_deref() {
        Some("sql") => from_uri()
            .ok_or_else(|| format!("catalog {name} is of type sql but its uri is neither sqlite:… nor postgresql:…")),
        Some("rest") => Ok(CatalogKind::Rest),
        Some("s3tables") => Ok(CatalogKind::S3tables),
        Some(other) => Err(format!(
            "catalog {name} is of type {other:?}; tidemark opens the types sql, rest and s3tables"
        )),
        None if uri.starts_with("http") => Ok(CatalogKind::Rest),
        None => from_uri().ok_or_else(|| format!("catalog {name} has no type and no uri to infer it from")),
    }
}

fn kind_type(kind: CatalogKind) -> &'static str {
    match kind {
        CatalogKind::Sqlite | CatalogKind::Postgres => "sql",
        CatalogKind::Rest => "rest",
        CatalogKind::S3tables => "s3tables",
    }
}

/// SQLAlchemy URIs (PyIceberg's SQL catalog) in the form tidemark opens: `sqlite:///rel` and
/// `sqlite:////abs` become the path; `postgresql+driver://` loses the driver.
fn sqlalchemy_to_tidemark(uri: &str) -> String {
    if let Some(path) = uri.strip_prefix("sqlite:///") {
        return path.to_string();
    }
    if let Some((scheme, rest)) = uri.split_once("://")
        && let Some(base) = scheme.split_once('+').map(|(b, _)| b)
        && base.starts_with("postgres")
    {
        return format!("{base}://{rest}");
    }
    uri.to_string()
}

/// The SQLite file a catalog value names (absolute; `sqlite:` and `sqlite://` prefixes and a
/// query string dropped).
pub fn sqlite_file(value: &str) -> PathBuf {
    let path = value
        .strip_prefix("sqlite://")
        .or_else(|| value.strip_prefix("sqlite:"))
        .unwrap_or(value);
    let path = path.split('?').next().unwrap_or(path);
    std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path))
}

/// How a reader opens a recorded [`CatalogRef`]: with the catalog defined under the same name
/// when it is the same catalog (its credentials are the reader's own), else from the reference
/// alone (credentials from the standard places: the AWS chain, `PGPASSWORD` / `~/.pgpass`).
pub fn resolve_ref(reference: &CatalogRef, defs: &Definitions) -> Resolved {
    let mut props = HashMap::from([("uri".to_string(), reference.uri.clone())]);
    if let Some(def) = defs.get(&reference.name)
        && defined_kind(&reference.name, def).is_ok_and(|k| k == reference.kind)
    {
        let def_uri = def.get("uri").map(|u| sqlalchemy_to_tidemark(u));
        if def_uri.as_deref().is_none_or(|u| same_uri(u, &reference.uri)) {
            props = def.clone();
            // The defined URI may carry the reader's own password.
            props.insert("uri".into(), def_uri.unwrap_or_else(|| reference.uri.clone()));
        }
    }
    props.insert("type".into(), kind_type(reference.kind).into());
    if let Some(w) = &reference.warehouse {
        props.insert("warehouse".into(), w.clone());
    }
    // An S3 Tables reference is its table-bucket ARN, which the backend takes as `warehouse`.
    if reference.kind == CatalogKind::S3tables && !props.contains_key("warehouse") {
        props.insert("warehouse".into(), reference.uri.clone());
    }
    Resolved {
        kind: reference.kind,
        name: reference.name.clone(),
        props,
    }
}

/// Whether two references name the same catalog: kind, name and URI (passwords set aside);
/// the warehouse is where new tables go, not which catalog it is.
pub fn same_catalog(a: &CatalogRef, b: &CatalogRef) -> bool {
    a.kind == b.kind && a.name == b.name && same_uri(&a.uri, &b.uri)
}

/// Whether two catalog URIs name the same catalog once passwords are set aside.
fn same_uri(a: &str, b: &str) -> bool {
    strip_password(a).trim_end_matches('/') == strip_password(b).trim_end_matches('/')
}

/// `s3://bucket/prefix` stays; a local folder becomes `file:///abs/path`, because the storage
/// factory picks the backend from the URL scheme and a bare path is not a URL.
pub fn normalize_warehouse(warehouse: &str) -> Result<String, TableError> {
    let w = warehouse.trim().trim_end_matches('/');
    let invalid = |reason: String| TableError::InvalidWarehouse {
        warehouse: warehouse.to_string(),
        reason,
    };
    if w.is_empty() {
        return Err(invalid("the warehouse location is empty".into()));
    }
    if let Some(rest) = w.strip_prefix("s3://").or_else(|| w.strip_prefix("s3a://")) {
        if rest.is_empty() || rest.starts_with('/') {
            return Err(invalid("an S3 warehouse needs a bucket: s3://bucket/prefix".into()));
        }
        return Ok(w.to_string());
    }
    if let Some(path) = w.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(invalid("a file:// warehouse needs an absolute path (file:///…)".into()));
        }
        return Ok(w.to_string());
    }
    if let Some((scheme, _)) = w.split_once("://") {
        return Err(invalid(format!(
            "scheme {scheme:?} is not supported (use s3:// or a local folder)"
        )));
    }
    let abs = std::path::absolute(w).map_err(|e| invalid(format!("cannot make the path absolute: {e}")))?;
    let abs = abs.to_str().ok_or_else(|| invalid("the path is not UTF-8".into()))?;
    Ok(format!("file://{}", abs.trim_end_matches('/')))
}

/// Replaces the password of `scheme://user:password@host…` so the URI can go into messages.
pub fn redact(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => uri.to_string(),
        },
        None => uri.to_string(),
    }
}

/// `scheme://user:password@host…` without the password (the user stays: readers bring the
/// password through their own configuration, e.g. the PostgreSQL password file).
pub(crate) fn strip_password(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => uri.to_string(),
    }
}

/// The S3 FileIO properties from environment-style variables (`env` returns a variable's value).
pub fn s3_props(env: impl Fn(&str) -> Option<String>) -> HashMap<String, String> {
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    let mut props = HashMap::new();
    if let Some(endpoint) = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")) {
        // Virtual-host addressing puts the bucket in the host name, which an IP or localhost
        // endpoint (a local test server) cannot resolve.
        if endpoint_needs_path_style(&endpoint) {
            props.insert(S3_PATH_STYLE_ACCESS.to_string(), "true".to_string());
        }
        props.insert(S3_ENDPOINT.to_string(), endpoint);
    }
    if let Some(v) = env("AWS_ACCESS_KEY_ID") {
        props.insert(S3_ACCESS_KEY_ID.to_string(), v);
    }
    if let Some(v) = env("AWS_SECRET_ACCESS_KEY") {
        props.insert(S3_SECRET_ACCESS_KEY.to_string(), v);
    }
    if let Some(v) = env("AWS_SESSION_TOKEN") {
        props.insert(S3_SESSION_TOKEN.to_string(), v);
    }
    match env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")) {
        Some(region) => {
            props.insert(S3_REGION.to_string(), region);
        }
        // S3-compatible servers ignore the region but request signing needs one.
        None if props.contains_key(S3_ENDPOINT) => {
            props.insert(S3_REGION.to_string(), "us-east-1".to_string());
        }
        None => {}
    }
    props
}

pub(crate) fn endpoint_needs_path_style(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or(v6)
    } else {
        authority.split(':').next().unwrap_or(authority)
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
