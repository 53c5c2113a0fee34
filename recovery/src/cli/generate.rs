//! `tidemark gen events`: deterministic NDJSON order events from a seed.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use tidemark_journal::generate::OrderGen;

#[derive(Debug, Subcommand)]
pub enum GenCommand {
    /// Write NDJSON events: random orders' next versions, some tombstones.
    Events {
        /// Distinct orders.
        #[arg(long, default_value_t = 1000)]
        orders: u64,
        /// Events to write.
        #[arg(long, default_value_t = 10_000)]
        events: u64,
        /// Position of the first event.
        #[arg(long, default_value_t = 1)]
        first_position: u64,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Percent of events (after an order's first) that are tombstones.
        #[arg(long, default_value_t = 5)]
        delete_percent: u64,
        /// Output file, or - for stdout.
        #[arg(long, default_value = "-")]
        out: PathBuf,
    },
}

pub fn run(cmd: GenCommand) -> anyhow::Result<()> {
    match cmd {
        GenCommand::Events {
            orders,
            events,
            first_position,
            seed,
            delete_percent,
            out,
        } => {
            anyhow::ensure!(orders > 0, "--orders must be at least 1");
            let mut g = OrderGen::new(seed, orders, first_position);
            g.delete_percent = delete_percent.min(100);
            let sink: Box<dyn Write> = if out.as_os_str() == "-" {
                Box::new(std::io::stdout().lock())
            } else {
                Box::new(std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?)
            };
            let mut w = BufWriter::with_capacity(1 << 20, sink);
            for _ in 0..events {
                serde_json::to_writer(&mut w, &g.next_event())?;
                w.write_all(b"\n")?;
            }
            w.flush()?;
            Ok(())
        }
    }
}
