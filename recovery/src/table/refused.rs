//! Refused credentials in the errors of the table files' client. Table files (metadata,
//! manifests, data files) are read and written through iceberg-rust's FileIO, on opendal, and
//! not through tidemark's own S3 client; iceberg reports every opendal failure as one
//! "Unexpected => Failure in doing io operation" with the opendal error as its source. So that
//! refused or invalid credentials are exit 8 there too, as in tidemark's own S3 client
//! ([`tidemark_journal::store::REFUSED_CREDENTIAL_CODES`]), [`refused_code`] looks for:
//!
//! 1. an opendal error in the chain whose kind is `PermissionDenied` (opendal's S3 service gives
//!    that kind to every HTTP 403), or whose S3 error code is a refused-credentials code:
//!    opendal keeps no code field, but its S3 service writes the parsed error reply as the
//!    message, `S3Error { code: "InvalidToken", message: "…", … }`, and the code is read from
//!    there (a 400 `InvalidToken`, a malformed session token, is `Unexpected` to opendal);
//! 2. otherwise (a catalog client's error, such as the REST catalog's, which carries the
//!    server's reply only as text), a refused-credentials code in the text of the chain.

use tidemark_journal::store::REFUSED_CREDENTIAL_CODES;

/// The refused-credentials code that `err` (or a cause of it) reports, if any: an S3 error code
/// such as `InvalidToken`, or `PermissionDenied` for a 403 without one.
pub fn refused_code(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut text = String::new();
    let mut cause = Some(err);
    while let Some(c) = cause {
        if let Some(code) = opendal_refused(c) {
            return Some(code);
        }
        text.push_str(&c.to_string());
        text.push('\n');
        cause = c.source();
    }
    REFUSED_CREDENTIAL_CODES
        .iter()
        .chain(&["PermissionDenied"])
        .find(|code| text.contains(**code))
        .map(|code| (*code).to_string())
}

/// Whether `err` is one of the table files' client's errors (iceberg's or opendal's) that
/// reports refused credentials: such a cause decides exit 8 wherever it sits in a chain (under
/// a DataFusion error of a query, say).
pub fn is_refused_table_io(err: &(dyn std::error::Error + 'static)) -> bool {
    (err.is::<iceberg::Error>() || is_opendal(err)) && refused_code(err).is_some()
}

#[cfg(feature = "remote")]
fn is_opendal(err: &(dyn std::error::Error + 'static)) -> bool {
    err.is::<opendal::Error>()
}

#[cfg(not(feature = "remote"))]
fn is_opendal(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

#[cfg(feature = "remote")]
fn opendal_refused(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let e = err.downcast_ref::<opendal::Error>()?;
    let code = s3_code(e.message());
    match code {
        Some(code) if tidemark_journal::store::is_refused_credentials(code) => Some(code.to_string()),
        _ if e.kind() == opendal::ErrorKind::PermissionDenied => Some(code.unwrap_or("PermissionDenied").to_string()),
        _ => None,
    }
}

#[cfg(not(feature = "remote"))]
fn opendal_refused(_: &(dyn std::error::Error + 'static)) -> Option<String> {
    None
}

/// The S3 error code in the message opendal's S3 service writes for an error reply
/// (`S3Error { code: "AccessDenied", … }`).
#[cfg(any(feature = "remote", test))]
fn s3_code(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("S3Error {")?;
    let start = rest.find("code: \"")? + "code: \"".len();
    let len = rest[start..].find('"')?;
    Some(&rest[start..start + len]).filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_is_read_from_opendal_s3_error_message() {
        let m = r#"S3Error { code: "InvalidToken", message: "The provided token is malformed", resource: "", request_id: "x" }"#;
        assert_eq!(s3_code(m), Some("InvalidToken"));
        assert_eq!(s3_code("something else: code: \"InvalidToken\""), None);
        assert_eq!(s3_code(r#"S3Error { code: "", message: "" }"#), None);
    }

    /// iceberg's wrapping of an opendal error, as iceberg-storage-opendal makes it.
    #[cfg(feature = "remote")]
    fn wrapped(kind: opendal::ErrorKind, message: &str) -> iceberg::Error {
        iceberg::Error::new(iceberg::ErrorKind::Unexpected, "Failure in doing io operation")
            .with_source(opendal::Error::new(kind, message.to_string()))
    }

    #[cfg(feature = "remote")]
    #[test]
    fn a_400_invalid_token_and_a_403_are_refused_credentials() {
        let token = wrapped(
            opendal::ErrorKind::Unexpected,
            r#"S3Error { code: "InvalidToken", message: "The provided token is malformed or otherwise invalid.", resource: "", request_id: "" }"#,
        );
        assert_eq!(refused_code(&token).as_deref(), Some("InvalidToken"));
        assert!(is_refused_table_io(&token));
        let denied = wrapped(opendal::ErrorKind::PermissionDenied, "<Error>…</Error>");
        assert_eq!(refused_code(&denied).as_deref(), Some("PermissionDenied"));
        let code = wrapped(
            opendal::ErrorKind::PermissionDenied,
            r#"S3Error { code: "SignatureDoesNotMatch", message: "", resource: "", request_id: "" }"#,
        );
        assert_eq!(refused_code(&code).as_deref(), Some("SignatureDoesNotMatch"));
        // Another 400 stays what it is.
        let other = wrapped(
            opendal::ErrorKind::Unexpected,
            r#"S3Error { code: "InvalidArgument", message: "", resource: "", request_id: "" }"#,
        );
        assert_eq!(refused_code(&other), None);
        assert!(!is_refused_table_io(&other));
    }
}
