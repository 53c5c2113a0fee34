//! [`request_stats`]: the S3 operations of this process (every client), their attempts beyond
//! the first and the transient failures, counted by an interceptor every client carries.

use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_s3::config::interceptors::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;
use tidemark_schemas::RequestCounts;

static OPERATIONS: AtomicU64 = AtomicU64::new(0);
pub(super) static ATTEMPTS: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// S3 requests of this process so far (every client): operations, attempts beyond the first,
/// and operations that failed with a transient error (5xx, throttling, timeout, connection)
/// after their last attempt.
pub fn request_stats() -> RequestCounts {
    let requests = OPERATIONS.load(Ordering::Relaxed);
    RequestCounts {
        requests,
        retried: ATTEMPTS.load(Ordering::Relaxed).saturating_sub(requests),
        failed: FAILED.load(Ordering::Relaxed),
    }
}

/// Counts operations, attempts and transient failures for [`request_stats`].
#[derive(Debug)]
pub(super) struct CountRequests;

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "tidemark-count-requests"
    }

    fn read_before_execution(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        OPERATIONS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn read_after_execution(
        &self,
        ctx: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        let ctx = ctx.inner();
        if ctx.is_failed() {
            let status = ctx.response().map(|r| r.status().as_u16());
            if status.is_none_or(|s| s >= 500 || s == 429) {
                FAILED.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}
