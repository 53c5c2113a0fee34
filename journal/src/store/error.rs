//! The errors of the object-store layer ([`StoreError`], each naming its object), the S3 codes
//! that mean refused credentials, and why a build without S3 refuses `s3://`.

/// The S3 (and AWS) error codes that mean "these credentials are refused or invalid": the
/// request will fail the same way however often it is sent, so it is never retried and is
/// [`StoreError::AccessDenied`] (exit 8) wherever it comes from: tidemark's own S3 client, or
/// the table files' client, whose errors carry the code (see `tidemark_recovery::table`).
/// `InvalidToken` is S3's HTTP 400 for a malformed or otherwise invalid session token
/// (`AWS_SESSION_TOKEN`); `ExpiredToken` and `TokenRefreshRequired` are an expired one;
/// `InvalidClientTokenId` is the STS-style name of an unknown key id.
pub const REFUSED_CREDENTIAL_CODES: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "InvalidAccessKeyId",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "ExpiredTokenException",
    "TokenRefreshRequired",
    "InvalidSecurity",
    "UnrecognizedClientException",
];

/// Whether `code` is one of [`REFUSED_CREDENTIAL_CODES`].
pub fn is_refused_credentials(code: &str) -> bool {
    REFUSED_CREDENTIAL_CODES.contains(&code)
}

/// The end of every refused-credentials message (the store's, the table files', a snapshot
/// source's): what to check. A report that keeps an error as text (a table of `replica check`,
/// of the warm follower) tells a refusal by it ([`is_refusal_text`]), and exits 8 for it.
pub const REFUSED_HINT: &str = "check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...)";

/// Whether an error's text is a refusal of the credentials (it ends with [`REFUSED_HINT`]).
pub fn is_refusal_text(message: &str) -> bool {
    message.contains(REFUSED_HINT)
}

/// Errors of the object-store layer. Each names the object it is about.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object {key}{} not found in {store}", version_suffix(.version_id))]
    NotFound {
        store: String,
        key: String,
        version_id: Option<String>,
    },
    #[error("conditional write of {key} in {store} refused: {reason}")]
    Conflict { store: String, key: String, reason: String },
    #[error("access to {store} refused ({detail}); {REFUSED_HINT}")]
    AccessDenied { store: String, detail: String },
    #[error("store {store} does not exist: {detail}")]
    NoSuchStore { store: String, detail: String },
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    /// An `s3://` store asked of a build without the `s3` feature (the embedded drill's).
    #[error("{url}: {}", NO_S3)]
    NotBuilt { url: String },
    #[error("I/O error on {key} in {store}: {source}")]
    Io {
        store: String,
        key: String,
        #[source]
        source: std::io::Error,
    },
    /// The request may have taken effect or not: no reply, a timeout or a 5xx after it was sent.
    #[error(
        "{op} of {key} in {store}: outcome unknown ({detail}); the write may or may not have happened: run the command again, it reads back what is stored"
    )]
    OutcomeUnknown {
        store: String,
        op: &'static str,
        key: String,
        detail: String,
    },
    #[error("{op} of {key} in {store} failed: {detail}")]
    Backend {
        store: String,
        op: &'static str,
        key: String,
        detail: String,
    },
}

fn version_suffix(v: &Option<String>) -> String {
    match v {
        Some(v) => format!(" (version {v})"),
        None => String::new(),
    }
}

impl StoreError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::NotFound { .. })
    }
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, StoreError::OutcomeUnknown { .. })
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why an `s3://` store cannot be opened by a build without the `s3` feature.
pub const NO_S3: &str = "this tidemark was built without S3 (the embedded build of `sandbox/drill.sh`: local \
                         folders and SQLite only); build it with its default features (`cargo build --release`) \
                         for S3";
