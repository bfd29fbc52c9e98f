//! The cluster's registration: the leader holds the cluster's registry
//! lease through mcs-client's keeper. A lost lease is logged and counted,
//! the keeper keeps trying, and each (re-)registration bumps
//! `Context::registrations` so the exports are sent again.

use crate::metrics::{CLUSTER_LEASE_AGE, CLUSTER_LEASE_LOSSES, CLUSTER_REGISTRATIONS};
use mcs_api::{ClusterRegistration, Incarnation, Label};
use mcs_client::{Client, LeaseEvent, Registration};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Registers the cluster (retrying until it succeeds or `cancel`), then
/// keeps its lease until `cancel`. Stopping does not withdraw: the lease
/// runs out on its own, or the next leader renews it with the same
/// incarnation (docs/design.md §13).
pub async fn hold(
    registry: Client,
    cluster_id: Label,
    incarnation: Incarnation,
    registrations: watch::Sender<u64>,
    continued: watch::Sender<Option<tokio::time::Instant>>,
    lease_secs: Arc<AtomicU64>,
    cancel: CancellationToken,
) {
    let registration = Registration::Cluster(
        cluster_id.clone(),
        ClusterRegistration { cluster_id: None, lease: None, incarnation, generation: None },
    );
    let mut backoff = mcs_client::Attempts::new(mcs_client::Backoff::default());
    let mut handle = loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            kept = registry.keep(registration.clone()) => match kept {
                Ok(handle) => break handle,
                Err(e) => {
                    tracing::warn!(error = %e, cluster = %cluster_id, "cluster registration failed; retrying");
                    crate::health::set_leading(true, false);
                }
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(backoff.delay(None)) => {}
        }
    };
    tracing::info!(cluster = %cluster_id, lease_secs = handle.lease().duration_secs, "cluster registered");
    lease_secs.store(handle.lease().duration_secs, Ordering::Relaxed);
    registered(&registrations);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {
                metrics::gauge!(CLUSTER_LEASE_AGE).set(handle.last_renewed().elapsed().as_secs_f64());
                continued.send_if_modified(|at| {
                    let now = handle.last_continued().map(tokio::time::Instant::from_std);
                    std::mem::replace(at, now) != now
                });
            }
            event = handle.event() => match event {
                Some(LeaseEvent::Lost { reason }) => {
                    tracing::error!(cluster = %cluster_id, %reason, "cluster lease lost; re-registering");
                    metrics::counter!(CLUSTER_LEASE_LOSSES).increment(1);
                    crate::health::set_leading(true, false);
                }
                Some(LeaseEvent::Regained { lease }) => {
                    tracing::info!(cluster = %cluster_id, "cluster lease regained (or the registry had forgotten it): exports are sent again");
                    lease_secs.store(lease.duration_secs, Ordering::Relaxed);
                    registered(&registrations);
                }
                None => break,
            },
        }
    }
    // Dropping the handle stops renewing without withdrawing.
    drop(handle);
}

fn registered(registrations: &watch::Sender<u64>) {
    metrics::counter!(CLUSTER_REGISTRATIONS).increment(1);
    crate::health::set_leading(true, true);
    registrations.send_modify(|n| *n += 1);
}
