//! Where a recovery's heavy stages run: `--engine local` (this process, the default),
//! `ballista-standalone` (a Ballista scheduler and executor started in this process on
//! 127.0.0.1), or `ballista://HOST:PORT` (a running Ballista cluster's scheduler).
//!
//! `session.rs`: the engines ([`Engine`], parsed from `--engine`), their errors and, for the
//! Ballista ones, the session with the object stores the job reads and writes ([`session`]);
//! `run.rs`: a recovery on the engine chosen ([`recover`]).

mod run;
mod session;

pub use run::recover;
pub use session::{Engine, EngineError, PARTITIONS, bucket_of, listing_url, runtime, s3_store, session};
