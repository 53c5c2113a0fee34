//! Choosing a table's head ([`choose_head`]). "Newest by name" is wrong: a commit that lost its
//! catalog swap, or crashed before it, leaves a metadata file that may sort after the true head.
//! Every metadata file lists its predecessors in `metadata-log`, the last entry being the file it
//! was derived from. So:
//! 1. the candidates are the files that no other file names as a predecessor;
//! 2. each candidate's chain is walked back through the last `metadata-log` entry of each file;
//!    with a compare-and-swap catalog every published file derives from the previous published
//!    one and nothing derives from a stray, so the published head ends the longest chain, and a
//!    stray ends a chain that branches off it;
//! 3. when the longest chain is tied (a commit lost its swap against the head itself), a hint
//!    (the expected head, or the previous catalog pointer) decides; without one the table is
//!    refused rather than guessed.
//!
//! What cannot be seen from the files alone: a commit that wrote its metadata file based on the
//! true head and then crashed before its catalog swap looks exactly like a newer head, and is
//! chosen. Passing the recorded expected head as a hint does not override that choice; the
//! reason then says the hint is an ancestor.
//!
//! Which files are read to choose: `super::read` (the newest, and those its whole log does not
//! name; every file when anything is unusual).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::dr::warehouse::file_name;

/// The outcome of [`choose_head`]. Exactly one of `head` and `refused` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeadChoice {
    /// The key of the chosen head metadata file.
    pub head: Option<String>,
    /// Why this file (or why none): for the report.
    pub reason: String,
    /// Keys of files on no chosen chain, sorted.
    pub strays: Vec<String>,
    /// Why the table was refused.
    pub refused: Option<String>,
}

/// `NNNNN` of `NNNNN-<uuid>.metadata.json`.
pub(crate) fn version_of(name: &str) -> Option<u64> {
    name.split_once('-')?.0.parse().ok()
}

/// Predecessor file names of metadata file `name` in `metadata-log` order (oldest first),
/// without the file itself.
pub(crate) fn predecessor_names<'a>(name: &'a str, json: &'a Value) -> impl Iterator<Item = &'a str> {
    json.get("metadata-log")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("metadata-file").and_then(Value::as_str))
        .map(file_name)
        .filter(move |n| *n != name)
}

/// [`predecessor_names`], owned.
fn log_of(name: &str, json: &Value) -> Vec<String> {
    predecessor_names(name, json).map(str::to_string).collect()
}

/// Picks the head among one table's metadata files (`(key, json)`); `hint` is an expected head or
/// a previous catalog pointer (a key, a URL or a file name). See the module documentation.
pub fn choose_head(files: &[(String, Value)], hint: Option<&str>) -> HeadChoice {
    let names: Vec<&str> = files.iter().map(|(k, _)| file_name(k)).collect();
    let logs: Vec<Vec<String>> = files.iter().zip(&names).map(|((_, j), n)| log_of(n, j)).collect();
    let by_name: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let key = |i: usize| files[i].0.clone();

    let named: HashSet<&str> = logs.iter().flatten().map(String::as_str).collect();
    let candidates: Vec<usize> = (0..files.len()).filter(|i| !named.contains(names[*i])).collect();

    // Walks back through the last log entry of each file. A missing file (expired metadata) is
    // stepped over using the log of the last file that was found; a cycle ends the walk.
    let chain = |start: usize| -> Vec<String> {
        let mut chain = vec![names[start].to_string()];
        let mut seen: HashSet<String> = chain.iter().cloned().collect();
        let mut current = start;
        'walk: loop {
            for name in logs[current].iter().rev() {
                if !seen.insert(name.clone()) {
                    break 'walk;
                }
                chain.push(name.clone());
                if let Some(&i) = by_name.get(name.as_str()) {
                    current = i;
                    continue 'walk;
                }
            }
            break;
        }
        chain
    };
    let strays_off = |kept: &HashSet<String>| -> Vec<String> {
        let mut s: Vec<String> = (0..files.len())
            .filter(|i| !kept.contains(names[*i]))
            .map(key)
            .collect();
        s.sort();
        s
    };

    if candidates.is_empty() {
        return HeadChoice {
            head: None,
            reason: "no head: every metadata file is named as a predecessor by another".into(),
            strays: Vec::new(),
            refused: Some(format!(
                "the metadata-log entries of the {} metadata files form a cycle; inspect them by hand",
                files.len()
            )),
        };
    }
    let chains: Vec<(usize, Vec<String>)> = candidates.iter().map(|&c| (c, chain(c))).collect();
    let longest = chains.iter().map(|(_, ch)| ch.len()).max().unwrap_or(0);
    let tied: Vec<&(usize, Vec<String>)> = chains.iter().filter(|(_, ch)| ch.len() == longest).collect();

    let hint_name = hint.map(file_name);
    let (head, mut reason) = if candidates.len() == 1 {
        (
            candidates[0],
            "the only file no other file names as a predecessor".to_string(),
        )
    } else if tied.len() == 1 {
        let others: Vec<String> = chains
            .iter()
            .filter(|(c, _)| *c != tied[0].0)
            .map(|(c, ch)| format!("{} (chain of {})", names[*c], ch.len()))
            .collect();
        let reason = format!(
            "of {} files no other file names as a predecessor, it ends the longest chain ({} metadata files; \
             shorter: {})",
            candidates.len(),
            longest,
            others.join(", ")
        );
        (tied[0].0, reason)
    } else if let Some(&&(c, _)) = tied.iter().find(|(c, _)| Some(names[*c]) == hint_name) {
        let reason = format!(
            "{} files end equally long chains ({} metadata files): {}; the hint names this one",
            tied.len(),
            longest,
            tied.iter().map(|(c, _)| names[*c]).collect::<Vec<_>>().join(", ")
        );
        (c, reason)
    } else {
        let mut tied_keys: Vec<String> = tied.iter().map(|(c, _)| key(*c)).collect();
        tied_keys.sort();
        let hint_note = match hint {
            Some(h) => format!("the hint {h} names neither"),
            None => "no hint (expected head or previous catalog pointer) was given".to_string(),
        };
        let kept: HashSet<String> = tied.iter().flat_map(|(_, ch)| ch.iter().cloned()).collect();
        return HeadChoice {
            head: None,
            reason: format!(
                "undecidable: {} heads end chains of {} metadata files",
                tied.len(),
                longest
            ),
            strays: strays_off(&kept),
            refused: Some(format!(
                "{} are both possible heads (equally long chains, one is a commit that lost its catalog swap) \
                 and {hint_note}; pass the expected head to decide",
                tied_keys.join(" and ")
            )),
        };
    };

    let on_chain: HashSet<String> = chains
        .iter()
        .find(|(c, _)| *c == head)
        .map(|(_, ch)| ch.iter().cloned().collect())
        .unwrap_or_default();
    // Two files with one version number: concurrent commits; the chain says which one won.
    let mut by_version: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(v) = version_of(n) {
            by_version.entry(v).or_default().push(i);
        }
    }
    for (v, idx) in by_version.iter().filter(|(_, idx)| idx.len() > 1) {
        let (won, lost): (Vec<usize>, Vec<usize>) = idx.iter().partition(|i| on_chain.contains(names[**i]));
        let list = |ix: &[usize]| ix.iter().map(|i| names[*i]).collect::<Vec<_>>().join(", ");
        reason.push_str(&format!(
            "; fork at version {v}: {} on the chain, {} stray",
            if won.is_empty() { "none".to_string() } else { list(&won) },
            list(&lost)
        ));
    }
    if let Some(h) = hint_name.filter(|h| *h != names[head]) {
        if on_chain.contains(h) {
            reason.push_str(&format!("; the hint {h} is an ancestor of this head"));
        } else {
            reason.push_str(&format!("; the hint {h} is not on this head's chain"));
        }
    }
    HeadChoice {
        head: Some(key(head)),
        reason,
        strays: strays_off(&on_chain),
        refused: None,
    }
}
