//! Recovery to a journal boundary H, one file per step:
//! [`snapshot`] (choose the trusted snapshot, prove its files exist, and with [`trust`] that the
//! position it holds is the one it records itself, from this journal), [`seed`] (a new table owning
//! copies of its rows), [`replay`] (verified events after the snapshot's position up to H),
//! [`validate`] (every key against an independent reference), then the route flip (in
//! `tidemark_router`), done by the caller only when validation passed.
//!
//! [`recover`] runs the steps in order with a timing per step (`local.rs`); [`engine::recover`]
//! runs them on the engine `--engine` names (a Ballista cluster: [`ballista`]). It is idempotent
//! and resumable by recovery id: a confirmed seed or replay of the same recovery is not redone.
//!
//! Beside the steps: [`audited`] (step 0, the source's history against the journal),
//! [`columnar`] (the validation's independent reference), `error.rs` ([`RecoverError`]),
//! `options.rs` ([`RecoverOptions`]), `report.rs` ([`RecoveryReport`]) and `steps.rs` (the steps
//! both engines share: the boundary, the validations, the detail lines); for the Ballista engine
//! [`distributed_check`], `footer.rs` and [`partition`].

pub mod audited;
#[cfg(feature = "ballista-engine")]
pub mod ballista;
#[cfg(all(test, feature = "ballista-engine"))]
mod ballista_partition_tests;
#[cfg(all(test, feature = "ballista-engine"))]
mod ballista_tests;
pub mod columnar;
#[cfg(test)]
mod columnar_tests;
#[cfg(feature = "ballista-engine")]
pub mod distributed_check;
#[cfg(feature = "ballista-engine")]
pub mod engine;
mod error;
#[cfg(feature = "ballista-engine")]
pub(crate) mod footer;
mod local;
mod options;
#[cfg(feature = "ballista-engine")]
pub mod partition;
#[cfg(test)]
mod positions_tests;
#[cfg(test)]
mod reads_tests;
pub mod replay;
mod report;
pub mod seed;
pub mod snapshot;
mod steps;
#[cfg(test)]
pub(crate) mod tests;
pub mod trust;
pub mod validate;

pub use error::RecoverError;
pub use local::recover;
pub use options::RecoverOptions;
pub use report::{RecoveryReport, StepTiming};
