//! `tidemark journal init | append | verify | status | checkpoints | resolve`.

use std::io::BufReader;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use tidemark_journal::checkpoint::{self, CheckpointFilter};
use tidemark_journal::clock::SystemClock;
use tidemark_journal::spec::orders_spec;
use tidemark_journal::verify::{VerifyOptions, verify};
use tidemark_journal::writer::{AppendOptions, append};
use tidemark_journal::{Journal, store};
use tidemark_recovery::exit::{VERIFY_FAILED, exit_error};
use tidemark_recovery::progress::Progress;
use tidemark_schemas::{FORMAT_VERSION, StatusReport, TableSpec};

use super::common::{Common, default_writer_id};
use super::output::{print_json, s3_requests};

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Create a journal (writes journal.json with the table spec).
    Init {
        #[arg(long)]
        journal: String,
        /// Table spec JSON (schemas/json/table-spec.schema.json); default: the orders spec.
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Journal id; default: a new UUID.
        #[arg(long)]
        journal_id: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Append NDJSON events as checksummed batches.
    Append {
        #[arg(long)]
        journal: String,
        /// NDJSON file, or - for stdin.
        #[arg(long)]
        input: PathBuf,
        #[arg(long, default_value_t = 10_000)]
        batch_size: usize,
        /// Recorded in every manifest; default: host and process id.
        #[arg(long)]
        writer_id: Option<String>,
        /// Accept an input that holds no event (an empty file, blank lines only): by default it
        /// is refused (exit 3), as it usually means the producer wrote nothing by mistake.
        #[arg(long)]
        allow_empty: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Walk the manifest chain and prove the contiguous range of positions.
    Verify {
        #[arg(long)]
        journal: String,
        /// Verify up to this position (refused if the chain ends before it).
        #[arg(long)]
        to: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// Head sequence, last position, batch and event counts.
    Status {
        #[arg(long)]
        journal: String,
        #[command(flatten)]
        common: Common,
    },
    /// Record which event of a conflicting key and version counts; the others become void.
    Resolve {
        #[arg(long)]
        journal: String,
        /// The key's value as text.
        #[arg(long)]
        key: String,
        #[arg(long)]
        version: i64,
        /// The position of the event that counts.
        #[arg(long)]
        keep_position: u64,
        /// Why, recorded in the resolution.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        common: Common,
    },
    /// List checkpoints (optionally of one table, at or before a position).
    Checkpoints {
        #[arg(long)]
        journal: String,
        #[arg(long)]
        table_uuid: Option<String>,
        #[arg(long)]
        table: Option<String>,
        /// Only the newest checkpoint at or before this position.
        #[arg(long)]
        at_or_before: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
}

async fn open(url: &str) -> anyhow::Result<Journal> {
    let store = store::open(url).await?;
    Ok(Journal::open(store).await?)
}

pub async fn run(cmd: JournalCommand) -> anyhow::Result<()> {
    match cmd {
        JournalCommand::Init {
            journal,
            spec,
            journal_id,
            common,
        } => {
            let spec: TableSpec = match spec {
                Some(path) => {
                    let text =
                        std::fs::read_to_string(&path).with_context(|| format!("reading spec {}", path.display()))?;
                    serde_json::from_str(&text)
                        .map_err(|e| tidemark_journal::JournalError::Spec(format!("{}: {e}", path.display())))?
                }
                None => orders_spec(),
            };
            let store = store::open_or_create(&journal).await?;
            #[allow(clippy::disallowed_methods)] // the binary mints journal ids
            let id = journal_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            let j = Journal::init(store, spec, id, &SystemClock).await?;
            if common.json {
                print_json(&j.header)?;
            } else {
                println!(
                    "journal {} created at {} (table {}, spec {})",
                    j.header.journal_id,
                    j.url(),
                    j.header.spec.name,
                    j.header.spec_digest
                );
            }
            Ok(())
        }
        JournalCommand::Append {
            journal,
            input,
            batch_size,
            writer_id,
            allow_empty,
            common,
        } => {
            let j = open(&journal).await?;
            let opts = AppendOptions {
                batch_size,
                writer_id: writer_id.unwrap_or_else(default_writer_id),
                source_name: input.display().to_string(),
            };
            let mut progress = Progress::new("append", common.quiet);
            let mut on_batch = |p: &tidemark_journal::writer::AppendProgress| {
                progress.update(
                    || {
                        format!(
                            "{}/{} batches, {} events, last position {}",
                            p.batches, p.total_batches, p.events, p.last_position
                        )
                    },
                    p.batches == p.total_batches,
                )
            };
            let report = if input.as_os_str() == "-" {
                append(&j, std::io::stdin().lock(), &opts, &SystemClock, &mut on_batch).await?
            } else {
                let file = std::fs::File::open(&input).with_context(|| format!("opening input {}", input.display()))?;
                append(
                    &j,
                    BufReader::with_capacity(1 << 20, file),
                    &opts,
                    &SystemClock,
                    &mut on_batch,
                )
                .await?
            };
            if report.events == 0 && report.already_present == 0 && !allow_empty {
                return Err(tidemark_recovery::exit::exit_error(
                    tidemark_recovery::exit::BAD_INPUT,
                    format!(
                        "{}: the input holds no event (an empty file or blank lines only); nothing was appended (--allow-empty accepts it)",
                        input.display()
                    ),
                ));
            }
            for key in &report.unaccepted_objects {
                eprintln!(
                    "warning: {key} is an event object no manifest accepts (a writer stopped between its two writes); it is not counted"
                );
            }
            if common.json {
                let report = tidemark_schemas::AppendReport {
                    s3_requests: s3_requests(),
                    ..report
                };
                print_json(&report)?;
            } else {
                match (report.first_position, report.last_position) {
                    (Some(a), Some(b)) => println!(
                        "appended {} events (positions {a}..={b}) in {} batches; head sequence {}",
                        report.events,
                        report.batches,
                        report.head_sequence.unwrap_or(0)
                    ),
                    _ => println!("nothing to append"),
                }
                if report.already_present > 0 {
                    println!(
                        "{} events were already in the journal, identical: not appended again",
                        report.already_present
                    );
                }
            }
            Ok(())
        }
        JournalCommand::Resolve {
            journal,
            key,
            version,
            keep_position,
            reason,
            common,
        } => {
            let j = open(&journal).await?;
            let r =
                tidemark_journal::resolution::resolve(&j, &key, version, keep_position, &reason, &SystemClock).await?;
            if common.json {
                print_json(&r)?;
            } else {
                println!(
                    "key {} version {}: position {} counts; void: {:?}",
                    r.key, r.version, r.keep_position, r.void_positions
                );
            }
            Ok(())
        }
        JournalCommand::Verify { journal, to, common } => {
            let j = open(&journal).await?;
            let mut progress = Progress::new("verify", common.quiet);
            let chain = verify(
                &j,
                &VerifyOptions {
                    to,
                    ..Default::default()
                },
                &mut |p| {
                    progress.update(
                        || format!("{}/{} manifests, {} MB", p.manifests, p.total, p.bytes / 1_000_000),
                        p.manifests == p.total,
                    )
                },
            )
            .await?;
            let r = &chain.report;
            if common.json {
                let r = tidemark_schemas::VerifyReport {
                    s3_requests: s3_requests(),
                    ..r.clone()
                };
                print_json(&r)?;
            } else {
                match (r.verified_first_position, r.verified_last_position) {
                    (Some(a), Some(b)) => println!(
                        "verified positions {a}..={b}: {} manifests, {} events, {} bytes (head sequence {}, digest {})",
                        r.verified_manifests,
                        r.verified_events,
                        r.verified_bytes,
                        r.head_sequence.unwrap_or(0),
                        r.head_digest.as_deref().unwrap_or("-")
                    ),
                    _ => println!("verified nothing: the journal has no accepted batch before the first break"),
                }
                for key in &r.unaccepted_objects {
                    println!("unaccepted event object (not counted): {key}");
                }
            }
            if let Some(b) = &r.first_break {
                return Err(exit_error(
                    VERIFY_FAILED,
                    format!(
                        "chain break ({}) at {}{}: {}",
                        b.kind,
                        b.key,
                        b.version_id
                            .as_ref()
                            .map(|v| format!(" version {v}"))
                            .unwrap_or_default(),
                        b.message
                    ),
                ));
            }
            Ok(())
        }
        JournalCommand::Status { journal, common } => {
            let j = open(&journal).await?;
            let seqs = j.manifest_sequences().await?;
            let (mut events, mut bytes) = (0, 0);
            let mut last_position = None;
            let mut accepted = std::collections::BTreeMap::new();
            for &seq in &seqs {
                let m = j.read_manifest(seq, None).await?;
                events += m.manifest.row_count;
                bytes += m.manifest.object_size;
                last_position = Some(m.manifest.last_position);
                accepted.insert(seq, m.manifest.object_key);
            }
            let head = seqs.last().copied();
            let unaccepted = j
                .unaccepted_objects(head.unwrap_or(0), &|s| accepted.get(&s).cloned())
                .await?;
            let report = StatusReport {
                s3_requests: s3_requests(),
                format_version: FORMAT_VERSION,
                journal: j.url(),
                journal_id: j.header.journal_id.clone(),
                head_sequence: head,
                last_position,
                batches: seqs.len() as u64,
                events,
                bytes,
                unaccepted_objects: unaccepted,
            };
            if common.json {
                print_json(&report)?;
            } else {
                println!("journal {} ({})", report.journal_id, report.journal);
                println!(
                    "head sequence  {}",
                    report.head_sequence.map_or("-".into(), |s| s.to_string())
                );
                println!(
                    "last position  {}",
                    report.last_position.map_or("-".into(), |s| s.to_string())
                );
                println!("batches        {}", report.batches);
                println!("events         {}", report.events);
                println!("bytes          {}", report.bytes);
                for key in &report.unaccepted_objects {
                    println!("unaccepted     {key}");
                }
            }
            Ok(())
        }
        JournalCommand::Checkpoints {
            journal,
            table_uuid,
            table,
            at_or_before,
            common,
        } => {
            let j = open(&journal).await?;
            let filter = CheckpointFilter {
                table_uuid,
                table_name: table,
            };
            let list = if at_or_before.is_some() {
                checkpoint::newest_at_or_before(j.store.as_ref(), &filter, at_or_before)
                    .await?
                    .into_iter()
                    .collect()
            } else {
                checkpoint::list(j.store.as_ref(), &filter).await?
            };
            if common.json {
                print_json(&list)?;
            } else if list.is_empty() {
                println!("no checkpoints");
            } else {
                for c in &list {
                    println!(
                        "position {:>12}  written {}  table {} ({})  snapshot {}  manifest {} {}",
                        c.position,
                        c.written_at,
                        c.table_name,
                        c.table_uuid,
                        c.snapshot_id,
                        c.manifest_sequence,
                        c.manifest_digest
                    );
                }
            }
            Ok(())
        }
    }
}
