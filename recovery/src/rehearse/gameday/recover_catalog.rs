//! Steps 3–7 against a DR warehouse: discover, choose each head, register, validate, and the
//! RTO per table.

use std::collections::HashMap;
use std::time::Instant;

use iceberg::ErrorKind;
use tidemark_journal::store;

use super::place::NAMESPACE;
use super::report::{GamedayError, GamedayRun, GamedayTable, fail};
use crate::catalog::{CatalogHandle, INSTEAD_OF_REGISTER};
use crate::dr::head::{HeadRead, choose_folder_head};
use crate::dr::history::{self, HistoryRecord};
use crate::dr::rebuild::{self, file_name, warehouse_base};
use crate::dr::rewrite::rewrite_paths;
use crate::rehearse::drill::Timer;
use crate::table::read::read_table;
use crate::table::{self, parse_ident};

/// Steps 3–7 against the replica warehouse `dr_url` (holding the source's keys), into `dr`.
pub(super) async fn recover_catalog(
    timer: &mut Timer<'_>,
    label: &str,
    source_base: &str,
    dr_url: &str,
    dr: &CatalogHandle,
    record: &HistoryRecord,
) -> Result<GamedayRun, GamedayError> {
    // Step 5 registers: a DR catalog that cannot is refused before anything is read or written.
    dr.require(true, false, "register the game day's tables", INSTEAD_OF_REGISTER)
        .map_err(|e| fail("discover")(e.to_string()))?;
    let dr_base = warehouse_base(dr_url).map_err(|e| fail("discover")(e.to_string()))?;
    let dr_store = store::open(dr_url).await.map_err(|e| fail("discover")(e.to_string()))?;
    let started = Instant::now();

    // 3. Discover.
    let t = Instant::now();
    let found = rebuild::discover(dr_store.as_ref(), Some(NAMESPACE))
        .await
        .map_err(|e| fail("discover")(e.to_string()))?;
    let discover_ms = t.elapsed().as_millis() as u64;
    timer.done(
        &format!("3 discover ({label})"),
        t,
        format!("{} table folders under {dr_base}", found.len()),
        true,
    );
    let share = discover_ms / found.len().max(1) as u64;
    let mut tables: Vec<GamedayTable> = found
        .iter()
        .map(|f| GamedayTable {
            table: f.ident(),
            head: None,
            strays: 0,
            validated: false,
            detail: String::new(),
            rto_ms: share,
        })
        .collect();

    // 4. Choose each head by the chain.
    let t = Instant::now();
    let mut heads: Vec<Option<String>> = Vec::with_capacity(found.len());
    for (files, out) in found.iter().zip(tables.iter_mut()) {
        let tt = Instant::now();
        let choice = choose_folder_head(dr_store.as_ref(), files, HeadRead::default())
            .await
            .map_err(|e| fail("choose")(e.to_string()))?
            .choice;
        out.strays = choice.strays.len();
        out.head = choice.head.as_deref().map(|h| file_name(h).to_string());
        if let Some(r) = &choice.refused {
            out.detail = format!("refused: {r}");
        }
        heads.push(choice.head);
        out.rto_ms += tt.elapsed().as_millis() as u64;
    }
    let strays: usize = tables.iter().map(|t| t.strays).sum();
    timer.done(
        &format!("4 choose by chain ({label})"),
        t,
        format!(
            "{} heads chosen, {strays} strays set aside",
            heads.iter().flatten().count()
        ),
        true,
    );

    // 5. Register: rewrite the head's paths to the DR warehouse, then register the new file.
    let t = Instant::now();
    let props = dr.file_io_props().clone();
    for (head, out) in heads.iter().zip(tables.iter_mut()) {
        let Some(head) = head else { continue };
        let tt = Instant::now();
        let result = async {
            let rw = rewrite_paths(&format!("{dr_base}/{head}"), source_base, &dr_base, &props)
                .await
                .map_err(|e| e.to_string())?;
            let ident = parse_ident(&out.table).map_err(|e| e.to_string())?;
            match dr.catalog().create_namespace(ident.namespace(), HashMap::new()).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NamespaceAlreadyExists => {}
                Err(e) => return Err(e.to_string()),
            }
            dr.register_table(&ident, &rw.new_metadata)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        }
        .await;
        if let Err(e) = result {
            out.detail = format!("not registered: {e}");
        }
        out.rto_ms += tt.elapsed().as_millis() as u64;
    }
    timer.done(
        &format!("5 register ({label})"),
        t,
        format!("paths rewritten {source_base} -> {dr_base}; registered in a new catalog"),
        true,
    );

    // 6. Validate against the record: history compared as a whole, every data file scanned.
    let t = Instant::now();
    let diffs = match history::record(dr, Some(NAMESPACE)).await {
        Ok(now) => history::compare(record, &now),
        // No table was registered (the namespace does not exist): each table says why.
        Err(_) if tables.iter().all(|t| !t.detail.is_empty()) => Vec::new(),
        Err(e) => return Err(fail("validate")(e.to_string())),
    };
    for out in tables.iter_mut() {
        if out.detail.starts_with("not registered") || out.detail.starts_with("refused") {
            continue;
        }
        let tt = Instant::now();
        let real: Vec<String> = diffs
            .iter()
            .filter(|d| d.table == out.table && !d.informational)
            .map(|d| {
                format!(
                    "{}: {} vs {}",
                    d.what,
                    d.a.as_deref().unwrap_or("-"),
                    d.b.as_deref().unwrap_or("-")
                )
            })
            .collect();
        let expected_rows = record.tables.iter().find(|r| r.table == out.table).map(|r| r.row_count);
        match scan(dr, &out.table).await {
            Ok(rows) if real.is_empty() && Some(rows) == expected_rows => {
                out.validated = true;
                out.detail = format!("{rows} rows scanned; history equal to the record (refs, schema, snapshots)");
            }
            Ok(rows) => {
                out.detail = format!(
                    "{rows} rows scanned (record {expected_rows:?}); differences: {}",
                    real.join("; ")
                );
            }
            Err(e) => out.detail = format!("scan failed: {e}"),
        }
        out.rto_ms += tt.elapsed().as_millis() as u64;
    }
    let failed: Vec<String> = tables
        .iter()
        .filter(|t| !t.validated)
        .map(|t| t.table.clone())
        .collect();
    timer.done(
        &format!("6 validate ({label})"),
        t,
        format!(
            "{} of {} tables equal to the record and fully readable{}",
            tables.len() - failed.len(),
            tables.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!("; FAILED: {}", failed.join(", "))
            }
        ),
        true,
    );
    let rto_ms = started.elapsed().as_millis() as u64;
    let t = Instant::now();
    let slowest = tables.iter().max_by_key(|t| t.rto_ms);
    timer.done(
        &format!("7 RTO ({label})"),
        t,
        format!(
            "{rto_ms} ms for {} tables; slowest {} at {} ms",
            tables.len(),
            slowest.map_or("-", |t| t.table.as_str()),
            slowest.map_or(0, |t| t.rto_ms)
        ),
        false,
    );
    Ok(GamedayRun {
        copy: label.to_string(),
        tables,
        rto_ms,
        failed_validation: failed,
        replica_behind: Vec::new(),
    })
}

/// Reads every live data file of the table; the row count.
pub(super) async fn scan(handle: &CatalogHandle, name: &str) -> Result<u64, String> {
    let t = table::load_table(handle, name).await.map_err(|e| e.to_string())?;
    let batches = read_table(&t).await.map_err(|e| e.to_string())?;
    Ok(batches.iter().map(|b| b.num_rows() as u64).sum())
}
