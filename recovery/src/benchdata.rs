//! Synthetic order rows for benchmarks: Arrow columns in the orders spec's order, built directly
//! (no JSON) so that setting up a table of millions of rows is not what a benchmark measures.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray};
use tidemark_journal::spec::UTC;

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
