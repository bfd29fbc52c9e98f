//! A running controller: the metrics and health endpoints, the cluster's
//! identity, then leadership terms. In each term the leader holds the
//! cluster's registry lease, reconciles exports and imports; a lost
//! leadership ends the process (exit 1, restarted by its Deployment) so no
//! two replicas ever write at once, and the term's clients refuse every
//! write once its renew deadline passed ([`crate::fence`]); SIGTERM ends the
//! term, releases the Lease and exits 0 without withdrawing anything
//! (docs/design.md §13), within [`STOP_GRACE`] + [`leader::RELEASE_BOUND`] +
//! [`SERVER_STOP`]: tasks still running after the grace (a reconcile waiting
//! on the API server, a controller waiting for a watch that cannot list)
//! are aborted.

use crate::config::Config;
use crate::leader::Election;
use crate::{Context, fence, health, identity, leader, registration};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long the term's tasks have to stop once it ends (reconciles in
/// flight finish), before they are aborted.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long the metrics server has to close its connections on the way out.
pub const SERVER_STOP: Duration = Duration::from_secs(1);

/// The async runtime of `threads` threads (`--worker-threads`). One, the
/// default, is a current-thread runtime: every task runs on the thread
/// that drives it, and no event is handed between threads (docs/design.md
/// §13). More make a multi-threaded one. Either way blocking work
/// (`spawn_blocking`: DNS lookups, files) has threads of its own.
pub fn runtime(threads: u16) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(usize::from(threads));
        builder
    };
    builder.enable_all().build()
}

/// Runs until SIGTERM/SIGINT (`Ok`) or a failure (`Err`).
pub async fn run(config: Config) -> anyhow::Result<()> {
    // Built first, so that a registry configuration it refuses (a TLS file
    // missing or invalid) stops the start before any cluster is touched.
    mcs_client::Client::new(config.registry.clone()).map_err(|e| {
        anyhow::anyhow!("--registry-url and its --registry-*-file flags: {}", mcs_api::chain(&e))
    })?;
    let handle = crate::metrics::install();
    let listener = health::bind(config.admin_listen).await?;
    tracing::info!(metrics = %listener.local_addr()?, "mcs-controller listening");
    let cancel = CancellationToken::new();
    tokio::spawn(shutdown_on_signal(cancel.clone()));
    let server = tokio::spawn(health::serve(listener, handle, cancel.clone()));

    let kube_config = kube::Config::infer().await.map_err(|e| {
        anyhow::anyhow!("finding the Kubernetes API server: {}", mcs_api::chain(&e))
    })?;
    let api_server = kube_config.cluster_url.clone();
    let kube = kube::Client::try_from(kube_config.clone()).map_err(|e| {
        anyhow::anyhow!(
            "connecting to the Kubernetes API server {api_server}: {}",
            mcs_api::chain(&e)
        )
    })?;
    let property = identity::read_cluster_property(kube.clone()).await.map_err(|e| {
        anyhow::anyhow!(
            "reading the ClusterProperty cluster.clusterset.k8s.io from {api_server}: {}",
            mcs_api::chain(&e)
        )
    })?;
    let cluster_id =
        identity::resolve_cluster_id(config.cluster_id.as_deref(), property.as_deref())?;
    health::saw_api_server();
    tracing::info!(cluster = %cluster_id, "cluster identity");

    let election = Election {
        namespace: config.lease_namespace.clone().unwrap_or_else(leader::default_namespace),
        name: config.lease_name.clone(),
        identity: leader::identity(),
        duration: config.lease_duration,
    };
    let Some(leadership) = election.acquire(kube.clone(), &cancel).await? else {
        stop_server(server).await;
        return Ok(());
    };
    let term = cancel.child_token();
    // The term's writes, to the API server and the registry, are fenced
    // by its leadership; the election keeps its own client.
    let kube = fence::kube_client(kube_config, leadership.guard.clone())?;
    let mut fenced = config.registry.clone();
    fenced.write_fence = Some(Arc::new(leadership.guard.clone()));
    let registry = mcs_client::Client::new(fenced)?;
    let (registrations_tx, registrations) = watch::channel(0);
    let (continued_tx, continued_renewal) = watch::channel(None);
    let ctx = Arc::new(Context {
        kube,
        registry: registry.clone(),
        cluster_id: cluster_id.clone(),
        incarnation: leadership.incarnation.clone(),
        settings: config.settings.clone(),
        registrations,
        cluster_lease_secs: Default::default(),
        continued_renewal,
    });
    let mut tasks = JoinSet::new();
    let incarnation = ctx.incarnation.clone();
    let lease_secs = ctx.cluster_lease_secs.clone();
    let hold = registration::hold(
        registry,
        cluster_id,
        incarnation,
        registrations_tx,
        continued_tx,
        lease_secs,
        term.clone(),
    );
    tasks.spawn(async move {
        hold.await;
        Ok(())
    });
    tasks.spawn(crate::export::run(ctx.clone(), term.clone()));
    tasks.spawn(crate::import::run(ctx, term.clone()));
    let result = tokio::select! {
        // A shutdown ends the tasks too (their token is a child of it): the
        // signal must win that race, or a graceful stop would exit 1.
        biased;
        _ = cancel.cancelled() => Ok(()),
        _ = leadership.lost.cancelled() => Err(anyhow::anyhow!("leadership lost")),
        done = tasks.join_next() => match done {
            Some(Ok(Err(e))) => Err(e),
            Some(Err(e)) => Err(anyhow::anyhow!("a controller task failed: {e}")),
            _ if cancel.is_cancelled() => Ok(()),
            _ => Err(anyhow::anyhow!("a controller task ended")),
        },
    };
    term.cancel();
    stop_tasks(tasks, STOP_GRACE).await;
    health::set_leading(false, false);
    if result.is_ok() {
        leadership.release().await;
    }
    cancel.cancel();
    stop_server(server).await;
    result
}

/// Waits `grace` for `tasks` to end (their token is cancelled), then
/// aborts those still running: a reconcile waiting on the API server, or a
/// kube-runtime controller waiting for a store that never fills (a watch
/// that cannot list), must not keep a stopping process alive.
async fn stop_tasks(mut tasks: JoinSet<anyhow::Result<()>>, grace: Duration) {
    let stopped =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if stopped.is_err() {
        tracing::warn!(
            tasks = tasks.len(),
            grace_secs = grace.as_secs(),
            "controller tasks did not stop in time: aborted"
        );
        tasks.shutdown().await;
    }
}

/// Waits [`SERVER_STOP`] for the metrics server to end, then aborts it.
async fn stop_server(mut server: tokio::task::JoinHandle<std::io::Result<()>>) {
    if tokio::time::timeout(SERVER_STOP, &mut server).await.is_err() {
        server.abort();
    }
}

async fn shutdown_on_signal(cancel: CancellationToken) {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down: exports stay registered");
    cancel.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::{ThreadId, current};
    use tokio::runtime::RuntimeFlavor;

    /// Where a spawned task and a blocking closure run, in `runtime`.
    fn threads_of(runtime: &tokio::runtime::Runtime) -> (ThreadId, ThreadId) {
        runtime.block_on(async {
            let task = tokio::spawn(async { current().id() });
            let blocking = tokio::task::spawn_blocking(|| current().id());
            (task.await.expect("the task"), blocking.await.expect("the closure"))
        })
    }

    #[test]
    fn one_thread_runs_every_task_on_its_caller_and_more_make_a_pool() {
        let one = runtime(1).expect("a runtime");
        assert_eq!(one.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
        let (task, blocking) = threads_of(&one);
        assert_eq!(task, current().id(), "a task runs on the thread that drives it");
        assert_ne!(blocking, current().id(), "blocking work has threads of its own");

        let three = runtime(3).expect("a runtime");
        assert_eq!(three.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(three.metrics().num_workers(), 3);
        let (task, blocking) = threads_of(&three);
        assert_ne!(task, current().id(), "tasks run on the runtime's workers");
        assert_ne!(blocking, task);
    }

    /// Issue 27 item 7 (before: the process waited for every task, and
    /// the export controller never ended while its watch could not list).
    #[tokio::test]
    async fn tasks_that_do_not_stop_are_aborted_after_the_grace() {
        const GRACE: Duration = Duration::from_millis(300);
        let mut tasks = JoinSet::new();
        tasks.spawn(async { Ok(()) });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(async move {
            let _dropped_on_abort = tx;
            std::future::pending::<anyhow::Result<()>>().await
        });
        let started = std::time::Instant::now();
        stop_tasks(tasks, GRACE).await;
        let took = started.elapsed();
        assert!(took >= GRACE && took < GRACE * 5, "{took:?}");
        assert!(rx.await.is_err(), "the stuck task was aborted");

        let mut tasks = JoinSet::new();
        tasks.spawn(async { Ok(()) });
        let started = std::time::Instant::now();
        stop_tasks(tasks, Duration::from_secs(60)).await;
        assert!(started.elapsed() < GRACE, "no wait when every task stopped");
    }
}
