//! The game day, step by step ([`run`]), and the checks of the user's catalogs it runs first.

use std::collections::HashMap;
use std::time::Instant;

use tidemark_journal::clock::Clock;
use tidemark_schemas::FORMAT_VERSION;

use super::catalogs;
use super::place::{GamedayOptions, NAMESPACE, Place, wipe};
use super::recover_catalog::recover_catalog;
use super::report::{GamedayError, GamedayReport, GamedayRun, fail};
use super::tables::{build_tables, commit, pointers_of};
use crate::dr::copy::{self, CopyOptions, Phase};
use crate::dr::history::{self};
use crate::dr::rebuild::warehouse_base;
use crate::dr::replica;
use crate::ids::Ids;
use crate::recover::snapshot::PrefixMap;
use crate::rehearse::drill::{DrillCheck, DrillStep, Timer};
use crate::table::TableError;

/// Checks `--catalog` and `--dr-catalog` as [`run`] does first, returning the catalog's own
/// error (for its exit code): a catalog that cannot take part is refused before anything is made.
pub async fn check_catalogs(opts: &GamedayOptions) -> Result<(), TableError> {
    let place = Place::of(opts).map_err(|reason| TableError::InvalidCatalog {
        uri: opts.work.display().to_string(),
        reason: format!("the game day's work folder: {reason}"),
    })?;
    catalogs::preflight(opts, &place.warehouse("gameday-source"), &place.warehouse("gameday-dr"))
        .await
        .map(|_| ())
}

/// After a game day on the user's catalogs that failed part-way: drops its scratch namespace
/// there (call only when [`check_catalogs`] passed); what could not be dropped.
pub async fn drop_scratch(opts: &GamedayOptions) -> Vec<String> {
    match Place::of(opts) {
        Ok(place) => {
            catalogs::drop_scratch(opts, &place.warehouse("gameday-source"), &place.warehouse("gameday-dr")).await
        }
        Err(reason) => vec![format!("the game day's work folder: {reason}")],
    }
}

/// Runs the game day (see the module documentation).
pub async fn run(
    opts: &GamedayOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&DrillStep),
) -> Result<GamedayReport, GamedayError> {
    let started = Instant::now();
    let mut timer = Timer {
        steps: Vec::new(),
        progress,
    };
    let place = Place::of(opts).map_err(fail("setup"))?;
    // The user's catalogs are checked before anything is created or cleared.
    let user = catalogs::preflight(opts, &place.warehouse("gameday-source"), &place.warehouse("gameday-dr"))
        .await
        .map_err(|e| fail("setup")(e.to_string()))?;
    // A previous game day in the same place is cleared (only tidemark's own scratch names).
    for rel in ["gameday-source", "gameday-dr", "gameday-source-2", "gameday-dr-2"] {
        place.clear(rel).await.map_err(fail("setup"))?;
    }
    let mut checks = Vec::new();
    let mut runs = Vec::new();

    // Setup and 1: the tables, recorded.
    let t = Instant::now();
    let src_wh = place.warehouse("gameday-source");
    let source = match user.source {
        Some(h) => h,
        None => place.catalog("gameday-source", &src_wh).await.map_err(fail("setup"))?,
    };
    let tables = build_tables(&source, opts, clock, ids).await.map_err(fail("setup"))?;
    let src_wh = match opts.catalog {
        Some(_) => catalogs::warehouse_of(&tables).map_err(fail("setup"))?,
        None => src_wh,
    };
    let pointers = pointers_of(&tables);
    timer.done(
        "setup",
        t,
        format!(
            "{} tables x {} commits x {} rows, tag eod and branch audit on each, {}, in {src_wh}",
            opts.tables,
            opts.commits.max(3),
            opts.rows_per_commit,
            if source.kind() == crate::catalog::CatalogKind::Rest {
                "no stray (the REST server writes the metadata files)"
            } else {
                "one stray"
            }
        ),
        false,
    );
    let t = Instant::now();
    let record = history::record(&source, Some(NAMESPACE))
        .await
        .map_err(|e| fail("record")(e.to_string()))?;
    timer.done(
        "1 record",
        t,
        format!("{} tables: rows, snapshots, refs, schema", record.tables.len()),
        false,
    );

    // 2: replicate consistently, then lose the region.
    let t = Instant::now();
    let dr_url = place.url("gameday-dr");
    let only_ours = CopyOptions {
        tables: Some(catalogs::names(opts)),
        ..CopyOptions::default()
    };
    let copied = copy::copy(&src_wh, &dr_url, &only_ours, &mut |_| {})
        .await
        .map_err(|e| fail("replicate")(e.to_string()))?;
    if !copied.is_complete() {
        return Err(fail("replicate")(format!("the copy did not complete: {copied:?}")));
    }
    let lost = match opts.catalog {
        // A user's catalog is never damaged: the game day stops using it (a simulated loss).
        Some(_) => format!("then {} no longer used (a simulated loss)", source.reference()),
        None => {
            let lost = wipe(&src_wh).await.map_err(fail("lose"))?;
            std::fs::remove_dir_all(place.work.join("catalogs/gameday-source"))
                .map_err(|e| fail("lose")(e.to_string()))?;
            format!("then the source catalog and its {lost} objects deleted")
        }
    };
    let user_source = opts.catalog.is_some().then_some(source);
    timer.done(
        "2 lose the region",
        t,
        format!("replica made by `replica copy` ({} objects); {lost}", copied.copied),
        false,
    );
    let (dr, user_dr) = match user.dr {
        Some(h) => (h.clone(), Some(h)),
        None => (
            place
                .catalog("gameday-dr", &place.warehouse("gameday-dr"))
                .await
                .map_err(fail("setup"))?,
            None,
        ),
    };
    let run1 = recover_catalog(&mut timer, "consistent copy", &src_wh, &dr_url, &dr, &record).await?;
    checks.push(DrillCheck {
        check: "every table equals the record after the consistent copy".into(),
        ok: run1.failed_validation.is_empty() && run1.tables.len() == opts.tables,
        detail: format!(
            "{} tables validated",
            run1.tables.iter().filter(|t| t.validated).count()
        ),
    });
    runs.push(run1);

    // 8: the same, with a data-first copy while a writer commits to half the tables.
    let t = Instant::now();
    let src2 = place.warehouse("gameday-source-2");
    let source2 = place.catalog("gameday-source-2", &src2).await.map_err(fail("setup"))?;
    let mut tables2 = build_tables(&source2, opts, clock, ids).await.map_err(fail("setup"))?;
    let dr2_url = place.url("gameday-dr-2");
    let unsafe_opts = CopyOptions::default();
    copy::copy_phase(&src2, &dr2_url, &unsafe_opts, Phase::Data, &mut |_| {})
        .await
        .map_err(|e| fail("wrong-order copy")(e.to_string()))?;
    let writes = opts.tables.div_ceil(2);
    let mut written = Vec::new();
    for t in tables2.iter_mut().take(writes) {
        *t = commit(&source2, t, 50, opts.rows_per_commit, clock, ids)
            .await
            .map_err(|e| fail("live writer")(e.to_string()))?;
        written.push(t.identifier().to_string());
    }
    copy::copy_phase(&src2, &dr2_url, &unsafe_opts, Phase::Metadata, &mut |_| {})
        .await
        .map_err(|e| fail("wrong-order copy")(e.to_string()))?;
    let record2 = history::record(&source2, Some(NAMESPACE))
        .await
        .map_err(|e| fail("record")(e.to_string()))?;
    let src2_base = warehouse_base(&src2).map_err(|e| fail("lose")(e.to_string()))?;
    let map = PrefixMap {
        from: src2_base.clone(),
        to: warehouse_base(&dr2_url).map_err(|e| fail("lose")(e.to_string()))?,
    };
    wipe(&src2).await.map_err(fail("lose"))?;
    drop(source2);
    std::fs::remove_dir_all(place.work.join("catalogs/gameday-source-2")).map_err(|e| fail("lose")(e.to_string()))?;
    let check = replica::check(&dr2_url, dr.file_io_props(), Some(&map))
        .await
        .map_err(|e| fail("replica check")(e.to_string()))?;
    let behind: Vec<(String, usize)> = check
        .tables
        .iter()
        .filter_map(|t| t.behind_commits.filter(|b| *b > 0).map(|b| (t.table.clone(), b)))
        .collect();
    timer.done(
        "8 wrong-order copy under a live writer",
        t,
        format!(
            "data/ copied, then {} commits by a live writer ({}), then metadata/; record taken, region lost; \
             replica check: {} tables behind",
            written.len(),
            written.join(", "),
            behind.len()
        ),
        false,
    );
    let dr2 = place
        .catalog("gameday-dr-2", &place.warehouse("gameday-dr-2"))
        .await
        .map_err(fail("setup"))?;
    let mut run2 = recover_catalog(
        &mut timer,
        "data-first copy under a live writer",
        &src2_base,
        &dr2_url,
        &dr2,
        &record2,
    )
    .await?;
    run2.replica_behind = behind.clone();
    // The object-level copy carried the stray along (the consistent copy copies only what a
    // chain references); the chain set it aside in both.
    let pointers2 = pointers_of(&tables2);
    let heads_match = |run: &GamedayRun, pointers: &HashMap<String, String>| {
        run.tables.iter().all(|t| {
            t.head
                .as_deref()
                .is_some_and(|h| pointers.get(&t.table).is_some_and(|p| p == h))
        })
    };
    let strays2: usize = run2.tables.iter().map(|t| t.strays).sum();
    checks.push(DrillCheck {
        check: "every head chosen by the chain is the lost catalog's pointer (strays not chosen)".into(),
        ok: heads_match(&runs[0], &pointers) && heads_match(&run2, &pointers2) && strays2 > 0,
        detail: format!(
            "consistent copy: {} strays copied; object-level copy: {strays2} strays found and set aside",
            runs[0].tables.iter().map(|t| t.strays).sum::<usize>()
        ),
    });
    let mut caught = run2.failed_validation.clone();
    caught.sort();
    written.sort();
    checks.push(DrillCheck {
        check: "step 6 catches every table the wrong-order copy broke, and only those".into(),
        ok: caught == written && !written.is_empty(),
        detail: format!(
            "failed validation: {}; written during the copy: {}",
            caught.join(", "),
            written.join(", ")
        ),
    });
    let mut behind_tables: Vec<String> = behind.iter().map(|(t, _)| t.clone()).collect();
    behind_tables.sort();
    checks.push(DrillCheck {
        check: "replica check names an older consistent head for those tables (RPO 1 commit)".into(),
        ok: behind_tables == written && behind.iter().all(|(_, b)| *b == 1),
        detail: behind
            .iter()
            .map(|(t, b)| format!("{t}: {b} behind"))
            .collect::<Vec<_>>()
            .join(", "),
    });
    runs.push(run2);
    if let Some(check) = catalogs::catalogs_cleanup(opts, user_source.as_ref(), user_dr.as_ref()).await {
        checks.push(check);
    }

    Ok(GamedayReport {
        format_version: FORMAT_VERSION,
        ok: checks.iter().all(|c| c.ok),
        location: place.base.clone(),
        tables: opts.tables,
        steps: timer.steps,
        runs,
        checks,
        total_ms: started.elapsed().as_millis() as u64,
        s3_requests: None,
    })
}

#[cfg(test)]
mod tests {
    use tidemark_journal::clock::SystemClock;

    use super::*;
    use crate::ids::SeededIds;

    #[tokio::test]
    async fn a_game_day_on_a_folder_passes_and_catches_the_wrong_order_copy() {
        let dir = tempfile::tempdir().unwrap();
        let opts = GamedayOptions {
            work: dir.path().to_path_buf(),
            store: None,
            tables: 3,
            commits: 3,
            rows_per_commit: 20,
            catalog: None,
            dr_catalog: None,
        };
        let mut steps = Vec::new();
        let report = run(&opts, &SystemClock, &SeededIds::new(5), &mut |s| {
            steps.push(s.step.clone())
        })
        .await
        .unwrap();
        assert!(report.ok, "{}", report.markdown());
        assert_eq!(report.runs.len(), 2);
        assert!(report.runs[0].failed_validation.is_empty());
        assert_eq!(report.runs[1].failed_validation, vec!["gameday.t00", "gameday.t01"]);
        assert!(
            report.runs[1].tables[0].detail.contains("scan failed"),
            "{:?}",
            report.runs[1].tables[0]
        );
        assert_eq!(
            report.runs[0].tables[0].strays, 0,
            "the consistent copy copies referenced files only"
        );
        assert_eq!(report.runs[1].tables[0].strays, 1);
        for n in [
            "1 record",
            "2 lose the region",
            "8 wrong-order copy under a live writer",
        ] {
            assert!(steps.iter().any(|s| s == n), "{steps:?}");
        }
        for n in ["3 discover", "4 choose by chain", "5 register", "6 validate", "7 RTO"] {
            assert_eq!(steps.iter().filter(|s| s.starts_with(n)).count(), 2, "{n}: {steps:?}");
        }
        assert!(report.markdown().contains("| gameday.t00 |"));
    }
}
