//! The audit's two checks of rows against the journal, both with the independent reference fold
//! ([`crate::reference`]) and the journal's own reader by position
//! ([`tidemark_journal::events::ByPosition`]), never the merge plan or the replay's reader:
//! * [`check_applied`] (`--deep`): an applier commit's rows are its parent's rows with its
//!   positions applied by the merge rules, as one unit;
//! * [`certify`]: the oldest retained snapshot of a history whose start expired holds exactly the
//!   fold of the journal from position 1 to its own recorded position.
//!
//! Both hold the rows of whole snapshots in memory (about the size of the table's live rows);
//! they are run once per snapshot and their results kept in the audit records.

use iceberg::spec::SnapshotRef;
use tidemark_journal::events::ByPosition;

use super::diff::{self, Compared, KeyRows, Loaded};
use super::error::AuditError;
use super::read::Ctx;
use super::report::{SnapshotAudit, Verdict};
use crate::reference::{RefRow, RefState, rows_of};

/// Every live row of `l`.
async fn all_rows(ctx: &Ctx<'_>, l: &Loaded) -> Result<Vec<RefRow>, AuditError> {
    let paths: Vec<&str> = l.files.data.iter().map(|f| f.path.as_str()).collect();
    diff::read_rows(ctx, l, &paths).await
}

fn key_rows(state: &RefState) -> KeyRows {
    state
        .rows
        .iter()
        .map(|(k, r)| (k.clone(), vec![(r.cells.clone(), r.position)]))
        .collect()
}

/// Applies the events of positions `(after, to]` to `state`, one unit per journal batch when
/// `per_batch` (a fold from position 1, as the applier applies it), else as one unit.
async fn fold(
    ctx: &Ctx<'_>,
    state: &mut RefState,
    after: u64,
    to: u64,
    per_batch: bool,
) -> Result<Option<String>, AuditError> {
    let range = ByPosition::select(ctx.journal, after, to).await?;
    let mut unit = Vec::new();
    for i in 0..range.manifests.len() {
        let events = rows_of(&ctx.journal.spec, &range.read(ctx.journal, i).await?);
        if per_batch {
            if let Err(c) = state.apply(&events) {
                return Ok(Some(format!("the journal's events conflict: {c}")));
            }
        } else {
            unit.extend(events);
        }
    }
    if !per_batch && let Err(c) = state.apply(&unit) {
        return Ok(Some(format!("its events conflict with its parent's rows: {c}")));
    }
    Ok(None)
}

/// What [`check_applied`] found: mismatching keys, or a reason it could not hold.
#[derive(Debug, Default)]
pub struct Checked {
    pub counts: super::report::Counts,
    pub samples: Vec<String>,
    pub detail: String,
}

/// Checks that `snap`, an applier commit of positions `first..=last`, holds its parent's rows
/// with those events applied. Returns the finding, `snap`'s loaded files, and files read.
pub(crate) async fn check_applied(
    ctx: &Ctx<'_>,
    previous: Option<&SnapshotRef>,
    parent: Option<Loaded>,
    snap: &SnapshotRef,
    first: u64,
    last: u64,
) -> Result<(Checked, Loaded, u64), AuditError> {
    let parent = diff::loaded_or(ctx, parent, previous).await?;
    let after = diff::load(ctx, snap).await?;
    let mut files_read = after.files.data.len() as u64;
    let seed = match &parent {
        Some(p) => {
            files_read += p.files.data.len() as u64;
            all_rows(ctx, p).await?
        }
        None => Vec::new(),
    };
    let mut checked = Checked::default();
    let mut state = match RefState::seeded(ctx.journal.spec.clone(), seed) {
        Ok(s) => s,
        Err(e) => {
            checked.detail = format!("its parent's rows cannot be folded: {e}");
            return Ok((checked, after, files_read));
        }
    };
    if let Some(why) = fold(ctx, &mut state, first - 1, last, false).await? {
        checked.detail = why;
        return Ok((checked, after, files_read));
    }
    let actual = diff::by_key(&ctx.journal.spec, all_rows(ctx, &after).await?);
    let Compared { counts, samples } = diff::compare(&key_rows(&state), &actual);
    checked.counts = counts;
    checked.samples = samples;
    Ok((checked, after, files_read))
}

/// What [`certify`] loaded.
pub struct Certified {
    pub loaded: Loaded,
    pub files_read: u64,
}

/// Certifies `snap` (the oldest retained snapshot; its parent `expired` is gone) against the fold
/// of the journal from position 1 to the position its own summary records.
pub(crate) async fn certify(
    ctx: &Ctx<'_>,
    snap: &SnapshotRef,
    expired: &str,
) -> Result<(SnapshotAudit, Certified), AuditError> {
    let mut entry = super::report::entry_of(snap);
    entry.kind = "start".into();
    let undecidable = |reason: String| AuditError::Undecidable {
        table_uuid: ctx.meta.uuid().to_string(),
        reason,
    };
    let own = crate::provenance::recorded_position(ctx.meta, snap)
        .filter(|r| r.recorded_by == snap.snapshot_id())
        .ok_or_else(|| {
            undecidable(format!(
                "its oldest retained snapshot {} records no journal position of its own and its parent {expired} expired: there is nothing to certify it against (audit it while an earlier audit's record exists)",
                snap.snapshot_id()
            ))
        })?;
    if own.journal_id.as_deref() != Some(ctx.journal.header.journal_id.as_str()) {
        return Err(undecidable(format!(
            "its oldest retained snapshot {} records journal {:?}, not this journal ({})",
            snap.snapshot_id(),
            own.journal_id,
            ctx.journal.header.journal_id
        )));
    }
    entry.position = Some(own.position);
    let loaded = diff::load(ctx, snap).await?;
    let files_read = loaded.files.data.len() as u64;
    let mut state = RefState::new(ctx.journal.spec.clone());
    match fold(ctx, &mut state, 0, own.position, true).await {
        Ok(None) => {}
        Ok(Some(why)) => return Err(undecidable(why)),
        Err(e) => {
            return Err(undecidable(format!(
                "certifying snapshot {} (its parent {expired} expired) needs the journal from position 1 to {}: {e}",
                snap.snapshot_id(),
                own.position
            )));
        }
    }
    let actual = diff::by_key(&ctx.journal.spec, all_rows(ctx, &loaded).await?);
    let Compared { counts, samples } = diff::compare(&key_rows(&state), &actual);
    entry.counts = counts;
    entry.sample_keys = samples;
    if counts.is_zero() {
        entry.verdict = Verdict::Certified;
        entry.detail = format!(
            "its parent {expired} expired; its rows equal the journal's fold of positions 1..={}",
            own.position
        );
    } else {
        entry.verdict = Verdict::Divergence;
        entry.detail = format!(
            "its parent {expired} expired; against the journal's fold of positions 1..={}: {} keys missing, {} different, {} not in the journal",
            own.position, counts.removed, counts.changed, counts.added
        );
    }
    Ok((entry, Certified { loaded, files_read }))
}
