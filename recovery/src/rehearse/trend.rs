//! The drills' trend: a self-contained HTML page and Prometheus textfile metrics, drawn from the
//! records of [`crate::rehearse::history`].

use super::history::DrillRecord;

/// The self-contained HTML page (one file, no external resource).
pub fn html(records: &[DrillRecord]) -> String {
    let _ = records;
    todo!("trend page")
}

/// Prometheus textfile metrics of the newest drill (and the newest passing one).
pub fn metrics(records: &[DrillRecord]) -> String {
    let _ = records;
    todo!("metrics")
}
