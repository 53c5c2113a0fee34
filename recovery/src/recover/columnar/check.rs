//! The expected rows of the keys (the fold) and the walk of the three sides, key by key.

use arrow::array::RecordBatch;
use tidemark_journal::spec::CompiledSpec;

use super::compare::Compare;
use super::sides::{Codec, Expect, Extra, SameValues, Side, invalid};
use crate::recover::RecoverError;
use crate::recover::validate::ValidationReport;
use crate::reference::RefConflict;

/// The expected rows in key order, or the conflict that stops the fold.
fn fold(spec: &CompiledSpec, s: &Side, e: &Side) -> Result<Vec<Expect>, RecoverError> {
    let snap = s.by_key();
    for w in snap.windows(2) {
        if s.key_row(w[0]) == s.key_row(w[1]) {
            return Err(invalid(format!(
                "the trusted snapshot: the seed holds key {} twice (positions {} and more)",
                s.show(spec, spec.key_index, w[0]),
                s.position.value(w[0] as usize)
            )));
        }
    }
    // Events by key, then highest version, then lowest position (the representative of retries).
    let mut ev: Vec<u32> = (0..e.len() as u32).collect();
    ev.sort_by(|&a, &b| {
        e.key_row(a)
            .cmp(&e.key_row(b))
            .then_with(|| e.version.value(b as usize).cmp(&e.version.value(a as usize)))
            .then_with(|| e.position.value(a as usize).cmp(&e.position.value(b as usize)))
    });
    let retry = SameValues::new(&e.payload, &e.payload, "events' values")?;
    let same_as_snapshot = SameValues::new(&s.payload, &e.payload, "events' and the snapshot's values")?;
    let (mut in_unit, mut against) = (Vec::<RefConflict>::new(), Vec::<RefConflict>::new());
    let mut out = Vec::with_capacity(snap.len() + ev.len() / 4);
    let (mut i, mut j) = (0usize, 0usize);
    while i < snap.len() || j < ev.len() {
        let order = match (snap.get(i), ev.get(j)) {
            (Some(&a), Some(&b)) => s.key_row(a).cmp(&e.key_row(b)),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        if order == std::cmp::Ordering::Less {
            out.push(Expect::Snapshot(snap[i]));
            i += 1;
            continue;
        }
        let row = (order == std::cmp::Ordering::Equal).then(|| snap[i]);
        let start = j;
        while j < ev.len() && e.key_row(ev[j]) == e.key_row(ev[start]) {
            j += 1;
        }
        let group = &ev[start..j];
        // Each version's run: the first is the representative, the rest must be retries of it.
        let mut r = 0;
        while r < group.len() {
            let rep = group[r];
            let version = e.version.value(rep as usize);
            let mut n = r + 1;
            while n < group.len() && e.version.value(group[n] as usize) == version {
                if !retry.same(group[n], rep) {
                    in_unit.push(RefConflict::InUnit {
                        key: e.show(spec, spec.key_index, rep).to_string(),
                        version,
                        first: e.position.value(rep as usize) as u64,
                        second: e.position.value(group[n] as usize) as u64,
                    });
                }
                n += 1;
            }
            if let Some(sr) = row
                && s.version.value(sr as usize) == version
                && !same_as_snapshot.same(sr, rep)
            {
                against.push(RefConflict::AgainstState {
                    key: e.show(spec, spec.key_index, rep).to_string(),
                    version,
                    table_position: s.position.value(sr as usize) as u64,
                    event_position: e.position.value(rep as usize) as u64,
                });
            }
            r = n;
        }
        let winner = group[0];
        out.push(match row {
            Some(sr) if e.version.value(winner as usize) <= s.version.value(sr as usize) => Expect::Snapshot(sr),
            _ => Expect::Event {
                e: winner,
                extra_from: row,
            },
        });
        if row.is_some() {
            i += 1;
        }
    }
    let first = |v: Vec<RefConflict>, at: fn(&RefConflict) -> u64| v.into_iter().min_by_key(at);
    let conflict = first(in_unit, |c| match c {
        RefConflict::InUnit { second, .. } => *second,
        RefConflict::AgainstState { event_position, .. } => *event_position,
    })
    .or_else(|| {
        first(against, |c| match c {
            RefConflict::InUnit { second, .. } => *second,
            RefConflict::AgainstState { event_position, .. } => *event_position,
        })
    });
    match conflict {
        Some(c) => Err(invalid(format!("the reference fold refused the events: {c}"))),
        None => Ok(out),
    }
}

/// Checks `table` (the recovered table's live rows) against the fold of `snapshot` (the trusted
/// snapshot's live rows) with `events` (the verified events, one unit), key by key and column by
/// column. `extra` names the columns outside the spec, which both row sides carry. The batches
/// are taken so that each side drops them once it holds their columns (see [`Side::new`]).
pub fn check(
    spec: &CompiledSpec,
    extra: &Extra,
    snapshot: Vec<RecordBatch>,
    events: Vec<RecordBatch>,
    table: Vec<RecordBatch>,
) -> Result<ValidationReport, RecoverError> {
    let codec = Codec::new(spec)?;
    let s = Side::new("snapshot", spec, &codec, Some(extra), snapshot)?;
    let e = Side::new("events", spec, &codec, None, events)?;
    let t = Side::new("recovered table", spec, &codec, Some(extra), table)?;
    let expected = fold(spec, &s, &e)?;
    let payload_of_snapshot = SameValues::new(&s.payload, &t.payload, "snapshot's and the table's values")?;
    let payload_of_events = SameValues::new(&e.payload, &t.payload, "events' and the table's values")?;
    let extra_of_snapshot = SameValues::new(&s.extra_cols, &t.extra_cols, "columns outside the spec")?;
    let mut c = Compare::new(spec, extra, &t);
    c.report.keys_expected = expected.len() as u64;
    let found = t.by_key();
    let (mut i, mut j) = (0usize, 0usize);
    let key_of = |x: Expect| match x {
        Expect::Snapshot(r) => s.key_row(r),
        Expect::Event { e: r, .. } => e.key_row(r),
    };
    while i < expected.len() || j < found.len() {
        let order = match (expected.get(i), found.get(j)) {
            (Some(&x), Some(&f)) => key_of(x).cmp(&t.key_row(f)),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        // The table's rows of this key (one, or duplicates).
        let run = |j: usize| {
            let mut n = j + 1;
            while n < found.len() && t.key_row(found[n]) == t.key_row(found[j]) {
                n += 1;
            }
            n
        };
        match order {
            std::cmp::Ordering::Less => {
                let (side, r) = c.source(&s, &e, expected[i]);
                c.missing(side, r);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let n = run(j);
                c.duplicates(found[j], n - j);
                c.extra_key(found[j]);
                j = n;
            }
            std::cmp::Ordering::Equal => {
                let n = run(j);
                c.duplicates(found[j], n - j);
                let x = expected[i];
                let (side, r) = c.source(&s, &e, x);
                let payload = match x {
                    Expect::Snapshot(_) => &payload_of_snapshot,
                    Expect::Event { .. } => &payload_of_events,
                };
                // A new key's columns outside the spec are expected null.
                let extra_same = match x {
                    Expect::Snapshot(r)
                    | Expect::Event {
                        extra_from: Some(r), ..
                    } => extra_of_snapshot.same(r, found[j]),
                    Expect::Event { extra_from: None, .. } => {
                        t.extra_cols.iter().all(|col| col.is_null(found[j] as usize))
                    }
                };
                c.same(side, r, payload, extra_same, extra_side(x, &s), found[j]);
                i += 1;
                j = n;
            }
        }
    }
    Ok(c.finish())
}

/// Which side's outside columns a key's expected row shows (for a mismatch's text).
fn extra_side(x: Expect, s: &Side) -> Option<(&Side, u32)> {
    match x {
        Expect::Snapshot(r)
        | Expect::Event {
            extra_from: Some(r), ..
        } => Some((s, r)),
        Expect::Event { extra_from: None, .. } => None,
    }
}
