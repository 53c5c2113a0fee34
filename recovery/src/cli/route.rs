//! `tidemark route show | flip` and `tidemark query`.

use arrow::array::RecordBatch;
use clap::{Subcommand, ValueEnum};
use tidemark_journal::clock::SystemClock;
use tidemark_recovery::exit::{CONFLICT, exit_error};
use tidemark_recovery::query::routed_context;
use tidemark_recovery::table;
use tidemark_router::{FlipRequest, RouteStore};

use super::common::Common;
use super::output::print_json;
use super::table::CatalogArgs;

#[derive(Debug, Subcommand)]
pub enum RouteCommand {
    /// Print the route and its history.
    Show {
        #[arg(long)]
        route: String,
        #[command(flatten)]
        common: Common,
    },
    /// Point readers and the next writer at a table (If-Match on the route read; generation + 1).
    Flip {
        #[arg(long)]
        route: String,
        #[command(flatten)]
        catalog: CatalogArgs,
        #[arg(long)]
        table: String,
        /// The journal position the table holds (the next writer starts after it).
        #[arg(long)]
        applied_position: u64,
        #[arg(long)]
        reason: String,
        /// Only flip from this generation (refused if the route moved).
        #[arg(long)]
        expect_generation: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
}

pub async fn run(cmd: RouteCommand) -> anyhow::Result<()> {
    match cmd {
        RouteCommand::Show { route, common } => {
            let routes = RouteStore::open(&route).await?;
            let history = routes.history().await?;
            if let Some((current, version_id)) = history.first()
                && let Err(e) = routes.check_lineage(current, version_id).await
            {
                eprintln!("warning: {e}");
            }
            if common.json {
                let h: Vec<_> = history
                    .iter()
                    .map(|(r, v)| serde_json::json!({"version_id": v, "route": r}))
                    .collect();
                print_json(&h)?;
            } else if history.is_empty() {
                println!("no route at {}", routes.url());
            } else {
                for (i, (r, v)) in history.iter().enumerate() {
                    let mark = if i == 0 { "current" } else { "earlier" };
                    println!(
                        "{mark:<8} generation {:<4} table {} ({}) applied position {}  {}  reason: {}  [version {v}]",
                        r.generation, r.table_name, r.table_uuid, r.applied_position, r.written_at, r.reason
                    );
                }
            }
            Ok(())
        }
        RouteCommand::Flip {
            route,
            catalog,
            table: name,
            applied_position,
            reason,
            expect_generation,
            common,
        } => {
            let routes = RouteStore::open_or_create(&route).await?;
            let handle = catalog.open().await?;
            let t = table::load_table(&handle, &name).await?;
            let req = FlipRequest {
                table_name: name.clone(),
                catalog: handle.reference().clone(),
                metadata_location: t.metadata_location().unwrap_or_default().to_string(),
                table_uuid: t.metadata().uuid().to_string(),
                applied_position,
                reason,
                recovery_id: None,
            };
            let (new, _) = match routes.read().await? {
                None => routes.init(req, &SystemClock).await?,
                Some((cur, etag, _)) => {
                    if let Some(g) = expect_generation
                        && g != cur.generation
                    {
                        return Err(exit_error(
                            CONFLICT,
                            format!(
                                "the route is at generation {}, not {g}; re-read it with `tidemark route show`",
                                cur.generation
                            ),
                        ));
                    }
                    routes.flip(&etag, cur.generation, req, &SystemClock).await?
                }
            };
            if common.json {
                print_json(&new)?;
            } else {
                println!(
                    "route {} now at generation {}: {} ({})",
                    routes.url(),
                    new.generation,
                    new.table_name,
                    new.table_uuid
                );
            }
            Ok(())
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// The route URL; resolved on every invocation.
    #[arg(long)]
    pub route: String,
    /// The name the routed table has in SQL (tombstones excluded); `<name>_with_tombstones` has every row.
    #[arg(long, default_value = "orders")]
    pub name: String,
    #[arg(long, default_value = "is_deleted")]
    pub delete_column: String,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    pub sql: String,
}

pub async fn run_query(args: QueryArgs) -> anyhow::Result<()> {
    let routes = RouteStore::open(&args.route).await?;
    let (ctx, route) = routed_context(&routes, &args.name, &args.delete_column).await?;
    let batches: Vec<RecordBatch> = ctx.sql(&args.sql).await?.collect().await?;
    eprintln!(
        "route generation {}: {} ({})",
        route.generation, route.table_name, route.table_uuid
    );
    match args.format {
        Format::Table => println!("{}", arrow::util::pretty::pretty_format_batches(&batches)?),
        Format::Json => {
            let mut w = arrow::json::ArrayWriter::new(std::io::stdout());
            w.write_batches(&batches.iter().collect::<Vec<_>>())?;
            w.finish()?;
            println!();
        }
        Format::Csv => {
            let mut w = arrow::csv::Writer::new(std::io::stdout());
            for b in &batches {
                w.write(b)?;
            }
        }
    }
    Ok(())
}
