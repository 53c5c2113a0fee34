//! Exit codes of the `tidemark` binary (documented in docs/errors.md, "Exit codes"). Errors map to a
//! code by their kind, so automation can tell "fix the input" from "someone else won the race".

use tidemark_journal::JournalError;
use tidemark_journal::store::StoreError;

pub const OK: u8 = 0;
/// Unexpected failure: I/O, network, a bug.
pub const FAILURE: u8 = 1;
/// Command-line usage error (clap).
pub const USAGE: u8 = 2;
/// Bad input: malformed NDJSON, wrong field type, position that does not continue, bad spec.
pub const BAD_INPUT: u8 = 3;
/// Verification failed: a chain break, checksum mismatch, missing object, validation mismatch.
pub const VERIFY_FAILED: u8 = 4;
/// Lost a race: concurrent writer, stale route (412), fenced writer, conflicting checkpoint.
pub const CONFLICT: u8 = 5;
/// The store lacks a capability the journal requires (see `tidemark store check`).
pub const CAPABILITY: u8 = 6;
/// A journal, store, object or table that does not exist.
pub const NOT_FOUND: u8 = 7;
/// Credentials refused.
pub const ACCESS_DENIED: u8 = 8;
/// A catalog commit whose outcome is unknown (its reply was lost and the table could not be
/// reloaded): run the command again once the catalog answers; it resolves the commit.
pub const OUTCOME_UNKNOWN: u8 = 9;
/// The table's history holds a write the journal does not explain (`audit`); `apply` and
/// `recover` refuse to build on it (see the audit's report for the snapshot and what to do).
pub const DIVERGENCE: u8 = 12;
/// A distributed engine's failure: the Ballista scheduler cannot be reached, or a job failed
/// on the cluster (nothing was committed; see the scheduler's and executors' logs).
pub const CLUSTER: u8 = 11;
/// A drill of a real table passed every check but took longer than `--rto-budget`.
pub const RTO_OVER_BUDGET: u8 = 13;

/// An error that has already decided its exit code (e.g. a failed verification report).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

pub fn exit_error(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code,
        message: message.into(),
    })
}

fn store_code(e: &StoreError) -> u8 {
    match e {
        StoreError::NotFound { .. } | StoreError::NoSuchStore { .. } => NOT_FOUND,
        StoreError::Conflict { .. } => CONFLICT,
        StoreError::AccessDenied { .. } => ACCESS_DENIED,
        StoreError::InvalidUrl { .. } => BAD_INPUT,
        StoreError::NotBuilt { .. } => CAPABILITY,
        StoreError::Io { .. } | StoreError::Backend { .. } | StoreError::OutcomeUnknown { .. } => FAILURE,
    }
}

fn journal_code(e: &JournalError) -> u8 {
    match e {
        JournalError::Store(s) => store_code(s),
        JournalError::NotInitialized { .. } => NOT_FOUND,
        JournalError::AlreadyInitialized { .. } => CONFLICT,
        JournalError::Input { .. }
        | JournalError::PositionMismatch { .. }
        | JournalError::ConflictingEvent { .. }
        | JournalError::ResentEventDiffers { .. }
        | JournalError::Spec(_) => BAD_INPUT,
        JournalError::ResolutionExists { .. } => CONFLICT,
        JournalError::Capability { .. } => CAPABILITY,
        JournalError::ConcurrentWriter { .. } | JournalError::CheckpointConflict { .. } => CONFLICT,
        JournalError::Corrupt { .. } | JournalError::ChainBroken { .. } | JournalError::Format { .. } => VERIFY_FAILED,
    }
}

fn table_code(e: &crate::table::TableError) -> u8 {
    use crate::table::TableError as T;
    match e {
        T::CommitConflict { .. } | T::CommitNotApplied { .. } => CONFLICT,
        T::CommitUnknown { .. } => OUTCOME_UNKNOWN,
        T::MissingCapability { .. } | T::NotBuilt { .. } => CAPABILITY,
        T::TableNotFound { .. } => NOT_FOUND,
        T::AccessDenied { .. } => ACCESS_DENIED,
        T::SchemaMismatch { .. }
        | T::InvalidIdent { .. }
        | T::InvalidCatalog { .. }
        | T::InvalidWarehouse { .. }
        | T::BatchSchema { .. }
        | T::Unsupported { .. } => BAD_INPUT,
        _ => FAILURE,
    }
}

fn apply_code(e: &crate::apply::ApplyError) -> u8 {
    use crate::apply::ApplyError as A;
    match e {
        A::Journal(j) => journal_code(j),
        A::Table(t) => table_code(t),
        A::Merge(m) if m.is_conflict() => VERIFY_FAILED,
        A::Merge(_) => FAILURE,
        A::ChainBroken { .. } => VERIFY_FAILED,
        A::OtherJournal { .. } | A::CheckpointAhead { .. } => BAD_INPUT,
        A::Contended { .. } => CONFLICT,
        A::Failpoint(_) => FAILURE,
        A::Fenced(_) => CONFLICT,
        A::Spill { .. } => FAILURE,
        A::Divergence(_) => DIVERGENCE,
        A::Audit(a) => audit_code(a),
        A::Uncleaned { error, .. } => apply_code(error),
    }
}

fn audit_code(e: &crate::audit::AuditError) -> u8 {
    use crate::audit::AuditError as X;
    match e {
        X::Source(crate::table::source::SourceError::MissingFile { .. }) => VERIFY_FAILED,
        X::Source(crate::table::source::SourceError::AccessDenied { .. }) => ACCESS_DENIED,
        X::Source(_) => FAILURE,
        X::Table(t) => table_code(t),
        X::Journal(j) => journal_code(j),
        X::Store(s) => store_code(s),
        X::UnknownSnapshot { .. } => NOT_FOUND,
        X::Undecidable { .. } => BAD_INPUT,
        X::BadRecord { .. } => VERIFY_FAILED,
    }
}

fn route_code(e: &tidemark_router::RouteError) -> u8 {
    use tidemark_router::RouteError as R;
    match e {
        R::Store(s) => store_code(s),
        R::NotFound { .. } => NOT_FOUND,
        R::AlreadyExists { .. } | R::StaleRoute { .. } | R::Fenced { .. } => CONFLICT,
        R::Format { .. } | R::NotNewest { .. } => VERIFY_FAILED,
        R::InvalidFlip { .. } => BAD_INPUT,
    }
}

fn lease_code(e: &crate::dr::lease::LeaseError) -> u8 {
    use crate::dr::lease::LeaseError as L;
    match e {
        L::Held { .. } | L::Fenced { .. } | L::Lost { .. } => CONFLICT,
        L::Format { .. } => VERIFY_FAILED,
        L::Store(s) => store_code(s),
    }
}

fn state_code(e: &crate::dr::follow_state::StateError) -> u8 {
    use crate::dr::follow_state::StateError as S;
    match e {
        S::Format { .. } => VERIFY_FAILED,
        S::Changed { .. } => CONFLICT,
        S::Lease(l) => lease_code(l),
        S::Store(s) => store_code(s),
    }
}

fn follow_code(e: &crate::dr::follow::FollowError) -> Option<u8> {
    use crate::dr::follow::FollowError as F;
    match e {
        F::Lease(l) => Some(lease_code(l)),
        F::Catalog(t) => Some(table_code(t)),
        F::Dr(_) => None,
    }
}

/// The warm follower's errors (issue 13), which nest transparently.
fn warm_code(cause: &(dyn std::error::Error + 'static)) -> Option<u8> {
    use crate::dr::failover::FailoverError as P;
    use crate::dr::follower::RunError as R;
    if let Some(e) = cause.downcast_ref::<R>() {
        return match e {
            R::Follow(f) => follow_code(f),
            R::State(s) => Some(state_code(s)),
            R::Lease(l) => Some(lease_code(l)),
            R::Open { source, .. } => Some(store_code(source)),
        };
    }
    if let Some(e) = cause.downcast_ref::<P>() {
        return match e {
            P::Lease(l) => Some(lease_code(l)),
            P::Follow(f) => follow_code(f),
            P::State(s) => Some(state_code(s)),
            P::Route { .. } | P::Table { .. } => None, // the cause decides
            P::NoDrTable { .. } => Some(NOT_FOUND),
            P::NoPosition { .. } => Some(BAD_INPUT),
            P::RecordedForAnother { .. } => Some(CONFLICT),
            P::BadRecord { .. } => Some(BAD_INPUT),
            P::Store(s) => Some(store_code(s)),
            P::Journal(j) => Some(journal_code(j)),
        };
    }
    if let Some(e) = cause.downcast_ref::<crate::dr::resync::ResyncError>() {
        use crate::dr::resync::ResyncError as S;
        return Some(match e {
            S::PrimaryIncomplete { .. } => VERIFY_FAILED,
            S::Catalog(t) => table_code(t),
        });
    }
    if let Some(e) = cause.downcast_ref::<crate::dr::lease::LeaseError>() {
        return Some(lease_code(e));
    }
    if let Some(e) = cause.downcast_ref::<crate::dr::follow_state::StateError>() {
        return Some(state_code(e));
    }
    None
}

fn recover_code(e: &crate::recover::RecoverError) -> u8 {
    use crate::recover::RecoverError as R;
    match e {
        R::Journal(j) => journal_code(j),
        R::Table(t) => table_code(t),
        R::Merge(m) if m.is_conflict() => VERIFY_FAILED,
        R::MissingFile { .. }
        | R::ChainBroken { .. }
        | R::Validation { .. }
        | R::OtherJournal { .. }
        | R::CheckpointMismatch { .. } => VERIFY_FAILED,
        R::BeyondVerified { .. }
        | R::NoCheckpoint { .. }
        | R::UnknownSnapshot { .. }
        | R::NoPosition { .. }
        | R::Unsupported { .. } => BAD_INPUT,
        R::TargetExists { .. } => CONFLICT,
        R::ResumeMismatch { .. } => BAD_INPUT,
        R::Untrusted { .. } | R::NoTrustedSnapshot { .. } => DIVERGENCE,
        R::Audit(a) => audit_code(a),
        #[cfg(feature = "ballista-engine")]
        R::Engine(e) => {
            use crate::recover::engine::EngineError as E;
            match e {
                E::BadEngine { .. } => BAD_INPUT,
                E::Unreachable { .. } | E::JobFailed { .. } => CLUSTER,
                E::Store { .. } => FAILURE,
            }
        }
        R::Uncleaned { error, .. } => recover_code(error),
        _ => FAILURE,
    }
}

/// The exit code of an error: the first cause in its chain that has a known kind.
pub fn code_of(err: &anyhow::Error) -> u8 {
    // What this build lacks decides, wherever it sits (under an iceberg error, say).
    if err.chain().any(|c| {
        matches!(c.downcast_ref::<StoreError>(), Some(StoreError::NotBuilt { .. }))
            || matches!(
                c.downcast_ref::<crate::table::TableError>(),
                Some(crate::table::TableError::NotBuilt { .. })
            )
    }) {
        return CAPABILITY;
    }
    for cause in err.chain() {
        if let Some(code) = warm_code(cause) {
            return code;
        }
        if let Some(e) = cause.downcast_ref::<Exit>() {
            return e.code;
        }
        if cause
            .downcast_ref::<crate::rehearse::table_drill::ForeignScratchTable>()
            .is_some()
        {
            return BAD_INPUT;
        }
        if let Some(e) = cause.downcast_ref::<JournalError>() {
            return journal_code(e);
        }
        if let Some(e) = cause.downcast_ref::<StoreError>() {
            return store_code(e);
        }
        if let Some(e) = cause.downcast_ref::<tidemark_router::RouteError>() {
            return route_code(e);
        }
        // Its `Route` and `Table` variants are transparent: their own kinds are not links of
        // the chain, so they are read here (a reader's route that is not the newest decision is
        // 4, as for `route show` and `route flip`).
        if let Some(e) = cause.downcast_ref::<crate::query::QueryError>() {
            use crate::query::QueryError as Q;
            match e {
                Q::Route(r) => return route_code(r),
                Q::Table(t) => return table_code(t),
                Q::UuidMismatch { .. } | Q::DataFusion(_) => continue, // the cause decides
            }
        }
        // The table files' client (iceberg's FileIO on opendal) refusing the credentials, under
        // any wrapper (a DataFusion error of a query, say).
        if crate::table::refused::is_refused_table_io(cause) {
            return ACCESS_DENIED;
        }
        if let Some(e) = cause.downcast_ref::<crate::recover::RecoverError>() {
            return recover_code(e);
        }
        if let Some(e) = cause.downcast_ref::<crate::dr::backup::BackupError>() {
            use crate::dr::backup::BackupError as B;
            match e {
                B::Invalid { .. } | B::NotBackedUp { .. } => return VERIFY_FAILED,
                _ => continue, // the cause decides
            }
        }
        // Its `Read` variant is transparent: the table error's kind is read here.
        if let Some(e) = cause.downcast_ref::<crate::dr::replica::FilesError>() {
            use crate::dr::replica::FilesError as F;
            return match e {
                F::Parse { .. } => VERIFY_FAILED,
                F::Read(t) => table_code(t),
            };
        }
        if let Some(e) = cause.downcast_ref::<crate::dr::rebuild::DrError>() {
            use crate::dr::rebuild::DrError as D;
            match e {
                D::InvalidWarehouse { .. } | D::InvalidNamespace { .. } | D::InvalidTableName { .. } => {
                    return BAD_INPUT;
                }
                _ => continue,
            }
        }
        if let Some(e) = cause.downcast_ref::<crate::apply::ApplyError>() {
            return apply_code(e);
        }
        if let Some(e) = cause.downcast_ref::<crate::audit::AuditError>() {
            return audit_code(e);
        }
        if let Some(e) = cause.downcast_ref::<crate::table::TableError>() {
            return table_code(e);
        }
        // A boxed source (`source: Box<TableError>`) is its own link in the chain.
        if let Some(e) = cause.downcast_ref::<Box<crate::table::TableError>>() {
            return table_code(e);
        }
        if let Some(e) = cause.downcast_ref::<crate::merge::MergeError>() {
            return if e.is_conflict() { VERIFY_FAILED } else { FAILURE };
        }
        if let Some(e) = cause.downcast_ref::<crate::rehearse::fault::FaultError>() {
            return match e {
                crate::rehearse::fault::FaultError::Table(t) => table_code(t),
                crate::rehearse::fault::FaultError::Predicate { .. } => BAD_INPUT,
            };
        }
    }
    FAILURE
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::table::TableError;

    /// The `pub const NAME: u8 = N;` lines of a source file: code → name.
    fn constants(source: &str) -> BTreeMap<u8, String> {
        source
            .lines()
            .filter_map(|l| {
                let rest = l.trim().strip_prefix("pub const ")?;
                let (name, value) = rest.split_once(": u8 = ")?;
                Some((value.trim_end_matches(';').parse().ok()?, name.to_string()))
            })
            .collect()
    }

    /// The rows `| N | `NAME` | meaning |` of the "Exit codes" table of docs/errors.md.
    fn documented(doc: &str) -> BTreeMap<u8, String> {
        let section = doc.split("\n## Exit codes\n").nth(1).expect("an Exit codes section");
        let section = section.split("\n## ").next().unwrap();
        let mut rows = BTreeMap::new();
        for line in section.lines().filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let Ok(code) = cells[1].parse::<u8>() else {
                continue; // the header
            };
            let name = cells[2].trim_matches('`').to_string();
            assert!(
                rows.insert(code, name).is_none(),
                "exit code {code} is documented twice"
            );
        }
        rows
    }

    /// docs/errors.md's exit-code table and the constants that define the codes say the same,
    /// both ways: every constant is documented under its code, every documented code is one.
    #[test]
    fn the_exit_code_table_matches_the_constants() {
        let mut defined = constants(include_str!("exit.rs"));
        defined.extend(constants(include_str!("dr/follow_status.rs")));
        // The parse reads the values the code uses.
        for (code, name) in [
            (OK, "OK"),
            (ACCESS_DENIED, "ACCESS_DENIED"),
            (RTO_OVER_BUDGET, "RTO_OVER_BUDGET"),
            (crate::dr::follow_status::EXIT_NOT_RUNNING, "EXIT_NOT_RUNNING"),
        ] {
            assert_eq!(defined.get(&code).map(String::as_str), Some(name));
        }
        let documented = documented(include_str!("../../docs/errors.md"));
        for (code, name) in &defined {
            assert_eq!(
                documented.get(code),
                Some(name),
                "exit code {code} ({name}) is not documented as such in docs/errors.md"
            );
        }
        for (code, name) in &documented {
            assert_eq!(
                defined.get(code),
                Some(name),
                "docs/errors.md documents exit code {code} ({name}), which no constant defines"
            );
        }
    }

    /// A table file the embedded build cannot reach: iceberg's error, wrapped as every iceberg
    /// error is (`TableError::Iceberg`, a failure of its own), carries the store's `NotBuilt`.
    #[test]
    fn what_the_build_lacks_decides_the_code_under_an_iceberg_error() {
        let lacks = iceberg::Error::new(iceberg::ErrorKind::FeatureUnsupported, "table file s3://b/t/v1.json")
            .with_source(StoreError::NotBuilt {
                url: "s3://b/t/v1.json".into(),
            });
        let err = anyhow::Error::new(TableError::Iceberg {
            context: "check table metadata s3://b/t/v1.json".into(),
            source: Box::new(lacks),
        });
        assert_eq!(code_of(&err), CAPABILITY);
        assert!(
            format!("{err:#}").contains("s3://b/t/v1.json: this tidemark was built without S3"),
            "{err:#}"
        );

        // The same iceberg error with another cause stays a failure.
        let other = iceberg::Error::new(iceberg::ErrorKind::Unexpected, "table file /t/v1.json");
        let err = anyhow::Error::new(TableError::Iceberg {
            context: "check table metadata /t/v1.json".into(),
            source: Box::new(other),
        });
        assert_eq!(code_of(&err), FAILURE);

        let catalog = anyhow::Error::new(TableError::NotBuilt {
            what: "the PostgreSQL catalog postgres://h/db".into(),
        });
        assert_eq!(code_of(&catalog), CAPABILITY);
    }
}
