//! The warm follower crashed inside a cycle: at its failpoints (`follow:after-table`, after a
//! table moved and before the cycle's state is written; `follow:after-state`, after the state and
//! before the lease is released) and by kill -9 at seeded random moments, each followed by plain
//! re-runs. Every re-run completes; no table is reported as someone else's change, nothing moves
//! backwards, and the state names exactly what the DR catalog points at.

use std::collections::BTreeMap;

use super::super::replica_warm::{base, replicate};
use super::super::support::faults::*;
use super::super::support::*;

const CRASH: i32 = 86;
const TABLES: [&str; 3] = ["shop.a", "shop.b", "shop.c"];

struct Site<'a> {
    s: &'a Scratch,
    journal: String,
    primary_wh: String,
    replica: String,
    follow: Vec<String>,
}

impl Site<'_> {
    fn apply(&self, until: u64) {
        for t in TABLES {
            self.s
                .story(&self.journal, self.s.path_str("primary.db"), t)
                .warehouse(&self.primary_wh)
                .apply_until(until);
        }
        replicate(&self.primary_wh, &self.replica, None, true);
    }

    fn args(&self) -> Vec<&str> {
        self.follow.iter().map(String::as_str).collect()
    }

    /// The state the follower wrote, and the DR catalog's pointers: every table at `position`,
    /// OK, registered where the catalog points.
    fn check(&self, position: u64) -> serde_json::Value {
        let state: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(self.s.path("state/state.json")).unwrap()).unwrap();
        let out = self.s.path_str("pointers.json");
        self.s
            .run(&[
                "catalog",
                "state",
                "--catalog",
                &self.s.path_str("dr.db"),
                "--out",
                &out,
            ])
            .ok();
        let pointers: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        for t in TABLES {
            let ts = state["tables"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["table"] == t)
                .unwrap_or_else(|| panic!("{t} not in {state}"));
            assert_eq!(ts["status"], "ok", "{ts}");
            assert_eq!(ts["verified_position"], position, "{ts}");
            assert_eq!(ts["registered_metadata"], pointers["tables"][t], "{ts} vs {pointers}");
        }
        state
    }
}

#[test]
fn a_follower_crashed_inside_a_cycle_resumes_with_nothing_moved_backwards() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 600, 100);
    let root = s.path_str("sites");
    let (primary_wh, replica) = (format!("{root}/primary"), format!("{root}/replica"));
    let map = format!("{}={}", base(&primary_wh), base(&replica));
    let follow = [
        "replica",
        "follow",
        "--warehouse",
        &replica,
        "--catalog",
        &s.path_str("dr.db"),
        "--prefix-map",
        &map,
        "--state",
        &s.path_str("state"),
        "--holder",
        "f1",
        "--once",
    ]
    .map(String::from)
    .to_vec();
    let site = Site {
        s: &s,
        journal,
        primary_wh,
        replica,
        follow,
    };

    // Stopped after the second table moved, before any state: the re-run adopts both moves.
    site.apply(100);
    s.run_with(&[("TIDEMARK_FAILPOINT", "follow:after-table:2")], &site.args())
        .fails(CRASH, &["failpoint"]);
    assert!(!s.path("state/state.json").exists());
    s.run(&site.args()).ok();
    site.check(100);

    // Stopped between moves of a later cycle, after the state is written, and before the lease
    // is released: the re-run (same holder) takes the lease again.
    for (fp, until) in [("follow:after-table:1", 200), ("follow:after-state", 300)] {
        site.apply(until);
        s.run_with(&[("TIDEMARK_FAILPOINT", fp)], &site.args())
            .fails(CRASH, &["failpoint"]);
        s.run(&site.args()).ok();
        site.check(until);
    }

    // kill -9 at seeded random moments within one run's duration, then re-runs until one
    // completes; each round leaves the state and the pointers agreeing, never behind.
    let started = std::time::Instant::now();
    s.run(&site.args()).ok();
    let window = (started.elapsed().as_millis() as u64).max(50);
    let mut rng = 20261213u64;
    let mut kills = 0;
    let mut cycles = BTreeMap::new();
    for until in [400, 500, 600] {
        site.apply(until);
        kills += until_complete(&s, &mut rng, window, &site.args());
        let state = site.check(until);
        cycles.insert(until, state["cycle"].as_u64().unwrap());
    }
    assert!(kills > 0, "the seed must kill some runs");
    assert!(cycles.values().is_sorted(), "{cycles:?}");
}
