//! The drill itself ([`run`]) and its options ([`DrillOptions`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use tidemark_journal::Journal;
use tidemark_journal::clock::Clock;
use tidemark_journal::generate::OrderGen;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::store::{self, ObjectStore, PutMode, StoreError, list_all};
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_router::{Fence, FlipRequest, RouteStore};
use tidemark_schemas::{FORMAT_VERSION, OrderEvent};

use super::report::{Cause, DrillCheck, DrillError, DrillReport, DrillStep, Timer, fail};
use crate::apply::{ApplyOptions, Guard, RouteFence, applied_state, apply, apply_all};
use crate::catalog::{CatalogConfig, CatalogHandle, open_catalog};
use crate::ids::Ids;
use crate::query::routed_context_with;
use crate::recover::snapshot::{PrefixMap, SnapshotChoice, SnapshotSource};
use crate::recover::{RecoverOptions, recover};
use crate::rehearse::fault::delete_rows;
use crate::table;

#[derive(Debug, Clone)]
pub struct DrillOptions {
    /// A folder for catalogs (and, without `store`, for everything).
    pub work: std::path::PathBuf,
    /// `s3://bucket/prefix` for the journal, warehouses and route; default: the work folder.
    pub store: Option<String>,
    pub orders: u64,
    pub events: u64,
    pub seed: u64,
    /// The catalog of the source and recovered tables (what `--catalog` accepts); default: a
    /// SQLite catalog each for the source and the DR side, in the work folder. A given catalog
    /// holds both tables, in a namespace of the drill's own (`drill_<id>`), so drills never meet.
    pub catalog: Option<String>,
}

fn event(position: u64, id: &str, version: i64, status: &str, deleted: bool, time: &str) -> OrderEvent {
    OrderEvent {
        format_version: None,
        position,
        order_id: id.to_string(),
        order_version: version,
        customer_id: format!("c-{id}"),
        status: status.into(),
        amount: format!("{version}.00"),
        currency: "EUR".into(),
        is_deleted: deleted,
        event_time: time.into(),
    }
}

fn ndjson(events: &[OrderEvent]) -> String {
    events
        .iter()
        .map(|e| serde_json::to_string(e).expect("event serializes") + "\n")
        .collect()
}

/// Copies every object under `from` to `to` in one store (bucket replication: objects, not tables).
async fn copy_prefix(store: &dyn ObjectStore, from: &str, to: &str) -> Result<u64, StoreError> {
    let mut n = 0;
    for obj in list_all(store, from).await? {
        let body = store.get(&obj.key, None).await?.body;
        store
            .put(&format!("{to}{}", &obj.key[from.len()..]), body, PutMode::Overwrite)
            .await?;
        n += 1;
    }
    Ok(n)
}

pub async fn run(
    opts: &DrillOptions,
    clock: &dyn Clock,
    ids: &dyn Ids,
    progress: &mut dyn FnMut(&DrillStep),
) -> Result<DrillReport, DrillError> {
    let started = Instant::now();
    let mut timer = Timer {
        steps: Vec::new(),
        progress,
    };
    std::fs::create_dir_all(&opts.work).map_err(fail("setup"))?;
    let work = std::fs::canonicalize(&opts.work).map_err(fail("setup"))?;
    let base = opts.store.clone().unwrap_or_else(|| work.display().to_string());
    let base = base.trim_end_matches('/').to_string();
    let url = |rel: &str| format!("{base}/{rel}");
    let warehouse_url = |rel: &str| {
        if base.starts_with("s3://") {
            url(rel)
        } else {
            format!("file://{base}/{rel}")
        }
    };

    // Setup.
    let t = Instant::now();
    let setup = &fail::<StoreError>("setup");
    let root = store::open_or_create(&base).await.map_err(setup)?;
    let journal_store = store::open_or_create(&url("journal")).await.map_err(setup)?;
    let journal = Journal::init(journal_store, orders_spec(), format!("drill-{}", ids.uuid()), clock)
        .await
        .map_err(fail("setup"))?;
    let ns = match &opts.catalog {
        Some(_) => format!("drill_{}", &ids.uuid().simple().to_string()[..12]),
        None => "shop".to_string(),
    };
    let (src_name, rec_name) = (format!("{ns}.orders"), format!("{ns}.orders_recovered"));
    let open = |dir: &str, wh: &str| {
        let cfg = CatalogConfig {
            uri: match &opts.catalog {
                Some(c) => c.clone(),
                None => work.join(dir).join("catalog.db").display().to_string(),
            },
            warehouse: wh.to_string(),
            name: String::new(),
        };
        let d = work.join(dir);
        async move {
            std::fs::create_dir_all(&d).map_err(Cause::from)?;
            open_catalog(&cfg).await.map_err(Cause::from)
        }
    };
    let source: CatalogHandle = open("source", &warehouse_url("source-warehouse"))
        .await
        .map_err(fail("setup"))?;
    let dr: CatalogHandle = open("dr", &warehouse_url("dr-warehouse"))
        .await
        .map_err(fail("setup"))?;
    let routes = RouteStore::new(store::open_or_create(&url("route")).await.map_err(setup)?);
    timer.done(
        "setup",
        t,
        format!(
            "journal and route under {base}; {src_name} in the {}, {rec_name} in the {}",
            source.reference(),
            dr.reference()
        ),
        false,
    );

    // Phase 1: orders flow in; A, B, C among them.
    let t = Instant::now();
    let mut events: Vec<OrderEvent> = ["A", "B", "C"]
        .iter()
        .enumerate()
        .map(|(i, id)| event(i as u64 + 1, id, 1, "placed", false, "2026-11-01T10:00:00Z"))
        .collect();
    let mut g = OrderGen::new(opts.seed, opts.orders, 4);
    for _ in 0..opts.events {
        events.push(g.next_event());
    }
    let aopts = AppendOptions {
        batch_size: (opts.events as usize / 10).max(100),
        writer_id: "drill-writer".into(),
        source_name: "drill phase 1".into(),
    };
    append(&journal, ndjson(&events).as_bytes(), &aopts, clock, &mut |_| {})
        .await
        .map_err(fail("generate"))?;
    let before_bad = g.next_position() - 1;
    timer.done(
        "generate and journal",
        t,
        format!("{} events, positions 1..={before_bad}", events.len()),
        false,
    );

    let t = Instant::now();
    let r = apply_all(&journal, &source, &src_name, clock, ids)
        .await
        .map_err(fail("apply"))?;
    let src = table::load_table(&source, &src_name).await.map_err(fail("apply"))?;
    let first_route = FlipRequest {
        table_name: src_name.clone(),
        catalog: source.reference().clone(),
        metadata_location: src.metadata_location().unwrap_or_default().into(),
        table_uuid: src.metadata().uuid().to_string(),
        applied_position: r.applied_to_position,
        reason: "drill: the production table".into(),
        recovery_id: None,
    };
    routes.init(first_route, clock).await.map_err(fail("apply"))?;
    timer.done(
        "apply with checkpoints",
        t,
        format!(
            "{} commits, {} checkpoints; route generation 1",
            r.commits, r.checkpoints_written
        ),
        false,
    );

    // The bad cleanup job.
    let t = Instant::now();
    let threshold = OrderGen::order_id(opts.orders * 7 / 10);
    let bad = delete_rows(
        &source,
        &src_name,
        &format!("order_id IN ('A', 'B', 'C') OR order_id >= '{threshold}'"),
        clock,
        ids,
    )
    .await
    .map_err(fail("bad delete"))?;
    timer.done(
        "bad delete",
        t,
        format!("{} rows deleted outside the journal", bad.rows_deleted),
        false,
    );

    // Replication copies the warehouse, damage included.
    let t = Instant::now();
    let copied = copy_prefix(root.as_ref(), "source-warehouse/", "dr-warehouse/")
        .await
        .map_err(fail("replicate"))?;
    let src = table::load_table(&source, &src_name).await.map_err(fail("replicate"))?;
    let replica_metadata = src.metadata_location().unwrap_or_default().to_string();
    // The source table's own S3 settings (a REST catalog vends them per table) over the DR's.
    let mut replica_props = dr.file_io_props().clone();
    replica_props.extend(src.file_io().config().props().clone());
    let replica_snapshots = src.metadata().snapshots().count() as u64;
    let replica_position = applied_state(&src).position;
    timer.done("replicate to DR", t, format!("{copied} objects copied"), false);

    // The stream goes on: B updated, C deleted, D new, E late, plus more orders.
    let t = Instant::now();
    let mut p = before_bad;
    let mut next = |id: &str, v: i64, status: &str, deleted: bool, time: &str| {
        p += 1;
        event(p, id, v, status, deleted, time)
    };
    let mut more = vec![
        next("B", 2, "shipped", false, "2026-11-20T09:00:00Z"),
        next("C", 2, "cancelled", true, "2026-11-20T09:05:00Z"),
        next("D", 1, "placed", false, "2026-11-20T09:10:00Z"),
        next("E", 1, "placed", false, "2026-10-01T08:00:00Z"),
    ];
    let mut g2 = OrderGen::new(opts.seed + 1, opts.orders, p + 1);
    for _ in 0..(opts.events / 5).max(10) {
        more.push(g2.next_event());
    }
    more.iter_mut().skip(4).for_each(|e| e.order_version += 1_000); // newer than phase 1
    let aopts = AppendOptions {
        source_name: "drill phase 2".into(),
        ..aopts.clone()
    };
    append(&journal, ndjson(&more).as_bytes(), &aopts, clock, &mut |_| {})
        .await
        .map_err(fail("stream"))?;
    // The applier finds the bad write (another writer's commit since its own last one that the
    // journal does not explain) and commits nothing on top of it.
    let stopped = apply_all(&journal, &source, &src_name, clock, ids).await;
    let h_expected = g2.next_position() - 1;
    let applier_stopped = match &stopped {
        Err(crate::apply::ApplyError::Divergence(d)) => Some(d.snapshot_id),
        _ => None,
    };
    timer.done(
        "stream continues",
        t,
        format!(
            "{} events (A–E among them) to position {h_expected}; the applier {}",
            more.len(),
            match (&stopped, applier_stopped) {
                (_, Some(s)) => format!("stopped at the bad write (snapshot {s}) and committed nothing"),
                (Ok(r), None) => format!("did not stop: {} commits on the damaged table", r.commits),
                (Err(e), None) => format!("failed: {e}"),
            }
        ),
        false,
    );

    // Recovery from the DR copy.
    let rec_started = Instant::now();
    let recovery_id = format!("drill-{}", ids.uuid());
    let ropts = RecoverOptions {
        recovery_id: recovery_id.clone(),
        source: SnapshotSource {
            metadata_location: replica_metadata,
            file_io_props: replica_props,
            prefix_map: Some(PrefixMap {
                from: warehouse_url("source-warehouse"),
                to: warehouse_url("dr-warehouse"),
            }),
        },
        // No snapshot named: the audit finds the bad write and the newest trusted snapshot
        // (the drill never tells it where the fault was).
        choice: SnapshotChoice::Trusted,
        to: None,
        into: rec_name.clone(),
        partition_rows: None,
        validation_split: Default::default(),
        trust: Default::default(),
    };
    let route_at_start = routes
        .read()
        .await
        .map_err(fail("recover"))?
        .ok_or_else(|| fail("recover")("no route"))?;
    let mut rsteps = Vec::new();
    let (report, recovered) = recover(&journal, &dr, &ropts, clock, ids, &mut |s| rsteps.push(s.clone()))
        .await
        .map_err(fail("recover"))?;
    for s in rsteps {
        let st = DrillStep {
            step: format!("recover: {}", s.step),
            ms: s.ms,
            detail: s.detail,
            recovery: true,
        };
        (timer.progress)(&st);
        timer.steps.push(st);
    }
    let found = report.audit.first_divergence.as_ref();
    let mut checks = vec![
        DrillCheck {
            check: "the applier stopped at the bad write".into(),
            ok: applier_stopped.is_some() && applier_stopped == bad.snapshot_id,
            detail: format!(
                "stopped at snapshot {}; the bad delete was snapshot {}",
                applier_stopped.map_or("(none)".into(), |s| s.to_string()),
                bad.snapshot_id.map_or("?".into(), |s| s.to_string())
            ),
        },
        DrillCheck {
            check: "the audit found the bad write".into(),
            ok: found.is_some_and(|d| Some(d.snapshot_id) == bad.snapshot_id && d.counts.removed == bad.rows_deleted),
            detail: crate::recover::audited::describe(found),
        },
        DrillCheck {
            check: "recovery started from the snapshot before it".into(),
            ok: report.snapshot_position == before_bad,
            detail: format!(
                "snapshot {} at position {} (the bad delete came after position {before_bad})",
                report.source_snapshot_id, report.snapshot_position
            ),
        },
    ];
    checks.push(DrillCheck {
        check: "validation against the reference".into(),
        ok: report.validation.ok,
        detail: format!(
            "{} keys, {} mismatches",
            report.validation.keys_expected,
            report.validation.first_mismatches.len()
        ),
    });
    let t = Instant::now();
    let mut flipped = false;
    if report.validation.ok {
        let req = FlipRequest {
            table_name: rec_name.clone(),
            catalog: dr.reference().clone(),
            metadata_location: recovered.metadata_location().unwrap_or_default().into(),
            table_uuid: recovered.metadata().uuid().to_string(),
            applied_position: report.h,
            reason: "drill: recovered after the bad delete".into(),
            recovery_id: Some(recovery_id.clone()),
        };
        routes
            .flip(&route_at_start.1, route_at_start.0.generation, req, clock)
            .await
            .map_err(fail("flip"))?;
        flipped = true;
    }
    timer.done(
        "recover: flip route",
        t,
        if flipped {
            "generation 2".into()
        } else {
            "not flipped: validation failed".into()
        },
        true,
    );
    let rto_ms = rec_started.elapsed().as_millis() as u64;

    // A stale controller that read the route before the flip is refused.
    let stale = FlipRequest {
        table_name: src_name.clone(),
        catalog: source.reference().clone(),
        metadata_location: "stale".into(),
        table_uuid: "stale".into(),
        applied_position: 0,
        reason: "a stale controller".into(),
        recovery_id: None,
    };
    let stale_refused = routes
        .flip(&route_at_start.1, route_at_start.0.generation, stale, clock)
        .await
        .is_err();
    checks.push(DrillCheck {
        check: "stale controller refused (If-Match)".into(),
        ok: stale_refused,
        detail: "flip from generation 1 after the flip to 2".into(),
    });

    // The next writer resumes after H, fenced by the route.
    let t = Instant::now();
    let mut gen3 = OrderGen::new(opts.seed + 2, opts.orders, h_expected + 1);
    let mut tail: Vec<OrderEvent> = (0..20).map(|_| gen3.next_event()).collect();
    tail.iter_mut().for_each(|e| e.order_version += 2_000);
    let aopts = AppendOptions {
        source_name: "drill phase 3".into(),
        ..aopts.clone()
    };
    append(&journal, ndjson(&tail).as_bytes(), &aopts, clock, &mut |_| {})
        .await
        .map_err(fail("resume"))?;
    let (fence, route) = Fence::acquire(&routes).await.map_err(fail("resume"))?;
    let guard = Guard(Arc::new(RouteFence {
        routes: routes.clone(),
        fence,
    }));
    let resumed = apply(
        &journal,
        &dr,
        &route.table_name,
        &ApplyOptions {
            guard: Some(guard),
            ..Default::default()
        },
        clock,
        ids,
        &mut |_| {},
    )
    .await
    .map_err(fail("resume"))?;
    timer.done(
        "writer resumes after H",
        t,
        format!(
            "positions {}..={} into {}",
            resumed.started_after_position + 1,
            resumed.applied_to_position,
            route.table_name
        ),
        false,
    );
    checks.push(DrillCheck {
        check: "next writer starts after H".into(),
        ok: resumed.started_after_position == report.h,
        detail: format!("started after {}, H = {}", resumed.started_after_position, report.h),
    });

    // A reader queries through the route.
    let t = Instant::now();
    let (ctx, routed) = routed_context_with(&routes, "orders", "is_deleted", Some(&dr))
        .await
        .map_err(fail("query"))?;
    let rows = ctx.sql("SELECT order_id, order_version, status, is_deleted FROM orders_with_tombstones WHERE order_id IN ('A','B','C','D','E')").await.map_err(fail("query"))?.collect().await.map_err(fail("query"))?;
    let visible = ctx
        .sql("SELECT count(*) FROM orders")
        .await
        .map_err(fail("query"))?
        .collect()
        .await
        .map_err(fail("query"))?;
    timer.done(
        "query through the route",
        t,
        format!("generation {}: {}", routed.generation, routed.table_name),
        false,
    );
    let mut story: BTreeMap<String, (i64, String, bool)> = BTreeMap::new();
    for b in &rows {
        for r in 0..b.num_rows() {
            let cell = |i: usize| {
                crate::reference::cell(
                    b.column(i).as_ref(),
                    if i == 1 {
                        tidemark_journal::spec::ColumnType::Long
                    } else if i == 3 {
                        tidemark_journal::spec::ColumnType::Boolean
                    } else {
                        tidemark_journal::spec::ColumnType::String
                    },
                    r,
                )
            };
            let (
                crate::reference::Cell::Str(id),
                crate::reference::Cell::Long(v),
                crate::reference::Cell::Str(st),
                crate::reference::Cell::Bool(d),
            ) = (cell(0), cell(1), cell(2), cell(3))
            else {
                continue;
            };
            story.insert(id, (v, st, d));
        }
    }
    let expect = [
        ("A", 1, "placed", false),
        ("B", 2, "shipped", false),
        ("C", 2, "cancelled", true),
        ("D", 1, "placed", false),
        ("E", 1, "placed", false),
    ];
    for (id, v, st, d) in expect {
        let got = story.get(id);
        let ok = got == Some(&(v, st.to_string(), d));
        let row = |v: i64, st: &str, d: bool| format!("version {v} {st}{}", if d { " (tombstone)" } else { "" });
        checks.push(DrillCheck {
            check: format!("order {id}"),
            ok,
            detail: format!(
                "expected {}; found {}",
                row(v, st, d),
                got.map_or("no row".into(), |(v, st, d)| row(*v, st, *d))
            ),
        });
    }
    let visible_count = visible
        .first()
        .map(|b| crate::reference::cell(b.column(0).as_ref(), tidemark_journal::spec::ColumnType::Long, 0))
        .unwrap_or(crate::reference::Cell::Null);
    checks.push(DrillCheck {
        check: "readers follow the route".into(),
        ok: routed.generation == 2 && routed.table_name == rec_name,
        detail: format!("generation {}, {} visible orders", routed.generation, visible_count),
    });

    let src_now = table::load_table(&source, &src_name).await.map_err(fail("report"))?;
    let rpo_commits = (src_now.metadata().snapshots().count() as u64).saturating_sub(replica_snapshots);
    // What the journal replay won back: the positions journaled beyond the replica's.
    let rpo_positions = h_expected.saturating_sub(replica_position);
    let ok = checks.iter().all(|c| c.ok);
    drop(root);
    Ok(DrillReport {
        format_version: FORMAT_VERSION,
        ok,
        location: base,
        orders: opts.orders,
        events: opts.events,
        steps: timer.steps,
        rto_ms,
        rpo_commits,
        rpo_positions,
        h: report.h,
        audit: report.audit.clone(),
        checks,
        total_ms: started.elapsed().as_millis() as u64,
        s3_requests: None,
    })
}
