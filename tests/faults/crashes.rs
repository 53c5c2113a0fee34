//! Crashes: kill -9 at seeded random moments and failpoints at every step boundary, each
//! followed by plain re-runs until the command completes, then the journal, table and route
//! checked against an independent fold.

use super::super::support::faults::*;
use super::super::support::*;

/// Crash anywhere: `journal append`, `apply` and `recover --route` killed at random moments
/// (fixed seed, bounded runs) and re-run until they complete; then the journal verifies, the
/// recovered table equals the independent fold, and the route's generation is 1: nothing lost,
/// doubled or invented.
#[test]
fn killed_at_random_moments_then_rerun() {
    let windows = step_durations(false);
    let kills: u32 = [20261201u64, 7, 99]
        .into_iter()
        .map(|seed| killed_then_rerun(seed, false, &windows))
        .sum();
    assert!(kills >= 3, "the seeds must crash some runs: {kills}");
}

/// [`killed_at_random_moments_then_rerun`] with the journal and the warehouse on S3 (the moto
/// server of sandbox/test.sh): a kill can land between any two S3 requests.
#[test]
fn killed_at_random_moments_on_s3_then_rerun() {
    if !s3_available() {
        return;
    }
    let windows = step_durations(true);
    let kills: u32 = [20261202u64, 31]
        .into_iter()
        .map(|seed| killed_then_rerun(seed, true, &windows))
        .sum();
    assert!(kills >= 2, "the seeds must crash some runs: {kills}");
}

/// How long each killable step of the scenario takes uninterrupted on this machine, in ms: the
/// scenario run once without kills (its checks included). The kill moments are drawn within
/// these durations, so they land inside the work on a fast machine as on a slow one (fixed
/// windows let every run finish before its kill on a fast CI machine).
fn step_durations(s3: bool) -> Vec<u64> {
    let mut took = Vec::new();
    journey(0, s3, &mut |s, args| {
        let started = std::time::Instant::now();
        s.run(args).ok();
        took.push(started.elapsed().as_millis() as u64);
        0
    });
    took
}

/// One [`journey`] of [`killed_at_random_moments_then_rerun`] with kill moments drawn from `seed`
/// within `windows` (the steps' uninterrupted durations); returns how many runs were killed.
fn killed_then_rerun(seed: u64, s3: bool, windows: &[u64]) -> u32 {
    let mut rng = seed;
    let mut step = 0;
    journey(seed, s3, &mut |s, args| {
        // At least 20 ms: a process must start before a kill means anything.
        let window = windows[step].max(20);
        step += 1;
        until_complete(s, &mut rng, window, args)
    })
}

/// The failpoints at each step boundary stop the process as a crash would (exit 86); a plain
/// re-run completes with the same result as an uninterrupted run.
#[test]
fn failpoints_at_every_step_then_rerun() {
    let s = Scratch::new();
    let journal = s.path_str("journal");
    s.run(&["journal", "init", "--journal", &journal]).ok();
    let input = s.write("in.ndjson", &events(1, 40));
    let input = input.to_str().unwrap();
    let append = Scratch::append_args(&journal, input, &["--batch-size", "10"]);
    for fp in ["append:after-event-object:2", "append:after-manifest:3"] {
        let run = s.run_with(&[("TIDEMARK_FAILPOINT", fp)], &append);
        assert_eq!(run.code, 86, "{fp}: {}", run.stderr);
    }
    s.run(&append).ok();
    let catalog = s.path_str("catalog.db");
    let story = s.story(&journal, &catalog, "shop.orders");
    // A commit per batch: the crashes fall between batches (the default would commit the four
    // batches waiting at once).
    let apply = story.args("apply", &["--batches-per-commit", "1"]);
    for fp in ["apply:after-commit:1", "apply:after-checkpoint:2"] {
        assert_eq!(s.run_with(&[("TIDEMARK_FAILPOINT", fp)], &apply).code, 86, "{fp}");
    }
    s.run(&apply).ok();
    let route = s.path_str("route");
    std::fs::create_dir_all(&route).unwrap();
    let recover = recover_args(&journal, &catalog, "40", "rec-fp", &route);
    for fp in [
        "recover:after-seed",
        "recover:after-replay",
        "recover:after-validate",
        "recover:after-flip",
    ] {
        assert_eq!(s.run_with(&[("TIDEMARK_FAILPOINT", fp)], &recover).code, 86, "{fp}");
    }
    let done = s.run(&recover).ok().json();
    assert_eq!(done["route"]["generation"], 1, "{done}");
    assert_eq!(
        done["route_already_flipped"], true,
        "the flip before the crash is found"
    );
    let v = s.verify_json(&journal);
    assert_eq!(v["verified_last_position"], 40);
    let replica = s.path_str("replica");
    let copy = [
        "replica",
        "copy",
        "--from",
        &s.path_str("warehouse"),
        "--to",
        &replica,
        "--json",
    ];
    assert_eq!(
        s.run_with(&[("TIDEMARK_FAILPOINT", "copy:after-object:3")], &copy).code,
        86
    );
    let r = s.run(&copy).ok().json();
    assert!(r["skipped"].as_u64().unwrap() >= 3, "{r}");
}

/// `catalog restore` stopped after its first table (failpoint `restore:after-table:1`) leaves
/// that table registered at the backup's pointer and the other one absent; a plain re-run with
/// the same `--expect` leaves the first alone, registers the second, and the restored catalog
/// records the same history as the one backed up.
#[test]
fn a_restore_stopped_after_a_table_is_resumed_by_a_rerun() {
    let s = Scratch::new();
    let journal = journal_with(&s, "journal", 30, 10);
    let catalog = s.path_str("catalog.db");
    let warehouse = s.path_str("warehouse");
    for table in ["shop.orders", "shop.orders_copy"] {
        apply_in(&s, &journal, &catalog, &warehouse, table);
    }
    let backups = s.path_str("backups");
    let id = backup(&s, &catalog, &warehouse, &backups);
    let before = s.path_str("before.json");
    record(&s, &[], &catalog, &warehouse, &before);

    std::fs::create_dir_all(s.path("new")).unwrap();
    let new = s.path_str("new/catalog.db");
    let restore = [
        "catalog",
        "restore",
        "--catalog",
        &new,
        "--warehouse",
        &warehouse,
        "--from",
        &backups,
        "--id",
        &id,
        "--expect",
        "empty",
        "--json",
    ];
    let crashed = s.run_with(&[("TIDEMARK_FAILPOINT", "restore:after-table:1")], &restore);
    assert_eq!(crashed.code, 86, "{}", crashed.stderr);
    let state = s
        .run(&[
            "catalog",
            "state",
            "--catalog",
            &new,
            "--warehouse",
            &warehouse,
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(
        state["tables"].as_object().map(|m| m.len()),
        Some(1),
        "one table restored: {state}"
    );

    let done = s.run(&restore).ok().json();
    assert_eq!(done["applied"], true, "{done}");
    let actions: Vec<&str> = done["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["unchanged", "register"], "{done}");
    let after = s.path_str("after.json");
    record(&s, &[], &new, &warehouse, &after);
    s.run(&["history", "compare", &before, &after]).ok();
    // Once more: nothing to do.
    let again = s.run(&restore).ok().json();
    assert!(
        again["tables"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["action"] == "unchanged"),
        "{again}"
    );
}
