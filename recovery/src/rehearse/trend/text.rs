//! Times and text of the trend: parsing the records' times, durations, counts and HTML escaping.

use chrono::{DateTime, Utc};

use crate::rehearse::history::DrillRecord;

pub(super) fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

pub(super) fn unix_seconds(s: &str) -> Option<f64> {
    parse_time(s).map(|t| t.timestamp_millis() as f64 / 1000.0)
}

/// Oldest first: by start time, then drill id (a start time that does not parse sorts first).
pub(super) fn in_time_order(records: &[DrillRecord]) -> Vec<&DrillRecord> {
    let mut v: Vec<&DrillRecord> = records.iter().collect();
    v.sort_by_cached_key(|r| (parse_time(&r.started_at), r.started_at.clone(), r.drill_id.clone()));
    v
}

/// A drill's start as two label lines (day, time of day), for the charts' x axes.
pub(super) fn when(r: &DrillRecord) -> (String, String) {
    match parse_time(&r.started_at) {
        Some(t) => (t.format("%Y-%m-%d").to_string(), t.format("%H:%M").to_string()),
        None => (clip(&r.started_at, 16), String::new()),
    }
}

/// A unit for durations up to `max_s` seconds: its name and its length in seconds.
pub(super) fn time_unit(max_s: f64) -> (&'static str, f64) {
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

pub(super) fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        return format!("{:.0} ms", seconds * 1000.0);
    }
    let (unit, len) = time_unit(seconds);
    format!("{:.1} {unit}", seconds / len)
}

pub(super) fn ms(ms: u64) -> String {
    duration(ms as f64 / 1000.0)
}

// ---- text ----------------------------------------------------------------------------------

/// HTML escaping, for element text and double- or single-quoted attribute values alike.
pub(super) fn esc(s: &str) -> String {
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
pub(super) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n.saturating_sub(1)).collect::<String>() + "…"
    }
}

pub(super) fn count(n: u64) -> String {
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

pub(super) fn bytes(n: u64) -> String {
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

pub(super) fn verdict_html(r: &DrillRecord) -> String {
    let class = if r.ok { "pass" } else { "fail" };
    format!(
        "<span class=\"{class}\" title=\"{}\">{}</span>",
        esc(&r.verdict),
        esc(&clip(&r.verdict, 120))
    )
}
