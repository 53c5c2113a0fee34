//! What a write that did not go in leaves behind (issue 34): nothing. A commit that lost its
//! race to another writer wrote data files, delete files, manifests and a metadata file that no
//! snapshot references; each is removed before the retry, so that the table's folders hold
//! only what the table references and a re-run needs no more room than the first run.

use std::collections::BTreeSet;
use std::path::Path;

use super::super::support::faults::files_ending;
use super::super::support::story::Story;
use super::super::support::*;

fn names(dir: &Path, suffix: &str) -> BTreeSet<String> {
    files_ending(dir, suffix).into_iter().map(|(p, _)| p).collect()
}

/// `apply` paused just before its commit (`apply:before-commit`) while `fault delete` commits
/// to the same table: the applier's commit is refused as a conflict and retried. Afterwards
/// the data and delete files of the lost attempt are gone, the table's new files are exactly
/// the fault's and the retry's, and every metadata file is the table's current one or on its
/// metadata log.
#[test]
fn a_commit_that_lost_its_race_leaves_no_files() {
    let s = Scratch::new();
    let warehouse = s.path_str("warehouse");
    let story = Story::new(&s).warehouse(warehouse.clone()).journaled(40, 10);
    story.apply_until(20);
    let wh = Path::new(&warehouse);
    let before = names(wh, ".parquet");

    let args = story.args("apply", &["--json"]);
    let (mut lost, mut fault) = (BTreeSet::new(), BTreeSet::new());
    let r = s.run_paused("apply:before-commit", &args, || {
        let paused = names(wh, ".parquet");
        lost = paused.difference(&before).cloned().collect();
        story.bad_delete("order_id = 'o-3'");
        fault = names(wh, ".parquet").difference(&paused).cloned().collect();
    });
    let r = r.ok();
    let report = r.json();
    assert_eq!(report["retries"], 1, "the commit did not lose its race: {report}");
    assert!(!lost.is_empty(), "the paused attempt had written no file");
    assert!(!fault.is_empty(), "the fault delete wrote no file");

    let after = names(wh, ".parquet");
    let left: Vec<_> = lost.intersection(&after).collect();
    assert!(
        left.is_empty(),
        "files of the lost attempt left behind: {left:?}\n{}",
        r.stderr
    );
    let retry: Vec<_> = after
        .iter()
        .filter(|p| !before.contains(*p) && !fault.contains(*p))
        .collect();
    let written = &report["writes"];
    let expected = written["data_files_written"].as_u64().unwrap() + written["delete_files_written"].as_u64().unwrap();
    assert_eq!(
        retry.len() as u64,
        expected,
        "new files {retry:?}, the report: {written}"
    );

    // The current metadata file is the highest version; every other is on its metadata log.
    let metadata = names(wh, ".metadata.json");
    let current = metadata
        .iter()
        .max_by_key(|p| Path::new(p).file_name().unwrap().to_string_lossy().into_owned())
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(current).unwrap()).unwrap();
    let logged: BTreeSet<String> = parsed["metadata-log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| file_name(l["metadata-file"].as_str().unwrap()))
        .collect();
    let stray: Vec<_> = metadata
        .iter()
        .filter(|p| *p != current && !logged.contains(&file_name(p)))
        .collect();
    assert!(stray.is_empty(), "metadata files no commit references: {stray:?}");
}

fn file_name(p: &str) -> String {
    p.rsplit('/').next().unwrap_or(p).to_string()
}
