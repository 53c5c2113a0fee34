//! The suite's table on the terminal: each size's steps, peers and ratios, read from the JSON
//! report the run writes (the JSON holds every figure; this is what a reader looks at first).

use serde_json::Value;

use super::{STATE_PEERS, apply_runs, f};

pub(crate) fn print_table(r: &Value) {
    let s2 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
    let s0 = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    println!("\nmachine: {}", r["machine"]);
    for s in r["sizes"].as_array().unwrap() {
        let t = &s["tidemark"];
        println!("\n== {} rows + {} events ==", s["rows"], s["events"]);
        println!("{:<34} {:>10} {:>12}", "step", "seconds", "peak RSS MB");
        let row =
            |name: &str, secs: Option<f64>, rss: Option<f64>| println!("{name:<34} {:>10} {:>12}", s2(secs), s0(rss));
        row(
            "tidemark journal verify",
            f(t, &["verify", "seconds"]),
            f(t, &["verify", "peak_rss_mb"]),
        );
        row(
            "tidemark seed",
            f(t, &["recovery", "seed_s"]),
            f(t, &["recovery", "step_peak_rss_mb", "seed"]),
        );
        row(
            "tidemark replay",
            f(t, &["recovery", "replay_s"]),
            f(t, &["recovery", "step_peak_rss_mb", "replay"]),
        );
        row(
            "tidemark validate",
            f(t, &["recovery", "validate_s"]),
            f(t, &["recovery", "step_peak_rss_mb", "validate"]),
        );
        row(
            "tidemark total recovery (+verify)",
            f(t, &["recovery", "total_s"]),
            f(t, &["recovery", "peak_rss_mb"]),
        );
        row("tidemark recovery CPU seconds", f(t, &["recovery", "cpu_s"]), None);
        row(
            "sha256sum (event objects)",
            f(&s["peers"], &["sha256sum", "seconds"]),
            None,
        );
        for p in STATE_PEERS {
            let v = &s["peers"][p];
            let what = match v["conflict_check"].as_bool() {
                Some(true) => "state + check",
                Some(false) => "state only",
                None if v.get("skipped").is_some() => "skipped",
                None => "failed",
            };
            row(&format!("{p} ({what})"), f(v, &["seconds"]), f(v, &["peak_rss_mb"]));
        }
        // The recovery on the other engines (seed and replay are one distributed step there).
        if let Some(by) = t["recovery_by_engine"].as_object() {
            for (e, rec) in by.iter().filter(|(e, _)| *e != "local") {
                row(
                    &format!("{e}: replay"),
                    f(rec, &["replay_s"]),
                    f(rec, &["step_peak_rss_mb", "replay"]),
                );
                row(
                    &format!("{e}: validate"),
                    f(rec, &["validate_s"]),
                    f(rec, &["step_peak_rss_mb", "validate"]),
                );
                row(&format!("{e}: total"), f(rec, &["total_s"]), f(rec, &["peak_rss_mb"]));
                println!(
                    "{:<34} {:>10}",
                    format!("{e}: recovery/checked peer"),
                    s2(f(&s["ratios"], &["recovery_vs_fastest_checked_peer_by_engine", e]))
                );
            }
        }
        apply_runs::print(&t["apply"]);
        let ra = &s["ratios"];
        println!(
            "ratios: verify/sha256sum throughput {} (target >= 0.8)",
            s2(f(ra, &["verify_vs_sha256sum_throughput"]))
        );
        for (kind, target) in [("checked", "replay <= 1.0, recovery <= 1.5"), ("state_only", "")] {
            println!(
                "ratios to the fastest {} peer ({}): replay {}, recovery {}{}",
                kind.replace('_', "-"),
                ra[format!("fastest_{kind}_peer")].as_str().unwrap_or("none"),
                s2(f(ra, &[format!("replay_vs_fastest_{kind}_peer").as_str()])),
                s2(f(ra, &[format!("recovery_vs_fastest_{kind}_peer").as_str()])),
                if target.is_empty() {
                    String::new()
                } else {
                    format!(" (targets: {target})")
                }
            );
        }
        println!(
            "CPU seconds (user + system) to the fastest checked peer's: recovery {}",
            s2(f(ra, &["recovery_cpu_vs_fastest_checked_peer"]))
        );
        println!("same final state as tidemark: {}", s["same_final_state"]);
    }
    let p = &r["pyiceberg"];
    println!(
        "\n== PyIceberg upsert() at {} rows + {} events ==\nupsert {} s vs tidemark replay {} s: tidemark {}x faster (target >= 50); same final state: {}",
        p["rows"],
        p["events"],
        s2(f(p, &["pyiceberg_upsert", "seconds"])),
        s2(f(p, &["tidemark_replay_s"])),
        s2(f(p, &["upsert_vs_tidemark_replay_time"])),
        p["same_final_state"]
    );
    let d = &r["drill"];
    if !d.is_null() {
        println!(
            "\n== the drill of a real table at {} rows + {} events (issue 32) ==\n{:<34} {:>10} {:>12}",
            d["rows"], d["events"], "command", "seconds", "peak RSS MB"
        );
        for (name, k) in [
            ("tidemark recover --dry-run", "recover_dry_run"),
            ("tidemark drill --source-table", "drill"),
        ] {
            println!(
                "{name:<34} {:>10} {:>12}",
                s2(f(d, &[k, "seconds"])),
                s0(f(d, &[k, "peak_rss_mb"]))
            );
        }
        println!(
            "drill / recover --dry-run: {}x",
            s2(f(d, &["drill_vs_recover_dry_run_time"]))
        );
        let a = &d["audit"];
        println!(
            "\n== the audit (issue 30): a history of {} applier commits, then a foreign commit rewriting 1% ==",
            a["history_commits"]
        );
        println!(
            "{:<34} {:>10} {:>12} {:>12}",
            "command", "seconds", "peak RSS MB", "files read"
        );
        for (name, k) in [
            ("first audit", "first_audit"),
            ("incremental audit", "incremental_audit"),
        ] {
            println!(
                "{name:<34} {:>10} {:>12} {:>12}",
                s2(f(a, &[k, "seconds"])),
                s0(f(a, &[k, "peak_rss_mb"])),
                s0(f(a, &[k, "output", "files_read"]))
            );
        }
        println!(
            "{:<34} {:>10}   ({} data + {} delete files the foreign commit touched, {} bytes)",
            "DuckDB reading the same files",
            s2(f(a, &["duckdb_read_touched", "seconds"])),
            a["touched_files"]["data_files"].as_array().map_or(0, Vec::len),
            a["touched_files"]["delete_files"].as_array().map_or(0, Vec::len),
            a["touched_files"]["bytes"]
        );
        println!(
            "incremental audit / DuckDB read: {}x",
            s2(f(a, &["incremental_audit_vs_duckdb_read_time"]))
        );
    }
}
