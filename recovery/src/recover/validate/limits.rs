//! The validation's memory bound: rows per partition ([`PARTITION_ROWS`]), partitions at once,
//! and the key-range parts' limits; and how it splits the keys ([`Split`]).

/// Rows that one validation partition holds at most (on average): the larger of the snapshot's
/// and the table's rows plus the range's events. Above this many, validation partitions by key
/// hash and spills to disk.
pub const PARTITION_ROWS: u64 = 250_000;

/// The validation's partitions for `rows` rows of the snapshot or table (the larger) and
/// `range_events` events: each side of a partition holds about its share of `partition_rows`,
/// whatever the range's size.
pub(super) fn partitions(rows: u64, range_events: u64, partition_rows: u64) -> usize {
    (rows + range_events).div_ceil(partition_rows.max(1)).max(1) as usize
}

/// Partitions folded and compared at the same time.
pub(super) const PARTITIONS_AT_ONCE: usize = 2;

/// The split by key range ([`super::ranges`]): a part's size aimed at, and the largest
/// run of overlapping files (or a part's events) it takes, in multiples of the partition rows;
/// a larger run makes the validation split by key hash. A part counts both sides' rows (a
/// key-hash partition about the partition rows of each side), so a part of the target size holds
/// about two key-hash partitions' rows; the parts in flight hold at most `RANGE_MAX` partitions'
/// rows ([`rows_in_flight`]).
pub(super) const RANGE_TARGET: u64 = 4;
const RANGE_MAX: u64 = 12;

#[cfg(test)]
tokio::task_local! {
    /// Tests: the events a key-range part may hold (instead of `RANGE_MAX` partitions' rows),
    /// for validations within its scope.
    pub(crate) static MAX_PART_EVENTS: u64;
}

#[cfg(test)]
tokio::task_local! {
    /// Tests: the rows the key-range parts checked at the same time may hold (instead of
    /// `RANGE_MAX` partitions' rows), for validations within its scope.
    pub(crate) static ROWS_IN_FLIGHT: u64;
}

/// The rows of the largest key-range part allowed: `RANGE_MAX` partitions' rows.
pub(super) fn largest_part(partition_rows: u64) -> u64 {
    partition_rows.max(1) * RANGE_MAX
}

/// The events a key-range part may hold before the validation splits by key hash instead.
pub(super) fn max_part_events(partition_rows: u64) -> u64 {
    #[cfg(test)]
    if let Ok(n) = MAX_PART_EVENTS.try_with(|n| *n) {
        return n;
    }
    largest_part(partition_rows)
}

/// The rows (both sides' and the events) of the key-range parts held at the same time: the
/// largest part allowed. Parts of the target size run [`PARTITIONS_AT_ONCE`] at a time; a part
/// larger than half the budget waits until it can run alone, so a plan of large parts (files
/// that overlap much, up to `RANGE_MAX` partitions' rows a run) holds no more than one of them.
pub(super) fn rows_in_flight(partition_rows: u64) -> u64 {
    #[cfg(test)]
    if let Ok(n) = ROWS_IN_FLIGHT.try_with(|n| *n) {
        return n;
    }
    largest_part(partition_rows)
}

/// How the validation splits the keys when they do not fit one partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Split {
    /// By key range when the manifests' key bounds allow it, else by key hash.
    #[default]
    Auto,
    /// By key hash, every row spilled (what `auto` falls back to).
    KeyHash,
}
