//! The drills' trend: a self-contained HTML page and Prometheus textfile metrics, drawn from the
//! records of [`crate::rehearse::history`].
//!
//! The page ([`html`]) is one file that loads nothing: its charts are inline SVG drawn here (no
//! script), its style is inline, and a Content-Security-Policy meta (`default-src 'none'`) stops
//! any load that a record's text could smuggle in; every text taken from a record is HTML-escaped
//! as well. It shows the RTO per step and the RPO over the past drills, the last drill's timeline,
//! the drills, and the last drill's checks. It reads no clock: the same records draw the same page.
//!
//! The metrics ([`metrics`]) are gauges in the Prometheus text format, for node_exporter's textfile
//! collector (no timestamps: the collector refuses them). Each series carries the drilled source
//! (`source` label) and describes that source's newest drill, except
//! `tidemark_drill_last_success_timestamp_seconds`, which is 0 (never absent) when no drill of the
//! source passed, so that one rule `time() - … > 8d` alerts on a failed, a missed and a never
//! passing weekly drill alike. Names and meanings: docs/formats.md.

use std::collections::BTreeMap;
use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::history::DrillRecord;

/// The page's Content-Security-Policy: nothing may load, inline style only.
pub(crate) const CSP_META: &str = r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">"#;
/// The steps' colours (the RTO chart's stacks), in order of the steps' first appearance.
pub(crate) const STEP_COLOURS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
];
/// The RPO chart: positions (bars) and seconds (line and markers).
pub(crate) const RPO_POSITIONS_COLOUR: &str = "#2f4b7c";
pub(crate) const RPO_SECONDS_COLOUR: &str = "#d45087";
/// The timeline: a step that finished, a step that failed.
pub(crate) const STEP_OK_COLOUR: &str = "#3a923a";
pub(crate) const STEP_FAILED_COLOUR: &str = "#d62728";
/// The mark over a failed drill's bar in the RTO chart.
const DRILL_FAILED_MARK: &str = "#b00020";

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1150px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px}\
table{border-collapse:collapse;font-size:13px}\
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right;vertical-align:top}\
td{white-space:nowrap}td.w{white-space:normal}\
.t{text-align:left}.pass{color:#1b7a1b}.fail{color:#b00020;font-weight:bold}\
svg text{font-size:11px;fill:#333}p.none{color:#666}";

/// Width of every chart, in pixels.
const W: f64 = 1100.0;

/// The self-contained HTML page (one file, no external resource): see the module doc.
pub fn html(records: &[DrillRecord]) -> String {
    let drills = in_time_order(records);
    let mut p = String::new();
    p.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    p.push_str(CSP_META);
    let _ = write!(
        p,
        "\n<meta name=\"referrer\" content=\"no-referrer\">\n<title>tidemark drill trend</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>tidemark drill trend</h1>\n"
    );
    let Some(last) = drills.last() else {
        p.push_str(
            "<p class=\"none\">No drill has been recorded in this history yet: \
             <code>tidemark drill --source-table … --history …</code> adds one record per drill.</p>\n",
        );
        p.push_str("</body>\n</html>\n");
        return p;
    };
    summary(&mut p, &drills);
    p.push_str("<h2>RTO per step</h2>\n");
    rto_chart(&mut p, &drills);
    p.push_str("<h2>RPO</h2>\n");
    rpo_chart(&mut p, &drills);
    let _ = writeln!(
        p,
        "<h2>The last drill's timeline</h2>\n<p>Drill {} started {}: {}.</p>",
        esc(&last.drill_id),
        esc(&last.started_at),
        verdict_html(last)
    );
    timeline(&mut p, last);
    p.push_str("<h2>Drills</h2>\n");
    drills_table(&mut p, &drills);
    p.push_str("<h2>The last drill's checks</h2>\n");
    checks_table(&mut p, last);
    p.push_str("</body>\n</html>\n");
    p
}

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

// ---- times ---------------------------------------------------------------------------------

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

fn unix_seconds(s: &str) -> Option<f64> {
    parse_time(s).map(|t| t.timestamp_millis() as f64 / 1000.0)
}

/// Oldest first: by start time, then drill id (a start time that does not parse sorts first).
fn in_time_order(records: &[DrillRecord]) -> Vec<&DrillRecord> {
    let mut v: Vec<&DrillRecord> = records.iter().collect();
    v.sort_by_cached_key(|r| (parse_time(&r.started_at), r.started_at.clone(), r.drill_id.clone()));
    v
}

/// A drill's start as two label lines (day, time of day), for the charts' x axes.
fn when(r: &DrillRecord) -> (String, String) {
    match parse_time(&r.started_at) {
        Some(t) => (t.format("%Y-%m-%d").to_string(), t.format("%H:%M").to_string()),
        None => (clip(&r.started_at, 16), String::new()),
    }
}

/// A unit for durations up to `max_s` seconds: its name and its length in seconds.
fn time_unit(max_s: f64) -> (&'static str, f64) {
    if max_s >= 2.0 * 86400.0 {
        ("d", 86400.0)
    } else if max_s >= 2.0 * 3600.0 {
        ("h", 3600.0)
    } else if max_s >= 120.0 {
        ("min", 60.0)
    } else {
        ("s", 1.0)
    }
}

fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        return format!("{:.0} ms", seconds * 1000.0);
    }
    let (unit, len) = time_unit(seconds);
    format!("{:.1} {unit}", seconds / len)
}

fn ms(ms: u64) -> String {
    duration(ms as f64 / 1000.0)
}

// ---- text ----------------------------------------------------------------------------------

/// HTML escaping, for element text and double- or single-quoted attribute values alike.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// At most `n` characters of `s` (not escaped).
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n.saturating_sub(1)).collect::<String>() + "…"
    }
}

fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn verdict_html(r: &DrillRecord) -> String {
    let class = if r.ok { "pass" } else { "fail" };
    format!(
        "<span class=\"{class}\" title=\"{}\">{}</span>",
        esc(&r.verdict),
        esc(&clip(&r.verdict, 120))
    )
}

// ---- page sections -------------------------------------------------------------------------

fn summary(p: &mut String, drills: &[&DrillRecord]) {
    let mut sources: Vec<&str> = drills.iter().map(|d| d.source.as_str()).collect();
    sources.sort_unstable();
    sources.dedup();
    let (first, last) = (drills[0], drills[drills.len() - 1]);
    let passed = drills.iter().filter(|d| d.ok).count();
    let _ = writeln!(
        p,
        "<p>Source{} {} (journal {}). {} drill{} from {} to {}, {passed} passed.</p>",
        if sources.len() == 1 { "" } else { "s" },
        sources
            .iter()
            .map(|s| format!("<code>{}</code>", esc(s)))
            .collect::<Vec<_>>()
            .join(", "),
        esc(&last.journal),
        drills.len(),
        if drills.len() == 1 { "" } else { "s" },
        esc(&first.started_at),
        esc(&last.started_at),
    );
}

/// A chart's plotting area inside its SVG.
struct Plot {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Plot {
    fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// The y of `v` on an axis from 0 to `top`.
    fn y(&self, v: f64, top: f64) -> f64 {
        self.bottom() - self.height * (v / top).clamp(0.0, 1.0)
    }

    /// The centre of drill `i`'s slot of `n`, and the width of its bar.
    fn slot(&self, i: usize, n: usize) -> (f64, f64) {
        let slot = self.width / n as f64;
        (self.left + slot * (i as f64 + 0.5), (slot * 0.6).min(56.0))
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about five ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Left,
    Right,
}

/// Draws a y axis from 0 to a round value at or over `max`, with its title; returns that top.
fn y_axis(out: &mut String, plot: &Plot, max: f64, title: &str, side: Side) -> f64 {
    let step = tick_step(max);
    let top = ((max / step).ceil() * step).max(step);
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    let (x, anchor, dx) = match side {
        Side::Left => (plot.left, "end", -6.0),
        Side::Right => (plot.left + plot.width, "start", 6.0),
    };
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let y = plot.y(v, top);
        if side == Side::Left {
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/>"##,
                plot.left,
                plot.left + plot.width
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}">{v:.decimals$}</text>"#,
            x + dx,
            y + 4.0
        );
        v += step;
    }
    let tx = match side {
        Side::Left => 14.0,
        Side::Right => W - 8.0,
    };
    let ty = plot.top + plot.height / 2.0;
    let _ = writeln!(
        out,
        r#"<text x="{tx:.1}" y="{ty:.1}" text-anchor="middle" transform="rotate(-90 {tx:.1} {ty:.1})">{}</text>"#,
        esc(title)
    );
    let _ = writeln!(
        out,
        r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/>"##,
        plot.top,
        plot.bottom()
    );
    top
}

/// The drills' start times under their slots (at most about twelve labels).
fn x_labels(out: &mut String, plot: &Plot, drills: &[&DrillRecord]) {
    let n = drills.len();
    let every = n.div_ceil(12).max(1);
    let _ = writeln!(
        out,
        r##"<line x1="{:.1}" y1="{b:.1}" x2="{:.1}" y2="{b:.1}" stroke="#999"/>"##,
        plot.left,
        plot.left + plot.width,
        b = plot.bottom()
    );
    for (i, d) in drills.iter().enumerate().step_by(every) {
        let (cx, _) = plot.slot(i, n);
        let (day, time) = when(d);
        let _ = writeln!(
            out,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}<tspan x="{cx:.1}" dy="13">{}</tspan></text>"#,
            plot.bottom() + 16.0,
            esc(&day),
            esc(&time)
        );
    }
}

enum Mark<'a> {
    Swatch(&'a str),
    Line { colour: &'a str, dashed: bool },
}

/// A legend row (wrapping) from `y`; returns the y under it.
fn legend(out: &mut String, mut y: f64, items: &[(String, Mark)]) -> f64 {
    let mut x = 70.0;
    for (label, mark) in items {
        let width = 34.0 + label.chars().count() as f64 * 6.2;
        if x + width > W - 10.0 && x > 70.0 {
            x = 70.0;
            y += 18.0;
        }
        match mark {
            Mark::Swatch(c) => {
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{:.1}" width="14" height="10" fill="{c}"/>"#,
                    y - 9.0
                );
            }
            Mark::Line { colour, dashed } => {
                let dash = if *dashed { r#" stroke-dasharray="5 3""# } else { "" };
                let _ = write!(
                    out,
                    r#"<line x1="{x:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="{colour}" stroke-width="2"{dash}/>"#,
                    x + 16.0,
                    yy = y - 4.0
                );
            }
        }
        let _ = writeln!(out, r#"<text x="{:.1}" y="{y:.1}">{}</text>"#, x + 20.0, esc(label));
        x += width;
    }
    y + 18.0
}

/// Every step name of the drills, in order of first appearance (the colours' order).
fn step_names<'a>(drills: &[&'a DrillRecord]) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for s in drills.iter().flat_map(|d| &d.steps) {
        if !names.contains(&s.step.as_str()) {
            names.push(&s.step);
        }
    }
    names
}

fn step_colour(names: &[&str], step: &str) -> &'static str {
    let i = names.iter().position(|n| *n == step).unwrap_or(0);
    STEP_COLOURS[i % STEP_COLOURS.len()]
}

/// Stacked bars of each drill's steps, the RTO (audit to validation) marked on each, the budget
/// dashed, a failed drill marked ✗.
fn rto_chart(p: &mut String, drills: &[&DrillRecord]) {
    let names = step_names(drills);
    let max_ms = drills
        .iter()
        .map(|d| {
            d.steps
                .iter()
                .map(|s| s.ms)
                .sum::<u64>()
                .max(d.rto_ms)
                .max(d.rto_budget_ms.unwrap_or(0))
        })
        .max()
        .unwrap_or(0);
    let (unit, len) = time_unit(max_ms as f64 / 1000.0);
    let v = |ms: u64| ms as f64 / 1000.0 / len;
    let plot = Plot {
        left: 70.0,
        top: 24.0,
        width: W - 100.0,
        height: 230.0,
    };
    let height = plot.bottom() + 90.0;
    let _ = writeln!(
        p,
        r#"<svg id="rto-chart" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" aria-label="RTO per step over the drills">"#
    );
    let top = y_axis(p, &plot, v(max_ms), &format!("time ({unit})"), Side::Left);
    let n = drills.len();
    for (i, d) in drills.iter().enumerate() {
        let (cx, bw) = plot.slot(i, n);
        let x = cx - bw / 2.0;
        let mut stacked = 0u64;
        for s in d.steps.iter().filter(|s| s.ms > 0) {
            let (y0, y1) = (plot.y(v(stacked), top), plot.y(v(stacked + s.ms), top));
            let _ = writeln!(
                p,
                r#"<rect x="{x:.1}" y="{y1:.1}" width="{bw:.1}" height="{:.1}" fill="{}"><title>{} {}: {}</title></rect>"#,
                y0 - y1,
                step_colour(&names, &s.step),
                esc(&d.started_at),
                esc(&s.step),
                ms(s.ms)
            );
            stacked += s.ms;
        }
        let y = plot.y(v(d.rto_ms), top);
        let _ = writeln!(
            p,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#111" stroke-width="3"><title>RTO {}</title></line>"##,
            x - 4.0,
            x + bw + 4.0,
            ms(d.rto_ms)
        );
        if let Some(budget) = d.rto_budget_ms {
            let yb = plot.y(v(budget), top);
            let _ = writeln!(
                p,
                r##"<line x1="{:.1}" y1="{yb:.1}" x2="{:.1}" y2="{yb:.1}" stroke="#555" stroke-width="2" stroke-dasharray="5 3"><title>budget {}</title></line>"##,
                x - 8.0,
                x + bw + 8.0,
                ms(budget)
            );
        }
        if !d.ok {
            let ymark = plot.y(v(stacked), top).min(y) - 6.0;
            let _ = writeln!(
                p,
                r#"<text x="{cx:.1}" y="{ymark:.1}" text-anchor="middle" fill="{DRILL_FAILED_MARK}" style="fill:{DRILL_FAILED_MARK};font-size:14px">✗<title>{}</title></text>"#,
                esc(&d.verdict)
            );
        }
    }
    x_labels(p, &plot, drills);
    let mut items: Vec<(String, Mark)> = names
        .iter()
        .map(|n| (n.to_string(), Mark::Swatch(step_colour(&names, n))))
        .collect();
    items.push((
        "RTO (audit to validation)".into(),
        Mark::Line {
            colour: "#111",
            dashed: false,
        },
    ));
    if drills.iter().any(|d| d.rto_budget_ms.is_some()) {
        items.push((
            "budget".into(),
            Mark::Line {
                colour: "#555",
                dashed: true,
            },
        ));
    }
    legend(p, plot.bottom() + 56.0, &items);
    p.push_str("</svg>\n");
}

/// The RPO of each drill: journal positions beyond the trusted snapshot (bars, left axis) and
/// the trusted snapshot's age (line, right axis; left when no drill has positions).
fn rpo_chart(p: &mut String, drills: &[&DrillRecord]) {
    let pos_max = drills.iter().filter_map(|d| d.rpo_positions).max();
    let sec_max = drills
        .iter()
        .filter_map(|d| d.rpo_seconds)
        .filter(|s| s.is_finite())
        .reduce(f64::max);
    if pos_max.is_none() && sec_max.is_none() {
        p.push_str("<p class=\"none\">No drill recorded an RPO (none got as far as a trusted snapshot).</p>\n");
        return;
    }
    let plot = Plot {
        left: 70.0,
        top: 24.0,
        width: W - 150.0,
        height: 200.0,
    };
    let height = plot.bottom() + 72.0;
    let _ = writeln!(
        p,
        r#"<svg id="rpo-chart" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" aria-label="RPO over the drills">"#
    );
    let n = drills.len();
    let mut items = Vec::new();
    if let Some(max) = pos_max {
        let top = y_axis(p, &plot, max as f64, "journal positions", Side::Left);
        for (i, d) in drills.iter().enumerate() {
            let Some(positions) = d.rpo_positions else { continue };
            let (cx, bw) = plot.slot(i, n);
            let y = plot.y(positions as f64, top);
            let _ = writeln!(
                p,
                r#"<rect x="{:.1}" y="{y:.1}" width="{bw:.1}" height="{:.1}" fill="{RPO_POSITIONS_COLOUR}"><title>{}: {} positions</title></rect>"#,
                cx - bw / 2.0,
                plot.bottom() - y,
                esc(&d.started_at),
                count(positions)
            );
        }
        items.push((
            "RPO: journal positions beyond the trusted snapshot".to_string(),
            Mark::Swatch(RPO_POSITIONS_COLOUR),
        ));
    }
    if let Some(max) = sec_max {
        let (unit, len) = time_unit(max);
        let side = if pos_max.is_some() { Side::Right } else { Side::Left };
        let top = y_axis(p, &plot, max / len, &format!("snapshot age ({unit})"), side);
        let mut path = String::new();
        let mut pen_down = false;
        for (i, d) in drills.iter().enumerate() {
            let Some(seconds) = d.rpo_seconds.filter(|s| s.is_finite()) else {
                pen_down = false;
                continue;
            };
            let (cx, _) = plot.slot(i, n);
            let y = plot.y(seconds / len, top);
            let _ = write!(path, "{}{cx:.1} {y:.1} ", if pen_down { "L" } else { "M" });
            pen_down = true;
            let _ = writeln!(
                p,
                r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{RPO_SECONDS_COLOUR}"><title>{}: {}</title></rect>"#,
                cx - 5.0,
                y - 5.0,
                esc(&d.started_at),
                duration(seconds)
            );
        }
        let _ = writeln!(
            p,
            r#"<path d="{}" fill="none" stroke="{RPO_SECONDS_COLOUR}" stroke-width="2.5"/>"#,
            path.trim_end()
        );
        items.push((
            "RPO: age of the trusted snapshot at the drill's start".to_string(),
            Mark::Swatch(RPO_SECONDS_COLOUR),
        ));
    }
    x_labels(p, &plot, drills);
    legend(p, plot.bottom() + 56.0, &items);
    p.push_str("</svg>\n");
}

/// The drill's steps as a Gantt chart (start and length), a failed step in red with its error.
fn timeline(p: &mut String, d: &DrillRecord) {
    if d.steps.is_empty() {
        p.push_str("<p class=\"none\">The last drill recorded no step.</p>\n");
        return;
    }
    let end_ms = d.steps.iter().map(|s| s.start_ms + s.ms).max().unwrap_or(0).max(1);
    let (unit, len) = time_unit(end_ms as f64 / 1000.0);
    let v = |ms: u64| ms as f64 / 1000.0 / len;
    let row = 26.0;
    let plot = Plot {
        left: 110.0,
        top: 10.0,
        width: W - 110.0 - 300.0,
        height: row * d.steps.len() as f64,
    };
    let height = plot.bottom() + 66.0;
    let _ = writeln!(
        p,
        r#"<svg id="timeline-chart" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" aria-label="The last drill's steps over time">"#
    );
    let step = tick_step(v(end_ms));
    let right = (v(end_ms) / step).ceil() * step;
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    let x_of = |value: f64| plot.left + plot.width * (value / right).clamp(0.0, 1.0);
    let mut t = 0.0;
    while t <= right + step / 2.0 {
        let x = x_of(t);
        let _ = writeln!(
            p,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{t:.decimals$}</text>"##,
            plot.top,
            plot.bottom(),
            plot.bottom() + 16.0
        );
        t += step;
    }
    let _ = writeln!(
        p,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time from the drill's start ({unit})</text>"#,
        plot.left + plot.width / 2.0,
        plot.bottom() + 34.0
    );
    for (i, s) in d.steps.iter().enumerate() {
        let y = plot.top + row * i as f64 + 4.0;
        let x = x_of(v(s.start_ms));
        let w = (x_of(v(s.start_ms + s.ms)) - x).max(2.0);
        let colour = if s.ok { STEP_OK_COLOUR } else { STEP_FAILED_COLOUR };
        let note = if s.ok {
            ms(s.ms)
        } else {
            format!("{} — failed: {}", ms(s.ms), clip(&s.detail, 60))
        };
        let _ = writeln!(
            p,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{colour}"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}">{}</text>"#,
            plot.left - 8.0,
            y + row / 2.0 + 1.0,
            esc(&clip(&s.step, 16)),
            row - 8.0,
            esc(&s.step),
            esc(&s.detail),
            x + w + 6.0,
            y + row / 2.0 + 1.0,
            esc(&note)
        );
    }
    let items = [
        ("step finished".to_string(), Mark::Swatch(STEP_OK_COLOUR)),
        ("step failed".to_string(), Mark::Swatch(STEP_FAILED_COLOUR)),
    ];
    legend(p, plot.bottom() + 56.0, &items);
    p.push_str("</svg>\n");
}

fn drills_table(p: &mut String, drills: &[&DrillRecord]) {
    let several = drills.iter().any(|d| d.source != drills[0].source);
    p.push_str("<table id=\"drills\">\n<thead><tr><th class=\"t\">started</th><th class=\"t\">drill</th>");
    if several {
        p.push_str("<th class=\"t\">source</th>");
    }
    p.push_str(
        "<th class=\"t\">verdict</th><th>RTO</th><th>budget</th><th>RPO positions</th><th>RPO age</th>\
         <th>rows</th><th>events replayed</th><th>bytes read</th><th>peak memory</th><th class=\"t\">tidemark</th></tr></thead>\n<tbody>\n",
    );
    for d in drills.iter().rev() {
        let _ = write!(
            p,
            "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td>",
            esc(&d.started_at),
            esc(&d.drill_id)
        );
        if several {
            let _ = write!(p, "<td class=\"t\">{}</td>", esc(&d.source));
        }
        let _ = writeln!(
            p,
            "<td class=\"t w\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            verdict_html(d),
            ms(d.rto_ms),
            d.rto_budget_ms.map(ms).unwrap_or_else(|| "–".into()),
            d.rpo_positions.map(count).unwrap_or_else(|| "–".into()),
            d.rpo_seconds.map(duration).unwrap_or_else(|| "–".into()),
            count(d.rows),
            count(d.events_replayed),
            bytes(d.bytes_read),
            if d.peak_memory_bytes > 0 {
                bytes(d.peak_memory_bytes)
            } else {
                "–".into()
            },
            esc(&d.tidemark_version),
        );
    }
    p.push_str("</tbody>\n</table>\n");
}

fn checks_table(p: &mut String, d: &DrillRecord) {
    if d.checks.is_empty() {
        p.push_str("<p class=\"none\">The last drill recorded no check.</p>\n");
        return;
    }
    p.push_str("<table id=\"checks\">\n<thead><tr><th class=\"t\">check</th><th class=\"t\">held</th><th class=\"t\">detail</th></tr></thead>\n<tbody>\n");
    for c in &d.checks {
        let (class, mark) = if c.ok { ("pass", "✓ yes") } else { ("fail", "✗ no") };
        let _ = writeln!(
            p,
            "<tr><td class=\"t\">{}</td><td class=\"t {class}\">{mark}</td><td class=\"t w\">{}</td></tr>",
            esc(&c.check),
            esc(&c.detail)
        );
    }
    p.push_str("</tbody>\n</table>\n");
}
