//! Keepers: hold a pool's, router's or cluster's lease for as long as the
//! caller wants it.
//!
//! ```text
//!  keep(registration) ──▶ register (with retries) ──▶ LeaseHandle
//!                          │
//!         every heartbeat_interval × [0.8, 1.0]: register again (a renewal)
//!           ok           ─▶ renewed (Regained if the lease had been lost,
//!                           or if the registry had forgotten the record)
//!           404          ─▶ Lost, register again at once (with backoff)
//!           409 owned    ─▶ Lost, keep trying (another incarnation holds it)
//!           409 stale    ─▶ move the generation past the stored one
//!           503, cut     ─▶ backoff; Lost once the lease has run out
//!  handle.shutdown()     ─▶ stop renewing, withdraw with ?incarnation=
//! ```
//!
//! Dropping the handle stops renewing without withdrawing: the lease then
//! runs out on its own.

use crate::backoff::{Attempts, jitter};
use crate::{Client, Error};
use mcs_api::{
    ClusterRegistration, Label, Lease, PoolRegistration, RouterRegistration, Withdrawal, Withdrawn,
};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a keeper holds the lease of.
#[derive(Debug, Clone)]
pub enum Registration {
    /// A pool (`POST /v1/pools`).
    Pool(PoolRegistration),
    /// A router replica (`POST /v1/routers`).
    Router(RouterRegistration),
    /// A cluster (`PUT /v1/clusters/{cluster_id}`).
    Cluster(Label, ClusterRegistration),
}

impl Registration {
    /// One attempt of the registration (renewal); the granted lease, and
    /// whether the registry continued a lease it held for this holder
    /// (`ClusterRegistered::renewed`; pools and routers always say so).
    async fn register_once(&self, client: &Client) -> Result<(Lease, bool), Error> {
        Ok(match self {
            Self::Pool(pool) => (client.register_pool_once(pool).await?.lease, true),
            Self::Router(router) => (client.register_router_once(router).await?.lease, true),
            Self::Cluster(id, cluster) => {
                let reply = client.register_cluster_once(id, cluster).await?;
                (reply.lease, reply.renewed)
            }
        })
    }

    async fn withdraw(&self, client: &Client) -> Result<Withdrawn, Error> {
        match self {
            Self::Pool(pool) => {
                let w = Withdrawal { incarnation: pool.incarnation.clone(), generation: None };
                client.withdraw_pool(&pool.pool_key.id(), &w).await
            }
            Self::Router(router) => {
                let w = Withdrawal { incarnation: router.incarnation.clone(), generation: None };
                client.withdraw_router(&router.router_id, &w).await
            }
            Self::Cluster(id, cluster) => {
                let w =
                    Withdrawal { incarnation: Some(cluster.incarnation.clone()), generation: None };
                client.withdraw_cluster(id, &w).await
            }
        }
    }

    /// Moves a client-chosen generation past `stored` (in the registry's
    /// units, `max(now_ms << 16, stored + 1)`); false if the registration
    /// lets the registry choose (then a stale generation cannot be cured
    /// here).
    fn move_past(&mut self, stored: u64) -> bool {
        let generation = match self {
            Self::Pool(p) if p.incarnation.is_some() => &mut p.generation,
            Self::Router(r) if r.incarnation.is_some() => &mut r.generation,
            Self::Cluster(_, c) => &mut c.generation,
            _ => return false,
        };
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        let now = u64::try_from(now_ms).unwrap_or(u64::MAX >> 16) << 16;
        *generation = Some(now.max(stored.saturating_add(1)));
        true
    }
}

/// What happened to a kept lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEvent {
    /// The lease is not held: the registry forgot the record (`404`),
    /// another incarnation holds it, or renewals failed until it ran out.
    /// The keeper keeps trying.
    Lost {
        /// Why, as the last error said it.
        reason: String,
    },
    /// A registration succeeded again after a loss, or a renewal found
    /// that the registry no longer held the record (it restarted on empty
    /// storage, its table was recreated or restored) and granted a new
    /// lease: what lived on the old one must be written again.
    Regained {
        /// The lease granted.
        lease: Lease,
    },
}

/// A lease being kept; renewals stop when it is dropped, and
/// [`LeaseHandle::shutdown`] withdraws the record.
#[must_use = "dropping the handle stops renewing the lease at once"]
#[derive(Debug)]
pub struct LeaseHandle {
    client: Client,
    registration: Registration,
    lease: Lease,
    events: mpsc::UnboundedReceiver<LeaseEvent>,
    renewed: watch::Receiver<Instant>,
    continued: watch::Receiver<Option<Instant>>,
    cancel: CancellationToken,
    task: JoinHandle<Registration>,
}

impl LeaseHandle {
    /// The lease granted by the first registration.
    pub fn lease(&self) -> Lease {
        self.lease
    }

    /// When the lease was last granted (registered or renewed).
    pub fn last_renewed(&self) -> Instant {
        *self.renewed.borrow()
    }

    /// When a renewal last found the lease as the keeper left it (the
    /// registry's `renewed: true`, or any renewal of a pool or router);
    /// `None` before the first. A registry that lost its state answers its
    /// first renewal after that with `Regained`, never here: so a list read
    /// before this instant came from a registry that still held the lease.
    pub fn last_continued(&self) -> Option<Instant> {
        *self.continued.borrow()
    }

    /// The next event (losses and regains), waiting for one.
    pub async fn event(&mut self) -> Option<LeaseEvent> {
        self.events.recv().await
    }

    /// An event already reported, if any, without waiting.
    pub fn try_event(&mut self) -> Option<LeaseEvent> {
        self.events.try_recv().ok()
    }

    /// Stops renewing and withdraws the record (with retries), naming the
    /// incarnation of the registration.
    pub async fn shutdown(mut self) -> Result<Withdrawn, Error> {
        self.cancel.cancel();
        // The task hands back the registration as it last sent it.
        let registration = match (&mut self.task).await {
            Ok(registration) => registration,
            Err(_) => self.registration.clone(),
        };
        registration.withdraw(&self.client).await
    }
}

impl Drop for LeaseHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Client {
    /// Registers `registration` (retrying as every call does) and keeps
    /// renewing it at the granted heartbeat interval, jittered, until the
    /// handle is shut down or dropped. Must be called within a tokio
    /// runtime.
    pub async fn keep(&self, registration: Registration) -> Result<LeaseHandle, Error> {
        let (lease, _) = self.retrying(|| registration.register_once(self)).await?;
        let (tx, events) = mpsc::unbounded_channel();
        let (renewed_tx, renewed) = watch::channel(Instant::now());
        let (continued_tx, continued) = watch::channel(None);
        let cancel = CancellationToken::new();
        let keeper = Keeper {
            events: tx,
            renewed: renewed_tx,
            continued: continued_tx,
            cancel: cancel.clone(),
        };
        let task = tokio::spawn(renew(self.clone(), registration.clone(), lease, keeper));
        Ok(LeaseHandle {
            client: self.clone(),
            registration,
            lease,
            events,
            renewed,
            continued,
            cancel,
            task,
        })
    }
}

/// The renewal task's ends of the handle's channels.
struct Keeper {
    events: mpsc::UnboundedSender<LeaseEvent>,
    renewed: watch::Sender<Instant>,
    continued: watch::Sender<Option<Instant>>,
    cancel: CancellationToken,
}

async fn renew(
    client: Client,
    mut registration: Registration,
    mut lease: Lease,
    keeper: Keeper,
) -> Registration {
    let Keeper { events, renewed, continued: continued_at, cancel } = keeper;
    let mut attempts = Attempts::new(client.config().backoff);
    let mut renewed_at = Instant::now();
    let mut lost = false;
    let mut wait = heartbeat(lease);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return registration,
            _ = tokio::time::sleep(wait) => {}
        }
        let error = match registration.register_once(&client).await {
            Ok((granted, continued)) => {
                lease = granted;
                renewed_at = Instant::now();
                renewed.send_replace(renewed_at);
                attempts.reset();
                if std::mem::take(&mut lost) {
                    tracing::info!("lease regained");
                    let _ = events.send(LeaseEvent::Regained { lease });
                } else if !continued {
                    tracing::warn!("the registry no longer held the record: registered anew");
                    let _ = events.send(LeaseEvent::Regained { lease });
                } else {
                    continued_at.send_replace(Some(renewed_at));
                }
                wait = heartbeat(lease);
                continue;
            }
            Err(error) => error,
        };
        let expired = renewed_at.elapsed() >= Duration::from_secs(lease.duration_secs);
        let lost_now = match &error {
            Error::NotFound { .. } | Error::Conflict(crate::Conflict::Owned { .. }) => true,
            Error::Conflict(crate::Conflict::StaleGeneration { stored_generation, .. }) => {
                if registration.move_past(stored_generation.unwrap_or(0)) {
                    wait = Duration::ZERO;
                    continue;
                }
                true
            }
            _ => expired,
        };
        if lost_now && !lost {
            lost = true;
            tracing::warn!(%error, "lease lost");
            let _ = events.send(LeaseEvent::Lost { reason: error.to_string() });
        } else {
            tracing::debug!(%error, "renewal failed");
        }
        // Retry soon, but never slower than the heartbeat itself.
        wait = attempts.delay(error.retry_after()).min(heartbeat(lease));
    }
}

/// The heartbeat interval, jittered down by up to a fifth so that keepers
/// started together do not renew together.
fn heartbeat(lease: Lease) -> Duration {
    jitter(Duration::from_secs(lease.heartbeat_interval_secs), 0.8)
}
