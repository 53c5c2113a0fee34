//! What every command prints: a value as pretty JSON on stdout, and the S3 requests of the
//! process for the `s3_requests` field of a `--json` report.

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The S3 requests this process made (for `s3_requests` in `--json` reports): tidemark's own
/// client's and the table files', `None` when none.
pub fn s3_requests() -> Option<tidemark_schemas::RequestCounts> {
    let own = tidemark_journal::store::s3_request_stats();
    let files = tidemark_recovery::catalog::counted_io::request_stats();
    let counts = tidemark_schemas::RequestCounts {
        requests: own.requests + files.requests,
        retried: own.retried + files.retried,
        failed: own.failed + files.failed,
    };
    (counts.requests > 0).then_some(counts)
}
