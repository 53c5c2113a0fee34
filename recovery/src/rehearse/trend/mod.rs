//! The drills' trend: a self-contained HTML page and Prometheus textfile metrics, drawn from the
//! records of [`crate::rehearse::history`].
//!
//! The page ([`html`]) is one file that loads nothing: its charts are inline SVG drawn here (no
//! script), its style is inline, and a Content-Security-Policy meta (`default-src 'none'`) stops
//! any load that a record's text could smuggle in; every text taken from a record is HTML-escaped
//! as well. It shows the RTO per step and the RPO over the past drills, the last drill's timeline,
//! the drills, and the last drill's checks. It reads no clock: the same records draw the same page.
//!
//! The metrics ([`metrics`]) are gauges in the Prometheus text format, for node_exporter's textfile
//! collector (no timestamps: the collector refuses them). Each series carries the drilled source
//! (`source` label) and describes that source's newest drill, except
//! `tidemark_drill_last_success_timestamp_seconds`, which is 0 (never absent) when no drill of the
//! source passed, so that one rule `time() - … > 8d` alerts on a failed, a missed and a never
//! passing weekly drill alike. Names and meanings: docs/formats.md.
//!
//! [`page`] lays the page out with the [`charts`]; [`metrics`] writes the metrics; both read the
//! records' times and text through [`text`].

mod charts;
mod metrics;
mod page;
#[cfg(test)]
mod tests;
mod text;

#[cfg(test)]
pub(crate) use charts::{RPO_POSITIONS_COLOUR, RPO_SECONDS_COLOUR, STEP_COLOURS, STEP_FAILED_COLOUR, STEP_OK_COLOUR};
pub use metrics::metrics;
#[cfg(test)]
pub(crate) use page::CSP_META;
pub use page::html;
