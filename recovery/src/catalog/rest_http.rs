//! The HTTP side of the Iceberg REST backend ([`super::rest`]): the catalog's authentication
//! ([`Auth`]: a fixed token, or an OAuth2 client-credentials exchange renewed on a 401), the
//! server's configuration (`GET /v1/config`), and a failed request classified by whether it can
//! have reached the server ([`HttpError`]). The token and the credential never leave it: errors
//! name no URL.

use std::collections::HashMap;

use reqwest::StatusCode;
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::table::error::TableError;

/// The catalog's authentication: a fixed token, or one obtained (and renewed on a 401) from
/// an OAuth2 client-credentials exchange.
pub(super) struct Auth {
    pub(super) token: Mutex<Option<String>>,
    pub(super) credential: Option<(Option<String>, String)>,
    pub(super) token_endpoint: String,
    pub(super) scope: String,
    pub(super) extra_headers: Vec<(String, String)>,
}

/// `GET /v1/config`'s reply (the fields tidemark reads).
#[derive(Debug, Default, Deserialize)]
pub(super) struct ServerConfig {
    #[serde(default)]
    pub(super) defaults: HashMap<String, String>,
    #[serde(default)]
    pub(super) overrides: HashMap<String, String>,
    /// The endpoints the server supports (REST spec 1.x); absent means the default set.
    #[serde(default)]
    pub(super) endpoints: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TokenReply {
    access_token: String,
}

/// The error model of a REST error reply (`{"error": {"message", "type", "code"}}`).
#[derive(Deserialize)]
struct ErrorReply {
    error: ErrorModel,
}

#[derive(Deserialize)]
struct ErrorModel {
    message: String,
    #[serde(default, rename = "type")]
    kind: String,
}

/// A failed request, classified by whether it can have reached the server.
#[derive(Debug)]
pub(super) enum HttpError {
    /// The connection could not be opened: nothing was sent.
    NotSent(String),
    /// Sent, but no (complete) reply: the server may have acted on it.
    Lost(String),
    /// The server replied with this status and message.
    Status(StatusCode, String),
}

impl HttpError {
    pub(super) fn from_reqwest(e: reqwest::Error) -> HttpError {
        let connect = e.is_connect();
        let text = describe(e);
        if connect {
            HttpError::NotSent(text)
        } else {
            HttpError::Lost(text)
        }
    }

    pub(super) fn into_table_error(self, uri: &str, what: &str) -> TableError {
        match self {
            HttpError::NotSent(d) | HttpError::Lost(d) => TableError::CatalogUnreachable {
                uri: uri.to_string(),
                detail: format!("{what}: {d}"),
            },
            HttpError::Status(status, message) => TableError::CatalogUnreachable {
                uri: uri.to_string(),
                detail: format!("{what}: HTTP {status}: {message}"),
            },
        }
    }
}

/// The error with its causes, without the URL (the caller names the catalog; a query string
/// could carry a secret).
pub(super) fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub(super) async fn status_error(reply: reqwest::Response) -> HttpError {
    let status = reply.status();
    let body = reply.text().await.unwrap_or_default();
    let message = match serde_json::from_str::<ErrorReply>(&body) {
        Ok(e) if e.error.kind.is_empty() => e.error.message,
        Ok(e) => format!("{} ({})", e.error.message, e.error.kind),
        Err(_) => body.chars().take(300).collect(),
    };
    HttpError::Status(status, message)
}

impl Auth {
    fn apply(&self, mut req: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
        for (k, v) in &self.extra_headers {
            req = req.header(k, v);
        }
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// The token to send: the cached one, or a fresh one when `renew` or none is cached.
    async fn token(&self, http: &reqwest::Client, renew: bool) -> Result<Option<String>, HttpError> {
        let mut cached = self.token.lock().await;
        if cached.is_some() && !(renew && self.credential.is_some()) {
            return Ok(cached.clone());
        }
        let Some((client_id, secret)) = &self.credential else {
            return Ok(cached.clone());
        };
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_secret", secret.as_str()),
            ("scope", self.scope.as_str()),
        ];
        if let Some(id) = client_id {
            form.push(("client_id", id.as_str()));
        }
        let reply = self
            .apply(http.post(&self.token_endpoint), None)
            .form(&form)
            .send()
            .await
            .map_err(HttpError::from_reqwest)?;
        if !reply.status().is_success() {
            return Err(status_error(reply).await);
        }
        let token: TokenReply = reply
            .json()
            .await
            .map_err(|e| HttpError::Lost(format!("unreadable token reply: {}", describe(e))))?;
        *cached = Some(token.access_token);
        Ok(cached.clone())
    }

    /// Sends the request `build` makes, authenticated; renews the OAuth2 token once on a 401 (the
    /// server refused the request, so sending it again is safe).
    pub(super) async fn send(
        &self,
        http: &reqwest::Client,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, HttpError> {
        let token = self.token(http, false).await?;
        let reply = self
            .apply(build(), token.as_deref())
            .send()
            .await
            .map_err(HttpError::from_reqwest)?;
        if reply.status() != StatusCode::UNAUTHORIZED || self.credential.is_none() {
            return Ok(reply);
        }
        let token = self.token(http, true).await?;
        self.apply(build(), token.as_deref())
            .send()
            .await
            .map_err(HttpError::from_reqwest)
    }
}

/// `GET /v1/config[?warehouse=W]`: the server's configuration.
pub(super) async fn fetch_config(
    http: &reqwest::Client,
    auth: &Auth,
    uri: &str,
    warehouse: Option<&String>,
) -> Result<ServerConfig, HttpError> {
    let url = format!("{uri}/v1/config");
    let reply = auth
        .send(http, || {
            let req = http.get(&url);
            match warehouse {
                Some(w) => req.query(&[("warehouse", w)]),
                None => req,
            }
        })
        .await?;
    if !reply.status().is_success() {
        return Err(status_error(reply).await);
    }
    reply
        .json::<ServerConfig>()
        .await
        .map_err(|e| HttpError::Lost(format!("unreadable /v1/config reply: {}", describe(e))))
}
