//! The Iceberg REST catalog backend (MinIO AIStor Tables, RustFS, Polaris, Lakekeeper, Nessie,
//! Glue's REST endpoint, SeaweedFS, …) behind the catalog contract ([`super::contract`]).
//!
//! Namespaces, listing, creating, loading and registering go through iceberg-catalog-rest's
//! `RestCatalog`. A commit cannot: the crate's `TableCommit` cannot be built outside iceberg, so
//! tidemark posts the spec's `CommitTableRequest` itself (`POST /v1/{prefix}/namespaces/{ns}/
//! tables/{table}`), with the same authentication the crate uses (a `token`, or an OAuth2
//! client-credentials exchange of `credential` at `<uri>/v1/oauth/tokens`). The server checks
//! the requirements and writes the metadata file; what its replies mean:
//! - 200: committed; the reply carries the new metadata and its location.
//! - 409: a requirement failed ([`CommitError::Conflict`]); nothing changed.
//! - 5xx, a timeout, a reset, an unreadable 200: the outcome is unknown, resolved by reloading
//!   the table ([`resolve_unknown`]). The request is never re-sent blindly.
//! - a connection that could not even be opened: nothing was sent; the catalog is unreachable.
//! - other 4xx: refused, nothing changed (a 401 first renews an expired OAuth2 token, once).
//!
//! Capabilities: `register` as the server really supports it. A server that lists its endpoints
//! in `/v1/config` is taken at its word. One that lists none has, by the spec, the default set,
//! which includes register, unless the catalog definition says otherwise with
//! `tidemark.register: false`: for servers whose register answers 200 with a table that does not
//! load as the registered file (SeaweedFS 4.48: empty metadata and a new uuid), which nothing in
//! their replies identifies before the fact. After a register, the table is loaded and checked
//! against the file (uuid and location), so such a server is caught, never reported as a success.
//! No `swap_pointer`: a REST catalog's pointer moves only through commits the server makes.
//!
//! The token, the credential and the S3 secret never leave this file and its HTTP side
//! ([`super::rest_http`]: authentication, `/v1/config`, failed requests): the reference, `Debug`
//! and every error name the catalog by its URI only.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::table_io::CountingStorageFactory;
use async_trait::async_trait;
use iceberg::io::{FileIO, FileIOBuilder, S3_ENDPOINT, S3_PATH_STYLE_ACCESS};
use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{Catalog, CatalogBuilder, ErrorKind, TableIdent};
use iceberg_catalog_rest::{CommitTableRequest, CommitTableResponse, RestCatalogBuilder};
use reqwest::StatusCode;
use tokio::sync::Mutex;

use super::contract::{
    Capabilities, CatalogBackend, CatalogKind, CatalogRef, CommitError, CommitRequest, resolve_unknown,
};
use super::rest_http::{Auth, HttpError, describe, fetch_config, status_error};
use super::rest_io::{VendedIo, is_io_key, layered};
use crate::table::error::{TableError, iceberg_err};

/// How long one request to the catalog may take before its outcome counts as unknown.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Catalog property (`true`/`false`) that says whether the server's register endpoint works,
/// for a server that does not list its endpoints (see the module documentation).
pub const REGISTER_PROP: &str = "tidemark.register";

/// Opens the REST catalog `name` from PyIceberg's property keys: `uri` (required), `warehouse`,
/// `prefix`, `credential` (`client_id:client_secret`), `token`, `scope`, `oauth2-server-uri`,
/// `header.*`, and the FileIO's `s3.*`; plus tidemark's [`REGISTER_PROP`]. Makes one request,
/// `GET /v1/config`, to learn the server's prefix, defaults and endpoints. `env` is the
/// environment's FileIO properties, the weakest layer ([`super::rest_io`]).
pub async fn open(
    name: &str,
    props: &HashMap<String, String>,
    env: &HashMap<String, String>,
) -> Result<Arc<dyn CatalogBackend>, TableError> {
    Ok(Arc::new(RestBackend::open(name, props, env).await?))
}

/// The REST backend. See the module documentation.
pub struct RestBackend {
    catalog: Arc<VendedIo>,
    reference: CatalogRef,
    capabilities: Capabilities,
    http: reqwest::Client,
    auth: Auth,
    /// `<uri>/v1[/<prefix>]`, the base of the table endpoints.
    base: String,
    /// Reads a metadata file before it is registered (the `s3.*` / `client.*` properties).
    file_io: FileIO,
    /// What `file_io` is built from: the layers of [`super::rest_io`] without a table's own.
    io_props: HashMap<String, String>,
}

// Manual Debug: `auth` holds the token and the credential.
impl std::fmt::Debug for RestBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestBackend")
            .field("reference", &self.reference)
            .field("capabilities", &self.capabilities)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl RestBackend {
    pub async fn open(
        name: &str,
        props: &HashMap<String, String>,
        env: &HashMap<String, String>,
    ) -> Result<RestBackend, TableError> {
        let props = &without_empty_secrets(props);
        let raw_uri = props.get("uri").map(|u| u.trim().trim_end_matches('/')).unwrap_or("");
        let shown = super::redact(raw_uri);
        let invalid = |reason: String| TableError::InvalidCatalog {
            uri: if shown.is_empty() {
                format!("rest catalog {name}")
            } else {
                shown.clone()
            },
            reason,
        };
        if raw_uri.is_empty() {
            return Err(invalid("a REST catalog needs a `uri` (http://host:port[/path])".into()));
        }
        if !(raw_uri.starts_with("http://") || raw_uri.starts_with("https://")) {
            return Err(invalid(format!(
                "the REST catalog uri must be http:// or https://, not {shown}"
            )));
        }
        let unreachable = |detail: String| TableError::CatalogUnreachable {
            uri: shown.clone(),
            detail,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| unreachable(format!("cannot build an HTTP client: {e}")))?;
        let credential = props.get("credential").map(|c| match c.split_once(':') {
            Some((id, secret)) => (Some(id.to_string()), secret.to_string()),
            None => (None, c.to_string()),
        });
        let auth = Auth {
            token: Mutex::new(props.get("token").cloned()),
            credential,
            token_endpoint: props
                .get("oauth2-server-uri")
                .cloned()
                .unwrap_or_else(|| format!("{raw_uri}/v1/oauth/tokens")),
            scope: props.get("scope").cloned().unwrap_or_else(|| "catalog".into()),
            extra_headers: props
                .iter()
                .filter_map(|(k, v)| k.strip_prefix("header.").map(|h| (h.to_string(), v.clone())))
                .collect(),
        };

        let register_prop = match props.get(REGISTER_PROP).map(|v| v.trim().to_ascii_lowercase()) {
            None => None,
            Some(v) if v == "true" => Some(true),
            Some(v) if v == "false" => Some(false),
            Some(v) => return Err(invalid(format!("{REGISTER_PROP} must be true or false, not {v:?}"))),
        };
        let config = fetch_config(&http, &auth, raw_uri, props.get("warehouse"))
            .await
            .map_err(|e| e.into_table_error(&shown, "read the catalog configuration (GET /v1/config)"))?;
        // The crate's precedence: server defaults < the user's properties < server overrides.
        let mut merged = config.defaults.clone();
        merged.extend(props.iter().map(|(k, v)| (k.clone(), v.clone())));
        merged.extend(config.overrides.clone());
        let uri = merged.get("uri").cloned().unwrap_or_else(|| raw_uri.to_string());
        let base = match merged.get("prefix").filter(|p| !p.is_empty()) {
            Some(prefix) => format!("{}/v1/{}", uri.trim_end_matches('/'), prefix.trim_matches('/')),
            None => format!("{}/v1", uri.trim_end_matches('/')),
        };

        let mut catalog_props = props.clone();
        catalog_props.remove(REGISTER_PROP);
        // A local S3 endpoint (an IP or localhost) has no DNS for virtual-host addressing.
        if let Some(endpoint) = catalog_props.get(S3_ENDPOINT)
            && !catalog_props.contains_key(S3_PATH_STYLE_ACCESS)
            && super::config::endpoint_needs_path_style(endpoint)
        {
            catalog_props.insert(S3_PATH_STYLE_ACCESS.to_string(), "true".to_string());
        }
        let storage = Arc::new(CountingStorageFactory::new());
        // The environment under the server under the definition (see `rest_io`); the crate is
        // given the definition only.
        let io_props = layered(env, &merged, &catalog_props);
        let file_io = FileIOBuilder::new(storage.clone()).with_props(io_props.clone()).build();
        let definition: HashMap<String, String> = catalog_props
            .iter()
            .filter(|(k, _)| is_io_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let inner = RestCatalogBuilder::default()
            .with_client(http.clone())
            .with_storage_factory(storage.clone())
            .load(name, catalog_props)
            .await
            .map_err(|e| unreachable(format!("{e:#}")))?;
        let catalog = VendedIo {
            inner,
            env: env.clone(),
            definition,
            storage,
        };

        let capabilities = Capabilities {
            register: register_supported(config.endpoints.as_deref(), register_prop),
            swap_pointer: false,
        };
        Ok(RestBackend {
            catalog: Arc::new(catalog),
            reference: CatalogRef {
                kind: CatalogKind::Rest,
                uri: shown,
                warehouse: props.get("warehouse").cloned(),
                name: name.to_string(),
            },
            capabilities,
            http,
            auth,
            base,
            file_io,
            io_props,
        })
    }

    /// The FileIO properties of this catalog as a whole (a table's own, vended with it, may add
    /// to them: read a loaded table's files with its `file_io()`).
    pub fn file_io_props(&self) -> &HashMap<String, String> {
        &self.io_props
    }

    fn table_endpoint(&self, ident: &TableIdent) -> String {
        format!(
            "{}/namespaces/{}/tables/{}",
            self.base,
            ident.namespace().to_url_string(),
            ident.name()
        )
    }
}

/// Whether register can be trusted on this server (see the module documentation).
fn register_supported(endpoints: Option<&[String]>, declared: Option<bool>) -> bool {
    let listed = endpoints.map(|list| {
        list.iter().any(|e| {
            e.split_whitespace()
                .eq(["POST", "/v1/{prefix}/namespaces/{namespace}/register"])
        })
    });
    match (listed, declared) {
        (Some(false), _) => false,
        (_, Some(declared)) => declared,
        (Some(true), None) | (None, None) => true,
    }
}

/// `props` without an empty `token` or `credential`: an empty value is unset, as in PyIceberg
/// (whose `if token := …` skips it), so `PYICEBERG_CATALOG__X__TOKEN=` sends no empty `Bearer`
/// header and does not stand in the way of the credential exchange.
fn without_empty_secrets(props: &HashMap<String, String>) -> HashMap<String, String> {
    let mut props = props.clone();
    props.retain(|k, v| !(matches!(k.as_str(), "token" | "credential") && v.trim().is_empty()));
    props
}

#[async_trait]
impl CatalogBackend for RestBackend {
    fn reference(&self) -> &CatalogRef {
        &self.reference
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn iceberg(&self) -> Arc<dyn Catalog> {
        self.catalog.clone()
    }

    async fn pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError> {
        match self.catalog.load_table(ident).await {
            Ok(table) => Ok(table.metadata_location().map(str::to_string)),
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
            Err(e) => Err(iceberg_err(format!(
                "load {ident} from REST catalog {}",
                self.reference.uri
            ))(e)),
        }
    }

    async fn commit(&self, base: &Table, request: CommitRequest) -> Result<Table, CommitError> {
        let ident = base.identifier();
        let table = ident.to_string();
        let body = CommitTableRequest {
            identifier: Some(ident.clone()),
            requirements: request.requirements.clone(),
            updates: request.updates.clone(),
        };
        let url = self.table_endpoint(ident);
        let sent = self.auth.send(&self.http, || self.http.post(&url).json(&body)).await;
        let unknown = |cause: String| resolve_unknown(self, base, &request, cause);
        let reply = match sent {
            Ok(reply) => reply,
            Err(HttpError::NotSent(d)) => {
                return Err(TableError::CatalogUnreachable {
                    uri: self.reference.uri.clone(),
                    detail: format!("commit to {table} not sent: {d}"),
                }
                .into());
            }
            Err(HttpError::Lost(d)) => return unknown(format!("no reply from {}: {d}", self.reference.uri)).await,
            // Only the token exchange yields a status here: the commit itself was not sent.
            Err(HttpError::Status(status, message)) => {
                return Err(TableError::CatalogUnreachable {
                    uri: self.reference.uri.clone(),
                    detail: format!(
                        "commit to {table} not sent: the OAuth2 token request failed: HTTP {status}: {message}"
                    ),
                }
                .into());
            }
        };
        let status = reply.status();
        if status.is_success() {
            return match reply.json::<CommitTableResponse>().await {
                Ok(done) => Table::builder()
                    .identifier(ident.clone())
                    .file_io(base.file_io().clone())
                    .metadata(done.metadata)
                    .metadata_location(done.metadata_location)
                    .runtime(iceberg::Runtime::current())
                    .build()
                    .map_err(|e| iceberg_err(format!("build the committed table {table}"))(e).into()),
                Err(e) => unknown(format!("HTTP {status} with an unreadable body: {}", describe(e))).await,
            };
        }
        let HttpError::Status(status, message) = status_error(reply).await else {
            unreachable!("status_error always returns a status")
        };
        match status {
            StatusCode::CONFLICT => Err(CommitError::Conflict { table, detail: message }),
            s if s.is_server_error() => unknown(format!("HTTP {s} from {}: {message}", self.reference.uri)).await,
            StatusCode::NOT_FOUND => Err(TableError::TableNotFound { table }.into()),
            s => Err(TableError::CatalogUnreachable {
                uri: self.reference.uri.clone(),
                detail: format!("the catalog refused the commit to {table}: HTTP {s}: {message}"),
            }
            .into()),
        }
    }

    async fn register(&self, ident: &TableIdent, metadata_location: &str) -> Result<Table, TableError> {
        if !self.capabilities.register {
            return Err(TableError::Unsupported {
                table: ident.to_string(),
                reason: format!(
                    "REST catalog {} has no working register endpoint (register a metadata file \
                     elsewhere, or recover into a new table with `tidemark recover --into`)",
                    self.reference.uri
                ),
            });
        }
        let context = || {
            format!(
                "register {metadata_location} as {ident} in REST catalog {}",
                self.reference.uri
            )
        };
        let file = TableMetadata::read_from(&self.file_io, metadata_location)
            .await
            .map_err(|e| iceberg_err(format!("{}: read the metadata file", context()))(e))?;
        self.catalog
            .register_table(ident, metadata_location.to_string())
            .await
            .map_err(|e| iceberg_err(context())(e))?;
        // Some servers answer 200 and keep something else (see the module documentation).
        let table = self
            .catalog
            .load_table(ident)
            .await
            .map_err(|e| iceberg_err(format!("{}: load the registered table", context()))(e))?;
        let loaded = table.metadata();
        if loaded.uuid() != file.uuid() || loaded.current_snapshot_id() != file.current_snapshot_id() {
            return Err(TableError::Unsupported {
                table: ident.to_string(),
                reason: format!(
                    "REST catalog {} answered the register of {metadata_location} but now loads {ident} \
                     as table {} at snapshot {:?} (the file has table {} at snapshot {:?}) from {}: \
                     its register endpoint does not work; set `{REGISTER_PROP}: false` in the \
                     catalog definition so that commands that need it refuse before changing anything",
                    self.reference.uri,
                    loaded.uuid(),
                    loaded.current_snapshot_id(),
                    file.uuid(),
                    file.current_snapshot_id(),
                    table.metadata_location().unwrap_or("no metadata file"),
                ),
            });
        }
        Ok(table)
    }

    async fn swap_pointer(&self, ident: &TableIdent, _expected: &str, _new: &str) -> Result<bool, TableError> {
        Err(TableError::Unsupported {
            table: ident.to_string(),
            reason: format!(
                "REST catalog {} moves a table's metadata only through commits, not by swapping the pointer",
                self.reference.uri
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_capability() {
        let listed = vec!["POST  /v1/{prefix}/namespaces/{namespace}/register".to_string()];
        let other = vec!["GET /v1/{prefix}/namespaces".to_string()];
        assert!(register_supported(Some(&listed), None));
        assert!(!register_supported(Some(&listed), Some(false)));
        assert!(!register_supported(Some(&other), Some(true)), "not listed: not there");
        assert!(register_supported(None, None), "the spec's default set has register");
        assert!(!register_supported(None, Some(false)));
    }
}
