//! How an error is printed: one line, its whole cause chain, each cause once.
//!
//! `{:#}` of an `anyhow::Error` joins every link of the chain with ": ". Many links already
//! print their source in their own text (a `"…: {source}"` message beside `#[source]`, and
//! iceberg's "Unexpected => Failure in doing io operation, source: …"), so a cause came out two
//! to four times. [`one_line`] prints a link only when its text is not already in the line.

/// The error and its causes on one line (`a: b: c`), a cause whose text the line already holds
/// left out.
pub fn one_line(err: &anyhow::Error) -> String {
    chain_text(err.chain().map(|c| c.to_string()))
}

/// [`one_line`] of a `std` error and its sources.
pub fn one_line_std(err: &(dyn std::error::Error + 'static)) -> String {
    let mut texts = Vec::new();
    let mut cause = Some(err);
    while let Some(c) = cause {
        texts.push(c.to_string());
        cause = c.source();
    }
    chain_text(texts.into_iter())
}

fn chain_text(texts: impl Iterator<Item = String>) -> String {
    let mut line = String::new();
    for text in texts {
        let text = text.trim();
        if text.is_empty() || line.contains(text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("no space left on device")]
    struct Full;

    /// A message that repeats its source, as `#[error("…: {source}")]` with `#[source]` does.
    #[derive(Debug, thiserror::Error)]
    #[error("{context}: {source}")]
    struct Repeats {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    }

    /// A message that does not print its source.
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Step(String, #[source] Repeats);

    #[test]
    fn each_cause_is_printed_once() {
        let inner = Repeats {
            context: "Unexpected => Failure in doing io operation".into(),
            source: Box::new(Full),
        };
        let middle = Repeats {
            context: "write data file d.parquet".into(),
            source: Box::new(inner),
        };
        let err = anyhow::Error::new(Step("apply failed".into(), middle));
        assert!(format!("{err:#}").matches("no space left on device").count() > 1);
        let line = one_line(&err);
        assert_eq!(
            line,
            "apply failed: write data file d.parquet: Unexpected => Failure in doing io operation: no space left on device"
        );
        assert_eq!(line.matches("no space left on device").count(), 1, "{line}");
        assert_eq!(one_line_std(err.as_ref()), line);
    }

    #[test]
    fn causes_that_do_not_repeat_are_all_printed() {
        let err = anyhow::Error::new(Full)
            .context("append to s3://b/j")
            .context("journal append");
        assert_eq!(
            one_line(&err),
            "journal append: append to s3://b/j: no space left on device"
        );
    }
}
