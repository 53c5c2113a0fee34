//! The house plan, checked (issue 31): no module of the workspace imports another that imports it
//! back, directly or through others, and no source file (tests aside) runs past about 600 lines.
//!
//! The check reads the source text itself, with no compiler help, so its rules are written here:
//! - a module is a file (`mod.rs`, `lib.rs` and `main.rs` stand for their folder or crate);
//! - an import is a path in a `use` or in code that starts with `crate::`, `super::`, `self::`
//!   or the name of a child module, resolved to the deepest module it names;
//! - `pub use` lines are a table of contents, not imports: a path through a re-export resolves to
//!   the module the item comes from;
//! - test modules (`tests.rs`, `*_tests.rs`, `#[cfg(test)] mod … { … }` blocks) and comments are
//!   left out: a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::{files_ending, workspace};

/// "About 600 lines": a file a reader takes in at once; a little over is not a failure.
const MAX_LINES: usize = 620;

type Module = Vec<String>;

fn is_test_name(name: &str) -> bool {
    name == "tests" || name == "test" || name == "test_support" || name.ends_with("_tests") || name.ends_with("_test")
}

fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The text with comments, string and char literals blanked (lengths kept, newlines kept).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && b[j + 1..].iter().take(hashes).filter(|&&h| h == b'#').count() == hashes {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &x in &b[i..j.min(b.len())] {
                blank(&mut out, x);
            }
            i = j;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            for &x in &b[i..(j + 1).min(b.len())] {
                blank(&mut out, x);
            }
            i = j + 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&x| x == b'\'').map(|p| i + 2 + p)
            } else {
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 1 + ch_len)
            };
            match end {
                Some(e) => {
                    for &x in &b[i..=e] {
                        blank(&mut out, x);
                    }
                    i = e + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The code without `#[cfg(test)] mod name { … }` blocks.
fn without_test_blocks(code: &str) -> String {
    let mut s = code.to_string();
    while let Some(at) = s.find("#[cfg(test)]") {
        let rest = &s[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let after_vis = trimmed
            .strip_prefix("pub(crate)")
            .or_else(|| trimmed.strip_prefix("pub"))
            .map_or(trimmed, str::trim_start);
        let is_block = after_vis.starts_with("mod ")
            && after_vis[4..]
                .trim_start()
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .is_some()
            && after_vis.find('{').is_some_and(|b| !after_vis[..b].contains(';'));
        if !is_block {
            // `#[cfg(test)] mod tests;` (a test file, skipped by name) or an item: drop the attribute.
            s.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        }
        let open = at + s[at..].find('{').unwrap();
        let mut depth = 0;
        let mut end = s.len();
        for (k, ch) in s[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        s.replace_range(at..end, "");
    }
    s
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every `use` statement: (is a re-export, each full path with braces expanded, its byte range).
fn use_statements(code: &str) -> Vec<(bool, Vec<String>, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut line_start = 0;
    for line in code.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let start = line_start + (line.len() - trimmed.len());
        line_start += line.len();
        let (public, rest) = if let Some(r) = trimmed.strip_prefix("pub") {
            let r = r.trim_start();
            let r = if r.starts_with('(') {
                r[r.find(')').map_or(0, |p| p + 1)..].trim_start()
            } else {
                r
            };
            (true, r)
        } else {
            (false, trimmed)
        };
        if !rest.starts_with("use ") {
            continue;
        }
        let body_at = start + (trimmed.len() - rest.len()) + 4;
        let Some(semi) = code[body_at..].find(';') else {
            continue;
        };
        let text = code[body_at..body_at + semi]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.push((public, expand(&text), start..body_at + semi + 1));
    }
    out
}

fn expand(text: &str) -> Vec<String> {
    let Some(open) = text.find('{') else {
        let path = text.split(" as ").next().unwrap_or(text);
        return vec![path.chars().filter(|c| !c.is_whitespace()).collect()];
    };
    let Some(close) = text.rfind('}') else {
        return Vec::new();
    };
    let prefix: String = text[..open].chars().filter(|c| !c.is_whitespace()).collect();
    let inner = &text[open + 1..close];
    let mut items = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for ch in inner.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    items.push(cur);
    let mut out = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        for e in expand(item) {
            if e == "self" {
                out.push(prefix.trim_end_matches(':').to_string());
            } else {
                out.push(format!("{prefix}{e}"));
            }
        }
    }
    out
}

/// Paths in code starting with `crate::`, `super::`, `self::` or one of `children::`.
fn code_paths(code: &str, children: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    let mut k = 0;
    while k < chars.len() {
        let (at, ch) = chars[k];
        let boundary = k == 0 || {
            let p = chars[k - 1].1;
            !ident_char(p) && p != ':'
        };
        if boundary && ident_char(ch) {
            let end = code[at..]
                .find(|c: char| !(ident_char(c) || c == ':'))
                .map_or(code.len(), |e| at + e);
            let path = code[at..end].trim_end_matches(':');
            let first = path.split("::").next().unwrap_or("");
            if path.contains("::") && (matches!(first, "crate" | "super" | "self") || children.contains(first)) {
                out.push(path.to_string());
            }
            while k < chars.len() && chars[k].0 < end {
                k += 1;
            }
            continue;
        }
        k += 1;
    }
    out
}

struct Tree {
    modules: BTreeSet<Module>,
    reexports: BTreeMap<(Module, String), Module>,
}

impl Tree {
    fn resolve(&self, current: &Module, path: &str) -> Option<Module> {
        let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        let mut base: Module = match parts.first().copied() {
            Some("crate") => {
                parts.remove(0);
                Vec::new()
            }
            Some("super") => {
                let mut b = current.clone();
                while parts.first() == Some(&"super") {
                    b.pop();
                    parts.remove(0);
                }
                b
            }
            Some("self") => {
                parts.remove(0);
                current.clone()
            }
            Some(first) if self.modules.contains(&child(current, first)) => current.clone(),
            _ => return None,
        };
        let mut best = self.modules.contains(&base).then(|| base.clone());
        let mut taken = 0;
        for (i, part) in parts.iter().enumerate() {
            base.push((*part).to_string());
            if self.modules.contains(&base) {
                best = Some(base.clone());
                taken = i + 1;
            }
        }
        let best = best?;
        if taken < parts.len()
            && let Some(target) = self.reexports.get(&(best.clone(), parts[taken].to_string()))
        {
            return Some(target.clone());
        }
        Some(best)
    }
}

fn child(m: &Module, name: &str) -> Module {
    let mut c = m.clone();
    c.push(name.to_string());
    c
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "(crate root)".to_string()
    } else {
        m.join("::")
    }
}

/// The import graph of one crate's source folder, test modules left out.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = files_ending(src, "rs");
    let code: BTreeMap<Module, String> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            (module_of(src, f), without_test_blocks(&code_only(&text)))
        })
        .collect();
    let mut tree = Tree {
        modules: code.keys().cloned().collect(),
        reexports: BTreeMap::new(),
    };
    for _ in 0..3 {
        for (m, text) in &code {
            for (public, paths, _) in use_statements(text) {
                if !public {
                    continue;
                }
                for p in paths {
                    if let Some(target) = tree.resolve(m, &p).filter(|t| t != m) {
                        let item = p.rsplit("::").next().unwrap_or("").to_string();
                        tree.reexports.insert((m.clone(), item), target);
                    }
                }
            }
        }
    }
    let mut edges = BTreeMap::new();
    for (m, text) in &code {
        if m.last().is_some_and(|n| is_test_name(n)) {
            continue;
        }
        let children: BTreeSet<String> = tree
            .modules
            .iter()
            .filter(|c| c.len() == m.len() + 1 && c.starts_with(m))
            .map(|c| c.last().unwrap().clone())
            .collect();
        let mut body = text.clone();
        let mut targets = BTreeSet::new();
        for (public, paths, range) in use_statements(text).into_iter().rev() {
            body.replace_range(range, "");
            if public {
                continue;
            }
            targets.extend(paths.iter().filter_map(|p| tree.resolve(m, p)));
        }
        targets.extend(code_paths(&body, &children).iter().filter_map(|p| tree.resolve(m, p)));
        targets.retain(|t| t != m && !t.last().is_some_and(|n| is_test_name(n)));
        edges.insert(m.clone(), targets);
    }
    edges
}

/// Strongly connected sets of more than one module (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let Some((w, _)) = s.edges.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                set.push(w.clone());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.out.push(set);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

const CRATES: [&str; 4] = ["schemas/src", "journal/src", "router/src", "recovery/src"];

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let mut report = String::new();
    for krate in CRATES {
        let edges = graph(&workspace().join(krate));
        assert!(!edges.is_empty(), "{krate}: no modules read");
        for set in circles(&edges) {
            report.push_str(&format!(
                "{krate}: {}\n",
                set.iter().map(name).collect::<Vec<_>>().join(", ")
            ));
            for a in &set {
                for b in edges[a].iter().filter(|b| set.contains(b)) {
                    report.push_str(&format!("    {} -> {}\n", name(a), name(b)));
                }
            }
        }
    }
    assert!(
        report.is_empty(),
        "import circles (move the shared part below both):\n{report}"
    );
}

#[test]
fn the_checker_sees_a_circle_through_a_child_and_not_through_a_re_export() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("apply")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod apply;\npub use apply::Error;\n").unwrap();
    // apply/mod.rs calls its child; the child uses the parent's error: a circle.
    std::fs::write(
        src.join("apply/mod.rs"),
        "mod unit;\nmod error;\npub use error::Error;\npub fn run() { unit::go(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("apply/unit.rs"),
        "use super::{Error as Failure}; // \"crate::x\"\npub fn go() {}\n",
    )
    .unwrap();
    std::fs::write(src.join("apply/error.rs"), "pub struct Error;\n").unwrap();
    // `super::Error` resolves through the re-export to apply::error: no circle.
    assert!(circles(&graph(src)).is_empty(), "{:?}", graph(src));
    // A shared helper defined in mod.rs and used by the child: a circle.
    std::fs::write(src.join("apply/unit.rs"), "pub fn go() { super::helper(); }\n").unwrap();
    std::fs::write(
        src.join("apply/mod.rs"),
        "mod unit;\npub fn helper() {}\npub fn run() { unit::go(); }\n#[cfg(test)]\nmod t { use crate::x::y; }\n",
    )
    .unwrap();
    let found = circles(&graph(src));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].iter().map(name).collect::<Vec<_>>(), ["apply", "apply::unit"]);
}

#[test]
fn no_source_file_runs_past_about_600_lines() {
    let mut long = Vec::new();
    for dir in CRATES
        .iter()
        .map(|c| workspace().join(c))
        .chain([workspace().join("recovery/benches")])
    {
        for f in files_ending(&dir, "rs") {
            let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
            if is_test_name(&stem) || f.components().any(|c| c.as_os_str() == "tests") {
                continue;
            }
            let lines = std::fs::read_to_string(&f).unwrap().lines().count();
            if lines > MAX_LINES {
                long.push(format!(
                    "{} ({lines} lines)",
                    f.strip_prefix(workspace()).unwrap_or(&f).display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "split by meaning, each under about 600 lines:\n{}",
        long.join("\n")
    );
}
