//! Injected time, so that drills and tests replay exactly. Library code never reads the system
//! clock directly; the binary passes [`SystemClock`].

use std::sync::Mutex;

use chrono::{DateTime, Duration, SecondsFormat, Utc};

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;

    /// RFC 3339 with microseconds, as written in every format.
    fn now_rfc3339(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Micros, true)
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        #[allow(clippy::disallowed_methods)] // the one sanctioned read of the system clock
        Utc::now()
    }
}

/// A clock that starts at a fixed instant and advances by a fixed step at every read.
#[derive(Debug)]
pub struct StepClock {
    next: Mutex<DateTime<Utc>>,
    step: Duration,
}

impl StepClock {
    pub fn new(start: DateTime<Utc>, step: Duration) -> Self {
        StepClock {
            next: Mutex::new(start),
            step,
        }
    }
}

impl Clock for StepClock {
    fn now(&self) -> DateTime<Utc> {
        let mut next = self.next.lock().expect("clock lock");
        let now = *next;
        *next = now + self.step;
        now
    }
}
