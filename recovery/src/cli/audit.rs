//! `tidemark audit`: a table's history held against the journal (`tidemark_recovery::audit`):
//! the timeline of verdicts, the first divergence and the newest trusted snapshot. Exit 0 when
//! the history holds no open divergence, 12 when it does.

use clap::Args;
use tidemark_journal::{Journal, store};
use tidemark_recovery::audit::{self, AuditOptions, AuditReport, Verdict};
use tidemark_recovery::exit::{DIVERGENCE, exit_error};
use tidemark_recovery::progress::Progress;
use tidemark_recovery::recover::audited::describe;

use super::common::Common;
use super::output::print_json;

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[arg(long)]
    pub journal: String,
    /// The catalog that holds --table (a SQLite file, postgres://…, rest+http(s)://…, an S3
    /// Tables ARN, or a defined catalog's name).
    #[arg(long, env = "TIDEMARK_CATALOG")]
    pub catalog: Option<String>,
    #[arg(long, env = "TIDEMARK_WAREHOUSE")]
    pub warehouse: Option<String>,
    /// The table, namespace.name …
    #[arg(long, conflicts_with = "source_metadata")]
    pub table: Option<String>,
    /// … or a replica's metadata file.
    #[arg(long)]
    pub source_metadata: Option<String>,
    /// Read the replica through a path prefix map FROM=TO.
    #[arg(long)]
    pub prefix_map: Option<String>,
    /// Audit the ancestry of this snapshot (default: main's current one).
    #[arg(long)]
    pub snapshot_id: Option<i64>,
    /// Also check each applier commit's rows: its parent's rows with its events applied by the
    /// merge rules (reads both snapshots' rows whole).
    #[arg(long)]
    pub deep: bool,
    /// Neither read nor write audit records (default: under the journal, `audits/`).
    #[arg(long)]
    pub no_records: bool,
    #[command(flatten)]
    pub common: Common,
}

pub async fn run(args: AuditArgs) -> anyhow::Result<()> {
    let journal = Journal::open(store::open(&args.journal).await?).await?;
    let source = super::recover::resolve_source(
        None,
        &super::recover::SourceArgs {
            table: args.table.clone(),
            catalog: args.catalog.clone(),
            warehouse: args.warehouse.clone(),
            metadata: args.source_metadata.clone(),
            prefix_map: args.prefix_map.clone(),
        },
    )
    .await?;
    let opts = AuditOptions {
        deep: args.deep,
        records: (!args.no_records).then(|| journal.store.clone()),
        head: args.snapshot_id,
        trust_from: None,
    };
    let mut progress = Progress::new("audit", args.common.quiet);
    let report = audit::audit(&journal, &source, &opts, &mut |e| {
        progress.update(
            || {
                format!(
                    "snapshot {} ({}, {}): {:?}",
                    e.snapshot_id, e.operation, e.kind, e.verdict
                )
            },
            false,
        )
    })
    .await?;
    if args.common.json {
        print_json(&report)?;
    } else {
        print_text(&report);
    }
    if !report.ok {
        return Err(exit_error(
            DIVERGENCE,
            format!(
                "the history diverges from the journal: {}",
                describe(report.first_divergence.as_ref())
            ),
        ));
    }
    Ok(())
}

fn print_text(r: &AuditReport) {
    println!(
        "audit of table {} ({}) against {}: {}",
        r.table_uuid, r.metadata_location, r.journal, r.start
    );
    println!(
        "  {:<20} {:<20} {:<24} {:<10} {:<16} {:>9} {:<10} {:>7} {:>7} {:>7}  detail",
        "snapshot", "parent", "committed", "operation", "kind", "position", "verdict", "removed", "changed", "added"
    );
    for e in &r.timeline {
        let verdict = match e.verdict {
            Verdict::Applied => "applied",
            Verdict::Seed => "seed",
            Verdict::Neutral => "neutral",
            Verdict::Divergence => "DIVERGENCE",
            Verdict::Accepted => "accepted",
            Verdict::Certified => "certified",
        };
        println!(
            "  {:<20} {:<20} {:<24} {:<10} {:<16} {:>9} {:<10} {:>7} {:>7} {:>7}  {} [{}]",
            e.snapshot_id,
            e.parent_id.map_or("-".into(), |p| p.to_string()),
            e.committed_at,
            e.operation,
            e.kind,
            e.position.map_or("-".into(), |p| p.to_string()),
            verdict,
            e.counts.removed,
            e.counts.changed,
            e.counts.added,
            e.detail,
            e.writer
        );
    }
    println!(
        "  {} snapshots audited, {} files read, {} records written",
        r.audited, r.files_read, r.records_written
    );
    match &r.first_divergence {
        Some(d) => println!("first divergence: {}", describe(Some(d))),
        None => println!("no divergence"),
    }
    match &r.trusted {
        Some(t) => println!(
            "trusted: snapshot {} at position {}{}",
            t.snapshot_id,
            t.position.map_or("?".into(), |p| p.to_string()),
            t.checkpoint
                .as_ref()
                .map(|c| format!(" (checkpoint {c})"))
                .unwrap_or_default()
        ),
        None => println!("trusted: none"),
    }
}
