//! How the applier cuts the verified journal batches it has to apply into commit units.
//!
//! By default ([`Grouping::Waiting`]) a unit takes every batch already waiting, in position
//! order, up to a bound of batches and of events: an applier that is behind pays one table
//! commit (and one checkpoint) per bound instead of one per batch, as Flink's Iceberg sink
//! commits once per checkpoint; an applier that is caught up finds one batch waiting and commits
//! it alone, so a batch's latency does not grow. `--batches-per-commit N` ([`Grouping::Fixed`])
//! keeps its meaning: exactly N batches a commit (fewer in the last unit).
//!
//! Only batches the journal committed (a manifest in the verified chain; an event object whose
//! manifest is missing is not a batch yet) are grouped, and only while they are contiguous: a
//! unit ends before a batch that does not start right after the previous one, and nothing
//! after such a gap is applied (the chain verification refuses a gap first; this is the
//! grouping's own guard).

use tidemark_journal::journal::StoredManifest;

use crate::apply::ApplyError;

/// Batches one commit of the default grouping takes at most.
pub const DEFAULT_GROUP_BATCHES: usize = 100;
/// Events one commit of the default grouping takes at most (a larger batch is a unit alone).
pub const DEFAULT_GROUP_EVENTS: u64 = 100_000;

/// How many journal batches a table commit of the applier takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// Exactly this many batches a commit (the last unit of a run may hold fewer).
    Fixed(usize),
    /// Every batch waiting, up to `max_batches` batches and `max_events` events a commit, at
    /// least one batch.
    Waiting { max_batches: usize, max_events: u64 },
}

impl Default for Grouping {
    fn default() -> Self {
        Grouping::Waiting {
            max_batches: DEFAULT_GROUP_BATCHES,
            max_events: DEFAULT_GROUP_EVENTS,
        }
    }
}

impl Grouping {
    /// `--batches-per-commit N` when given, else the default grouping.
    pub fn of(batches_per_commit: Option<usize>) -> Grouping {
        batches_per_commit.map_or_else(Grouping::default, |n| Grouping::Fixed(n.max(1)))
    }
}

/// The events of `m` within `(after, to]`.
fn events_within(m: &StoredManifest, after: u64, to: u64) -> u64 {
    let lo = m.manifest.first_position.max(after + 1);
    let hi = m.manifest.last_position.min(to);
    (hi + 1).saturating_sub(lo)
}

/// `pending` (the verified batches intersecting `(after, to]`, in position order) cut into
/// commit units by `grouping`. Stops at the first batch that does not follow the previous one
/// (positions not contiguous): it and everything after it are left out.
pub fn units<'a>(
    pending: &[&'a StoredManifest],
    after: u64,
    to: u64,
    grouping: Grouping,
) -> Vec<Vec<&'a StoredManifest>> {
    let mut out: Vec<Vec<&'a StoredManifest>> = Vec::new();
    let (mut events, mut previous_last) = (0u64, None::<u64>);
    for m in pending {
        if previous_last.is_some_and(|p| m.manifest.first_position != p + 1) {
            break;
        }
        previous_last = Some(m.manifest.last_position);
        let n = events_within(m, after, to);
        let full = match (out.last(), grouping) {
            (None, _) => true,
            (Some(u), Grouping::Fixed(k)) => u.len() >= k.max(1),
            (
                Some(u),
                Grouping::Waiting {
                    max_batches,
                    max_events,
                },
            ) => u.len() >= max_batches.max(1) || events + n > max_events,
        };
        if full {
            out.push(Vec::new());
            events = 0;
        }
        out.last_mut().expect("pushed").push(*m);
        events += n;
    }
    out
}

/// Whether a unit of `unit_len` batches that stopped with `error` is applied again one batch a
/// commit: a conflict (also one wrapped with files that could not be deleted) in a unit the
/// default grouping made, so that the applier stops where, and with the report, it would at one
/// batch a commit. Fixed units (`--batches-per-commit N`) stop as they are.
pub(crate) fn regroup_on(error: &ApplyError, grouping: Grouping, unit_len: usize) -> bool {
    error.is_conflict() && matches!(grouping, Grouping::Waiting { .. }) && unit_len > 1
}

/// `error`, with `left` (files earlier attempts of the same batches wrote and could not delete)
/// named beside it: unchanged when `left` is empty, else as [`ApplyError::Uncleaned`].
pub(crate) fn with_left(error: ApplyError, mut left: Vec<String>) -> ApplyError {
    if left.is_empty() {
        return error;
    }
    match error {
        ApplyError::Uncleaned { error, left: more } => {
            left.extend(more);
            ApplyError::Uncleaned { error, left }
        }
        error => ApplyError::Uncleaned {
            error: Box::new(error),
            left,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidemark_schemas::Manifest;

    fn batch(sequence: u64, first: u64, last: u64) -> StoredManifest {
        StoredManifest {
            manifest: Manifest {
                format_version: 1,
                journal_id: "j".into(),
                sequence,
                previous_digest: None,
                object_key: format!("events/{sequence}"),
                object_version_id: "v".into(),
                object_sha256: String::new(),
                object_size: 0,
                row_count: last + 1 - first,
                first_position: first,
                last_position: last,
                min_event_time: None,
                max_event_time: None,
                writer_id: "w".into(),
                spec_digest: String::new(),
                written_at: String::new(),
            },
            digest: format!("d{sequence}"),
            key: format!("manifests/{sequence}"),
            version_id: None,
        }
    }

    /// Ten batches of ten events: positions 1..=100.
    fn tens() -> Vec<StoredManifest> {
        (0..10).map(|i| batch(i + 1, i * 10 + 1, i * 10 + 10)).collect()
    }

    fn shape(units: &[Vec<&StoredManifest>]) -> Vec<Vec<u64>> {
        units
            .iter()
            .map(|u| u.iter().map(|m| m.manifest.sequence).collect())
            .collect()
    }

    fn waiting(max_batches: usize, max_events: u64) -> Grouping {
        Grouping::Waiting {
            max_batches,
            max_events,
        }
    }

    #[test]
    fn waiting_batches_are_grouped_up_to_the_event_and_batch_bounds() {
        let b = tens();
        let all: Vec<&StoredManifest> = b.iter().collect();
        assert_eq!(
            shape(&units(&all, 0, 100, waiting(100, 35))),
            [vec![1, 2, 3], vec![4, 5, 6], vec![7, 8, 9], vec![10]]
        );
        assert_eq!(
            shape(&units(&all, 0, 100, waiting(4, 1_000))),
            [vec![1, 2, 3, 4], vec![5, 6, 7, 8], vec![9, 10]]
        );
        // Everything waiting fits one unit.
        assert_eq!(
            shape(&units(&all, 0, 100, Grouping::default())),
            [(1..=10).collect::<Vec<_>>()]
        );
        // A batch larger than the event bound is a unit of its own, never split or skipped.
        assert_eq!(shape(&units(&all, 0, 100, waiting(100, 5))).len(), 10);
    }

    #[test]
    fn caught_up_means_one_batch_a_commit() {
        let b = tens();
        let last: Vec<&StoredManifest> = b[9..].iter().collect();
        assert_eq!(shape(&units(&last, 90, 100, Grouping::default())), [vec![10]]);
        assert!(units(&[], 100, 100, Grouping::default()).is_empty());
    }

    #[test]
    fn partial_batches_at_either_end_count_only_their_events_in_range() {
        let b = tens();
        let all: Vec<&StoredManifest> = b.iter().collect();
        // Applied up to 15 and asked to stop at 44: batches 2..=5 hold 5 + 10 + 10 + 4 events.
        let pending: Vec<&StoredManifest> = all[1..5].to_vec();
        assert_eq!(
            shape(&units(&pending, 15, 44, waiting(100, 25))),
            [vec![2, 3, 4], vec![5]]
        );
        assert_eq!(
            shape(&units(&pending, 15, 44, waiting(100, 24))),
            [vec![2, 3], vec![4, 5]]
        );
        assert_eq!(shape(&units(&pending, 15, 44, waiting(100, 29))), [vec![2, 3, 4, 5]]);
    }

    #[test]
    fn fixed_keeps_the_batches_per_commit_meaning() {
        let b = tens();
        let all: Vec<&StoredManifest> = b.iter().collect();
        assert_eq!(shape(&units(&all, 0, 100, Grouping::of(Some(1)))).len(), 10);
        assert_eq!(
            shape(&units(&all, 0, 100, Grouping::of(Some(3)))),
            [vec![1, 2, 3], vec![4, 5, 6], vec![7, 8, 9], vec![10]]
        );
        assert_eq!(Grouping::of(Some(0)), Grouping::Fixed(1));
        assert_eq!(Grouping::of(None), Grouping::default());
    }

    #[test]
    fn nothing_after_a_gap_is_grouped_or_applied() {
        let mut b = tens();
        b.remove(4); // positions 41..=50 missing
        let all: Vec<&StoredManifest> = b.iter().collect();
        for g in [Grouping::default(), Grouping::Fixed(1), Grouping::Fixed(3)] {
            let u = units(&all, 0, 100, g);
            let seqs: Vec<u64> = u.concat().iter().map(|m| m.manifest.sequence).collect();
            assert_eq!(seqs, [1, 2, 3, 4], "{g:?}");
        }
    }

    fn conflict() -> ApplyError {
        ApplyError::Merge(crate::merge::MergeError::ConflictInEvents {
            key: "o-1".into(),
            version: 3,
            first_position: 12,
            second_position: 45,
        })
    }

    #[test]
    fn a_conflict_with_files_left_behind_is_regrouped_too() {
        let uncleaned = with_left(conflict(), vec!["s3://b/t/data/x.parquet: denied".into()]);
        assert!(matches!(uncleaned, ApplyError::Uncleaned { .. }));
        for e in [conflict(), uncleaned] {
            assert!(regroup_on(&e, Grouping::default(), 2), "{e}");
            assert!(!regroup_on(&e, Grouping::default(), 1), "{e}");
            assert!(!regroup_on(&e, Grouping::Fixed(5), 5), "{e}");
        }
        let other = ApplyError::Spill {
            path: "/tmp/s".into(),
            message: "full".into(),
        };
        assert!(!regroup_on(&other, Grouping::default(), 2));
    }

    #[test]
    fn files_left_by_a_regrouped_attempt_stay_named_beside_the_final_error() {
        assert_eq!(with_left(conflict(), Vec::new()).to_string(), conflict().to_string());
        let first = with_left(conflict(), vec!["a.parquet: denied".into()]);
        let last = with_left(first, vec!["b.parquet: gone".into()]);
        let msg = last.to_string();
        assert!(msg.starts_with(&conflict().to_string()), "{msg}");
        assert!(
            msg.contains("2 file(s)") && msg.contains("a.parquet") && msg.contains("b.parquet"),
            "{msg}"
        );
        assert!(last.is_conflict());
    }
}
