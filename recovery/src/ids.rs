//! Injected ids (STYLE habit 5): library code never mints random ids itself. The binary passes
//! [`RandomIds`]; tests and drills pass [`SeededIds`] to replay exactly.

use std::sync::atomic::{AtomicU64, Ordering};

use uuid::Uuid;

pub trait Ids: Send + Sync {
    fn uuid(&self) -> Uuid;
}

/// Random v4 UUIDs, for the binary.
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomIds;

impl Ids for RandomIds {
    #[allow(clippy::disallowed_methods)] // the one sanctioned source of random ids
    fn uuid(&self) -> Uuid {
        Uuid::new_v4()
    }
}

/// A deterministic sequence of UUIDs from a seed.
#[derive(Debug)]
pub struct SeededIds {
    seed: u64,
    next: AtomicU64,
}

impl SeededIds {
    pub fn new(seed: u64) -> Self {
        SeededIds {
            seed,
            next: AtomicU64::new(0),
        }
    }
}

impl Ids for SeededIds {
    fn uuid(&self) -> Uuid {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut rng = tidemark_journal::generate::Rng::new(self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (a, b) = (rng.next_u64(), rng.next_u64());
        uuid::Builder::from_random_bytes(
            [a.to_le_bytes(), b.to_le_bytes()]
                .concat()
                .try_into()
                .expect("16 bytes"),
        )
        .into_uuid()
    }
}
