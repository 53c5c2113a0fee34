//! Progress lines on stderr for long work: at most one line a second, plus the final one, and
//! nothing at all with `--quiet` (stdout stays clean for `--json`).

use std::time::{Duration, Instant};

pub struct Progress {
    label: String,
    quiet: bool,
    last: Option<Instant>,
    every: Duration,
}

impl Progress {
    pub fn new(label: impl Into<String>, quiet: bool) -> Self {
        Progress {
            label: label.into(),
            quiet,
            last: None,
            every: Duration::from_secs(1),
        }
    }

    /// Prints `line` if a second has passed since the last one (or `force`).
    pub fn update(&mut self, line: impl FnOnce() -> String, force: bool) {
        if self.quiet {
            return;
        }
        let now = Instant::now();
        if force || self.last.is_none_or(|t| now.duration_since(t) >= self.every) {
            eprintln!("{}: {}", self.label, line());
            self.last = Some(now);
        }
    }
}
