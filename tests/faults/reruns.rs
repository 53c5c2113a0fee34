//! A completed recovery or failover re-run: it finds its own flip and never flips again.

use super::super::support::faults::*;
use super::super::support::*;

/// A journal of 50 events applied up to 40 into `shop.orders`, with a bad delete after it.
fn damaged(s: &Scratch) -> (String, String) {
    let journal = journal_with(s, "journal", 40, 10);
    let catalog = s.path_str("catalog.db");
    s.apply(&journal, &catalog, "shop.orders");
    s.fault_delete(&catalog, "shop.orders", "order_id = 'o-3'");
    let more = s.write("more.ndjson", &events(41, 50));
    s.append(&journal, more.to_str().unwrap());
    (journal, catalog)
}

/// The finding: re-running a completed `recover --recovery-id X --route R` flipped the route
/// again each time (generation 1 → 4 over three re-runs), and after another controller's flip it
/// took the readers back.
#[test]
fn a_completed_recovery_does_not_flip_again() {
    let s = Scratch::new();
    let (journal, catalog) = damaged(&s);
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    let recover = recover_args(&journal, &catalog, "40", "rec-twice", &route);
    let first = s.run(&recover).ok().json();
    assert_eq!(first["route"]["generation"], 1, "{first}");
    assert_eq!(first["route_already_flipped"], false);
    for _ in 0..2 {
        let again = s.run(&recover).ok().json();
        assert_eq!(again["route"]["generation"], 1, "{again}");
        assert_eq!(again["route_already_flipped"], true);
    }
    assert_eq!(generation(&s, &route), (1, "shop.fixed".into()));
    // Another controller decides after the recovery; a re-run must not take readers back.
    flip(&s, &route, &catalog, "shop.orders", 50, &[]);
    let again = s.run(&recover).ok().json();
    assert_eq!(again["route_already_flipped"], true, "{again}");
    assert_eq!(generation(&s, &route), (2, "shop.orders".into()));
}

/// A failover stopped after its flip and before its promotion was recorded (a crash, or a lost
/// reply after the last attempt) flipped the route again when re-run (generation 1 → 2 → 3): a
/// re-run finds its own flip in the route's history and completes without flipping (and names
/// the follower the first run fenced, not itself).
#[test]
fn a_failover_stopped_after_its_flip_does_not_flip_again() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 30, 10);
    let (primary, primary_wh) = (s.path_str("primary.db"), s.path_str("primary"));
    apply_in(&s, &journal, &primary, &primary_wh, "shop.orders");
    let replica = s.path_str("replica");
    s.run(&["replica", "copy", "--from", &primary_wh, "--to", &replica])
        .ok();
    let (dr, state) = (s.path_str("dr.db"), s.path_str("state"));
    let map = format!("file://{primary_wh}=file://{replica}");
    let target = [replica.as_str(), &dr, &map, &state];
    s.follow(&replica, &dr, &map, &state, &["--once", "--holder", "f-crash"])
        .ok();
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    flip(&s, &route, &primary, "shop.orders", 30, &[]);
    let failover = Scratch::replica_args(
        "failover",
        target,
        &["--route", &route, "--failover-id", "fo-crash", "--json"],
    );
    let crashed = s.run_with(&[("TIDEMARK_FAILPOINT", "failover:after-flip")], &failover);
    assert_eq!(crashed.code, 86, "{}", crashed.stderr);
    assert_eq!(generation(&s, &route).0, 2);
    let done = s.run(&failover).ok().json();
    assert_eq!(done["routes"][0]["from_generation"], 1, "{done}");
    assert_eq!(done["routes"][0]["to_generation"], 2, "{done}");
    assert_eq!(generation(&s, &route).0, 2, "flipped again");
    // The follower fenced is the one the first run fenced, not the failover itself.
    assert_eq!(done["fenced_holder"], "f-crash", "{done}");
    // Recorded now: the same failover again reports the recorded promotion (exit 0) and does
    // nothing again: no flip, no scan, the record unchanged.
    let record = s.path("state/promotions/fo-crash.json");
    let recorded = std::fs::read_to_string(&record).unwrap();
    let again = s.run(&failover).ok();
    assert!(again.stderr.contains("already recorded"), "{}", again.stderr);
    let mut again = again.json();
    assert_eq!(again["already_recorded"], true, "{again}");
    again["already_recorded"] = false.into();
    assert_eq!(again, done, "the recorded promotion");
    assert_eq!(generation(&s, &route).0, 2, "flipped again");
    assert_eq!(std::fs::read_to_string(&record).unwrap(), recorded);
}
