//! Failpoints: simulated crashes at the step boundaries of every command, for drills and tests.
//!
//! `TIDEMARK_FAILPOINT=NAME[:N]` makes the process stop dead at the N-th time (default the first)
//! it reaches the boundary `NAME`: it exits at once with [`CRASH_EXIT_CODE`], running no cleanup
//! and writing nothing more, as a `kill -9` there would. A plain re-run must then complete.
//! The boundaries (see docs/errors.md, "Failpoints"):
//!
//! * `append:after-event-object`, `append:after-manifest` — per batch of `journal append`;
//! * `apply:after-commit`, `apply:after-checkpoint` — per unit of `apply` (`after-commit:N`
//!   without the prefix is the older spelling, which `apply` reports as an error instead);
//! * `recover:after-seed`, `recover:after-replay`, `recover:after-validate`,
//!   `recover:after-flip`;
//! * `copy:after-object` — per object `replica copy` wrote;
//! * `restore:after-table` — per table `catalog restore` registered or swapped;
//! * `follow:after-table` — per table `replica follow` (or `failover`'s final scan) moved, before
//!   the cycle's state is written; `follow:after-state` — per cycle, after its state is written
//!   (before the lease is renewed or released).
//! * `publish:after-create` — per table `replica follow` (or `resync`'s restore) created in an S3
//!   Tables or REST catalog, before it is moved to a version.
//! * `resync:after-rename`, `resync:after-create` — per REST table `replica resync` walks back:
//!   after renaming it aside, before creating it again (a re-run restores it); after creating
//!   it, before filling it (a re-run fills it).
//! * `failover:after-flip` — `replica failover`, after its route flips, before its record.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The exit code of a process stopped at a failpoint.
pub const CRASH_EXIT_CODE: i32 = 86;

fn armed() -> Option<&'static (String, u64)> {
    static ARMED: OnceLock<Option<(String, u64)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let v = std::env::var("TIDEMARK_FAILPOINT").ok()?;
            parse(&v)
        })
        .as_ref()
}

/// `NAME` or `NAME:N` (N ≥ 1).
fn parse(v: &str) -> Option<(String, u64)> {
    let v = v.trim();
    if v.is_empty() {
        return None;
    }
    match v.rsplit_once(':') {
        Some((name, n)) if n.parse::<u64>().is_ok_and(|n| n >= 1) => Some((name.to_string(), n.parse().unwrap())),
        _ => Some((v.to_string(), 1)),
    }
}

/// Marks the boundary `name`; stops the process if the failpoint is armed for this hit.
pub fn hit(name: &str) {
    let Some((armed_name, nth)) = armed() else { return };
    if armed_name != name {
        return;
    }
    static COUNTS: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
    let mut counts = COUNTS.get_or_init(Default::default).lock().expect("failpoint counts");
    let n = counts.entry(name.to_string()).or_default();
    *n += 1;
    if *n == *nth {
        eprintln!("failpoint {name}:{nth} reached: stopping as a crash would");
        std::process::exit(CRASH_EXIT_CODE);
    }
}

/// Marks the boundary `name` where a test may act while the process waits (a pause point):
/// with `TIDEMARK_PAUSEPOINT=NAME` and `TIDEMARK_PAUSE_DIR=DIR`, the first time the process
/// reaches `NAME` it creates `DIR/reached` and waits (at most ten minutes) until `DIR/resume`
/// exists. Tests use it to land another writer's commit between a read and the write it guards.
/// The boundaries: `resync:before-move` (per table `replica resync` moves, after reading the
/// demoted pointer and before the swap or commit from it), `resync:before-record` (per write of
/// a table's resync record, after reading the record and before the conditional write of it),
/// `apply:before-commit` (per commit attempt of `apply`, after its files are written and before
/// the commit that publishes them).
pub fn pause(name: &str) {
    static PAUSED: OnceLock<()> = OnceLock::new();
    if std::env::var("TIDEMARK_PAUSEPOINT").ok().as_deref() != Some(name) {
        return;
    }
    let Some(dir) = std::env::var_os("TIDEMARK_PAUSE_DIR").map(std::path::PathBuf::from) else {
        return;
    };
    if PAUSED.set(()).is_err() {
        return;
    }
    let _ = std::fs::create_dir_all(&dir);
    if std::fs::write(dir.join("reached"), name).is_err() {
        return;
    }
    eprintln!(
        "pause point {name} reached: waiting for {}",
        dir.join("resume").display()
    );
    for _ in 0..6000 {
        if dir.join("resume").exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn names_and_counts_parse() {
        assert_eq!(
            parse("append:after-manifest"),
            Some(("append:after-manifest".into(), 1))
        );
        assert_eq!(
            parse("append:after-manifest:3"),
            Some(("append:after-manifest".into(), 3))
        );
        assert_eq!(parse("after-commit:2"), Some(("after-commit".into(), 2)));
        assert_eq!(parse(" "), None);
    }
}
