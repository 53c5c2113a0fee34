//! The distributed validation of a Ballista recovery: every key of the written table checked on
//! the cluster against the expected table, computed by a formulation that shares no SQL with the
//! merge plan it checks ([`crate::merge::decided_sql`]: the winner's position per key by an
//! ordered `first_value` over the events alone, a left join to the snapshot, a three-way decision
//! and an anti-join for the kept rows).
//!
//! Here the snapshot's rows and the events are one union; per key the greatest version wins and,
//! among the rows of that version, the lowest journal position (two aggregates joined back); the
//! columns outside the journal's spec come from the snapshot's row of that key. The written
//! files are then compared with that expectation as sets, both ways (`EXCEPT`, nulls equal), with
//! the row and distinct-key counts of both sides: equal counts of unique keys and two empty
//! differences mean the same rows.
//!
//! What it does not prove (docs/scale-out.md): it reads the same snapshot listing and the same
//! staged events as the merge, so a wrong input (a wrong snapshot, a wrong H, a bad staging) is
//! not caught here but by the reference ([`super::validate`]) that rereads them from the source
//! and the journal on the coordinator, on a sample of the key partitions; and it runs on the
//! same DataFusion and Ballista, so a bug of theirs that both formulations hit alike would pass.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type, SchemaRef};
use datafusion::prelude::SessionContext;
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN};

use super::RecoverError;
use super::validate::{DistributedCheck, FIRST_MISMATCHES};

fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The SQL of the expected table over `cur` (the snapshot) and `ev` (the staged events), with
/// `output`'s columns.
pub fn expected_sql(spec: &CompiledSpec, output: &SchemaRef) -> String {
    let (key, version) = (q(&spec.spec.key_column), q(&spec.spec.version_column));
    let from_events: Vec<_> = output
        .fields()
        .iter()
        .filter(|f| spec.event_schema.index_of(f.name()).is_ok())
        .collect();
    let union_cols = |side: &str| {
        from_events
            .iter()
            .map(|f| {
                format!(
                    "{} AS {}",
                    cast(&format!("{side}.{}", q(f.name())), f.data_type()),
                    q(f.name())
                )
            })
            .chain(std::iter::once(format!(
                "coalesce(CAST({side}.{} AS BIGINT), -1) AS _tm_p",
                q(POSITION_COLUMN)
            )))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let out_cols = output
        .fields()
        .iter()
        .map(|f| {
            if spec.event_schema.index_of(f.name()).is_ok() {
                format!("win.{}", q(f.name()))
            } else {
                let n = q(f.name());
                format!("{} AS {n}", cast(&format!("c.{n}"), f.data_type()))
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH u AS (SELECT {cur} FROM cur UNION ALL SELECT {ev} FROM ev), \
         newest AS (SELECT {key} AS _tm_k, max({version}) AS _tm_v FROM u GROUP BY {key}), \
         lowest AS (SELECT u.{key} AS _tm_k, min(u._tm_p) AS _tm_p FROM u JOIN newest ON u.{key} = newest._tm_k AND u.{version} = newest._tm_v GROUP BY u.{key}), \
         win AS (SELECT u.* FROM u JOIN lowest ON u.{key} = lowest._tm_k AND u._tm_p = lowest._tm_p) \
         SELECT {out_cols} FROM win LEFT JOIN cur c ON win.{key} = c.{key}",
        cur = union_cols("cur"),
        ev = union_cols("ev"),
    )
}

/// `expr` cast to exactly `to` (`arrow_cast` takes the type's own name, which round-trips).
fn cast(expr: &str, to: &DataType) -> String {
    format!("arrow_cast({expr}, '{}')", to.to_string().replace('\'', "''"))
}

/// `expr` as a value a sort-merge join can compare, equal exactly when `expr`'s values are:
/// zoned timestamps, times and durations by their integer count of units, nested and interval
/// values by their text.
fn comparable(expr: &str, ty: &DataType) -> String {
    match ty {
        DataType::Timestamp(_, Some(_)) | DataType::Time32(_) | DataType::Time64(_) | DataType::Duration(_) => {
            format!("arrow_cast({expr}, 'Int64')")
        }
        DataType::Interval(_)
        | DataType::List(_)
        | DataType::LargeList(_)
        | DataType::FixedSizeList(..)
        | DataType::Struct(_)
        | DataType::Map(..) => format!("arrow_cast({expr}, 'Utf8')"),
        _ => expr.to_string(),
    }
}

fn count(batches: &[RecordBatch], col: usize) -> u64 {
    batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .map(|b| {
            let c = arrow::compute::cast(b.column(col), &DataType::Int64).expect("a count casts to BIGINT");
            let c = c.as_primitive::<Int64Type>();
            if c.is_null(0) { 0 } else { c.value(0) as u64 }
        })
        .sum()
}

/// Checks the table `rec` (registered over the written files, with `output`'s columns) against
/// [`expected_sql`], on the session's cluster. `fail` maps a job's error.
pub async fn check(
    ctx: &SessionContext,
    spec: &CompiledSpec,
    output: &SchemaRef,
    fail: &dyn Fn(&'static str, datafusion::error::DataFusionError) -> RecoverError,
) -> Result<DistributedCheck, RecoverError> {
    let run = |sql: String, stage: &'static str| async move {
        ctx.sql(&sql)
            .await
            .map_err(|e| fail(stage, e))?
            .collect()
            .await
            .map_err(|e| fail(stage, e))
    };
    let key = q(&spec.spec.key_column);
    // The differences are anti-joins on every column; Ballista plans them as sort-merge joins
    // (they spill), whose comparator lacks some types: those are compared by a lossless image.
    let cols = output
        .fields()
        .iter()
        .map(|f| format!("{} AS {}", comparable(&q(f.name()), f.data_type()), q(f.name())))
        .collect::<Vec<_>>()
        .join(", ");
    let exp = expected_sql(spec, output);
    let expected = run(
        format!("WITH e AS ({exp}) SELECT count(*), count(DISTINCT {key}) FROM e"),
        "distributed validation: the expected table",
    )
    .await?;
    let found = run(
        format!("SELECT count(*), count(DISTINCT {key}) FROM rec"),
        "distributed validation: the written table",
    )
    .await?;
    let diffs = format!(
        "WITH e AS ({exp}), \
         missing AS (SELECT {cols} FROM e EXCEPT SELECT {cols} FROM rec), \
         extra AS (SELECT {cols} FROM rec EXCEPT SELECT {cols} FROM e)"
    );
    let n_missing = count(
        &run(
            format!("{diffs} SELECT count(*) FROM missing"),
            "distributed validation: missing rows",
        )
        .await?,
        0,
    );
    let n_extra = count(
        &run(
            format!("{diffs} SELECT count(*) FROM extra"),
            "distributed validation: extra rows",
        )
        .await?,
        0,
    );
    let mut first_keys = Vec::new();
    if n_missing + n_extra > 0 {
        let keys = run(
            format!(
                "{diffs}, dk AS (SELECT {key} AS k FROM missing UNION ALL SELECT {key} AS k FROM extra) \
                 SELECT DISTINCT arrow_cast(k, 'Utf8') AS k FROM dk ORDER BY k LIMIT {FIRST_MISMATCHES}"
            ),
            "distributed validation: first keys",
        )
        .await?;
        for b in &keys {
            let k = arrow::compute::cast(b.column(0), &DataType::Utf8)
                .map_err(|e| fail("distributed validation", e.into()))?;
            let k = k.as_string::<i32>();
            first_keys.extend((0..k.len()).map(|i| k.value(i).to_string()));
        }
    }
    let (keys_expected, expected_keys) = (count(&expected, 0), count(&expected, 1));
    let (rows_found, found_keys) = (count(&found, 0), count(&found, 1));
    Ok(DistributedCheck {
        ok: n_missing == 0
            && n_extra == 0
            && keys_expected == expected_keys
            && rows_found == found_keys
            && rows_found == keys_expected,
        keys_expected,
        rows_found,
        duplicate_keys: rows_found - found_keys,
        missing_or_different: n_missing,
        extra_or_different: n_extra,
        first_keys,
    })
}
