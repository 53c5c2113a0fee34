//! The Prometheus textfile metrics of the drills (see the module doc of [`super`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::text::{in_time_order, unix_seconds};
use crate::rehearse::history::DrillRecord;

/// Prometheus textfile metrics of each source's newest drill (and newest passing one): see the
/// module doc and docs/formats.md.
pub fn metrics(records: &[DrillRecord]) -> String {
    let mut by_source: BTreeMap<&str, Vec<&DrillRecord>> = BTreeMap::new();
    for r in in_time_order(records) {
        by_source.entry(&r.source).or_default().push(r);
    }
    let mut m = Exposition::default();
    if by_source.is_empty() {
        m.int("tidemark_drill_records", &[], 0);
        m.int("tidemark_drill_last_success_timestamp_seconds", &[], 0);
    }
    for (source, drills) in &by_source {
        let src = [("source", *source)];
        let newest = drills.last().expect("a source has a drill");
        m.int("tidemark_drill_records", &src, drills.len() as u64);
        if let Some(t) = unix_seconds(&newest.finished_at).or_else(|| unix_seconds(&newest.started_at)) {
            m.float("tidemark_drill_last_run_timestamp_seconds", &src, t);
        }
        let last_success = drills
            .iter()
            .rev()
            .filter(|d| d.ok)
            .find_map(|d| unix_seconds(&d.finished_at).or_else(|| unix_seconds(&d.started_at)));
        m.float(
            "tidemark_drill_last_success_timestamp_seconds",
            &src,
            last_success.unwrap_or(0.0),
        );
        m.int("tidemark_drill_ok", &src, u64::from(newest.ok));
        for (step, step_ms) in step_totals(newest) {
            m.float(
                "tidemark_drill_rto_seconds",
                &[("source", source), ("step", step)],
                step_ms as f64 / 1000.0,
            );
        }
        m.float(
            "tidemark_drill_rto_seconds",
            &[("source", source), ("step", "total")],
            newest.rto_ms as f64 / 1000.0,
        );
        if let Some(budget) = newest.rto_budget_ms {
            m.float("tidemark_drill_rto_budget_seconds", &src, budget as f64 / 1000.0);
        }
        if let Some(positions) = newest.rpo_positions {
            m.int("tidemark_drill_rpo_positions", &src, positions);
        }
        if let Some(seconds) = newest.rpo_seconds {
            m.float("tidemark_drill_rpo_seconds", &src, seconds);
        }
        m.int(
            "tidemark_drill_checks_failed",
            &src,
            newest.checks.iter().filter(|c| !c.ok).count() as u64,
        );
        m.int("tidemark_drill_rows", &src, newest.rows);
        m.int("tidemark_drill_events_replayed", &src, newest.events_replayed);
        m.int("tidemark_drill_read_bytes", &src, newest.bytes_read);
        if newest.peak_memory_bytes > 0 {
            m.int("tidemark_drill_peak_memory_bytes", &src, newest.peak_memory_bytes);
        }
        let info = [
            ("source", *source),
            ("drill_id", newest.drill_id.as_str()),
            ("tidemark_version", newest.tidemark_version.as_str()),
        ];
        m.int("tidemark_drill_info", &info, 1);
    }
    m.render()
}

// ---- metrics -------------------------------------------------------------------------------

/// Each family's HELP text; a family missing here is a bug.
fn help(family: &str) -> &'static str {
    match family {
        "tidemark_drill_records" => "Drill records of the source in the drill history.",
        "tidemark_drill_last_run_timestamp_seconds" => "When the newest drill of the source finished (Unix seconds).",
        "tidemark_drill_last_success_timestamp_seconds" => {
            "When the newest passing drill of the source finished (Unix seconds); 0 when no drill passed."
        }
        "tidemark_drill_ok" => "1 when the newest drill passed (every check held and every step finished), else 0.",
        "tidemark_drill_rto_seconds" => {
            "Seconds of each step of the newest drill; step=\"total\" is its RTO (audit to validation)."
        }
        "tidemark_drill_rto_budget_seconds" => "The newest drill's --rto-budget in seconds (absent without one).",
        "tidemark_drill_rpo_positions" => {
            "Journal positions beyond the trusted snapshot's at the newest drill (what a recovery would replay)."
        }
        "tidemark_drill_rpo_seconds" => "Seconds from the trusted snapshot's commit to the newest drill's start.",
        "tidemark_drill_checks_failed" => "Checks of the newest drill that did not hold.",
        "tidemark_drill_rows" => "Rows of the newest drill's recovered (scratch) table.",
        "tidemark_drill_events_replayed" => "Journal events the newest drill replayed.",
        "tidemark_drill_read_bytes" => "Bytes of the snapshot's data files the newest drill's seed and replay read.",
        "tidemark_drill_peak_memory_bytes" => "Peak resident memory of the newest drill (absent where unreadable).",
        "tidemark_drill_info" => "1, labelled with the newest drill's id and tidemark version.",
        other => panic!("metric family {other} has no HELP text"),
    }
}

/// Gauge families in order of their first sample, each family's samples together.
#[derive(Default)]
struct Exposition {
    families: Vec<(&'static str, Vec<String>)>,
}

impl Exposition {
    fn sample(&mut self, name: &'static str, labels: &[(&str, &str)], value: String) {
        let mut line = name.to_string();
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
                .collect();
            let _ = write!(line, "{{{}}}", pairs.join(","));
        }
        let _ = write!(line, " {value}");
        match self.families.iter_mut().find(|(n, _)| *n == name) {
            Some((_, lines)) => lines.push(line),
            None => self.families.push((name, vec![line])),
        }
    }

    fn int(&mut self, name: &'static str, labels: &[(&str, &str)], value: u64) {
        self.sample(name, labels, value.to_string());
    }

    fn float(&mut self, name: &'static str, labels: &[(&str, &str)], value: f64) {
        let text = if value.is_nan() {
            "NaN".to_string()
        } else if value.is_infinite() {
            (if value > 0.0 { "+Inf" } else { "-Inf" }).to_string()
        } else {
            format!("{value}")
        };
        self.sample(name, labels, text);
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for (name, lines) in &self.families {
            let help = help(name);
            let _ = writeln!(
                out,
                "# HELP {name} {}\n# TYPE {name} gauge",
                help.replace('\\', "\\\\").replace('\n', "\\n")
            );
            for line in lines {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// A label value as the text format quotes it: backslash, double quote and newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The drill's milliseconds per step name, in order of first appearance (a step that ran twice
/// counts once, with both runs: one series per step). A step named `total` is left out: the
/// label value is the RTO's.
fn step_totals(d: &DrillRecord) -> Vec<(&str, u64)> {
    let mut out: Vec<(&str, u64)> = Vec::new();
    for s in d.steps.iter().filter(|s| s.step != "total") {
        match out.iter_mut().find(|(n, _)| *n == s.step) {
            Some((_, ms)) => *ms += s.ms,
            None => out.push((&s.step, s.ms)),
        }
    }
    out
}
