//! The AWS S3 Tables catalog backend behind the catalog contract ([`super::contract`]).
//!
//! Namespaces, listing, creating and loading go through iceberg-catalog-s3tables'
//! `S3TablesCatalog`. A commit is tidemark's own, the way that crate commits and the AWS
//! documentation describes: `GetTableMetadataLocation` (the pointer and its version token), the
//! requirements checked against the metadata it points at, the updates applied to it, the new
//! metadata file written next to the current one (a new name, in the table's warehouse, which
//! S3 Tables requires), then `UpdateTableMetadataLocation` with the version token. S3 Tables
//! swaps the pointer only if the token is still current, which makes the check and the publish
//! atomic. What its replies mean:
//! - success: committed;
//! - `ConflictException` (a stale version token), or a requirement that fails before anything is
//!   sent: [`CommitError::Conflict`], nothing changed;
//! - a 5xx, throttling, a timeout, a reset or a reply that cannot be parsed: the outcome is
//!   unknown, resolved by reloading the table ([`resolve_unknown`]). The commit call runs with
//!   the SDK's retries off, so a lost reply is never re-sent (a re-sent request would meet its
//!   own success as a stale token and report a conflict);
//! - other refusals (bad request, forbidden, not found): nothing changed.
//!
//! Capabilities: no `register` (S3 Tables has no such call: a table exists only through
//! CreateTable); `swap_pointer` is UpdateTableMetadataLocation with the token read with the
//! pointer, so it moves the table if and only if it still points at the expected file.
//!
//! Properties (PyIceberg's S3 Tables names, and iceberg-rust's): the table-bucket ARN in
//! `warehouse` (or `s3tables.warehouse`, `table_bucket_arn`); `s3tables.endpoint` (or
//! `endpoint_url`); `s3tables.region` (or `region_name`, `client.region`; default: the ARN's
//! region); credentials `s3tables.access-key-id` / `s3tables.secret-access-key` /
//! `s3tables.session-token` or `s3tables.profile-name`, else the standard AWS chain; and the
//! FileIO's `s3.*`. Secrets stay in the SDK's credential provider and the FileIO: the reference,
//! `Debug` and every error name the catalog by its ARN only.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::table_io::CountingStorageFactory;
use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_sdk_s3tables::Client;
use aws_sdk_s3tables::config::retry::RetryConfig;
use aws_sdk_s3tables::config::timeout::TimeoutConfig;
use aws_sdk_s3tables::config::{Credentials, Region};
use aws_sdk_s3tables::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3tables::operation::update_table_metadata_location::UpdateTableMetadataLocationError;
use iceberg::io::{FileIO, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION};
use iceberg::spec::TableMetadata;
use iceberg::table::Table;
use iceberg::{Catalog, CatalogBuilder, MetadataLocation, TableIdent};
use iceberg_catalog_s3tables::{S3TablesCatalog, S3TablesCatalogBuilder};

use super::contract::{
    Capabilities, CatalogBackend, CatalogKind, CatalogRef, CommitError, CommitRequest, resolve_unknown,
};
use crate::table::error::{TableError, iceberg_err};

/// How long the commit call may take before its outcome counts as unknown.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Opens the S3 Tables catalog `name` (see the module documentation for the properties).
/// Makes no request: a wrong ARN or refused credentials show up on the first operation.
pub async fn open(name: &str, props: &HashMap<String, String>) -> Result<Arc<dyn CatalogBackend>, TableError> {
    Ok(Arc::new(S3TablesBackend::open(name, props).await?))
}

/// The S3 Tables backend. See the module documentation.
pub struct S3TablesBackend {
    catalog: Arc<S3TablesCatalog>,
    /// For reads (the SDK's standard retries).
    client: Client,
    /// For UpdateTableMetadataLocation: no retries (see the module documentation).
    commit_client: Client,
    file_io: FileIO,
    reference: CatalogRef,
}

// Manual Debug: the FileIO holds the S3 secret key.
impl std::fmt::Debug for S3TablesBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3TablesBackend")
            .field("reference", &self.reference)
            .finish_non_exhaustive()
    }
}

/// The first of `keys` that `props` has, non-empty.
fn first<'a>(props: &'a HashMap<String, String>, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .filter_map(|k| props.get(*k))
        .map(|v| v.trim())
        .find(|v| !v.is_empty())
}

/// The region of `arn:<partition>:s3tables:<region>:<account>:bucket/<name>`, or why it is not one.
pub fn arn_region(arn: &str) -> Result<&str, String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", partition, "s3tables", region, account, resource]
            if partition.starts_with("aws")
                && !region.is_empty()
                && !account.is_empty()
                && resource
                    .strip_prefix("bucket/")
                    .is_some_and(|b| !b.is_empty() && !b.contains('/')) =>
        {
            Ok(region)
        }
        _ => Err(format!(
            "{arn:?} is not a table-bucket ARN (arn:aws:s3tables:REGION:ACCOUNT:bucket/NAME)"
        )),
    }
}

impl S3TablesBackend {
    pub async fn open(name: &str, props: &HashMap<String, String>) -> Result<S3TablesBackend, TableError> {
        let arn = first(props, &["warehouse", "s3tables.warehouse", "table_bucket_arn"]).unwrap_or("");
        let invalid = |reason: String| TableError::InvalidCatalog {
            uri: if arn.is_empty() {
                format!("s3tables catalog {name}")
            } else {
                arn.to_string()
            },
            reason,
        };
        if arn.is_empty() {
            return Err(invalid(
                "an S3 Tables catalog needs the table-bucket ARN in `warehouse`".into(),
            ));
        }
        let arn_region = arn_region(arn).map_err(invalid)?;
        let region = first(props, &["s3tables.region", "region_name", "client.region"])
            .unwrap_or(arn_region)
            .to_string();
        let endpoint = first(props, &["s3tables.endpoint", "endpoint_url"]);

        let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region.clone()));
        if let Some(endpoint) = endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        match (
            first(
                props,
                &["s3tables.access-key-id", "aws_access_key_id", "client.access-key-id"],
            ),
            first(
                props,
                &[
                    "s3tables.secret-access-key",
                    "aws_secret_access_key",
                    "client.secret-access-key",
                ],
            ),
        ) {
            (Some(key), Some(secret)) => {
                let token = first(
                    props,
                    &["s3tables.session-token", "aws_session_token", "client.session-token"],
                );
                loader = loader.credentials_provider(Credentials::new(
                    key,
                    secret,
                    token.map(str::to_string),
                    None,
                    "catalog properties",
                ));
            }
            (None, None) => {}
            _ => {
                return Err(invalid(
                    "give both s3tables.access-key-id and s3tables.secret-access-key, or neither \
                     (the standard AWS chain then finds the credentials)"
                        .into(),
                ));
            }
        }
        if let Some(profile) = first(props, &["s3tables.profile-name", "profile_name"]) {
            loader = loader.profile_name(profile);
        }
        let sdk_config = loader.load().await;
        let client = Client::new(&sdk_config);
        let commit_client = Client::from_conf(
            aws_sdk_s3tables::config::Builder::from(&sdk_config)
                .retry_config(RetryConfig::disabled())
                .timeout_config(TimeoutConfig::builder().operation_timeout(COMMIT_TIMEOUT).build())
                .build(),
        );

        // The FileIO (table warehouses are S3 buckets) gets the s3.* properties only.
        let mut io_props: HashMap<String, String> = props
            .iter()
            .filter(|(k, _)| k.starts_with("s3."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        io_props.entry(S3_REGION.to_string()).or_insert(region);
        if let Some(endpoint) = io_props.get(S3_ENDPOINT)
            && !io_props.contains_key(S3_PATH_STYLE_ACCESS)
            && super::config::endpoint_needs_path_style(endpoint)
        {
            io_props.insert(S3_PATH_STYLE_ACCESS.to_string(), "true".to_string());
        }
        let storage = Arc::new(CountingStorageFactory::new());
        let file_io = iceberg::io::FileIOBuilder::new(storage.clone())
            .with_props(io_props.iter())
            .build();
        let catalog = S3TablesCatalogBuilder::default()
            .with_client(client.clone())
            .with_table_bucket_arn(arn)
            .with_storage_factory(storage)
            .load(name, io_props)
            .await
            .map_err(|e| invalid(format!("{e:#}")))?;
        Ok(S3TablesBackend {
            catalog: Arc::new(catalog),
            client,
            commit_client,
            file_io,
            reference: CatalogRef {
                kind: CatalogKind::S3tables,
                uri: arn.to_string(),
                warehouse: None,
                name: name.to_string(),
            },
        })
    }

    fn arn(&self) -> &str {
        &self.reference.uri
    }

    /// The table's pointer and version token (`None`: no such table).
    async fn pointer_and_token(&self, ident: &TableIdent) -> Result<Option<(Option<String>, String)>, TableError> {
        let reply = self
            .client
            .get_table_metadata_location()
            .table_bucket_arn(self.arn())
            .namespace(ident.namespace().to_url_string())
            .name(ident.name())
            .send()
            .await;
        match reply {
            Ok(out) => Ok(Some((
                out.metadata_location().map(str::to_string),
                out.version_token().to_string(),
            ))),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) => Ok(None),
            Err(e) => Err(self.sdk_error(&format!("read the metadata location of {ident}"), &e)),
        }
    }

    fn sdk_error<E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static>(
        &self,
        what: &str,
        e: &SdkError<E>,
    ) -> TableError {
        TableError::CatalogUnreachable {
            uri: self.arn().to_string(),
            detail: format!("{what}: {}", DisplayErrorContext(e)),
        }
    }

    /// UpdateTableMetadataLocation from the pointer read with `token` to `new`.
    async fn update_pointer(
        &self,
        ident: &TableIdent,
        token: &str,
        new: &str,
    ) -> Result<(), SdkError<UpdateTableMetadataLocationError>> {
        self.commit_client
            .update_table_metadata_location()
            .table_bucket_arn(self.arn())
            .namespace(ident.namespace().to_url_string())
            .name(ident.name())
            .version_token(token)
            .metadata_location(new)
            .send()
            .await
            .map(|_| ())
    }
}

/// What a failed UpdateTableMetadataLocation means for the pointer.
enum Outcome {
    /// A stale version token: another writer moved the table.
    Conflict,
    /// Refused before anything changed (bad request, forbidden, not found, …).
    Refused,
    /// The reply was lost or unreadable, or the server failed: it may have been applied.
    Unknown,
}

fn outcome(e: &SdkError<UpdateTableMetadataLocationError>) -> Outcome {
    match e {
        SdkError::ServiceError(s) => match s.err() {
            UpdateTableMetadataLocationError::ConflictException(_) => Outcome::Conflict,
            UpdateTableMetadataLocationError::InternalServerErrorException(_)
            | UpdateTableMetadataLocationError::TooManyRequestsException(_) => Outcome::Unknown,
            // A 2xx whose body does not parse: the server did it, the client cannot tell.
            _ if s.raw().status().is_server_error() || s.raw().status().is_success() => Outcome::Unknown,
            _ => Outcome::Refused,
        },
        // The request could not be built or signed: nothing was sent.
        SdkError::ConstructionFailure(_) => Outcome::Refused,
        // Dispatch failures, timeouts, and replies that do not parse.
        _ => Outcome::Unknown,
    }
}

/// Applies `request`'s updates to `meta` (at `location`): the new metadata and its file name, the
/// next version next to the current file.
fn apply_updates(
    table: &str,
    meta: &TableMetadata,
    location: &str,
    request: &CommitRequest,
) -> Result<(TableMetadata, MetadataLocation), TableError> {
    let mut builder = meta.clone().into_builder(Some(location.to_string()));
    for update in &request.updates {
        builder = update
            .clone()
            .apply(builder)
            .map_err(iceberg_err(format!("apply the commit's updates to {table}")))?;
    }
    let new_meta = builder
        .build()
        .map_err(iceberg_err(format!("build the new metadata of {table}")))?
        .metadata;
    let new_location = MetadataLocation::from_str(location)
        .map_err(iceberg_err(format!("parse the metadata file name of {table}")))?
        .with_next_version()
        .with_new_metadata(&new_meta);
    Ok((new_meta, new_location))
}

#[async_trait]
impl CatalogBackend for S3TablesBackend {
    fn reference(&self) -> &CatalogRef {
        &self.reference
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            register: false,
            swap_pointer: true,
        }
    }

    fn iceberg(&self) -> Arc<dyn Catalog> {
        self.catalog.clone()
    }

    async fn pointer(&self, ident: &TableIdent) -> Result<Option<String>, TableError> {
        Ok(self.pointer_and_token(ident).await?.and_then(|(location, _)| location))
    }

    async fn commit(&self, base: &Table, request: CommitRequest) -> Result<Table, CommitError> {
        let ident = base.identifier();
        let table = ident.to_string();
        let Some((Some(current), token)) = self.pointer_and_token(ident).await? else {
            return Err(TableError::TableNotFound { table }.into());
        };
        // The requirements are checked against what the pointer names now; the token makes
        // the publish fail if it moves in between.
        let meta = if base.metadata_location() == Some(current.as_str()) {
            base.metadata_ref()
        } else {
            Arc::new(
                TableMetadata::read_from(&self.file_io, &current)
                    .await
                    .map_err(iceberg_err(format!("read the current metadata of {table} ({current})")))?,
            )
        };
        for requirement in &request.requirements {
            if let Err(e) = requirement.check(Some(meta.as_ref())) {
                return Err(CommitError::Conflict {
                    table,
                    detail: format!("{} (the table is at {current})", e.message()),
                });
            }
        }
        let (new_meta, new_location) = apply_updates(&table, &meta, &current, &request)?;
        new_meta
            .write_to(&self.file_io, &new_location)
            .await
            .map_err(iceberg_err(format!(
                "write the metadata file {new_location} of {table}"
            )))?;
        let new_location = new_location.to_string();

        if let Err(e) = self.update_pointer(ident, &token, &new_location).await {
            let detail = DisplayErrorContext(&e).to_string();
            return match outcome(&e) {
                Outcome::Conflict => Err(CommitError::Conflict {
                    table,
                    detail: format!("version token {token} is stale: the table moved on from {current}"),
                }),
                Outcome::Refused => Err(TableError::CatalogUnreachable {
                    uri: self.arn().to_string(),
                    detail: format!("UpdateTableMetadataLocation of {table} was refused: {detail}"),
                }
                .into()),
                Outcome::Unknown => {
                    resolve_unknown(
                        self,
                        base,
                        &request,
                        format!("UpdateTableMetadataLocation of {table}: {detail}"),
                    )
                    .await
                }
            };
        }
        Table::builder()
            .identifier(ident.clone())
            .file_io(self.file_io.clone())
            .metadata(new_meta)
            .metadata_location(new_location)
            .runtime(iceberg::Runtime::current())
            .build()
            .map_err(|e| iceberg_err(format!("build the committed table {table}"))(e).into())
    }

    async fn register(&self, ident: &TableIdent, metadata_location: &str) -> Result<Table, TableError> {
        Err(TableError::Unsupported {
            table: ident.to_string(),
            reason: format!(
                "S3 Tables ({}) cannot register {metadata_location}: it has no register call, a \
                 table exists only through CreateTable; recover into a new table instead \
                 (`tidemark recover --into`), which creates it and commits the recovered snapshot",
                self.arn()
            ),
        })
    }

    async fn swap_pointer(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<bool, TableError> {
        let Some((current, token)) = self.pointer_and_token(ident).await? else {
            return Err(TableError::TableNotFound {
                table: ident.to_string(),
            });
        };
        if current.as_deref() != Some(expected) {
            return Ok(false);
        }
        match self.update_pointer(ident, &token, new).await {
            Ok(()) => Ok(true),
            Err(e) => match outcome(&e) {
                Outcome::Conflict => Ok(false),
                Outcome::Refused => Err(self.sdk_error(&format!("move {ident} to {new}"), &e)),
                // Read the pointer again: this call won if it now names `new`.
                Outcome::Unknown => match self.pointer_and_token(ident).await {
                    Ok(Some((Some(now), _))) => Ok(now == new),
                    Ok(_) => Ok(false),
                    Err(again) => Err(TableError::CatalogUnreachable {
                        uri: self.arn().to_string(),
                        detail: format!(
                            "moving {ident} to {new}: the outcome is unknown ({}), and reading the \
                             pointer again failed: {again}",
                            DisplayErrorContext(&e)
                        ),
                    }),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arn_forms() {
        assert_eq!(
            arn_region("arn:aws:s3tables:eu-west-1:123456789012:bucket/dr"),
            Ok("eu-west-1")
        );
        assert_eq!(
            arn_region("arn:aws-cn:s3tables:cn-north-1:123456789012:bucket/dr"),
            Ok("cn-north-1")
        );
        for bad in [
            "arn:aws:s3:::bucket",
            "arn:aws:s3tables:eu-west-1:123456789012:bucket/",
            "arn:aws:s3tables::123456789012:bucket/dr",
            "arn:aws:s3tables:eu-west-1:123456789012:bucket/dr/table/x",
            "s3tables://dr",
        ] {
            assert!(arn_region(bad).is_err(), "{bad}");
        }
    }
}
