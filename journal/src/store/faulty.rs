//! A fault-injecting wrapper around any [`ObjectStore`] (as slatedb's failing object store), for
//! tests: errors, delays and lost replies on chosen operations, deterministic under a seed.
//!
//! Each [`Rule`] names the operation, an optional key prefix and put mode, which matching calls it
//! hits (the `skip` first are spared, then at most `times`, each with `probability`), and the
//! [`Fault`]:
//!
//! * [`Fault::Unavailable`] — the request never reaches the inner store; the caller gets what the
//!   S3 backend reports for a 503 after its last attempt (an unknown outcome for a put, a backend
//!   error otherwise).
//! * [`Fault::LostReply`] — the request reaches the inner store (a put is written), the reply is
//!   replaced by an error ([`StoreError::OutcomeUnknown`] for a put).
//! * [`Fault::LostReplyRetried`] — a backend's own retry after a lost reply: the put reaches the
//!   inner store twice and the caller sees the second reply (a `412` conflict for a conditional
//!   put that the first attempt already wrote).
//! * [`Fault::Delay`] — the call waits, then proceeds.
//!
//! The wrapper counts what it injected ([`FaultyStore::injected`]) so tests can check that the
//! faults they meant did happen.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::{GetResult, ListPage, ObjectMeta, ObjectStore, PutMode, PutResult, Result, StoreError, VersionEntry};

/// The operations of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Put,
    Get,
    Head,
    List,
    ListVersions,
    Delete,
    DeleteVersion,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Get => "get",
            Op::Head => "head",
            Op::List => "list",
            Op::ListVersions => "list versions",
            Op::Delete => "delete",
            Op::DeleteVersion => "delete version",
        }
    }
}

/// Which put modes a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeFilter {
    Any,
    Overwrite,
    Create,
    Update,
    /// Create or Update.
    Conditional,
}

impl ModeFilter {
    fn matches(self, mode: Option<&PutMode>) -> bool {
        match (self, mode) {
            (ModeFilter::Any, _) => true,
            (_, None) => false,
            (ModeFilter::Overwrite, Some(PutMode::Overwrite)) => true,
            (ModeFilter::Create, Some(PutMode::Create)) => true,
            (ModeFilter::Update, Some(PutMode::Update { .. })) => true,
            (ModeFilter::Conditional, Some(PutMode::Create | PutMode::Update { .. })) => true,
            _ => false,
        }
    }
}

/// What a rule does to a call it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Unavailable,
    LostReply,
    LostReplyRetried,
    Delay(Duration),
}

/// One fault rule; build with [`Rule::new`] and the setters.
#[derive(Debug, Clone)]
pub struct Rule {
    pub op: Op,
    pub key_prefix: String,
    pub mode: ModeFilter,
    pub fault: Fault,
    pub skip: u64,
    pub times: u64,
    pub probability: f64,
}

impl Rule {
    /// Hits every matching call (until narrowed with the setters).
    pub fn new(op: Op, fault: Fault) -> Rule {
        Rule {
            op,
            key_prefix: String::new(),
            mode: ModeFilter::Any,
            fault,
            skip: 0,
            times: u64::MAX,
            probability: 1.0,
        }
    }
    pub fn prefix(mut self, prefix: &str) -> Rule {
        self.key_prefix = prefix.to_string();
        self
    }
    pub fn mode(mut self, mode: ModeFilter) -> Rule {
        self.mode = mode;
        self
    }
    /// Spares the first `n` matching calls.
    pub fn skip(mut self, n: u64) -> Rule {
        self.skip = n;
        self
    }
    /// Hits at most `n` calls.
    pub fn times(mut self, n: u64) -> Rule {
        self.times = n;
        self
    }
    /// Hits each eligible call with this probability (drawn from the store's seeded generator).
    pub fn probability(mut self, p: f64) -> Rule {
        self.probability = p;
        self
    }
}

#[derive(Debug)]
struct RuleState {
    rule: Rule,
    seen: u64,
    hit: u64,
}

/// The wrapper; see the module documentation.
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    rules: Mutex<(Vec<RuleState>, u64)>,
    injected: AtomicU64,
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultyStore").field("inner", &self.inner).finish()
    }
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn ObjectStore>, seed: u64, rules: Vec<Rule>) -> FaultyStore {
        let states = rules
            .into_iter()
            .map(|rule| RuleState { rule, seen: 0, hit: 0 })
            .collect();
        FaultyStore {
            inner,
            rules: Mutex::new((states, seed)),
            injected: AtomicU64::new(0),
        }
    }

    /// Replaces the rules (counters start again; the generator keeps its state).
    pub fn set_rules(&self, rules: Vec<Rule>) {
        let mut guard = self.rules.lock().expect("fault rules");
        guard.0 = rules
            .into_iter()
            .map(|rule| RuleState { rule, seen: 0, hit: 0 })
            .collect();
    }

    /// How many faults were injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// The fault for this call, if a rule hits it (the first matching rule decides).
    fn pick(&self, op: Op, key: &str, mode: Option<&PutMode>) -> Option<Fault> {
        let mut guard = self.rules.lock().expect("fault rules");
        let (states, rng) = &mut *guard;
        for s in states.iter_mut() {
            if s.rule.op != op || !key.starts_with(&s.rule.key_prefix) || !s.rule.mode.matches(mode) {
                continue;
            }
            s.seen += 1;
            if s.seen <= s.rule.skip || s.hit >= s.rule.times {
                continue;
            }
            if s.rule.probability < 1.0 && unit(next(rng)) >= s.rule.probability {
                continue;
            }
            s.hit += 1;
            self.injected.fetch_add(1, Ordering::SeqCst);
            return Some(s.rule.fault);
        }
        None
    }

    fn error(&self, op: Op, key: &str, what: &str) -> StoreError {
        let detail = format!("injected fault: {what}");
        if op == Op::Put {
            StoreError::OutcomeUnknown {
                store: self.inner.url(),
                op: op.name(),
                key: key.to_string(),
                detail,
            }
        } else {
            StoreError::Backend {
                store: self.inner.url(),
                op: op.name(),
                key: key.to_string(),
                detail,
            }
        }
    }

    /// Runs `call` under the fault picked for it.
    async fn run<T, F, Fut>(&self, op: Op, key: &str, mode: Option<&PutMode>, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        match self.pick(op, key, mode) {
            None => call().await,
            Some(Fault::Delay(d)) => {
                tokio::time::sleep(d).await;
                call().await
            }
            Some(Fault::Unavailable) => Err(self.error(op, key, "503 SlowDown, request not sent to the store")),
            Some(Fault::LostReply) => {
                let _ = call().await;
                Err(self.error(op, key, "the request reached the store, its reply was lost"))
            }
            Some(Fault::LostReplyRetried) => {
                let _ = call().await;
                call().await
            }
        }
    }
}

/// splitmix64: a small, seeded, reproducible generator (no dependency).
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[async_trait]
impl ObjectStore for FaultyStore {
    fn url(&self) -> String {
        self.inner.url()
    }

    async fn put(&self, key: &str, body: Bytes, mode: PutMode) -> Result<PutResult> {
        self.run(Op::Put, key, Some(&mode), || {
            self.inner.put(key, body.clone(), mode.clone())
        })
        .await
    }

    async fn get(&self, key: &str, version_id: Option<&str>) -> Result<GetResult> {
        self.run(Op::Get, key, None, || self.inner.get(key, version_id)).await
    }

    async fn head(&self, key: &str, version_id: Option<&str>) -> Result<ObjectMeta> {
        self.run(Op::Head, key, None, || self.inner.head(key, version_id)).await
    }

    async fn list_page(&self, prefix: &str, token: Option<&str>, max: usize) -> Result<ListPage> {
        self.run(Op::List, prefix, None, || self.inner.list_page(prefix, token, max))
            .await
    }

    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>> {
        self.run(Op::ListVersions, prefix, None, || self.inner.list_versions(prefix))
            .await
    }

    async fn delete(&self, key: &str) -> Result<()> {
        self.run(Op::Delete, key, None, || self.inner.delete(key)).await
    }

    async fn delete_version(&self, key: &str, version_id: &str) -> Result<()> {
        self.run(Op::DeleteVersion, key, None, || {
            self.inner.delete_version(key, version_id)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_reproducible() {
        let (mut a, mut b) = (7u64, 7u64);
        let xs: Vec<u64> = (0..5).map(|_| next(&mut a)).collect();
        let ys: Vec<u64> = (0..5).map(|_| next(&mut b)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&unit(x))));
    }
}
