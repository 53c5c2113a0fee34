//! A deterministic generator of order events (from a seed, no system randomness), for tests,
//! benchmarks and drills. Each event is a full row with the next version of its order; a share
//! of events are tombstones, and a deleted order can come back with a higher version.

use tidemark_schemas::OrderEvent;

/// SplitMix64: small, fast, and the same sequence everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub const STATUSES: [&str; 5] = ["placed", "paid", "packed", "shipped", "delivered"];
pub const CURRENCIES: [&str; 3] = ["EUR", "USD", "GBP"];

/// Seconds between the event times of consecutive positions: 15 minutes, so that a few hundred
/// events span several days (and day, hour and month transforms of a partitioned table make
/// several partitions).
pub const EVENT_STEP_SECONDS: i64 = 900;

/// Generates events for `orders` distinct orders, positions from `first_position`.
#[derive(Debug, Clone)]
pub struct OrderGen {
    rng: Rng,
    versions: Vec<i64>,
    next_position: u64,
    /// Seconds since the epoch of the event at position 0; each position is
    /// [`EVENT_STEP_SECONDS`] later.
    base_time: i64,
    pub delete_percent: u64,
}

impl OrderGen {
    pub fn new(seed: u64, orders: u64, first_position: u64) -> Self {
        OrderGen {
            rng: Rng::new(seed),
            versions: vec![0; orders as usize],
            next_position: first_position,
            base_time: 1_790_000_000,
            delete_percent: 5,
        }
    }

    pub fn order_id(i: u64) -> String {
        format!("o-{i:08}")
    }

    /// The next event: a random order's next version.
    pub fn next_event(&mut self) -> OrderEvent {
        let i = self.rng.below(self.versions.len() as u64);
        self.event_for(i)
    }

    /// The next version of order `i`.
    pub fn event_for(&mut self, i: u64) -> OrderEvent {
        self.versions[i as usize] += 1;
        let version = self.versions[i as usize];
        let position = self.next_position;
        self.next_position += 1;
        let deleted = version > 1 && self.rng.chance(self.delete_percent);
        let cents = self.rng.below(1_000_000) as i128;
        OrderEvent {
            format_version: None,
            position,
            order_id: Self::order_id(i),
            order_version: version,
            customer_id: format!("c-{:06}", self.rng.below(100_000)),
            status: STATUSES[self.rng.below(STATUSES.len() as u64) as usize].to_string(),
            amount: crate::codec::format_decimal(cents, 2),
            currency: CURRENCIES[self.rng.below(CURRENCIES.len() as u64) as usize].to_string(),
            is_deleted: deleted,
            event_time: crate::codec::format_timestamp_micros(
                (self.base_time + position as i64 * EVENT_STEP_SECONDS) * 1_000_000,
            ),
        }
    }

    pub fn next_position(&self) -> u64 {
        self.next_position
    }
}

/// `n` events as NDJSON text.
pub fn ndjson(seed: u64, orders: u64, first_position: u64, n: u64) -> String {
    let mut g = OrderGen::new(seed, orders, first_position);
    let mut out = String::with_capacity(n as usize * 200);
    for _ in 0..n {
        out.push_str(&serde_json::to_string(&g.next_event()).expect("event serializes"));
        out.push('\n');
    }
    out
}
