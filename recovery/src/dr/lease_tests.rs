use std::sync::Arc;

use chrono::{Duration, TimeZone, Utc};
use tidemark_journal::clock::StepClock;
use tidemark_journal::store::ObjectStore;
use tidemark_journal::store::local::LocalStore;

use super::*;

fn clock() -> StepClock {
    StepClock::new(Utc.timestamp_opt(1_800_000_000, 0).unwrap(), Duration::seconds(1))
}

fn store(dir: &tempfile::TempDir) -> Arc<dyn ObjectStore> {
    Arc::new(LocalStore::create(dir.path().join("state")).unwrap())
}

#[tokio::test]
async fn a_second_follower_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = (store(&dir), clock());
    let first = Lease::acquire(s.clone(), "follower-a", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
    let err = Lease::acquire(s.clone(), "follower-b", "dr", Duration::minutes(5), &c)
        .await
        .unwrap_err();
    match &err {
        LeaseError::Held { holder, .. } => assert_eq!(holder, "follower-a"),
        other => panic!("expected Held, got {other:?}"),
    }
    assert!(err.to_string().contains("follower-a"), "{err}");
    first.check().await.unwrap();
    // Released, the next follower takes it at once.
    first.release(&c).await.unwrap();
    Lease::acquire(s, "follower-b", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_old_holder_lost_it() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = (store(&dir), clock());
    let mut first = Lease::acquire(s.clone(), "a", "dr", Duration::milliseconds(1500), &c)
        .await
        .unwrap();
    // Each clock read is one second on: the lease has expired by the next acquire.
    let _ = c.now();
    let second = Lease::acquire(s.clone(), "b", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
    assert!(matches!(first.check().await, Err(LeaseError::Lost { holder, .. }) if holder == "b"));
    assert!(matches!(
        first.renew(Duration::minutes(5), &c).await,
        Err(LeaseError::Lost { .. })
    ));
    second.check().await.unwrap();
}

#[tokio::test]
async fn a_fenced_lease_stops_its_holder_and_is_never_acquired_again() {
    let dir = tempfile::tempdir().unwrap();
    let (s, c) = (store(&dir), clock());
    let mut follower = Lease::acquire(s.clone(), "a", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
    let (fencer, before) = fence(s.clone(), "failover-1", "dr", "region loss", &c).await.unwrap();
    fencer.check().await.unwrap();
    assert_eq!(before.unwrap().holder, "a");
    assert!(matches!(follower.check().await, Err(LeaseError::Fenced { by, .. }) if by == "failover-1"));
    assert!(matches!(
        follower.renew(Duration::minutes(5), &c).await,
        Err(LeaseError::Fenced { .. })
    ));
    let err = Lease::acquire(s.clone(), "a", "dr", Duration::minutes(5), &c)
        .await
        .unwrap_err();
    assert!(matches!(err, LeaseError::Fenced { .. }), "{err:?}");
    let (rec, _) = read(s.as_ref()).await.unwrap().unwrap();
    assert_eq!(rec.fenced_holder.as_deref(), Some("a"));
}

#[tokio::test]
async fn of_racing_followers_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let c = Arc::new(clock());
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (s, c) = (s.clone(), c.clone());
            tokio::spawn(
                async move { Lease::acquire(s, &format!("f{i}"), "dr", Duration::minutes(5), c.as_ref()).await },
            )
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => won += 1,
            Err(LeaseError::Held { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(won, 1);
}

#[tokio::test]
async fn lost_replies_on_the_lease_are_resolved_by_reading_back() {
    use tidemark_journal::store::faulty::{Fault, FaultyStore, ModeFilter, Op, Rule};
    let dir = tempfile::tempdir().unwrap();
    let c = clock();
    // Every conditional write of the lease loses its reply once (the write landed).
    let faulty = Arc::new(FaultyStore::new(
        store(&dir),
        7,
        vec![
            Rule::new(Op::Put, Fault::LostReply)
                .prefix(LEASE_KEY)
                .mode(ModeFilter::Conditional),
        ],
    ));
    let s: Arc<dyn ObjectStore> = faulty.clone();
    let mut lease = Lease::acquire(s.clone(), "a", "dr", Duration::minutes(5), &c)
        .await
        .unwrap();
    lease.check().await.unwrap();
    lease.renew(Duration::minutes(5), &c).await.unwrap();
    lease.check().await.unwrap();
    assert!(faulty.injected() >= 2, "{}", faulty.injected());
    // The second follower is still refused, naming the first.
    let err = Lease::acquire(s.clone(), "b", "dr", Duration::minutes(5), &c)
        .await
        .unwrap_err();
    assert!(
        matches!(err, LeaseError::Held { ref holder, .. } if holder == "a"),
        "{err:?}"
    );
    lease.release(&c).await.unwrap();
    assert_eq!(read(s.as_ref()).await.unwrap().unwrap().0.state, LeaseState::Released);
}
