//! Leader election against a real API server: one leader at a time, a
//! released Lease taken over at once, a dead leader's after its duration,
//! the cluster's incarnation carried over, a stolen Lease noticed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use mcs_controller::leader::{Election, INCARNATION_ANNOTATION};
use mcs_testkit::k8s::{K8sEnv, ensure_namespace};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn election(identity: &str) -> Election {
    Election {
        namespace: "mcs-system".into(),
        name: "mcs-controller".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
    }
}

#[tokio::test]
async fn one_leader_handover_failover_and_a_stolen_lease() {
    let Some(env) = K8sEnv::start("leader").await else { return };
    let kube = env.client().await;
    ensure_namespace(&kube, "mcs-system").await;
    let never = CancellationToken::new();

    let a = election("a").acquire(kube.clone(), &never).await.unwrap().unwrap();
    // b waits while a renews: three lease durations.
    let b_waits = CancellationToken::new();
    let b = {
        let (kube, b_waits) = (kube.clone(), b_waits.clone());
        tokio::spawn(async move { election("b").acquire(kube, &b_waits).await })
    };
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(!b.is_finished(), "b became leader while a renewed");
    assert!(!a.lost.is_cancelled());

    // A release hands over at once (within b's retry period), with the incarnation.
    let incarnation = a.incarnation.clone();
    let released = Instant::now();
    a.release().await;
    let b = tokio::time::timeout(Duration::from_secs(5), b).await.expect("b in time").unwrap();
    let b = b.unwrap().expect("b leads");
    assert!(released.elapsed() < Duration::from_secs(3), "{:?}", released.elapsed());
    assert_eq!(b.incarnation, incarnation, "the cluster's incarnation is carried over");

    // A leader that dies (stops renewing, no release) is replaced after the
    // Lease's duration, not before.
    drop(b);
    let died = Instant::now();
    let c = election("c").acquire(kube.clone(), &never).await.unwrap().unwrap();
    let waited = died.elapsed();
    assert!(waited >= Duration::from_secs(3), "took over a live lease after {waited:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert_eq!(c.incarnation, incarnation);
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "mcs-system");
    let lease = leases.get("mcs-controller").await.unwrap();
    let spec = lease.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("c"));
    assert_eq!(spec.lease_transitions, Some(2), "a → b → c");
    assert_eq!(
        lease.metadata.annotations.as_ref().unwrap()[INCARNATION_ANNOTATION],
        incarnation.to_string()
    );

    // Someone else writing the Lease ends c's leadership, and its writes.
    assert_eq!(c.guard.check(), Ok(()), "c's renewals keep its writes allowed");
    let mut stolen = lease;
    stolen.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
    leases.replace("mcs-controller", &PostParams::default(), &stolen).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), c.lost.cancelled())
        .await
        .expect("c notices it no longer leads");
    assert_eq!(c.guard.check(), Err(mcs_controller::leader::NotLeader::Ended));
}
