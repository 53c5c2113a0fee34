//! Synthetic order rows for benchmarks: Arrow columns in the orders spec's order, built directly
//! (no JSON) so that setting up a table of millions of rows is not what a benchmark measures.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use chrono::{DateTime, Utc};
use iceberg::table::Table;
use tidemark_journal::spec::UTC;

use crate::apply::ROWS_PER_FILE;
use crate::catalog::CatalogHandle;
use crate::ids::Ids;
use crate::table::{CommitStamp, TableError, arrow_schema, commit_overwrite, write_data_file};

pub fn order_id(i: u64) -> String {
    format!("o-{i:09}")
}

/// Columns for the given orders, versions and delete flags, in the orders spec's column order.
pub fn order_columns(ids: &[u64], versions: &[i64], deleted: &[bool]) -> Vec<ArrayRef> {
    let n = ids.len();
    vec![
        Arc::new(StringArray::from_iter_values(ids.iter().map(|i| order_id(*i)))),
        Arc::new(Int64Array::from(versions.to_vec())),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| format!("c-{:06}", i % 100_000)),
        )),
        Arc::new(StringArray::from_iter_values(
            versions.iter().map(|v| if *v == 1 { "placed" } else { "paid" }),
        )),
        Arc::new(
            Decimal128Array::from_iter_values(
                ids.iter()
                    .zip(versions)
                    .map(|(i, v)| (*i % 100_000) as i128 * 7 + *v as i128),
            )
            .with_precision_and_scale(18, 2)
            .expect("decimal(18,2)"),
        ),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n("EUR", n))),
        Arc::new(BooleanArray::from(deleted.to_vec())),
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(ids.iter().map(|i| 1_790_000_000_000_000 + *i as i64))
                .with_timezone(UTC),
        ),
    ]
}

/// Writes orders `0..rows` into `table` as key-sorted files of [`ROWS_PER_FILE`] rows and commits
/// them in one snapshot with `summary`: order `i` gets `row(i)` = (version, deleted, position).
pub async fn commit_orders(
    handle: &CatalogHandle,
    table: &Table,
    rows: u64,
    row: impl Fn(u64) -> (i64, bool, i64),
    summary: HashMap<String, String>,
    ids: &dyn Ids,
    at: DateTime<Utc>,
) -> Result<Table, TableError> {
    let schema = arrow_schema(table)?;
    let mut files = Vec::new();
    for start in (0..rows).step_by(ROWS_PER_FILE) {
        let orders: Vec<u64> = (start..(start + ROWS_PER_FILE as u64).min(rows)).collect();
        let (mut versions, mut deleted, mut positions) = (Vec::new(), Vec::new(), Vec::new());
        for (v, d, p) in orders.iter().map(|i| row(*i)) {
            versions.push(v);
            deleted.push(d);
            positions.push(p);
        }
        let mut cols = order_columns(&orders, &versions, &deleted);
        cols.push(Arc::new(Int64Array::from(positions)));
        let batch = RecordBatch::try_new(schema.clone(), cols).map_err(|e| TableError::BatchSchema {
            table: table.identifier().to_string(),
            detail: e.to_string(),
        })?;
        files.extend(write_data_file(table, &[batch], ids.uuid()).await?);
    }
    let stamp = CommitStamp { id: ids.uuid(), at };
    commit_overwrite(handle, table, &[], files, summary, stamp).await
}

/// The multi-threaded Tokio runtime a benchmark runs its steps on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("start the Tokio runtime")
}

/// CPU time of this process so far, all threads, user and system, in seconds (`/proc/self/stat`;
/// 0 where there is none). On a shared machine the wall time moves with the neighbours' load;
/// the CPU time much less, so the suite records both.
pub fn cpu_seconds() -> f64 {
    cpu_seconds_of(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default()).unwrap_or(0.0)
}

/// `utime + stime` of a `/proc/PID/stat` line, in seconds: fields 14 and 15, counted after the
/// command name in parentheses (which may hold spaces and parentheses itself), in the kernel's
/// fixed user-visible tick of 1/100 s (`USER_HZ`).
fn cpu_seconds_of(stat: &str) -> Option<f64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (the state): utime is field 14, stime field 15.
    let ticks = |i: usize| fields.get(i - 3)?.parse::<u64>().ok();
    Some((ticks(14)? + ticks(15)?) as f64 / 100.0)
}

/// Peak resident memory of this process so far (VmHWM), in MB.
pub fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::cpu_seconds_of;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
        let line = "4242 (suite (x) y) R 1 2 3 4 5 6 7 8 9 10 1234 566 0 0 20 0 3 0";
        assert_eq!(cpu_seconds_of(line), Some(18.0));
        assert_eq!(cpu_seconds_of("4242 (cut"), None);
        assert!(super::cpu_seconds() >= 0.0);
    }
}
