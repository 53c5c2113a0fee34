//! A table folder's head, chosen the one way every reader uses: `catalog rebuild`, the warm
//! follower, `replica check`, `replica copy`'s safe order, `replica resync`'s restore of a table
//! dropped on the demoted side, and the game day's step 4.
//!
//! [`choose_folder_head`] reads the folder's metadata files, takes out what a `replica resync`
//! walked over (`super::resync_record::exclude_recorded`: never a head, whatever its chain),
//! and chooses by the chain (`super::rebuild::choose_head`). Before this function each reader
//! wrote these three steps out itself, and three of them had forgotten the middle one.
//!
//! **Reading only what the choice needs** (unless [`HeadRead::every_file`]). A reader that walks
//! the head's chain (the follower, `replica check`, `replica copy`) needs every file's JSON; one
//! that only registers or names the head does not. Then the newest file by version number is
//! read first; the files its `metadata-log` names are its ancestors and need not be read when
//! that log is whole (its oldest entry is version 0, so nothing was dropped by
//! `write.metadata.previous-versions-max`): each of them is taken to log exactly the entries
//! before it in the head's log, which is what an Iceberg writer writes (a new file's log is its
//! parent's log plus the parent, and metadata files are never rewritten in place). Every file the
//! log does not name (a stray, a fork, a newer file of a lost commit) is read, and its log must be
//! whole too. Anything else — two files of the newest version, a name without a version, a log
//! that is not whole or out of version order, a folder with resync records, the newest file not
//! parsing — reads every file. So the choice is the one the full read makes whenever the files
//! not read are what a writer wrote; an ancestor edited by hand (its log naming a newer file, a
//! cycle the full read refuses) is only seen by a reader asking for every file. A file not read
//! cannot be torn without mattering less than that: as an ancestor of the head, a file that does
//! not parse is harmless to the choice either way. With the suite's rebuild benchmark (7 files a
//! table: a chain of 6 and a stray) this is 2 reads a table instead of 7.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use tidemark_journal::store::ObjectStore;

use super::choose::{HeadChoice, choose_head, predecessor_names, version_of};
use crate::dr::resync_record::{Excluded, exclude_recorded};
use crate::dr::warehouse::{DrError, TableFiles, file_name};

/// How [`choose_folder_head`] reads and chooses.
#[derive(Clone, Copy, Default)]
pub(crate) struct HeadRead<'a> {
    /// An expected head or previous pointer (key, URL or file name) deciding a tie.
    pub hint: Option<&'a str>,
    /// Read every metadata file (a reader walking the head's chain needs each file's JSON).
    pub every_file: bool,
    /// Files that are never candidates, taken out before anything else (the follower's own
    /// rewrites). Implies reading every file.
    pub not_candidate: Option<fn(&str, &Value) -> bool>,
}

/// A table folder, read, and its head chosen.
pub(crate) struct FolderHead {
    /// The metadata files read that parse, without those taken out (`(key, json)`, key order).
    pub parsed: Vec<(String, Value)>,
    /// The files read that do not parse (`(key, error)`): a torn write or copy.
    pub unparsable: Vec<(String, String)>,
    /// What the resync records took out.
    pub excluded: Excluded,
    /// The files taken out, as read (for [`FolderHead::head_of_all_files`]).
    walked_files: Vec<(String, Value)>,
    /// A listed resync record that cannot be read: `choice` is then refused with this reason,
    /// and the caller holds or refuses the table.
    pub unreadable_record: Option<String>,
    pub choice: HeadChoice,
    /// The head's chain, newest first, as file names (empty without a head).
    pub chain: Vec<String>,
    /// Metadata files not read because the head's whole log names them.
    pub not_read: usize,
    hint: Option<String>,
}

impl FolderHead {
    /// The head's JSON (the head is always a file that was read and parsed).
    pub fn head_json(&self) -> Option<&Value> {
        let head = self.choice.head.as_deref()?;
        self.parsed.iter().find(|(k, _)| k == head).map(|(_, j)| j)
    }

    /// Files that do not parse and that the head's chain does not name (`(key, error)`): one may
    /// be a newer head.
    pub fn unparsable_off_chain(&self) -> Vec<&(String, String)> {
        let on_chain: HashSet<&str> = self.chain.iter().map(String::as_str).collect();
        self.unparsable
            .iter()
            .filter(|(k, _)| !on_chain.contains(file_name(k)))
            .collect()
    }

    /// [`FolderHead::chain`] as `&str`.
    pub fn chain_names(&self) -> Vec<&str> {
        self.chain.iter().map(String::as_str).collect()
    }

    /// The head chosen among every file, walked over or not (where a walk back starts: see
    /// `super::resync::demoted_head`).
    pub fn head_of_all_files(&self) -> Option<String> {
        if self.walked_files.is_empty() {
            return self.choice.head.clone();
        }
        let mut all = self.parsed.clone();
        all.extend(self.walked_files.iter().cloned());
        choose_head(&all, self.hint.as_deref()).head
    }
}

/// Reads the table folder `files` (the store is opened on the warehouse root) and chooses its
/// head; see the module documentation. Errors only when a metadata file cannot be read at all.
pub(crate) async fn choose_folder_head(
    store: &dyn ObjectStore,
    files: &TableFiles,
    how: HeadRead<'_>,
) -> Result<FolderHead, DrError> {
    let lazy = !how.every_file && how.not_candidate.is_none() && files.record_keys.is_empty();
    let (mut parsed, unparsable, assumed) = if lazy {
        read_for_choice(store, files).await?
    } else {
        let (parsed, unparsable) = read_metadata(store, files).await?;
        (parsed, unparsable, Vec::new())
    };
    if let Some(skip) = how.not_candidate {
        parsed.retain(|(k, j)| !skip(k, j));
    }
    let before = (!files.record_keys.is_empty()).then(|| parsed.clone());
    let (excluded, unreadable_record) = match exclude_recorded(store, files, &mut parsed).await {
        Ok(e) => (e, None),
        Err(reason) => (Excluded::default(), Some(reason)),
    };
    let walked_files: Vec<(String, Value)> = before
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| excluded.keys.contains(k))
        .collect();

    let choice = match &unreadable_record {
        Some(reason) => HeadChoice {
            head: None,
            reason: "a resync record of this table cannot be read".into(),
            strays: Vec::new(),
            refused: Some(reason.clone()),
        },
        None if assumed.is_empty() => choose_head(&parsed, how.hint),
        None => {
            let mut input = parsed.clone();
            input.extend(assumed.iter().cloned());
            choose_head(&input, how.hint)
        }
    };
    let chain = match &choice.head {
        None => Vec::new(),
        Some(head) => {
            let by_name: HashMap<&str, &Value> =
                parsed.iter().chain(&assumed).map(|(k, j)| (file_name(k), j)).collect();
            chain(file_name(head), &by_name)
                .into_iter()
                .map(str::to_string)
                .collect()
        }
    };
    Ok(FolderHead {
        parsed,
        unparsable,
        excluded,
        walked_files,
        unreadable_record,
        choice,
        chain,
        not_read: assumed.len(),
        hint: how.hint.map(str::to_string),
    })
}

/// Every metadata file of the folder, read: `(key, json)` for each that parses, and
/// `(key, error)` for each that does not.
pub(crate) async fn read_metadata(
    store: &dyn ObjectStore,
    files: &TableFiles,
) -> Result<(Vec<(String, Value)>, Vec<(String, String)>), DrError> {
    read_keys(store, files, &files.metadata_keys).await
}

/// Reads `keys`: `(key, json)` for each that parses, `(key, error)` for each that does not.
async fn read_keys(
    store: &dyn ObjectStore,
    files: &TableFiles,
    keys: &[String],
) -> Result<(Vec<(String, Value)>, Vec<(String, String)>), DrError> {
    let mut parsed = Vec::with_capacity(keys.len());
    let mut unparsable = Vec::new();
    for key in keys {
        let got = store.get(key, None).await.map_err(|source| DrError::Read {
            table: files.ident(),
            key: key.clone(),
            source: Box::new(source),
        })?;
        match serde_json::from_slice::<Value>(&got.body) {
            Ok(json) => parsed.push((key.clone(), json)),
            Err(e) => unparsable.push((key.clone(), e.to_string())),
        }
    }
    Ok((parsed, unparsable))
}

type Read = (Vec<(String, Value)>, Vec<(String, String)>, Vec<(String, Value)>);

/// The files the choice needs (module documentation): what was read, what did not parse, and
/// the files not read with the log they are taken to hold (`{"metadata-log": [...]}`).
async fn read_for_choice(store: &dyn ObjectStore, files: &TableFiles) -> Result<Read, DrError> {
    let (mut parsed, mut unparsable) = (Vec::new(), Vec::new());
    let assumed = match needed_only(store, files, &mut parsed, &mut unparsable).await? {
        Some(assumed) => assumed,
        None => {
            // Every file: those not read yet (what was read is not read again).
            let read: HashSet<&String> = parsed
                .iter()
                .map(|(k, _)| k)
                .chain(unparsable.iter().map(|(k, _)| k))
                .collect();
            let rest: Vec<String> = files
                .metadata_keys
                .iter()
                .filter(|k| !read.contains(k))
                .cloned()
                .collect();
            let (more, bad) = read_keys(store, files, &rest).await?;
            parsed.extend(more);
            unparsable.extend(bad);
            Vec::new()
        }
    };
    parsed.sort_by(|a, b| a.0.cmp(&b.0));
    unparsable.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((parsed, unparsable, assumed))
}

/// The read of only the files the choice needs, into `parsed` and `unparsable`: the files not
/// read with the log they are taken to hold, or `None` when every file must be read.
async fn needed_only(
    store: &dyn ObjectStore,
    files: &TableFiles,
    parsed: &mut Vec<(String, Value)>,
    unparsable: &mut Vec<(String, String)>,
) -> Result<Option<Vec<(String, Value)>>, DrError> {
    let keys = &files.metadata_keys;
    let Some(versions) = keys
        .iter()
        .map(|k| version_of(file_name(k)))
        .collect::<Option<Vec<u64>>>()
    else {
        return Ok(None);
    };
    let Some(&newest) = versions.iter().max() else {
        return Ok(None);
    };
    let mut at_newest = keys.iter().zip(&versions).filter(|(_, v)| **v == newest);
    let (Some((head_key, _)), None) = (at_newest.next(), at_newest.next()) else {
        return Ok(None);
    };
    let (head, bad) = read_keys(store, files, std::slice::from_ref(head_key)).await?;
    unparsable.extend(bad);
    let Some((_, head_json)) = head.into_iter().next() else {
        return Ok(None);
    };
    let head_name = file_name(head_key);
    let mut assumed = None;
    if log_is_whole(head_name, &head_json) {
        let entries = log_entries(head_name, &head_json);
        let position: HashMap<&str, usize> = entries.iter().enumerate().map(|(i, (n, _))| (*n, i)).collect();
        let others: Vec<String> = keys
            .iter()
            .filter(|k| *k != head_key && !position.contains_key(file_name(k)))
            .cloned()
            .collect();
        let (read, bad) = read_keys(store, files, &others).await?;
        unparsable.extend(bad);
        if read.iter().all(|(k, j)| log_is_whole(file_name(k), j)) {
            assumed = Some(
                keys.iter()
                    .filter_map(|k| {
                        let i = *position.get(file_name(k))?;
                        let log: Vec<Value> = entries[..i].iter().map(|(_, e)| (*e).clone()).collect();
                        Some((k.clone(), json!({ "metadata-log": log })))
                    })
                    .collect(),
            );
        }
        parsed.extend(read);
    }
    parsed.push((head_key.clone(), head_json));
    Ok(assumed)
}

/// `(file name, entry)` of each `metadata-log` entry naming another file, oldest first.
fn log_entries<'a>(name: &str, json: &'a Value) -> Vec<(&'a str, &'a Value)> {
    json.get("metadata-log")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| Some((file_name(e.get("metadata-file")?.as_str()?), e)))
        .filter(|(n, _)| *n != name)
        .collect()
}

/// Nothing was dropped from the file's log and it is ordered as a writer writes it: it is the
/// table's first file (version 0, no log), or its entries have strictly rising versions from 0
/// to below the file's own.
fn log_is_whole(name: &str, json: &Value) -> bool {
    let Some(own) = version_of(name) else { return false };
    let mut next = 0;
    for entry in predecessor_names(name, json) {
        match version_of(entry) {
            Some(v) if v >= next && (next > 0 || v == 0) && v < own => next = v + 1,
            _ => return false,
        }
    }
    next > 0 || own == 0
}

/// Predecessor file names, newest first, without the file itself.
fn predecessors<'a>(name: &'a str, json: &'a Value) -> Vec<&'a str> {
    let mut log: Vec<&str> = predecessor_names(name, json).collect();
    log.reverse();
    log
}

/// The head's chain, newest first, as file names; as `choose_head` walks it (a predecessor
/// absent from the folder is stepped over through the log of the last file found).
fn chain<'a>(head: &'a str, by_name: &HashMap<&'a str, &'a Value>) -> Vec<&'a str> {
    let mut out = vec![head];
    let mut seen: HashSet<&str> = HashSet::from([head]);
    let mut current = head;
    'walk: while let Some(json) = by_name.get(current) {
        for name in predecessors(current, json) {
            if !seen.insert(name) {
                break 'walk;
            }
            out.push(name);
            if let Some((n, _)) = by_name.get_key_value(name) {
                current = n;
                continue 'walk;
            }
        }
        break;
    }
    out
}
