//! The trend's charts, inline SVG: the RTO per step and the RPO over the drills, and the last
//! drill's timeline.

use std::fmt::Write;

use super::text::*;
use crate::rehearse::history::DrillRecord;

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

/// Width of every chart, in pixels.
pub(super) const W: f64 = 1100.0;

/// A chart's plotting area inside its SVG.
pub(super) struct Plot {
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

    /// Opens a chart's `<svg>`: the page's width, `below` higher than the plot's bottom (room for
    /// the labels and the legend), its `id` and `label` (what a screen reader says of it).
    fn open_svg(&self, p: &mut String, id: &str, below: f64, label: &str) {
        let height = self.bottom() + below;
        let _ = writeln!(
            p,
            r#"<svg id="{id}" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img" aria-label="{label}">"#
        );
    }

    /// The centre of drill `i`'s slot of `n`, and the width of its bar.
    fn slot(&self, i: usize, n: usize) -> (f64, f64) {
        let slot = self.width / n as f64;
        (self.left + slot * (i as f64 + 0.5), (slot * 0.6).min(56.0))
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about five ticks up to `max`.
pub(super) fn tick_step(max: f64) -> f64 {
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
pub(super) enum Side {
    Left,
    Right,
}

/// Draws a y axis from 0 to a round value at or over `max`, with its title; returns that top.
pub(super) fn y_axis(out: &mut String, plot: &Plot, max: f64, title: &str, side: Side) -> f64 {
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
pub(super) fn x_labels(out: &mut String, plot: &Plot, drills: &[&DrillRecord]) {
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

pub(super) enum Mark<'a> {
    Swatch(&'a str),
    Line { colour: &'a str, dashed: bool },
}

/// A legend row (wrapping) from `y`; returns the y under it.
pub(super) fn legend(out: &mut String, mut y: f64, items: &[(String, Mark)]) -> f64 {
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
pub(super) fn step_names<'a>(drills: &[&'a DrillRecord]) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for s in drills.iter().flat_map(|d| &d.steps) {
        if !names.contains(&s.step.as_str()) {
            names.push(&s.step);
        }
    }
    names
}

pub(super) fn step_colour(names: &[&str], step: &str) -> &'static str {
    let i = names.iter().position(|n| *n == step).unwrap_or(0);
    STEP_COLOURS[i % STEP_COLOURS.len()]
}

/// Stacked bars of each drill's steps, the RTO (audit to validation) marked on each, the budget
/// dashed, a failed drill marked ✗.
pub(super) fn rto_chart(p: &mut String, drills: &[&DrillRecord]) {
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
    plot.open_svg(p, "rto-chart", 90.0, "RTO per step over the drills");
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
pub(super) fn rpo_chart(p: &mut String, drills: &[&DrillRecord]) {
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
    plot.open_svg(p, "rpo-chart", 72.0, "RPO over the drills");
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
pub(super) fn timeline(p: &mut String, d: &DrillRecord) {
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
    plot.open_svg(p, "timeline-chart", 66.0, "The last drill's steps over time");
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
