//! Which S3 settings a REST catalog's tables are read and written with, in the precedence a
//! user expects, strongest first:
//! 1. the catalog definition's own `s3.*` / `client.*` keys (what the user wrote for this
//!    catalog);
//! 2. what the server vends: `/v1/config` defaults and overrides, and the `config` of each
//!    table it loads (SeaweedFS, Polaris and Lakekeeper put the S3 endpoint and temporary
//!    credentials there);
//! 3. the environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, …), for what neither says.
//!
//! iceberg-catalog-rest merges its own properties under the server's overrides and each
//! table's config, and anything tidemark gave it from the environment would beat the server's
//! defaults (an `AWS_ENDPOINT_URL` aimed at another S3 server sent every write there). So the
//! crate is given the definition only, and [`VendedIo`] wraps it: every table it returns
//! carries a FileIO built from the three layers by [`layered`].

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::table_io::CountingStorageFactory;
use async_trait::async_trait;
use iceberg::io::{FileIOBuilder, S3_ENDPOINT, S3_PATH_STYLE_ACCESS};
use iceberg::table::Table;
use iceberg::{Catalog, Namespace, NamespaceIdent, Result, TableCommit, TableCreation, TableIdent};
use iceberg_catalog_rest::RestCatalog;

use super::config::endpoint_needs_path_style;

/// Whether `key` configures the FileIO (the keys each layer contributes).
pub(crate) fn is_io_key(key: &str) -> bool {
    key.starts_with("s3.") || key.starts_with("client.")
}

/// The FileIO properties from the three layers (see the module documentation): `env` under
/// `server` under `definition`; only FileIO keys are taken from each.
pub(crate) fn layered(
    env: &HashMap<String, String>,
    server: &HashMap<String, String>,
    definition: &HashMap<String, String>,
) -> HashMap<String, String> {
    let io = |m: &HashMap<String, String>| {
        m.iter()
            .filter(|(k, _)| is_io_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    let mut out: HashMap<String, String> = io(env).into_iter().collect();
    // The environment's path style was chosen for the environment's endpoint.
    if server.contains_key(S3_ENDPOINT) || definition.contains_key(S3_ENDPOINT) {
        out.remove(S3_PATH_STYLE_ACCESS);
    }
    out.extend(io(server));
    out.extend(io(definition));
    if let Some(endpoint) = out.get(S3_ENDPOINT)
        && !out.contains_key(S3_PATH_STYLE_ACCESS)
        && endpoint_needs_path_style(endpoint)
    {
        out.insert(S3_PATH_STYLE_ACCESS.to_string(), "true".to_string());
    }
    out
}

/// The crate's REST catalog, with every table it returns re-equipped by [`layered`].
pub(crate) struct VendedIo {
    pub inner: RestCatalog,
    pub env: HashMap<String, String>,
    pub definition: HashMap<String, String>,
    pub storage: Arc<CountingStorageFactory>,
}

// Manual Debug: the layers hold S3 secret keys (and the crate's catalog its credential).
impl std::fmt::Debug for VendedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendedIo").finish_non_exhaustive()
    }
}

impl VendedIo {
    /// `table` with a FileIO from the environment, what the crate built it with (the server's
    /// layers over the definition) and the definition.
    fn layer(&self, table: Table) -> Result<Table> {
        let props = layered(&self.env, table.file_io().config().props(), &self.definition);
        let file_io = FileIOBuilder::new(self.storage.clone()).with_props(props).build();
        let mut builder = Table::builder()
            .identifier(table.identifier().clone())
            .metadata(table.metadata_ref())
            .file_io(file_io)
            .readonly(table.readonly())
            .runtime(iceberg::Runtime::current());
        if let Some(location) = table.metadata_location() {
            builder = builder.metadata_location(location);
        }
        builder.build()
    }
}

#[async_trait]
impl Catalog for VendedIo {
    async fn list_namespaces(&self, parent: Option<&NamespaceIdent>) -> Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: HashMap<String, String>,
    ) -> Result<Namespace> {
        self.inner.create_namespace(namespace, properties).await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        self.inner.namespace_exists(namespace).await
    }

    async fn update_namespace(&self, namespace: &NamespaceIdent, properties: HashMap<String, String>) -> Result<()> {
        self.inner.update_namespace(namespace, properties).await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.inner.drop_namespace(namespace).await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }

    /// A create reply need not carry the table's config (SeaweedFS's does not), so the new
    /// table is loaded once to learn what the server vends for it.
    async fn create_table(&self, namespace: &NamespaceIdent, creation: TableCreation) -> Result<Table> {
        let created = self.inner.create_table(namespace, creation).await?;
        match self.inner.load_table(created.identifier()).await {
            Ok(loaded) if loaded.metadata_location() == created.metadata_location() => self.layer(loaded),
            _ => self.layer(created),
        }
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        self.layer(self.inner.load_table(table).await?)
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.inner.drop_table(table).await
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        self.inner.purge_table(table).await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.inner.table_exists(table).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        self.inner.rename_table(src, dest).await
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        self.layer(self.inner.register_table(table, metadata_location).await?)
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        self.layer(self.inner.update_table(commit).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_server_beats_the_environment_and_the_definition_beats_both() {
        let env = map(&[
            ("s3.endpoint", "http://127.0.0.1:5999"),
            ("s3.path-style-access", "true"),
            ("s3.access-key-id", "env-key"),
            ("s3.region", "eu-west-1"),
        ]);
        let server = map(&[("s3.endpoint", "https://s3.vended.example"), ("s3.region", "us-east-1")]);
        let out = layered(&env, &server, &HashMap::new());
        assert_eq!(out["s3.endpoint"], "https://s3.vended.example");
        assert_eq!(out["s3.region"], "us-east-1");
        assert_eq!(
            out["s3.access-key-id"], "env-key",
            "what the server does not say comes from the environment"
        );
        assert!(
            !out.contains_key("s3.path-style-access"),
            "the environment's path style was for its own endpoint: {out:?}"
        );

        let definition = map(&[("s3.endpoint", "http://127.0.0.1:7713"), ("uri", "http://catalog")]);
        let out = layered(&env, &server, &definition);
        assert_eq!(out["s3.endpoint"], "http://127.0.0.1:7713");
        assert_eq!(out["s3.path-style-access"], "true", "a local endpoint needs path style");
        assert!(!out.contains_key("uri"), "only FileIO keys: {out:?}");
    }

    #[test]
    fn the_environment_fills_in_when_nobody_else_says() {
        let env = map(&[
            ("s3.endpoint", "http://localhost:9000"),
            ("s3.path-style-access", "true"),
        ]);
        let out = layered(&env, &HashMap::new(), &HashMap::new());
        assert_eq!(out, env);
    }
}
