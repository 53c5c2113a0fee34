//! An SDK error turned into the contract's [`StoreError`], told apart by HTTP status and S3 error
//! code, and described in one line (status, code and message, or what went wrong with the
//! connection).

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use crate::store::error::{StoreError, is_refused_credentials};
use crate::store::object::PutMode;

/// Turns an SDK error into the contract's error. Service errors are told apart by HTTP status
/// and S3 error code: HEAD responses carry no body, hence no code, so the status must suffice.
pub(super) fn classify<E>(
    store: &str,
    op: &'static str,
    key: &str,
    version_id: Option<&str>,
    mode: Option<&PutMode>,
    err: &SdkError<E>,
) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let raw = err.raw_response();
    let status = raw.map(|r| r.status().as_u16()).unwrap_or(0);
    // A put without a reply, or with a server error (possibly a proxy's, after the server
    // wrote), may have happened: the caller reads back (the store contract).
    if op == "put" && (status == 0 || status >= 500) {
        return StoreError::OutcomeUnknown {
            store: store.to_string(),
            op,
            key: key.to_string(),
            detail: describe(err),
        };
    }
    let code = err.code().unwrap_or("");
    let message = err.message().unwrap_or("");
    let delete_marker = raw.and_then(|r| r.headers().get("x-amz-delete-marker")) == Some("true");
    let conflict = |reason: String| StoreError::Conflict {
        store: store.to_string(),
        key: key.to_string(),
        reason,
    };
    // Only a conditional put can fail a precondition; elsewhere a 412 or 409 is unexpected.
    let condition = match mode {
        Some(PutMode::Create) => Some((
            "If-None-Match: *".to_string(),
            "the key already has a current version".to_string(),
        )),
        Some(PutMode::Update { etag }) => Some((
            format!("If-Match: {etag}"),
            format!("the current version no longer has the expected ETag {etag}"),
        )),
        _ => None,
    };
    if let Some((header, why)) = condition {
        if status == 412 || code == "PreconditionFailed" {
            return conflict(format!("{header} failed: {why}"));
        }
        // S3 answers 409 when another conditional write of the key is in flight; nothing was
        // written, and the caller must re-read either way.
        if code == "ConditionalRequestConflict" || (status == 409 && code.is_empty()) {
            return conflict(format!(
                "{header} not applied: a concurrent conditional write of the key was in progress \
                 (409 ConditionalRequestConflict)"
            ));
        }
    }
    if code == "NoSuchBucket" {
        return StoreError::NoSuchStore {
            store: store.to_string(),
            detail: format!("{op} of {key}: NoSuchBucket: {message}"),
        };
    }
    // 405 with `x-amz-delete-marker: true` is S3's answer to GET/HEAD of a delete marker's id.
    if matches!(code, "NoSuchKey" | "NoSuchVersion" | "NotFound") || status == 404 || (status == 405 && delete_marker) {
        return StoreError::NotFound {
            store: store.to_string(),
            key: key.to_string(),
            version_id: version_id.map(str::to_string),
        };
    }
    // A 403, or a refused or invalid credential whatever its status (S3 answers a malformed
    // session token with 400 InvalidToken). The SDK retries neither (its classifiers retry 5xx,
    // throttling and transient codes only; tests/e2e.rs counts the requests).
    if status == 403 || is_refused_credentials(code) {
        let code = if code.is_empty() { "403" } else { code };
        return StoreError::AccessDenied {
            store: store.to_string(),
            detail: format!("{op} of {key}: {code}: {message}"),
        };
    }
    StoreError::Backend {
        store: store.to_string(),
        op,
        key: key.to_string(),
        detail: describe(err),
    }
}

/// One line for an SDK error after its last attempt: the HTTP status, S3 code and message, or
/// what went wrong with the connection; never a debug dump of the SDK's internals.
fn describe<E>(err: &SdkError<E>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    // A 4xx reply (but a throttle) is the answer to one attempt: the SDK retries 5xx, 429,
    // `RequestTimeout` and failures without a reply; naming retries there would mislead.
    let retried = status.is_none_or(|s| s >= 500 || s == 429) || err.code() == Some("RequestTimeout");
    let attempts = "after the last retry";
    match err {
        SdkError::ServiceError(_) | SdkError::ResponseError(_) => {
            let code = err.code().unwrap_or("no error code");
            let message = err.message().map(|m| format!(": {m}")).unwrap_or_default();
            let attempts = if retried {
                format!(" ({attempts})")
            } else {
                String::new()
            };
            match status {
                Some(s) => format!("HTTP {s} {code}{message}{attempts}"),
                None => format!("{code}{message}{attempts}"),
            }
        }
        // The operation timeout (retries included) or the last attempt's: the source says which
        // and after how long.
        SdkError::TimeoutError(_) => {
            let which = std::error::Error::source(err)
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            format!("timed out{which} (see TIDEMARK_S3_*_TIMEOUT)")
        }
        SdkError::DispatchFailure(d) => {
            let what = if d.is_timeout() {
                "timed out"
            } else if d.is_io() {
                "connection failed"
            } else {
                "request not sent"
            };
            let cause = std::error::Error::source(err)
                .and_then(std::error::Error::source)
                .map(|c| format!(": {c}"))
                .unwrap_or_default();
            format!("{what}{cause} ({attempts})")
        }
        SdkError::ConstructionFailure(_) => "the request could not be built".to_string(),
        _ => match status {
            Some(s) => format!("HTTP {s}"),
            None => "no reply".to_string(),
        },
    }
}
