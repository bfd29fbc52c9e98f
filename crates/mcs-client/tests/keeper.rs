//! Lease keepers against the fake registry: renewals, re-registration
//! after the record is forgotten, a lease lost in an outage, withdrawal on
//! shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

mod common;

use common::{client, cluster, pool};
use mcs_api::Label;
use mcs_client::{LeaseEvent, Registration};
use mcs_testkit::eventually;
use mcs_testkit::fake::FakeRegistry;
use serde_json::json;
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(10);

/// A pool asking for a 2 s lease renewed every second.
fn short_pool(dgd: &str) -> Registration {
    Registration::Pool(pool(
        dgd,
        json!({"incarnation": "relay-1", "lease": {"duration_secs": 2, "heartbeat_interval_secs": 1}}),
    ))
}

async fn event(handle: &mut mcs_client::LeaseHandle) -> LeaseEvent {
    tokio::time::timeout(WITHIN, handle.event())
        .await
        .expect("an event in time")
        .expect("keeper running")
}

#[tokio::test]
async fn renews_past_the_lease_and_withdraws_on_shutdown() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let handle = c.keep(short_pool("llama")).await.unwrap();
    assert_eq!(handle.lease().duration_secs, 2);
    let registered = handle.last_renewed();
    // Twice the lease: without renewals the pool would have expired.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(c.pools().await.unwrap().pools.len(), 1, "renewed");
    assert!(handle.last_renewed() > registered, "renewals are reported");
    assert!(handle.last_renewed().elapsed() < Duration::from_secs(2));
    assert!(fake.writes_seen() >= 4, "renewals sent: {}", fake.writes_seen());
    handle.shutdown().await.unwrap();
    assert!(c.pools().await.unwrap().pools.is_empty(), "withdrawn on shutdown");
}

/// Issue 22, item 4: a relay ordering its own generations, its clock 30 s
/// ahead of the registry's, had its graceful shutdown refused (`409
/// stale_generation`) and its pool left registered until the lease lapsed.
#[tokio::test]
async fn shutdown_withdraws_after_a_generation_ahead_of_the_registry_clock() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as u64;
    let ahead = (now_ms + 30_000) << 16;
    let handle = c
        .keep(Registration::Pool(pool(
            "llama",
            json!({"incarnation": "relay-1", "generation": ahead}),
        )))
        .await
        .unwrap();
    assert_eq!(c.pools().await.unwrap().pools.len(), 1);
    let withdrawn = handle.shutdown().await.expect("the owner's withdrawal succeeds");
    assert!(withdrawn.generation > ahead, "above the relay's generation");
    assert!(c.pools().await.unwrap().pools.is_empty(), "withdrawn on shutdown");
}

#[tokio::test]
async fn re_registers_after_the_registry_forgets_the_record() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let mut handle = c.keep(short_pool("llama")).await.unwrap();
    fake.forget_next_writes(2);
    assert!(
        matches!(event(&mut handle).await, LeaseEvent::Lost { ref reason } if reason.contains("not found"))
    );
    assert!(matches!(event(&mut handle).await, LeaseEvent::Regained { .. }));
    assert_eq!(c.pools().await.unwrap().pools.len(), 1);
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn reports_a_lease_lost_in_an_outage_and_regains_it() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let mut handle = c.keep(short_pool("llama")).await.unwrap();
    fake.fail_next_writes(u32::MAX, 1);
    assert!(matches!(event(&mut handle).await, LeaseEvent::Lost { .. }));
    fake.fail_next_writes(0, 1);
    assert!(matches!(event(&mut handle).await, LeaseEvent::Regained { .. }));
    handle.shutdown().await.unwrap();
}

/// A registry restarted on empty storage takes a cluster's renewal as a
/// new registration (`renewed: false`): the keeper reports `Regained`, so
/// the controller writes its exports again, though no renewal failed.
#[tokio::test]
async fn a_cluster_keeper_reports_a_registry_that_forgot_it() {
    let mut fake = FakeRegistry::start().await;
    let c = client(&fake);
    let east = Label::new("east").unwrap();
    let mut handle = c.keep(Registration::Cluster(east, cluster("c1"))).await.unwrap();
    // Renewals of a lease the registry holds report nothing.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(handle.last_renewed().elapsed() < Duration::from_secs(1), "renewed");
    assert_eq!(handle.try_event(), None, "a renewal is no news");
    fake.restart_empty().await;
    assert!(c.clusters().await.unwrap().clusters.is_empty(), "the registry forgot the cluster");
    assert!(matches!(event(&mut handle).await, LeaseEvent::Regained { .. }));
    assert_eq!(c.clusters().await.unwrap().clusters.len(), 1, "registered anew");
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_cluster_keeper_withdraws_with_its_incarnation() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let east = Label::new("east").unwrap();
    let handle = c.keep(Registration::Cluster(east, cluster("c1"))).await.unwrap();
    assert_eq!(c.clusters().await.unwrap().clusters.len(), 1);
    handle.shutdown().await.unwrap();
    eventually(WITHIN, "cluster withdrawn", async || {
        c.clusters().await.is_ok_and(|l| l.clusters.is_empty())
    })
    .await;
}
