//! The versioned MERGE as a DataFusion plan (DataFusion 53 has no MERGE statement). Given the
//! table rows that can hold the events' keys (each with the data file it lives in) and one unit of
//! events, it computes, inside DataFusion:
//!
//! * conflicts: two events with one key and version and different payloads (a self-join), and an
//!   event whose version equals the table row's but whose payload differs (a join with the table);
//!   either stops the merge before anything is produced;
//! * the winning event per key (the highest version, then the lowest position, so that
//!   identical retries collapse onto their first position: `first_value` of the position
//!   grouped by key, then the event at that position);
//! * what happens to each key: `insert` (new key), `update` (newer version: replaces the row, a
//!   tombstone included) or `keep` (older or equal version: nothing changes);
//! * the data files to rewrite (those that hold an updated key) and the rows of those files that
//!   stay: every row the decision's join by key did not match to an update (each table row
//!   carries its index into the plan, so no second join by key is needed). Files without an
//!   updated key are not touched: copy-on-write rewrites only what changed, and new keys go to
//!   new files.
//!
//! The same rules are implemented independently, without DataFusion, in [`crate::reference`].

#[cfg(test)]
mod props_tests;

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use tidemark_journal::spec::{CompiledSpec, POSITION_COLUMN};

/// The column added to table rows that names their data file.
pub const FILE_COLUMN: &str = "_tidemark_file";

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(
        "conflicting events for key {key} version {version}: positions {first_position} and {second_position} carry different payloads; nothing was committed; once you know which one is right, record it with `tidemark journal resolve --key {key} --version {version} --keep-position P --reason …` (docs/journal.md, \"Conflicts\")"
    )]
    ConflictInEvents {
        key: String,
        version: i64,
        first_position: u64,
        second_position: u64,
    },
    #[error(
        "event at position {event_position} for key {key} version {version} differs from the table's row of the same version (written by position {table_position}); nothing was committed; `tidemark journal resolve --key {key} --version {version} --keep-position {table_position} …` keeps the table's event and voids the other (docs/journal.md, \"Conflicts\")"
    )]
    ConflictWithTable {
        key: String,
        version: i64,
        table_position: u64,
        event_position: u64,
    },
    #[error("merge plan failed ({context}): {source}")]
    DataFusion {
        context: &'static str,
        #[source]
        source: datafusion::error::DataFusionError,
    },
    #[error("merge input: {0}")]
    Input(String),
}

impl MergeError {
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            MergeError::ConflictInEvents { .. } | MergeError::ConflictWithTable { .. }
        )
    }
}

/// What a merge produced.
#[derive(Debug, Default)]
pub struct MergeOutput {
    /// New rows (inserted and replaced keys), in the output schema.
    pub upserts: Vec<RecordBatch>,
    /// Data files that hold a replaced key: remove them…
    pub files_to_rewrite: Vec<String>,
    /// …and write these rows of theirs again, with the upserts.
    pub kept_rows: Vec<RecordBatch>,
    pub stats: MergeStats,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct MergeStats {
    pub events: u64,
    pub inserted: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub tombstones_written: u64,
    pub files_rewritten: u64,
    pub rows_kept: u64,
}

impl MergeStats {
    /// Adds the counts of another unit's (or chunk's) merge.
    pub fn add(&mut self, o: &MergeStats) {
        self.events += o.events;
        self.inserted += o.inserted;
        self.updated += o.updated;
        self.unchanged += o.unchanged;
        self.tombstones_written += o.tombstones_written;
        self.files_rewritten += o.files_rewritten;
        self.rows_kept += o.rows_kept;
    }
}

/// `name` as a quoted SQL identifier.
pub fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn df(context: &'static str) -> impl FnOnce(datafusion::error::DataFusionError) -> MergeError {
    move |source| MergeError::DataFusion { context, source }
}

/// `a.c IS DISTINCT FROM b.c OR …` over the payload (every column but key and version).
fn payload_differs(spec: &CompiledSpec, a: &str, b: &str) -> String {
    let parts: Vec<String> = spec
        .spec
        .columns
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != spec.key_index && *i != spec.version_index)
        .map(|(_, c)| format!("({a}.{n} IS DISTINCT FROM {b}.{n})", n = q(&c.name)))
        .collect();
    if parts.is_empty() {
        "false".into()
    } else {
        parts.join(" OR ")
    }
}

fn key_string(batch: &RecordBatch, col: usize, row: usize) -> String {
    let a = cast(batch.column(col), &DataType::Utf8).expect("key casts to string");
    a.as_any()
        .downcast_ref::<StringArray>()
        .expect("utf8")
        .value(row)
        .to_string()
}

fn int_at(batch: &RecordBatch, col: usize, row: usize) -> i64 {
    let a = cast(batch.column(col), &DataType::Int64).expect("casts to int64");
    a.as_primitive::<arrow::datatypes::Int64Type>().value(row)
}

async fn collect(ctx: &SessionContext, sql: &str, context: &'static str) -> Result<Vec<RecordBatch>, MergeError> {
    ctx.sql(sql)
        .await
        .map_err(df(context))?
        .collect()
        .await
        .map_err(df(context))
}

fn mem_table(batches: Vec<RecordBatch>, schema: SchemaRef) -> Result<Arc<MemTable>, MergeError> {
    let batches: Vec<RecordBatch> = batches.into_iter().filter(|b| b.num_rows() > 0).collect();
    MemTable::try_new(schema, vec![batches])
        .map(Arc::new)
        .map_err(df("registering input"))
}

/// The quoted key, version and position columns of `spec`: the three names the merge's SQL
/// joins, picks winners and orders by.
fn key_version_pos(spec: &CompiledSpec) -> (String, String, String) {
    (
        q(&spec.spec.key_column),
        q(&spec.spec.version_column),
        q(POSITION_COLUMN),
    )
}

/// The merge's SQL over the tables `ev` (events, event schema) and `cur` (table rows), shared by
/// the local merge below and the distributed one (`recover::ballista`), so that both engines
/// run one formulation of the rules.
///
/// Conflicts among the events: same key and version, different payload (first by position).
pub fn conflicts_in_events_sql(spec: &CompiledSpec) -> String {
    let (key, version, pos) = key_version_pos(spec);
    format!(
        "SELECT a.{key} AS k, a.{version} AS v, a.{pos} AS p1, b.{pos} AS p2 FROM ev a JOIN ev b \
         ON a.{key} = b.{key} AND a.{version} = b.{version} AND a.{pos} < b.{pos} \
         WHERE {} ORDER BY p2, p1 LIMIT 1",
        payload_differs(spec, "a", "b")
    )
}

/// Conflicts with the table: same key and version as the stored row, different payload.
pub fn conflicts_with_table_sql(spec: &CompiledSpec) -> String {
    let (key, version, pos) = key_version_pos(spec);
    format!(
        "SELECT e.{key} AS k, e.{version} AS v, c.{pos} AS tp, e.{pos} AS ep FROM ev e JOIN cur c \
         ON e.{key} = c.{key} AND e.{version} = c.{version} WHERE {} ORDER BY ep LIMIT 1",
        payload_differs(spec, "e", "c")
    )
}

/// The first row of [`conflicts_in_events_sql`]'s result, as the error.
pub fn conflict_in_events(b: &RecordBatch) -> Option<MergeError> {
    (b.num_rows() > 0).then(|| MergeError::ConflictInEvents {
        key: key_string(b, 0, 0),
        version: int_at(b, 1, 0),
        first_position: int_at(b, 2, 0) as u64,
        second_position: int_at(b, 3, 0) as u64,
    })
}

/// The first row of [`conflicts_with_table_sql`]'s result, as the error.
pub fn conflict_with_table(b: &RecordBatch) -> Option<MergeError> {
    (b.num_rows() > 0).then(|| MergeError::ConflictWithTable {
        key: key_string(b, 0, 0),
        version: int_at(b, 1, 0),
        table_position: int_at(b, 2, 0) as u64,
        event_position: int_at(b, 3, 0) as u64,
    })
}

/// The winner per key and what it does to the table: the `output` columns, then `extra` (a
/// select list fragment ending in `, `, may be empty), then `_op` (`insert`, `update` or `keep`).
/// Columns outside the journal's spec (another writer added them) carry the table row's value
/// forward; a new key gets null.
pub fn decided_sql(spec: &CompiledSpec, output: &SchemaRef, extra: &str) -> String {
    let (key, version, pos) = key_version_pos(spec);
    let out_cols: Vec<String> = output
        .fields()
        .iter()
        .map(|f| {
            let side = if spec.event_schema.index_of(f.name()).is_ok() {
                "w"
            } else {
                "c"
            };
            format!("{side}.{}", q(f.name()))
        })
        .collect();
    // The winner's position per key, by a grouped `first_value` over two integers (a window
    // `row_number()` per key cost a partition's state for every key: 9% of a 10M + 1M
    // recovery's CPU), then its row by that position (positions are unique in the journal).
    format!(
        "WITH wp AS (SELECT first_value({pos} ORDER BY {version} DESC, {pos} ASC) AS wpos FROM ev GROUP BY {key}), \
         w AS (SELECT ev.* FROM ev JOIN wp ON ev.{pos} = wp.wpos) \
         SELECT {cols}, {extra}\
           CASE WHEN c.{key} IS NULL THEN 'insert' WHEN w.{version} > c.{version} THEN 'update' ELSE 'keep' END AS _op \
         FROM w LEFT JOIN cur c ON w.{key} = c.{key}",
        cols = out_cols.join(", "),
    )
}

/// The schema of table rows with their file column (a dictionary: the path once per batch).
pub fn current_schema(table_schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = table_schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(FILE_COLUMN, crate::table::read::file_column_type(), false));
    Arc::new(Schema::new(fields))
}

/// Runs the merge of `events` (event schema) into `current` (table rows plus [`FILE_COLUMN`]).
/// `output` is the schema of produced rows (the table's columns, by name): the spec's columns
/// come from the winning event, any other column from the table row it replaces (null for a
/// new key). The plan runs on two partitions (both cores); see [`merge_in`].
pub async fn merge(
    spec: &CompiledSpec,
    current: Vec<RecordBatch>,
    current_schema: SchemaRef,
    events: Vec<RecordBatch>,
    output: SchemaRef,
) -> Result<MergeOutput, MergeError> {
    merge_in(spec, current, current_schema, events, output, 2).await
}

/// [`merge`] on `partitions` partitions. A caller that runs merges side by side (the key-range
/// chunks of copy-on-write and of the spilled replay, two in flight) passes 1: each plan then
/// skips the hash repartitioning that copies every row of both sides (at 10M rows + 1M events:
/// 13.2–13.5 s of CPU for the whole recovery instead of 14.1 s, docs/runs/issue-33.md, "Levers measured").
pub async fn merge_in(
    spec: &CompiledSpec,
    current: Vec<RecordBatch>,
    current_schema: SchemaRef,
    events: Vec<RecordBatch>,
    output: SchemaRef,
    partitions: usize,
) -> Result<MergeOutput, MergeError> {
    let config = SessionConfig::new()
        .with_target_partitions(partitions.max(1))
        .with_batch_size(16 * 1024);
    let ctx = SessionContext::new_with_config(config);
    ctx.register_table("ev", mem_table(events, spec.event_schema.clone())?)
        .map_err(df("register events"))?;
    let (numbered, numbered_schema) = numbered(&current, &current_schema)?;
    ctx.register_table("cur", mem_table(numbered, numbered_schema)?)
        .map_err(df("register table rows"))?;

    for b in collect(&ctx, &conflicts_in_events_sql(spec), "conflicts among events").await? {
        if let Some(e) = conflict_in_events(&b) {
            return Err(e);
        }
    }
    for b in collect(&ctx, &conflicts_with_table_sql(spec), "conflicts with the table").await? {
        if let Some(e) = conflict_with_table(&b) {
            return Err(e);
        }
    }
    let extra = format!("c.{} AS _old_file, c.{} AS _old_row, ", q(FILE_COLUMN), q(ROW_COLUMN));
    let decided = collect(&ctx, &decided_sql(spec, &output, &extra), "choosing winners").await?;
    let mut out = MergeOutput::default();
    out.stats.events = ctx
        .table("ev")
        .await
        .map_err(df("count"))?
        .count()
        .await
        .map_err(df("count"))? as u64;
    let n_out = output.fields().len();
    let delete_idx = output
        .index_of(&spec.spec.delete_column)
        .map_err(|e| MergeError::Input(e.to_string()))?;
    let mut files = BTreeSet::new();
    // The table rows the updates replace, by their index among `current`.
    let mut replaced = vec![false; current.iter().map(RecordBatch::num_rows).sum()];
    for b in &decided {
        let op = cast(b.column(n_out + 2), &DataType::Utf8).map_err(|e| MergeError::Input(e.to_string()))?;
        let op = op.as_any().downcast_ref::<StringArray>().expect("utf8");
        let old_file = cast(b.column(n_out), &DataType::Utf8).map_err(|e| MergeError::Input(e.to_string()))?;
        let old_file = old_file.as_any().downcast_ref::<StringArray>().expect("utf8");
        let old_row = b
            .column(n_out + 1)
            .as_primitive_opt::<arrow::datatypes::UInt64Type>()
            .ok_or_else(|| MergeError::Input("the table rows' index is not a u64".into()))?;
        let mut take = Vec::new();
        for r in 0..b.num_rows() {
            match op.value(r) {
                "insert" => {
                    out.stats.inserted += 1;
                    take.push(r as u32)
                }
                "update" => {
                    out.stats.updated += 1;
                    files.insert(old_file.value(r).to_string());
                    take.push(r as u32);
                    replaced[old_row.value(r) as usize] = true;
                }
                _ => out.stats.unchanged += 1,
            }
        }
        let idx = arrow::array::UInt32Array::from(take);
        let cols: Vec<ArrayRef> = (0..n_out)
            .map(|c| arrow::compute::take(b.column(c).as_ref(), &idx, None))
            .collect::<Result<_, _>>()
            .map_err(|e| MergeError::Input(e.to_string()))?;
        let rows = conform(&output, cols)?;
        let deleted = rows.column(delete_idx).as_boolean();
        out.stats.tombstones_written += deleted.true_count() as u64;
        if rows.num_rows() > 0 {
            out.upserts.push(rows);
        }
    }
    out.files_to_rewrite = files.into_iter().collect();
    out.stats.files_rewritten = out.files_to_rewrite.len() as u64;

    // Rows of the rewritten files that stay: every row no update replaced (the join by key
    // above matched every table row of an updated key, so no second join by key is needed).
    if !out.files_to_rewrite.is_empty() {
        let input = |e: arrow::error::ArrowError| MergeError::Input(e.to_string());
        let rewritten: std::collections::HashSet<&str> = out.files_to_rewrite.iter().map(String::as_str).collect();
        let cols: Vec<usize> = output
            .fields()
            .iter()
            .map(|f| current_schema.index_of(f.name()))
            .collect::<Result<_, _>>()
            .map_err(input)?;
        let file_idx = current_schema.index_of(FILE_COLUMN).map_err(input)?;
        let mut first = 0;
        for b in &current {
            let in_rewritten = in_files(b.column(file_idx).as_ref(), &rewritten).map_err(input)?;
            let keep: arrow::array::BooleanArray = (0..b.num_rows())
                .map(|r| Some(in_rewritten[r] && !replaced[first + r]))
                .collect();
            first += b.num_rows();
            if keep.true_count() > 0 {
                let kept =
                    arrow::compute::filter_record_batch(&b.project(&cols).map_err(input)?, &keep).map_err(input)?;
                out.stats.rows_kept += kept.num_rows() as u64;
                out.kept_rows.push(conform(&output, kept.columns().to_vec())?);
            }
        }
    }
    Ok(out)
}

/// The column added to the table rows inside a merge: each row's index among them, so that the
/// decision's join by key also names the rows the updates replace.
const ROW_COLUMN: &str = "_tidemark_row";

/// `current` with [`ROW_COLUMN`] appended, and its schema.
fn numbered(current: &[RecordBatch], schema: &SchemaRef) -> Result<(Vec<RecordBatch>, SchemaRef), MergeError> {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(ROW_COLUMN, DataType::UInt64, false));
    let numbered_schema = Arc::new(Schema::new(fields));
    let mut first = 0u64;
    let batches = current
        .iter()
        .map(|b| {
            let n = b.num_rows() as u64;
            let mut cols = b.columns().to_vec();
            cols.push(Arc::new(arrow::array::UInt64Array::from_iter_values(first..first + n)));
            first += n;
            RecordBatch::try_new(numbered_schema.clone(), cols)
        })
        .collect::<Result<_, _>>()
        .map_err(|e| MergeError::Input(format!("table rows do not fit their schema: {e}")))?;
    Ok((batches, numbered_schema))
}

/// Whether each row of the file column `col` names one of `files`: a dictionary's values are
/// looked up once each, any other column row by row.
fn in_files(col: &dyn Array, files: &std::collections::HashSet<&str>) -> Result<Vec<bool>, arrow::error::ArrowError> {
    if let Some(d) = col.as_dictionary_opt::<arrow::datatypes::Int32Type>()
        && let Some(values) = d.values().as_string_opt::<i32>()
    {
        let named: Vec<bool> = (0..values.len())
            .map(|v| values.is_valid(v) && files.contains(values.value(v)))
            .collect();
        return Ok((0..d.len())
            .map(|r| d.is_valid(r) && named[d.keys().value(r) as usize])
            .collect());
    }
    let col = cast(col, &DataType::Utf8)?;
    let col = col.as_string::<i32>();
    Ok((0..col.len())
        .map(|r| col.is_valid(r) && files.contains(col.value(r)))
        .collect())
}

/// Rebuilds columns in the output schema (casting e.g. string views to strings), so that the
/// batch carries the table's field ids.
pub fn conform(output: &SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch, MergeError> {
    let cols: Vec<ArrayRef> = columns
        .into_iter()
        .zip(output.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                cast(&c, f.data_type())
            }
        })
        .collect::<Result<_, _>>()
        .map_err(|e| MergeError::Input(e.to_string()))?;
    RecordBatch::try_new(output.clone(), cols)
        .map_err(|e| MergeError::Input(format!("rows do not fit the table schema: {e}")))
}
