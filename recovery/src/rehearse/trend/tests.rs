//! Tests of the drills' trend ([`super`]): the metrics against a strict parser of the
//! Prometheus text format written here (promtool is not in the sandbox), the page's structure
//! (nothing it could load, every record's text escaped), and the page in headless Chromium: a
//! screenshot that shows the charts drawn, and a net log with no request that leaves the page.
//!
//! Chromium: `apt-get install -y chromium` (sandbox/test.sh installs it). A missing Chromium
//! fails the test; TIDEMARK_SKIP_CHROMIUM=1 skips it explicitly.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{
    CSP_META, RPO_POSITIONS_COLOUR, RPO_SECONDS_COLOUR, STEP_COLOURS, STEP_FAILED_COLOUR, STEP_OK_COLOUR, html, metrics,
};
use crate::rehearse::history::{DrillRecord, RecordCheck, RecordStep};

// ---- records -------------------------------------------------------------------------------

fn step(step: &str, start_ms: u64, ms: u64, ok: bool, detail: &str) -> RecordStep {
    RecordStep {
        step: step.into(),
        start_ms,
        ms,
        ok,
        detail: detail.into(),
    }
}

fn check(check: &str, ok: bool, detail: &str) -> RecordCheck {
    RecordCheck {
        check: check.into(),
        ok,
        detail: detail.into(),
    }
}

/// A passing drill of `source` that started at `started` and took `scale` times the base times.
fn passing(id: &str, source: &str, started: &str, finished: &str, scale: u64) -> DrillRecord {
    let times = [
        ("scratch", 300),
        ("audit", 4_000),
        ("choose", 700),
        ("seed", 9_000),
        ("replay", 14_000),
    ];
    let mut steps = Vec::new();
    let mut at = 0;
    for (name, ms) in times {
        steps.push(step(name, at, ms * scale, true, "done"));
        at += ms * scale;
    }
    steps.push(step("validate", at, 6_000 * scale, true, "reference matches"));
    at += 6_000 * scale;
    steps.push(step("cleanup", at, 500, true, "scratch table dropped"));
    DrillRecord {
        format_version: 1,
        drill_id: id.into(),
        started_at: started.into(),
        finished_at: finished.into(),
        tidemark_version: "0.1.0".into(),
        source: source.into(),
        journal: "s3://journal/orders".into(),
        ok: true,
        verdict: "pass".into(),
        rto_ms: (4_000 + 700 + 9_000 + 14_000 + 6_000) * scale,
        rto_budget_ms: Some(120_000),
        rpo_positions: Some(1_000 * scale),
        rpo_seconds: Some(3_600.0 * scale as f64),
        rows: 10_000_000,
        events_replayed: 1_000_000,
        bytes_read: 3 << 30,
        peak_memory_bytes: 900 << 20,
        trusted_snapshot_id: Some(42),
        trusted_position: Some(9_000_000),
        h: Some(10_000_000),
        steps,
        checks: vec![
            check("chain", true, "positions 1..=10000000"),
            check("route", true, "generation 7"),
        ],
    }
}

/// Two passing drills of `prod.orders`, then a newest one whose replay failed.
fn history() -> Vec<DrillRecord> {
    let a = passing("d1", "prod.orders", "2026-11-19T03:00:00Z", "2026-11-19T03:12:30Z", 1);
    let b = passing("d2", "prod.orders", "2026-11-26T03:00:00Z", "2026-11-26T03:10:45.5Z", 2);
    let mut c = passing("d3", "prod.orders", "2026-12-03T03:00:00Z", "2026-12-03T03:14:00Z", 2);
    c.ok = false;
    c.verdict = "step replay failed: the journal's oldest events were deleted".into();
    let replay = c.steps.iter_mut().find(|s| s.step == "replay").unwrap();
    replay.ok = false;
    replay.detail = "positions 1..=200 removed by retention; oldest held 201".into();
    c.steps.retain(|s| s.step != "validate");
    c.rto_ms = 40_000;
    c.checks
        .push(check("journal reaches the snapshot", false, "oldest held 201 > 101"));
    vec![b, c, a] // not in time order: the trend orders them
}

// ---- the Prometheus text format ------------------------------------------------------------

#[derive(Debug)]
struct Exposition {
    /// Family name → its TYPE.
    types: HashMap<String, String>,
    helps: HashSet<String>,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Exposition {
    /// The value of the one sample of `name` with exactly these labels.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.samples
            .iter()
            .find(|(n, l, _)| n == name && *l == want)
            .map(|(_, _, v)| *v)
    }
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with("__")
}

/// A sample value as Prometheus parses it (Go's ParseFloat: decimals, exponents, NaN, ±Inf).
fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => return Ok(f64::NAN),
        "+Inf" | "Inf" => return Ok(f64::INFINITY),
        "-Inf" => return Ok(f64::NEG_INFINITY),
        _ => {}
    }
    let ok_chars = s
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    let has_digit = s.chars().any(|c| c.is_ascii_digit());
    match s.parse::<f64>() {
        Ok(v) if ok_chars && has_digit => Ok(v),
        _ => Err(format!("{s:?} is not a float")),
    }
}

/// `{name="value",…}` from `s` (which starts with `{`); returns the labels and the rest.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = &s[1..];
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("a label without =")?;
        let name = &rest[..eq];
        if !is_label_name(name) {
            return Err(format!("{name:?} is not a label name"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("a label value that is not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("an unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("escape \\{:?} in a label value", other.map(|(_, c)| c))),
                },
                Some((_, '\n')) => return Err("a raw newline in a label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err("labels not separated by ,".into());
        }
    }
}

/// Parses `text` by the text format's rules, strictly: names and label names by their regexes,
/// quoted and escaped label values, float values, no timestamps (the textfile collector refuses
/// them), HELP and TYPE (once each) before their family's samples, a family's samples together,
/// no series twice, the last line ended by a newline.
fn parse_exposition(text: &str) -> Result<Exposition, String> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the last line does not end with a newline".into());
    }
    let mut e = Exposition {
        types: HashMap::new(),
        helps: HashSet::new(),
        samples: Vec::new(),
    };
    let mut sampled: HashSet<String> = HashSet::new();
    let mut series = HashSet::new();
    let mut current: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let at = |m: String| format!("line {}: {m}: {line:?}", i + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let words: Vec<&str> = comment.trim_start().splitn(3, ' ').collect();
            match words.as_slice() {
                ["HELP", name, help] => {
                    if !is_metric_name(name) {
                        return Err(at("not a metric name".into()));
                    }
                    if help.replace("\\\\", "").replace("\\n", "").contains('\\') {
                        return Err(at("a HELP escape other than \\\\ and \\n".into()));
                    }
                    if sampled.contains(*name) || !e.helps.insert(name.to_string()) {
                        return Err(at("HELP after the family's samples, or twice".into()));
                    }
                }
                ["TYPE", name, kind] => {
                    if !is_metric_name(name) {
                        return Err(at("not a metric name".into()));
                    }
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(kind) {
                        return Err(at("unknown type".into()));
                    }
                    if sampled.contains(*name) || e.types.insert(name.to_string(), kind.to_string()).is_some() {
                        return Err(at("TYPE after the family's samples, or twice".into()));
                    }
                }
                ["HELP" | "TYPE", ..] => return Err(at("incomplete HELP or TYPE".into())),
                _ => {} // a comment
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..name_end];
        if !is_metric_name(name) {
            return Err(at("not a metric name".into()));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(at)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let value = rest
            .strip_prefix(' ')
            .ok_or_else(|| at("no space before the value".into()))?;
        if value.contains(' ') {
            return Err(at("a timestamp, or junk after the value".into()));
        }
        let value = parse_value(value).map_err(at)?;
        if !e.types.contains_key(name) {
            return Err(at("a sample before its family's TYPE".into()));
        }
        if current.as_deref() != Some(name) && !sampled.insert(name.to_string()) {
            return Err(at("the family's samples are not together".into()));
        }
        current = Some(name.to_string());
        if !series.insert((name.to_string(), labels.clone())) {
            return Err(at("the same series twice".into()));
        }
        e.samples.push((name.to_string(), labels, value));
    }
    Ok(e)
}

#[test]
fn the_parser_rejects_what_the_text_format_forbids() {
    let good = "# HELP x_y An \\\\ help.\n# TYPE x_y gauge\nx_y{a=\"q\\\"\\\\\\n\",b=\"\"} -1.5e3\nx_y 0\n";
    let e = parse_exposition(good).unwrap();
    assert_eq!(e.value("x_y", &[("a", "q\"\\\n"), ("b", "")]), Some(-1500.0));
    let bad = [
        ("# TYPE x gauge\nx 1", "no final newline"),
        ("# TYPE 1x gauge\n1x 1\n", "metric name"),
        ("# TYPE x-y gauge\nx-y 1\n", "metric name"),
        ("# TYPE x gauge\nx{1a=\"v\"} 1\n", "label name"),
        ("# TYPE x gauge\nx{__a=\"v\"} 1\n", "reserved label name"),
        ("# TYPE x gauge\nx{a=v} 1\n", "unquoted label value"),
        ("# TYPE x gauge\nx{a=\"v} 1\n", "unterminated label value"),
        ("# TYPE x gauge\nx{a=\"\\t\"} 1\n", "bad escape"),
        ("# TYPE x gauge\nx{a=\"v\",a=\"w\"} 1\n", "label twice"),
        ("# TYPE x gauge\nx{a=\"v\" b=\"w\"} 1\n", "labels not separated"),
        ("# TYPE x gauge\nx 1.2.3\n", "value"),
        ("# TYPE x gauge\nx one\n", "value"),
        ("# TYPE x gauge\nx inf\n", "value"),
        ("# TYPE x gauge\nx 1 1700000000000\n", "timestamp"),
        ("x 1\n# TYPE x gauge\n", "sample before TYPE"),
        ("# TYPE x gauge\n# TYPE x gauge\nx 1\n", "TYPE twice"),
        ("# TYPE x gauge\nx 1\n# HELP x late\n", "HELP after samples"),
        ("# TYPE x gauge\n# TYPE x counter\nx 1\n", "TYPE twice"),
        ("# TYPE x nonsense\nx 1\n", "unknown type"),
        ("# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n", "duplicate series"),
        (
            "# TYPE x gauge\n# TYPE y gauge\nx 1\ny 1\nx{a=\"1\"} 2\n",
            "family split",
        ),
        ("# HELP x a \\t b\n# TYPE x gauge\nx 1\n", "HELP escape"),
    ];
    for (text, why) in bad {
        assert!(parse_exposition(text).is_err(), "accepted ({why}): {text:?}");
    }
}

#[test]
fn the_metrics_parse_and_tell_a_failed_newest_drill() {
    let text = metrics(&history());
    let e = parse_exposition(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    for (name, kind) in &e.types {
        assert_eq!(kind, "gauge", "{name}");
        assert!(e.helps.contains(name), "{name} has no HELP");
    }
    let src = [("source", "prod.orders")];
    let v = |name: &str| e.value(name, &src).unwrap_or_else(|| panic!("no {name}\n{text}"));
    assert_eq!(v("tidemark_drill_ok"), 0.0);
    assert_eq!(v("tidemark_drill_records"), 3.0);
    // The newest passing drill is d2 (2026-11-26T03:10:45.5Z), not the failed d3.
    assert_eq!(v("tidemark_drill_last_success_timestamp_seconds"), 1_795_662_645.5);
    assert_eq!(v("tidemark_drill_last_run_timestamp_seconds"), 1_796_267_640.0);
    assert_eq!(v("tidemark_drill_rpo_positions"), 2_000.0);
    assert_eq!(v("tidemark_drill_rpo_seconds"), 7_200.0);
    assert_eq!(v("tidemark_drill_rto_budget_seconds"), 120.0);
    assert_eq!(v("tidemark_drill_checks_failed"), 1.0);
    assert_eq!(v("tidemark_drill_rows"), 10_000_000.0);
    assert_eq!(v("tidemark_drill_events_replayed"), 1_000_000.0);
    assert_eq!(v("tidemark_drill_read_bytes"), (3u64 << 30) as f64);
    assert_eq!(v("tidemark_drill_peak_memory_bytes"), (900u64 << 20) as f64);
    let rto = |step: &str| {
        e.value(
            "tidemark_drill_rto_seconds",
            &[("source", "prod.orders"), ("step", step)],
        )
    };
    assert_eq!(rto("total"), Some(40.0));
    assert_eq!(rto("replay"), Some(28.0));
    assert_eq!(rto("seed"), Some(18.0));
    assert_eq!(rto("cleanup"), Some(0.5));
    assert_eq!(rto("validate"), None, "the newest drill never validated");
    let info = [
        ("source", "prod.orders"),
        ("drill_id", "d3"),
        ("tidemark_version", "0.1.0"),
    ];
    assert_eq!(e.value("tidemark_drill_info", &info), Some(1.0));

    // The check can fail: the same text with a broken line added is refused.
    for broken in [
        "tidemark_drill_ok{source=\"prod.orders\"} 1\n",
        "tidemark_drill_ok{source=\"a\"b\"} 1\n",
        "tidemark-drill-ok 1\n",
    ] {
        assert!(
            parse_exposition(&format!("{text}{broken}")).is_err(),
            "accepted {broken:?}"
        );
    }
}

#[test]
fn the_metrics_escape_label_values_and_say_0_when_no_drill_passed() {
    let odd = "s3://b/m \"v2\"\\x\nz";
    let mut r = passing("d9", odd, "2026-12-01T00:00:00Z", "2026-12-01T00:05:00Z", 1);
    r.ok = false;
    r.steps[0].step = "sc\"ratch\\".into();
    r.peak_memory_bytes = 0;
    r.rpo_positions = None;
    let mut records = history();
    records.push(r);
    let text = metrics(&records);
    let e = parse_exposition(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    let src = [("source", odd)];
    assert_eq!(e.value("tidemark_drill_ok", &src), Some(0.0));
    assert_eq!(
        e.value("tidemark_drill_last_success_timestamp_seconds", &src),
        Some(0.0)
    );
    assert_eq!(
        e.value(
            "tidemark_drill_rto_seconds",
            &[("source", odd), ("step", "sc\"ratch\\")]
        ),
        Some(0.3)
    );
    assert_eq!(
        e.value("tidemark_drill_peak_memory_bytes", &src),
        None,
        "0 is unreadable, not 0 bytes"
    );
    assert_eq!(e.value("tidemark_drill_rpo_positions", &src), None);
    // The other source is still there, its own.
    assert_eq!(
        e.value("tidemark_drill_records", &[("source", "prod.orders")]),
        Some(3.0)
    );

    let empty = parse_exposition(&metrics(&[])).unwrap();
    assert_eq!(
        empty.value("tidemark_drill_last_success_timestamp_seconds", &[]),
        Some(0.0)
    );
    assert_eq!(empty.value("tidemark_drill_records", &[]), Some(0.0));
}

// ---- the page's structure ------------------------------------------------------------------

/// What in `page` could load something: a URL of a network scheme anywhere; in its markup
/// (every record's text is escaped, so each `<` opens a real tag) an element that loads, embeds,
/// links or runs something, an attribute that loads (`src=`, `href=` to anything but `#`, …), an
/// event handler, CSS `url(` or `@import` in a style attribute or the `<style>` element.
fn external_references(page: &str) -> Vec<String> {
    const ELEMENTS: [&str; 16] = [
        "script",
        "link",
        "iframe",
        "frame",
        "object",
        "embed",
        "img",
        "image",
        "use",
        "foreignobject",
        "audio",
        "video",
        "source",
        "base",
        "form",
        "picture",
    ];
    const ATTRIBUTES: [&str; 11] = [
        "src",
        "srcset",
        "action",
        "formaction",
        "poster",
        "background",
        "data",
        "xlink:href",
        "ping",
        "cite",
        "manifest",
    ];
    let lower = page.to_ascii_lowercase();
    let mut found = Vec::new();
    for scheme in ["http://", "https://", "ftp://", "ws://", "wss://"] {
        if lower.contains(scheme) {
            found.push(scheme.to_string());
        }
    }
    let css = |text: &str| text.contains("url(") || text.contains("@import");
    if let Some(start) = lower.find("<style>") {
        let end = lower[start..].find("</style>").map_or(lower.len(), |e| start + e);
        if css(&lower[start..end]) {
            found.push("url( or @import in <style>".into());
        }
    }
    for tag in lower.split('<').skip(1) {
        let (name, attributes) = tag_attributes(tag);
        if ELEMENTS.contains(&name) {
            found.push(format!("<{name}>"));
        }
        for (attribute, value) in attributes {
            let loads = ATTRIBUTES.contains(&attribute)
                || (attribute == "href" && value != "#")
                || attribute.starts_with("on")
                || (attribute == "style" && css(value));
            if loads {
                found.push(format!("{attribute}= in <{name}>"));
            }
        }
    }
    found
}

/// The name and attributes of the tag that `tag` starts with (the text after a `<`); values are
/// double-quoted, single-quoted or bare.
fn tag_attributes(tag: &str) -> (&str, Vec<(&str, &str)>) {
    let end = |s: &str| {
        s.find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .unwrap_or(s.len())
    };
    let name = &tag[..end(tag)];
    let mut rest = &tag[name.len()..];
    let mut attributes = Vec::new();
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
        if rest.is_empty() || rest.starts_with('>') {
            return (name, attributes);
        }
        let n = rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '/')
            .unwrap_or(rest.len());
        let attribute = &rest[..n];
        rest = rest[n..].trim_start();
        let mut value = "";
        if let Some(r) = rest.strip_prefix('=') {
            let r = r.trim_start();
            let (v, after) = match r.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let close = r[1..].find(q).map_or(r.len(), |i| i + 1);
                    (&r[1..close], r.get(close + 1..).unwrap_or(""))
                }
                _ => r.split_at(end(r)),
            };
            value = v;
            rest = after;
        }
        attributes.push((attribute, value));
        if n == 0 && value.is_empty() {
            rest = &rest[rest.chars().next().map_or(0, char::len_utf8)..]; // a stray character
        }
    }
}

#[test]
fn the_page_is_self_contained_and_escapes_the_records() {
    let mut records = history();
    records[1].source = "<script>alert(1)</script>".into();
    records[1].verdict = "failed: \"<img src=x onerror=alert(2)>\" & more".into();
    records[1].checks[0].detail = "<b>bold</b>".into();
    records[1].steps[0].detail = "</svg><svg onload=alert(3)>".into();
    let page = html(&records);
    assert_eq!(external_references(&page), Vec::<String>::new());
    assert!(page.contains(CSP_META), "no CSP meta");
    let head_end = page.find("</head>").unwrap();
    assert!(
        page.find(CSP_META).unwrap() < page.find("<style>").unwrap().min(head_end),
        "the CSP comes first"
    );
    for raw in ["<script", "<img", "<b>", "<svg onload", "</svg><svg"] {
        assert!(!page.contains(raw), "{raw} is not escaped");
    }
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("&lt;b&gt;bold&lt;/b&gt;"));
    assert!(page.contains("&lt;/svg&gt;&lt;svg onload=alert(3)&gt;"));
    assert!(page.contains("&quot;&lt;img src=x onerror=alert(2)&gt;&quot; &amp; more"));
    for (open, close) in [
        ("<svg", "</svg>"),
        ("<table", "</table>"),
        ("<html", "</html>"),
        ("<title>", "</title>"),
    ] {
        assert_eq!(page.matches(open).count(), page.matches(close).count(), "{open}");
    }
    for id in [
        "rto-chart",
        "rpo-chart",
        "timeline-chart",
        "id=\"drills\"",
        "id=\"checks\"",
    ] {
        assert!(page.contains(id), "no {id}");
    }
    // The check can fail.
    let leaky = page.replace(
        "</body>",
        "<img src=\"http://127.0.0.1:9/x.png\"><a href=\"https://x\">x</a><p style=\"background:url(x.png)\"></p></body>",
    );
    let found = external_references(&leaky);
    for what in [
        "http://",
        "https://",
        "<img>",
        "src= in <img>",
        "href= in <a>",
        "style= in <p>",
    ] {
        assert!(found.contains(&what.to_string()), "{what} not found: {found:?}");
    }
}

#[test]
fn the_page_says_when_there_is_no_drill_and_draws_one() {
    let empty = html(&[]);
    assert!(empty.contains(CSP_META));
    assert!(empty.contains("No drill has been recorded"));
    assert!(!empty.contains("<svg"));
    assert_eq!(external_references(&empty), Vec::<String>::new());

    let one = html(&history()[2..]);
    assert_eq!(one.matches("<svg").count(), 3);
    assert!(one.contains("d1") && one.contains(">pass<"));
    assert_eq!(external_references(&one), Vec::<String>::new());
    // No RPO, no step, no check: said, not drawn.
    let mut bare = history().remove(2);
    (bare.rpo_positions, bare.rpo_seconds) = (None, None);
    bare.steps.clear();
    bare.checks.clear();
    let page = html(&[bare]);
    assert!(page.contains("No drill recorded an RPO"));
    assert!(page.contains("recorded no step"));
    assert!(page.contains("recorded no check"));
}

// ---- headless Chromium ---------------------------------------------------------------------

fn find_chromium() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("TIDEMARK_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// What Chromium left of a page: its screenshot and its net log.
struct Rendered {
    png: Vec<u8>,
    net_log: String,
}

/// Opens `page` (written to `dir/name.html`) in headless Chromium with its own profile.
fn render(chromium: &Path, dir: &Path, name: &str, page: &str) -> Rendered {
    let file = dir.join(format!("{name}.html"));
    let (shot, log) = (dir.join(format!("{name}.png")), dir.join(format!("{name}-netlog.json")));
    std::fs::write(&file, page).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            // Less of the browser's own traffic (it is told apart below, not trusted away).
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-features=NetworkTimeServiceQuerying,Translate,MediaRouter,OptimizationHints",
            // Exact colours in the screenshot.
            "--force-color-profile=srgb",
            "--hide-scrollbars",
            "--window-size=1200,1600",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join(format!("{name}-profile")).display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--log-net-log={}", log.display()))
        .arg(format!("file://{}", file.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", chromium.display()));
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {name} within 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = reader.join().unwrap();
    assert!(status.success(), "chromium failed on {name} ({status}): {stderr}");
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot of {name} ({e}): {stderr}"));
    let net_log = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("no net log of {name} ({e}): {stderr}"));
    Rendered { png, net_log }
}

/// The pixels of a PNG as RGB, for what Chromium writes (8-bit RGB or RGBA, not interlaced).
/// Written here rather than taken from the `png` crate: as a dev-dependency that crate turns on
/// flate2 and miniz_oxide features that rebuild parquet, DataFusion and iceberg for the tests.
fn decode_png(bytes: &[u8]) -> Result<(usize, usize, Vec<[u8; 3]>), String> {
    let chunks = bytes.strip_prefix(b"\x89PNG\r\n\x1a\n".as_slice()).ok_or("not a PNG")?;
    let (mut at, mut header, mut data) = (0, None, Vec::new());
    loop {
        let len = chunks.get(at..at + 4).ok_or("truncated")?;
        let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
        let kind = chunks.get(at + 4..at + 8).ok_or("truncated")?;
        let body = chunks.get(at + 8..at + 8 + len).ok_or("truncated chunk")?;
        match kind {
            b"IHDR" => header = Some(body.to_vec()),
            b"IDAT" => data.extend_from_slice(body),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len; // length, type, body, CRC
    }
    let h = header.ok_or("no IHDR")?;
    let width = u32::from_be_bytes(h[0..4].try_into().unwrap()) as usize;
    let height = u32::from_be_bytes(h[4..8].try_into().unwrap()) as usize;
    let bpp = match (h[8], h[9], h[12]) {
        (8, 2, 0) => 3,
        (8, 6, 0) => 4,
        other => return Err(format!("unsupported PNG (depth, colour type, interlace) {other:?}")),
    };
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(data.as_slice())
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let stride = width * bpp;
    if raw.len() != height * (stride + 1) {
        return Err(format!("{} bytes of image data for {width}×{height}", raw.len()));
    }
    let (mut prev, mut cur) = (vec![0u8; stride], vec![0u8; stride]);
    let mut pixels = Vec::with_capacity(width * height);
    for line in raw.chunks(stride + 1) {
        for i in 0..stride {
            let a = if i >= bpp { cur[i - bpp] } else { 0 };
            let (b, c) = (prev[i], if i >= bpp { prev[i - bpp] } else { 0 });
            let predicted = match line[0] {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((a as u16 + b as u16) / 2) as u8,
                4 => {
                    let p = a as i16 + b as i16 - c as i16;
                    let (pa, pb, pc) = ((p - a as i16).abs(), (p - b as i16).abs(), (p - c as i16).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => return Err(format!("filter {f}")),
            };
            cur[i] = line[1 + i].wrapping_add(predicted);
        }
        pixels.extend(cur.chunks(bpp).map(|p| [p[0], p[1], p[2]]));
        std::mem::swap(&mut prev, &mut cur);
    }
    Ok((width, height, pixels))
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// The charts are drawn: enough pixels of exactly each chart's colours (the steps' stacks, the
/// RPO's bars and markers, the timeline's finished and failed steps).
fn charts_drawn(png: &[u8]) -> Result<(), String> {
    let (width, height, pixels) = decode_png(png)?;
    if (width, height) != (1200, 1600) {
        return Err(format!("a {width}×{height} screenshot"));
    }
    let mut counts: HashMap<[u8; 3], usize> = HashMap::new();
    for p in pixels {
        *counts.entry(p).or_default() += 1;
    }
    let n = |hex: &str| counts.get(&rgb(hex)).copied().unwrap_or(0);
    let stacks: Vec<usize> = STEP_COLOURS.iter().map(|c| n(c)).collect();
    let mut missing = Vec::new();
    // The least wanted is about a third of what the test's records draw at 1200×1600.
    if stacks.iter().filter(|&&c| c >= 100).count() < 5 || stacks.iter().sum::<usize>() < 5_000 {
        missing.push(format!("the RTO chart's stacks (pixels per step colour {stacks:?})"));
    }
    for (what, colour, least) in [
        ("the RPO chart's bars", RPO_POSITIONS_COLOUR, 9_000),
        ("the RPO chart's markers", RPO_SECONDS_COLOUR, 400),
        ("the timeline's finished steps", STEP_OK_COLOUR, 1_500),
        ("the timeline's failed step", STEP_FAILED_COLOUR, 1_500),
    ] {
        if n(colour) < least {
            missing.push(format!("{what} ({} pixels of {colour}, {least} wanted)", n(colour)));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("not drawn: {}", missing.join("; ")))
    }
}

/// The requests in a Chromium net log that leave the page (any scheme but `file:`); returns the
/// browser's own requests, which are told apart and left aside: no initiator ("not an origin"),
/// not in the page's (`file://`) network partition, and to Google's own hosts (Chromium's
/// account and service probes, which no flag turns off).
fn no_request_leaves(net_log: &str) -> Result<Vec<String>, String> {
    let log: serde_json::Value =
        serde_json::from_str(net_log).map_err(|e| format!("the net log does not parse: {e}"))?;
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .ok_or("the net log has no URL_REQUEST_START_JOB event type")?;
    let events = log["events"].as_array().ok_or("the net log has no events")?;
    let (mut leaving, mut browser) = (Vec::new(), Vec::new());
    for params in events
        .iter()
        // The job's end (phase 2) carries no url.
        .filter(|e| e["type"].as_u64() == Some(start_job) && e["phase"].as_u64() != Some(2))
        .map(|e| &e["params"])
    {
        let url = params["url"].as_str().ok_or("a request without a url")?;
        if url.starts_with("file:") {
            continue;
        }
        let host = url
            .split("://")
            .nth(1)
            .unwrap_or("")
            .split(['/', ':', '?'])
            .next()
            .unwrap_or("");
        let google = ["google.com", "gvt1.com", "googleapis.com", "gstatic.com"]
            .iter()
            .any(|d| host == *d || host.ends_with(&format!(".{d}")));
        let from_browser = params["initiator"].as_str() == Some("not an origin")
            && !params["network_isolation_key"]
                .as_str()
                .unwrap_or("file")
                .contains("file:")
            && google;
        if from_browser {
            browser.push(url.to_string())
        } else {
            leaving.push(url.to_string())
        }
    }
    if leaving.is_empty() {
        Ok(browser)
    } else {
        Err(format!("requests leave the page: {leaving:?}"))
    }
}

#[test]
fn the_page_shows_its_charts_in_headless_chromium_and_loads_nothing() {
    if std::env::var("TIDEMARK_SKIP_CHROMIUM").is_ok_and(|v| v == "1") {
        eprintln!("skipped (TIDEMARK_SKIP_CHROMIUM=1): the trend page is not rendered in Chromium");
        return;
    }
    let chromium = find_chromium().unwrap_or_else(|| {
        panic!(
            "chromium is not installed: `apt-get install -y chromium` (bash sandbox/test.sh installs it), \
             or set TIDEMARK_SKIP_CHROMIUM=1 to skip this test"
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let page = render(&chromium, dir.path(), "trend", &html(&history()));
    charts_drawn(&page.png).unwrap();
    let browser = no_request_leaves(&page.net_log).unwrap();
    eprintln!("the browser's own requests, left aside: {browser:?}");

    // The checks can fail: a page without charts (no drill yet), its CSP taken out, that loads
    // an image from the network.
    let leaky = html(&[]).replace(CSP_META, "").replace(
        "</body>",
        "<img src=\"http://127.0.0.1:9/x.png\" width=\"8\" height=\"8\" alt=\"\"></body>",
    );
    let leaky = render(&chromium, dir.path(), "leaky", &leaky);
    let err = charts_drawn(&leaky.png).unwrap_err();
    assert!(err.contains("RTO chart") && err.contains("timeline"), "{err}");
    let err = no_request_leaves(&leaky.net_log).unwrap_err();
    assert!(err.contains("http://127.0.0.1:9/x.png"), "{err}");
}
