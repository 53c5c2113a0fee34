//! One snapshot classified on its own ([`classify`]): a recovery's seed, an applier commit (its
//! positions continue its parent's; with `deep`, its rows checked, see [`super::deep`]), or
//! another writer's commit diffed on the journal's columns ([`super::diff`]).

use std::collections::HashMap;

use iceberg::spec::SnapshotRef;

use crate::audit::deep;
use crate::audit::diff::{self, Loaded};
use crate::audit::error::AuditError;
use crate::audit::read::Ctx;
use crate::audit::report::{AuditReport, AuditState, SnapshotAudit, Verdict};
use crate::provenance::{PROP_FIRST_POSITION, PROP_JOURNAL_ID, PROP_LAST_POSITION, PROP_SOURCE_VERDICT, PROP_STEP};

/// Classifies `snap` (its parent `previous`; `parent` holds the parent's loaded files when an
/// earlier step loaded them, and is left holding `snap`'s when this step loaded them).
#[allow(clippy::too_many_arguments)]
pub(super) async fn classify(
    ctx: &Ctx<'_>,
    snap: &SnapshotRef,
    previous: Option<&SnapshotRef>,
    parent: &mut Option<Loaded>,
    state: &AuditState,
    deep: bool,
    props: &HashMap<String, String>,
    entry: &mut SnapshotAudit,
    report: &mut AuditReport,
) -> Result<(), AuditError> {
    let own_last = props.get(PROP_LAST_POSITION).and_then(|v| v.parse::<u64>().ok());
    let step = props.get(PROP_STEP).map(String::as_str);
    // A recovered table starts at its seed; the distributed engine seeds and replays in one
    // commit, the table's first.
    if step == Some("seed") || (step == Some("replay") && previous.is_none()) {
        entry.kind = "recovery seed".into();
        entry.position = own_last;
        let verdict = props.get(PROP_SOURCE_VERDICT).cloned().unwrap_or_default();
        entry.verdict = if verdict.starts_with("divergence accepted") {
            Verdict::Accepted
        } else {
            Verdict::Seed
        };
        entry.detail = format!(
            "seeded from snapshot {} at position {}{}",
            props
                .get(crate::provenance::PROP_SOURCE_SNAPSHOT)
                .map_or("?", String::as_str),
            own_last.map_or("?".into(), |p| p.to_string()),
            if verdict.is_empty() {
                String::new()
            } else {
                format!(" ({verdict})")
            }
        );
        *parent = None;
        return Ok(());
    }
    if let Some(last) = own_last {
        entry.kind = if step == Some("replay") {
            "recovery replay".into()
        } else {
            "applier".into()
        };
        entry.position = Some(last);
        let journal_id = props.get(PROP_JOURNAL_ID).cloned().unwrap_or_default();
        let expected_first = state.position.unwrap_or(0) + 1;
        let first = props.get(PROP_FIRST_POSITION).and_then(|v| v.parse::<u64>().ok());
        // One applier commit made as several snapshots (a delete, then an append, as PyIceberg's
        // overwrite does), each carrying the same record: the later ones continue the first.
        let same_as_parent = previous.is_some_and(|p| {
            let pp = &p.summary().additional_properties;
            [PROP_JOURNAL_ID, PROP_FIRST_POSITION, PROP_LAST_POSITION]
                .iter()
                .all(|k| pp.get(*k).is_some() && pp.get(*k) == props.get(*k))
        });
        let bad = if journal_id != ctx.journal.header.journal_id {
            Some(format!(
                "records journal {journal_id:?}, not this journal ({})",
                ctx.journal.header.journal_id
            ))
        } else {
            match first {
                None => Some(format!("records last position {last} but no {PROP_FIRST_POSITION}")),
                Some(f) if same_as_parent => {
                    entry.detail = format!("applied positions {f}..={last} (the same commit as its parent)");
                    None
                }
                Some(f) if f > expected_first => Some(format!(
                    "applied {f}..={last}: positions {expected_first}..={} were never applied (a gap)",
                    f - 1
                )),
                Some(f) if f < expected_first => Some(format!(
                    "applied {f}..={last}, but its parent already held up to {} (an overlap)",
                    expected_first - 1
                )),
                Some(_) if last + 1 < expected_first => Some(format!("records last position {last} below its first")),
                Some(f) => {
                    entry.detail = format!("applied positions {f}..={last}");
                    None
                }
            }
        };
        if let Some(why) = bad {
            entry.verdict = Verdict::Divergence;
            entry.detail = why;
            *parent = None;
            return Ok(());
        }
        entry.verdict = Verdict::Applied;
        if deep {
            let first = first.expect("checked");
            let (checked, loaded, files_read) =
                deep::check_applied(ctx, previous, parent.take(), snap, first, last).await?;
            report.files_read += files_read;
            if !checked.counts.is_zero() || !checked.detail.is_empty() {
                entry.verdict = Verdict::Divergence;
                entry.counts = checked.counts;
                entry.sample_keys = checked.samples;
                entry.detail = if checked.detail.is_empty() {
                    format!(
                        "its rows are not the merge rules applied to its parent's rows and positions {first}..={last}"
                    )
                } else {
                    checked.detail
                };
            } else {
                entry.detail.push_str("; rows checked (deep)");
            }
            *parent = Some(loaded);
        } else {
            *parent = None;
        }
        return Ok(());
    }
    // Another writer's commit: diffed on the journal's columns.
    entry.kind = "other".into();
    let before = diff::loaded_or(ctx, parent.take(), previous).await?;
    let after = diff::load(ctx, snap).await?;
    let d = diff::diff(ctx, before.as_ref(), &after).await?;
    report.files_read += d.files_read;
    entry.counts = d.counts;
    entry.sample_keys = d.samples;
    if let Some(why) = d.schema_problem {
        entry.verdict = Verdict::Divergence;
        entry.detail = why;
    } else if d.counts.is_zero() {
        entry.verdict = Verdict::Neutral;
        entry.detail = format!(
            "no journal column of any key changed ({} data files read of {} removed, {} added, {} with changed deletes)",
            d.files_read, d.removed_files, d.added_files, d.touched_files
        );
    } else {
        entry.verdict = Verdict::Divergence;
        entry.detail = format!(
            "{} keys removed, {} changed, {} added on the journal's columns",
            d.counts.removed, d.counts.changed, d.counts.added
        );
    }
    *parent = Some(after);
    Ok(())
}
