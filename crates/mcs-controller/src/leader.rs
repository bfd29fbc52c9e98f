//! Leader election on a `coordination.k8s.io` Lease, so that two replicas
//! are safe: only the leader holds the cluster's registry lease, exports and
//! imports. See docs/design.md §13.
//!
//! ```text
//!  candidate: get Lease ── none ──────────────▶ create (holder = me)      ─▶ leader
//!                       └─ held, and unchanged for its duration (by our
//!                          own clock, as client-go does) ─▶ update (rv) ─▶ leader
//!  leader:   renew every duration/3; no renewal for 2/3 duration ─▶ lost
//!  shutdown: release (holder cleared), so a standby takes over at once
//!  writes:   LeaderGuard::check before each: refused once 2/3 duration
//!            passed since the last renewal began (monotonic clock), or lost
//! ```
//!
//! The renewal task alone would let a replica that was paused (SIGSTOP, a
//! stalled node) past its Lease write on waking, before the task runs and
//! notices: the [`LeaderGuard`] judges by the clock instead, so the writes
//! stop when the term's deadline passes whatever the task has seen.
//!
//! The Lease also carries the cluster's registry incarnation (annotation
//! [`INCARNATION_ANNOTATION`]): a new leader adopts it, so its renewals of
//! the cluster's registry lease continue the old leader's instead of
//! waiting for them to lapse (which would drop the cluster's slices in
//! every other cluster for a moment at each rolling update).

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use mcs_api::Incarnation;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The Lease annotation holding the cluster's registry incarnation.
pub const INCARNATION_ANNOTATION: &str = "mcs-registry.io/cluster-incarnation";

/// Where and how long to hold the Lease.
#[derive(Debug, Clone)]
pub struct Election {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity (pod name and a random suffix).
    pub identity: String,
    /// How long the Lease lasts without renewal.
    pub duration: Duration,
}

/// Whether this replica may still write as the leader: until the renew
/// deadline (two thirds of the Lease's duration) after the start of its
/// last successful acquisition or renewal, by this process's monotonic
/// clock, and never again once the term ended. Cheap to clone and to
/// check. Others take the Lease over only after a whole duration without
/// seeing it change, counted from no earlier than that start: the last
/// third is the margin of a write already sent.
#[derive(Debug, Clone)]
pub struct LeaderGuard {
    /// Writes are allowed before this instant; `None` once the term ended.
    valid_until: Arc<Mutex<Option<Instant>>>,
    deadline: Duration,
}

/// Why [`LeaderGuard::check`] refused a write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotLeader {
    /// The term ended: the Lease was lost or released.
    #[error("not the leader: leadership ended")]
    Ended,
    /// No renewal began within the renew deadline; the Lease may be
    /// another replica's by now.
    #[error(
        "not the leader: the leader lease was not renewed in time ({late:?} past its deadline)"
    )]
    Expired {
        /// How long ago the deadline passed.
        late: Duration,
    },
}

impl LeaderGuard {
    /// A guard for a term whose acquisition began at `started`, with the
    /// renew deadline `deadline`.
    pub fn new(started: Instant, deadline: Duration) -> Self {
        Self { valid_until: Arc::new(Mutex::new(Some(started + deadline))), deadline }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.valid_until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A renewal that began at `started` succeeded: writes are allowed
    /// until `started` + the deadline (never earlier than before, nor
    /// again once the term ended).
    pub fn renewed(&self, started: Instant) {
        let mut slot = self.slot();
        if let Some(until) = slot.as_mut() {
            *until = (*until).max(started + self.deadline);
        }
    }

    /// The term ended: every later check fails.
    pub fn end(&self) {
        *self.slot() = None;
    }

    /// `Ok` while a write may be sent as the leader.
    pub fn check(&self) -> Result<(), NotLeader> {
        self.check_at(Instant::now())
    }

    /// [`Self::check`] at `now`.
    pub fn check_at(&self, now: Instant) -> Result<(), NotLeader> {
        match *self.slot() {
            None => Err(NotLeader::Ended),
            Some(until) if now >= until => Err(NotLeader::Expired { late: now - until }),
            Some(_) => Ok(()),
        }
    }
}

/// The registry client's writes are the leader's too.
impl mcs_client::WriteFence for LeaderGuard {
    fn check(&self) -> Result<(), String> {
        LeaderGuard::check(self).map_err(|e| e.to_string())
    }
}

/// Being the leader: the incarnation to register the cluster with, a
/// guard for each write, and a token cancelled when leadership is lost.
#[derive(Debug)]
pub struct Leadership {
    /// The cluster's registry incarnation (adopted from the Lease).
    pub incarnation: Incarnation,
    /// Checked before every write of the term.
    pub guard: LeaderGuard,
    /// Cancelled when the Lease could not be renewed in time.
    pub lost: CancellationToken,
    renewer: tokio::task::JoinHandle<()>,
    stop: CancellationToken,
    api: Api<Lease>,
    election: Election,
}

impl Election {
    /// Waits until this replica holds the Lease (or `cancel` fires: `None`).
    pub async fn acquire(
        self,
        client: kube::Client,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<Leadership>> {
        let api: Api<Lease> = Api::namespaced(client, &self.namespace);
        let mut observed: Option<(String, Instant)> = None;
        let mut announced = false;
        loop {
            let started = Instant::now();
            match self.try_acquire(&api, &mut observed).await {
                Ok(Some(incarnation)) => {
                    tracing::info!(lease = %self.name, identity = %self.identity, %incarnation, "became leader");
                    metrics::gauge!(crate::metrics::LEADER).set(1.0);
                    crate::health::saw_api_server();
                    let guard = LeaderGuard::new(started, self.renew_deadline());
                    let lost = CancellationToken::new();
                    let stop = CancellationToken::new();
                    let renewer = tokio::spawn(renew(
                        api.clone(),
                        self.clone(),
                        guard.clone(),
                        lost.clone(),
                        stop.clone(),
                    ));
                    return Ok(Some(Leadership {
                        incarnation,
                        guard,
                        lost,
                        renewer,
                        stop,
                        api,
                        election: self,
                    }));
                }
                Ok(None) => {
                    crate::health::saw_api_server();
                    if !std::mem::replace(&mut announced, true) {
                        tracing::info!(lease = %self.name, "waiting to become leader");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %mcs_api::chain(&e), lease = %self.name, "leader election failed; retrying")
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return Ok(None),
                _ = tokio::time::sleep(self.retry_period()) => {}
            }
        }
    }

    fn retry_period(&self) -> Duration {
        self.duration / 5
    }

    /// How long after a renewal began the leader may still write without
    /// another: two thirds of the Lease's duration.
    pub fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }

    /// One attempt: `Some(incarnation)` when this replica now holds the Lease.
    async fn try_acquire(
        &self,
        api: &Api<Lease>,
        observed: &mut Option<(String, Instant)>,
    ) -> Result<Option<Incarnation>, kube::Error> {
        let now = Timestamp::now();
        let Some(mut lease) = api.get_opt(&self.name).await? else {
            let incarnation = new_incarnation();
            let mut lease = Lease::default();
            lease.metadata.name = Some(self.name.clone());
            lease.metadata.annotations =
                Some([(INCARNATION_ANNOTATION.to_owned(), incarnation.to_string())].into());
            lease.spec = Some(self.spec(now, now, 0));
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Some(incarnation)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
                Err(e) => Err(e),
            };
        };
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        // The holder's renewals are judged by when we saw them change, not by
        // the times it wrote: clocks of two nodes need not agree.
        let seen_at = match observed {
            Some((seen_rv, at)) if *seen_rv == rv => *at,
            _ => {
                *observed = Some((rv.clone(), Instant::now()));
                Instant::now()
            }
        };
        let duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.duration, Duration::from_secs);
        let free = match &holder {
            None => true,
            Some(h) if *h == self.identity => true,
            Some(_) => seen_at.elapsed() >= duration,
        };
        if !free {
            return Ok(None);
        }
        let incarnation = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(INCARNATION_ANNOTATION))
            .and_then(|v| Incarnation::new(v.as_str()).ok())
            .unwrap_or_else(new_incarnation);
        let transitions = spec.lease_transitions.unwrap_or(0)
            + i32::from(holder.as_deref() != Some(self.identity.as_str()));
        lease
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(INCARNATION_ANNOTATION.to_owned(), incarnation.to_string());
        lease.spec = Some(self.spec(now, now, transitions));
        match api.replace(&self.name, &PostParams::default(), &lease).await {
            Ok(_) => Ok(Some(incarnation)),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}

/// Renews the Lease every third of its duration until `stop`, extending
/// `guard` by each success; ends `guard` and cancels `lost` when no
/// renewal succeeded for two thirds of it, or another replica holds it.
async fn renew(
    api: Api<Lease>,
    election: Election,
    guard: LeaderGuard,
    lost: CancellationToken,
    stop: CancellationToken,
) {
    let deadline = election.renew_deadline();
    let mut renewed = Instant::now();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(election.duration / 3) => {}
        }
        let started = Instant::now();
        match renew_once(&api, &election).await {
            Ok(true) => {
                renewed = started;
                guard.renewed(started);
                crate::health::saw_api_server();
            }
            Ok(false) => {
                tracing::error!(lease = %election.name, "leadership lost: another replica holds the lease");
                break;
            }
            Err(e) if renewed.elapsed() >= deadline => {
                tracing::error!(error = %mcs_api::chain(&e), lease = %election.name, "leadership lost: no renewal in time");
                break;
            }
            Err(e) => {
                tracing::warn!(error = %mcs_api::chain(&e), lease = %election.name, "leader lease renewal failed")
            }
        }
    }
    guard.end();
    metrics::gauge!(crate::metrics::LEADER).set(0.0);
    lost.cancel();
}

/// One renewal: false when another replica holds the Lease.
async fn renew_once(api: &Api<Lease>, election: &Election) -> Result<bool, kube::Error> {
    let mut lease = api.get(&election.name).await?;
    let mut spec = lease.spec.take().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
        return Ok(false);
    }
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    lease.spec = Some(spec);
    api.replace(&election.name, &PostParams::default(), &lease).await?;
    Ok(true)
}

/// How long [`Leadership::release`] may take (the API server slow or away):
/// past it the Lease is left to run out on its own.
pub const RELEASE_BOUND: Duration = Duration::from_secs(3);

impl Leadership {
    /// Stops renewing and clears the holder, so that a standby takes over
    /// without waiting for the Lease to run out. The incarnation stays.
    /// Takes at most [`RELEASE_BOUND`].
    pub async fn release(mut self) {
        self.guard.end();
        self.stop.cancel();
        metrics::gauge!(crate::metrics::LEADER).set(0.0);
        let result = tokio::time::timeout(RELEASE_BOUND, async {
            // A renewal in flight lands before the release reads the Lease.
            let _ = (&mut self.renewer).await;
            let mut lease = self.api.get(&self.election.name).await?;
            let mut spec = lease.spec.take().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.election.identity.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            lease.spec = Some(spec);
            self.api.replace(&self.election.name, &PostParams::default(), &lease).await.map(|_| ())
        })
        .await
        .unwrap_or_else(|_| {
            let message = format!("no answer within {} s", RELEASE_BOUND.as_secs());
            Err(kube::Error::Service(message.into()))
        });
        match result {
            Ok(()) => tracing::info!(lease = %self.election.name, "leadership released"),
            Err(e) => {
                tracing::warn!(error = %mcs_api::chain(&e), lease = %self.election.name, "releasing the leader lease failed; it runs out on its own")
            }
        }
    }
}

/// Dropping leadership stops renewing without releasing: the Lease then
/// runs out on its own (as when the process dies).
impl Drop for Leadership {
    fn drop(&mut self) {
        self.guard.end();
        self.stop.cancel();
    }
}

/// A fresh incarnation: `mcs-controller-` and 32 random hex digits.
pub fn new_incarnation() -> Incarnation {
    Incarnation::new(format!("mcs-controller-{}", uuid::Uuid::new_v4().simple()))
        .expect("a valid incarnation")
}

/// This replica's identity: the pod's name (`POD_NAME`, else the host
/// name) and a random suffix, so a restarted pod is a new candidate.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "mcs-controller".into());
    format!("{host}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// The namespace of the Lease when no flag names one: `POD_NAMESPACE`, the
/// service account's namespace file, else `default`.
pub fn default_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
        })
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    /// Issue 29 item 10 (before: nothing but the renewal task judged
    /// leadership, so a replica woken after SIGCONT wrote until the task
    /// ran: a stale slice 2 ms after "leadership lost").
    #[test]
    fn the_guard_refuses_writes_from_the_renew_deadline_on() {
        let t0 = Instant::now();
        let guard = LeaderGuard::new(t0, DEADLINE);
        assert_eq!(guard.check_at(t0), Ok(()));
        assert_eq!(guard.check_at(t0 + DEADLINE - Duration::from_millis(1)), Ok(()));
        assert_eq!(guard.check_at(t0 + DEADLINE), Err(NotLeader::Expired { late: Duration::ZERO }));
        // Woken 30 s later (SIGSTOP): refused before any renewal ran.
        let woken = t0 + Duration::from_secs(30);
        assert_eq!(
            guard.check_at(woken),
            Err(NotLeader::Expired { late: Duration::from_secs(20) })
        );
        // A renewal that began later extends the term from its start.
        guard.renewed(t0 + Duration::from_secs(25));
        assert_eq!(guard.check_at(t0 + Duration::from_secs(34)), Ok(()));
        assert!(guard.check_at(t0 + Duration::from_secs(35)).is_err());
    }

    #[test]
    fn an_older_renewal_never_shortens_the_term_and_an_ended_term_stays_ended() {
        let t0 = Instant::now();
        let guard = LeaderGuard::new(t0 + Duration::from_secs(5), DEADLINE);
        guard.renewed(t0);
        assert_eq!(guard.check_at(t0 + Duration::from_secs(14)), Ok(()));
        let clone = guard.clone();
        clone.end();
        assert_eq!(guard.check_at(t0), Err(NotLeader::Ended), "clones share the term");
        guard.renewed(t0 + Duration::from_secs(20));
        assert_eq!(guard.check_at(t0 + Duration::from_secs(21)), Err(NotLeader::Ended));
        assert_eq!(mcs_client::WriteFence::check(&guard), Err(NotLeader::Ended.to_string()));
    }

    #[test]
    fn the_renew_deadline_is_two_thirds_of_the_lease() {
        let election = Election {
            namespace: "ns".into(),
            name: "l".into(),
            identity: "me".into(),
            duration: Duration::from_secs(15),
        };
        assert_eq!(election.renew_deadline(), Duration::from_secs(10));
    }
}
