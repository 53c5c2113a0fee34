//! What every command shares on its command line: the options every command takes
//! ([`Common`]: `--json`, `--quiet`), and the parsers of `--hint` maps, durations and the
//! default writer id.

use clap::Args;

/// Options every command takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Print the result as JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

/// `--hint NS.TABLE=METADATA_FILE` options as a map.
pub fn parse_hints(hints: Vec<String>) -> anyhow::Result<std::collections::HashMap<String, String>> {
    hints
        .into_iter()
        .map(|h| match h.split_once('=') {
            Some((table, file)) => Ok((table.to_string(), file.to_string())),
            None => Err(anyhow::anyhow!("--hint is NS.TABLE=METADATA_FILE, got {h:?}")),
        })
        .collect()
}

/// `30s`, `5m`, `1h`, `500ms`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30s, 5m, 500ms"))?;
    let ms = match unit {
        "ms" => n,
        "s" => n * 1000,
        "m" => n * 60_000,
        "h" => n * 3_600_000,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    Ok(std::time::Duration::from_millis(ms))
}

/// A default writer id: host and process, so that two writers never share one.
pub fn default_writer_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".into());
    format!("{host}-{}", std::process::id())
}
