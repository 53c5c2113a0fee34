//! The engine's choice: a recovery on the local engine ([`crate::recover::local`]) or on a
//! Ballista one ([`crate::recover::ballista`]).

use super::session::Engine;
use crate::recover::error::RecoverError;
use crate::recover::options::RecoverOptions;
use crate::recover::report::{RecoveryReport, StepTiming};
use crate::recover::{ballista, local};

/// Runs a recovery ([`crate::recover::recover`]) on `engine`.
pub async fn recover(
    journal: &tidemark_journal::Journal,
    handle: &crate::catalog::CatalogHandle,
    opts: &RecoverOptions,
    engine: &Engine,
    clock: &dyn tidemark_journal::clock::Clock,
    ids: &dyn crate::ids::Ids,
    progress: &mut dyn FnMut(&StepTiming),
) -> Result<(RecoveryReport, iceberg::table::Table), RecoverError> {
    match engine {
        Engine::Local => local::recover(journal, handle, opts, clock, ids, progress).await,
        _ => ballista::recover(journal, handle, opts, engine, clock, ids, progress).await,
    }
}
