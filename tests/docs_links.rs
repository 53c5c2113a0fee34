//! The documentation, checked (issue 31): every relative link of the README, `docs/`,
//! `runbooks/` and `schemas/` pages names a file that exists and, with `#anchor` into a Markdown
//! page, a heading of that page; and every page under `docs/` is reached from the README by
//! following links.
//!
//! The rules are GitHub's rendering, written here: a heading's anchor is its text in lower case,
//! with backticks and link targets dropped, every character but letters, digits, `-`, `_` and
//! spaces removed, and spaces turned into `-`; a second heading with the same anchor gets `-1`,
//! a third `-2`. Lines inside fenced code blocks and inside inline code are neither headings nor
//! links; links that name a scheme (`https:`, `mailto:`) are not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::support::{files_ending, workspace};

/// The lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The text without inline code spans.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// `(text, target)` of each `[text](target)` of a line.
fn links(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(close) = rest.find("](") {
        let open = rest[..close].rfind('[').map_or(0, |o| o + 1);
        let after = &rest[close + 2..];
        let Some(end) = after.find(')') else { break };
        out.push((rest[open..close].to_string(), after[..end].to_string()));
        rest = &after[end..];
    }
    out
}

fn slug(heading: &str) -> String {
    let mut text = heading.replace('`', "");
    for (label, target) in links(&text.clone()) {
        text = text.replace(&format!("[{label}]({target})"), &label);
    }
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 { base.clone() } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// `base/../x` as `x`, without asking the file system.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every relative link of `file`: (line, target as written, the file it names, its anchor).
fn relative_links(file: &Path) -> Vec<(usize, String, PathBuf, Option<String>)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for (n, line) in prose_lines(&text) {
        for (_, target) in links(&without_code(line)) {
            let target = target.split_whitespace().next().unwrap_or("").to_string();
            let scheme = target
                .split_once(':')
                .is_some_and(|(s, _)| s.chars().all(|c| c.is_ascii_alphabetic()));
            if target.is_empty() || scheme {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a.to_string())),
                None => (target.as_str(), None),
            };
            let named = if path.is_empty() {
                file.to_path_buf()
            } else {
                normal(&file.parent().unwrap().join(path))
            };
            out.push((n, target.clone(), named, anchor));
        }
    }
    out
}

fn pages(root: &Path) -> Vec<PathBuf> {
    let files = ["docs", "runbooks", "schemas"].map(|dir| files_ending(&root.join(dir), "md"));
    std::iter::once(root.join("README.md"))
        .chain(files.into_iter().flatten())
        .map(|f| normal(&f))
        .collect()
}

/// What is wrong with the links of the pages under `root`, a line each.
fn broken_links(root: &Path) -> Vec<String> {
    let root = normal(root);
    let mut wrong = Vec::new();
    for file in pages(&root) {
        for (line, target, named, anchor) in relative_links(&file) {
            let at = format!(
                "{}:{line}: {target}",
                file.strip_prefix(&root).unwrap_or(&file).display()
            );
            if !named.exists() {
                wrong.push(format!("{at}: no such file"));
            } else if let Some(anchor) = anchor.filter(|_| named.extension().is_some_and(|e| e == "md"))
                && !anchors(&std::fs::read_to_string(&named).unwrap()).contains(&anchor)
            {
                wrong.push(format!("{at}: no heading has this anchor"));
            }
        }
    }
    wrong
}

/// The pages under `docs/` that no chain of links from the README reaches.
fn unreached_docs(root: &Path) -> Vec<String> {
    let root = normal(root);
    let mut reached = BTreeSet::new();
    let mut todo = vec![root.join("README.md")];
    while let Some(file) = todo.pop() {
        if !reached.insert(file.clone()) || file.extension().is_none_or(|e| e != "md") || !file.is_file() {
            continue;
        }
        todo.extend(relative_links(&file).into_iter().map(|(_, _, named, _)| named));
    }
    files_ending(&root.join("docs"), "md")
        .into_iter()
        .map(|f| normal(&f))
        .filter(|f| !reached.contains(f))
        .map(|f| f.strip_prefix(&root).unwrap_or(&f).display().to_string())
        .collect()
}

#[test]
fn every_link_of_the_documentation_names_a_file_and_a_heading_that_exist() {
    let wrong = broken_links(&workspace());
    assert!(wrong.is_empty(), "links that lead nowhere:\n{}", wrong.join("\n"));
}

#[test]
fn every_page_under_docs_is_reached_from_the_readme() {
    let unreached = unreached_docs(&workspace());
    assert!(
        unreached.is_empty(),
        "pages no link from the README leads to:\n{}",
        unreached.join("\n")
    );
}

#[test]
fn the_checker_sees_a_missing_file_a_missing_heading_and_an_unreached_page() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs/runs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Tidemark\n[a](docs/a.md#the-merge-rules-issue-7) [b](docs/b.md) [gone](docs/gone.md)\n\
         `[code](docs/not-a-link.md)`\n```sh\n[fenced](docs/fenced.md)\n```\n[web](https://example.com/x)\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n## The merge rules (issue 7)\n## Twice\n## Twice\n[up](../README.md#tidemark) [2](#twice-1) [3](#twice-2)\n",
    )
    .unwrap();
    std::fs::write(root.join("docs/b.md"), "# B\n[runs](runs/one.md#nowhere)\n").unwrap();
    std::fs::write(root.join("docs/runs/one.md"), "# One\n").unwrap();
    std::fs::write(root.join("docs/lonely.md"), "# Lonely\n").unwrap();
    assert_eq!(
        broken_links(root),
        vec![
            "README.md:2: docs/gone.md: no such file".to_string(),
            "docs/a.md:5: #twice-2: no heading has this anchor".to_string(),
            "docs/b.md:2: runs/one.md#nowhere: no heading has this anchor".to_string(),
        ]
    );
    assert_eq!(unreached_docs(root), vec!["docs/lonely.md".to_string()]);
}
