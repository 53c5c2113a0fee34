//! The self-contained HTML trend page (see the module doc of [`super`]).

use std::fmt::Write;

use super::charts::{rpo_chart, rto_chart, timeline};
use super::text::*;
use crate::rehearse::history::DrillRecord;

/// The page's Content-Security-Policy: nothing may load, inline style only.
pub(crate) const CSP_META: &str = r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">"#;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1150px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px}\
table{border-collapse:collapse;font-size:13px}\
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right;vertical-align:top}\
td{white-space:nowrap}td.w{white-space:normal}\
.t{text-align:left}.pass{color:#1b7a1b}.fail{color:#b00020;font-weight:bold}\
svg text{font-size:11px;fill:#333}p.none{color:#666}";

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
