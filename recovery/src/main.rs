//! The `tidemark` binary: parses the command line, runs the command, prints errors as one line
//! with their whole cause chain (each cause once: `error_text`), and returns a documented exit code (see `exit.rs`).

mod cli;

use std::process::ExitCode;

use clap::Parser;
use tidemark_recovery::exit;

/// mimalloc rather than glibc's malloc: glibc's per-thread arenas held the memory one step freed
/// while the next step's threads allocated anew (docs/performance.md, "the allocator"); its purge
/// delay is set in `main` (`tidemark_recovery::allocator`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Counts the table-file client's retries for `s3_requests`; prints nothing.
    tidemark_recovery::catalog::counted_io::install_retry_counter();
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Freed memory kept for reuse by a command that ends, given back by a service
    // (tidemark_recovery::allocator).
    tidemark_recovery::allocator::configure(args.process());
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("error: {}", tidemark_recovery::error_text::one_line(&e));
            ExitCode::from(exit::code_of(&e))
        }
    }
}
