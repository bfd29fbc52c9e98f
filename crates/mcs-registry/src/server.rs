//! Wiring and serving: build the registry from its settings, serve the API
//! and admin ports over HTTP/1.1 with idle timeouts (or over TLS, HTTP/1.1
//! or HTTP/2 by ALPN: `crate::tls`), and shut down
//! gracefully on SIGTERM or SIGINT (long-polls end at once, requests in
//! flight are drained).
//!
//! Storage is not needed to start serving: the ports open at once, and the
//! reader starts once the table answers at a schema this binary may use
//! ([`wait_for_table`], retried with backoff). Meanwhile `/healthz` is ok,
//! `/readyz` and writes answer 503 (the view is not ready before the first
//! full read), so Kubernetes waits instead of restarting in a crash loop.

use crate::clock::{Clock, SystemClock};
use crate::config::{Args, Settings, StorageKind};
use crate::connection::{self, Terms};
use crate::http::{AppState, admin_router, router};
use crate::live::LiveView;
use crate::metrics as m;
use crate::reader::{Reader, ReaderConfig};
use crate::registrar::Registrar;
use crate::shutdown::stopped;
use anyhow::Context;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::service::TowerToHyperService;
use mcs_store::{Backoff, DynamoConfig, DynamoStore, MemoryStore, Store, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Connections past `--max-connections` answered `503` at once; beyond
/// them, more are closed unanswered (each answer takes a task for at most
/// the refusal's head timeout plus a lingering close).
pub const REFUSALS_IN_FLIGHT: usize = 64;

/// A registry assembled but not yet serving: its shared state, its reader,
/// and the switch that stops both.
#[derive(Debug)]
pub struct Registry {
    /// What the HTTP handlers share.
    pub state: Arc<AppState>,
    /// The reader, to be run (or polled by hand in tests).
    pub reader: Reader,
    /// Set to `true` to stop the reader and end long-polls.
    pub shutdown: watch::Sender<bool>,
}

impl Registry {
    /// Assembles a registry over `store`, judging leases by `clock`.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, settings: &Settings) -> Self {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let make = if settings.discovery.is_some() { LiveView::discovered } else { LiveView::new };
        let view = Arc::new(make(
            settings.skew_allowance_ms,
            settings.stale_after.as_millis() as u64,
            settings.expiry_hold,
            clock,
        ));
        let registrar = Arc::new(Registrar::new(
            store.clone(),
            view.clone(),
            settings.writer_id.clone(),
            settings.lease,
            settings.request_timeout,
            settings.max_generation_ahead_ms,
        ));
        let reader = Reader::new(
            store,
            view.clone(),
            registrar.clone(),
            ReaderConfig {
                refresh_interval: settings.refresh_interval,
                full_resync_interval: settings.full_resync_interval,
                lookback_ms: settings.lookback_ms,
                lease_horizon_ms: settings.lease.horizon_ms(
                    settings.skew_allowance_ms,
                    settings.refresh_interval.as_millis() as u64,
                    settings.lookback_ms,
                ),
            },
        );
        let state = Arc::new(AppState {
            view,
            events: Arc::new(crate::events::Journals::default()),
            registrar,
            max_watch: settings.max_watch,
            watch_slots: Arc::new(Semaphore::new(settings.max_watches)),
            max_body_bytes: settings.max_body_bytes,
            max_export_body_bytes: settings.max_export_body_bytes,
            request_timeout: settings.request_timeout,
            ready_max_staleness: settings.ready_max_staleness,
            shutdown: shutdown_rx,
            spiffe_trust_domain: settings.spiffe_trust_domain.clone(),
            discovered: settings.discovery.is_some(),
            about: crate::http::status::About::of(settings),
        });
        Self { state, reader, shutdown }
    }
}

/// Runs the registry until SIGTERM or SIGINT, or until storage did not
/// answer within `--storage-connect-timeout-secs` (an error). Logging must
/// be set up first ([`init_tracing`]).
pub async fn run(args: Args, settings: Settings) -> anyhow::Result<()> {
    let metrics = crate::metrics::install();
    // Certificate files are loaded before anything else: a missing or
    // broken one is an error at startup, naming its flag.
    let reloader = settings.tls.clone().map(crate::tls::Reloader::new).transpose()?;
    // Pool discovery's Kubernetes configuration is checked before serving:
    // without one it could never list anything.
    let kube = match &settings.discovery {
        Some(_) => Some(crate::discovery::watch::client().await?),
        None => None,
    };
    let (store, table) = open_store(&args, &settings).await?;
    let registry = Registry::new(store, Arc::new(SystemClock), &settings);
    let api = listen(args.listen, args.listen_backlog)
        .with_context(|| format!("binding --listen {}", args.listen))?;
    let admin = listen(args.admin_listen, args.listen_backlog)
        .with_context(|| format!("binding --admin-listen {}", args.admin_listen))?;
    tracing::info!(
        api = %api.local_addr()?,
        admin = %admin.local_addr()?,
        storage = ?args.storage,
        writer = %settings.writer_id,
        tls = settings.tls.is_some(),
        admin_tls = settings.tls.as_ref().is_some_and(|t| t.admin_tls),
        authz = settings.spiffe_trust_domain.is_some(),
        "mcs-registry listening"
    );
    for note in &settings.warnings {
        tracing::warn!("{note}");
    }
    let stop = registry.state.shutdown.clone();
    let (api_tls, admin_tls) = match (reloader, &settings.tls) {
        (Some(reloader), Some(tls)) => {
            let acceptor = |listener| {
                crate::tls::Acceptor::new(reloader.subscribe(), listener, tls.handshake_timeout)
            };
            let (api_tls, admin_tls) = (acceptor("api"), acceptor("admin"));
            tokio::spawn(reloader.run(stop.clone()));
            (Some(api_tls), tls.admin_tls.then_some(admin_tls))
        }
        _ => (None, None),
    };
    let reader = registry.reader;
    let timeout = settings.storage_connect_timeout;
    let mut reader = tokio::spawn({
        let mut stop = stop.clone();
        async move {
            if let Some(table) = table
                && !wait_for_table(&table, timeout, &mut stop).await?
            {
                return Ok(());
            }
            reader.run(stop).await;
            anyhow::Ok(())
        }
    });
    if let (Some(kube), Some(discovery)) = (kube, settings.discovery.clone()) {
        tracing::info!(
            mode = discovery.mode.as_str(),
            router = %format!("{}/{}", discovery.router_namespace, discovery.router_service),
            "pool discovery from Kubernetes"
        );
        tokio::spawn(crate::discovery::watch::run(
            kube,
            discovery,
            registry.state.view.clone(),
            stop.clone(),
        ));
    }
    let api_task = tokio::spawn(serve(
        api,
        router(registry.state.clone()),
        settings.clone(),
        "api",
        stop.clone(),
        api_tls,
    ));
    let admin_task = tokio::spawn(serve(
        admin,
        admin_router(registry.state.clone(), metrics),
        settings.clone(),
        "admin",
        stop,
        admin_tls,
    ));

    // The reader ends early only when storage did not answer within
    // --storage-connect-timeout-secs.
    let ended_early = tokio::select! {
        _ = shutdown_signal() => None,
        ended = &mut reader => Some(ended),
    };
    tracing::info!("shutting down: draining requests");
    registry.shutdown.send_replace(true);
    let _ = tokio::join!(api_task, admin_task);
    let ended = match ended_early {
        Some(ended) => ended,
        None => reader.await,
    };
    ended??;
    tracing::info!("stopped");
    Ok(())
}

/// Opens the configured store, without calling it: a DynamoDB store comes
/// back twice, as the registry's store and as the table for
/// [`wait_for_table`] to check before the reader starts.
async fn open_store(
    args: &Args,
    settings: &Settings,
) -> anyhow::Result<(Arc<dyn Store>, Option<DynamoStore>)> {
    match args.storage {
        StorageKind::Memory => Ok((Arc::new(MemoryStore::new()), None)),
        StorageKind::Dynamodb => {
            let mut config = DynamoConfig::new(args.store.table.clone().unwrap_or_default());
            config.region = args.store.region.clone();
            config.endpoint = args.store.dynamodb_endpoint.clone();
            config.retention = settings.retention;
            let store = DynamoStore::connect(config).await.context("configuring DynamoDB")?;
            Ok((Arc::new(store.clone()), Some(store)))
        }
    }
}

/// The first delay between startup checks of the table, and the longest.
const TABLE_BACKOFF: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(15));

/// Waits until `table` answers at a schema version this binary may use
/// (`DynamoStore::ensure_schema`: its own, one behind in compatibility mode
/// (renewals still move `changed_at_ms`), or one additive migration ahead;
/// the store writes by the version read),
/// checking again with backoff, one log line per failed check. Every
/// failure is retried, not only an unreachable endpoint: a missing or
/// unmigrated table is usually a migration job still running, a table too
/// new a rollout to finish or roll back, and either way exiting would only
/// crash-loop; those are logged at error level with the fix. Gives up
/// after `timeout` when one is set; `Ok(false)` when stopped first.
pub async fn wait_for_table(
    table: &DynamoStore,
    timeout: Option<Duration>,
    stop: &mut watch::Receiver<bool>,
) -> anyhow::Result<bool> {
    let started = tokio::time::Instant::now();
    let mut backoff = Backoff::new(TABLE_BACKOFF.0, TABLE_BACKOFF.1);
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let error = match table.ensure_schema().await {
            Ok(version) if version > mcs_store::dynamo::SCHEMA_VERSION => {
                tracing::warn!(
                    target_table = %table.target(),
                    schema_version = version,
                    binary_schema_version = mcs_store::dynamo::SCHEMA_VERSION,
                    "table is one additive migration ahead of this binary: serving it (N-1/N); \
                     finish the rollout"
                );
                return Ok(true);
            }
            Ok(version) if version < mcs_store::dynamo::SCHEMA_VERSION => {
                tracing::warn!(
                    target_table = %table.target(),
                    schema_version = version,
                    binary_schema_version = mcs_store::dynamo::SCHEMA_VERSION,
                    compatibility = mcs_store::dynamo::compatibility_mode(version),
                    "table is behind this binary: serving it in compatibility mode; once every \
                     registry runs this release, run mcs-admin migrate"
                );
                return Ok(true);
            }
            Ok(version) => {
                tracing::info!(
                    target_table = %table.target(),
                    schema_version = version,
                    "table schema is current"
                );
                return Ok(true);
            }
            Err(error) => error,
        };
        let elapsed = started.elapsed();
        if let Some(timeout) = timeout
            && elapsed >= timeout
        {
            return Err(anyhow::Error::from(error).context(format!(
                "no usable table within --storage-connect-timeout-secs {}",
                timeout.as_secs()
            )));
        }
        let mut delay = backoff.next_delay();
        if let Some(timeout) = timeout {
            delay = delay.min(timeout.saturating_sub(elapsed));
        }
        let retry_in_ms = delay.as_millis() as u64;
        match &error {
            StoreError::Unavailable(_) => {
                tracing::warn!(attempt, retry_in_ms, %error, "storage not reachable; not ready, retrying");
            }
            _ => {
                tracing::error!(attempt, retry_in_ms, %error, "table not usable; not ready, retrying");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopped(stop) => return Ok(false),
        }
    }
}

/// Accepts connections on `listener` until `stop` turns true, then waits up
/// to the shutdown grace for open connections to finish. At most
/// `--max-connections` are served at once (`listener` names them in
/// metrics); one past the cap is answered `503` (see `crate::connection`),
/// or closed at once while [`REFUSALS_IN_FLIGHT`] others are being answered.
/// With `tls`, each connection begins with a TLS handshake.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: Settings,
    name: &'static str,
    mut stop: watch::Receiver<bool>,
    tls: Option<crate::tls::Acceptor>,
) {
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let bounds = connection::Bounds {
        listener: name,
        write: settings.write_timeout,
        idle: settings.idle_timeout,
        // HTTP/2 is spoken only over TLS (ALPN): its preface is the second
        // half of the handshake.
        preface: settings.tls.as_ref().map_or(settings.idle_timeout, |t| t.handshake_timeout),
        keepalive_interval: settings.http2_keepalive_interval,
        keepalive_timeout: settings.http2_keepalive_timeout,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(settings.idle_timeout).keep_alive(true);
    let mut refuser = hyper::server::conn::http1::Builder::new();
    refuser
        .timer(TokioTimer::new())
        .header_read_timeout(connection::REFUSAL_HEAD_TIMEOUT)
        .keep_alive(false);
    let h2 = bounds.h2_builder();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of file descriptors and the like: back off, keep serving.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let stop = stop.clone();
                if let Ok(permit) = slots.clone().try_acquire_owned() {
                    let slot = connection::Slot::new(permit, name);
                    if let Some(tls) = &tls {
                        let (tls, app, h1, h2) = (tls.clone(), app.clone(), builder.clone(), h2.clone());
                        tokio::spawn(async move {
                            if let Some(stream) = tls.accept(stream).await {
                                serve_tls(stream, app, (&h1, &h2), Terms { stop, bounds, hold: slot }).await;
                            }
                        });
                        continue;
                    }
                    let (h1, service) = (builder.clone(), TowerToHyperService::new(app.clone()));
                    tokio::spawn(async move {
                        connection::serve(&h1, stream, service, Terms { stop, bounds, hold: slot }).await;
                    });
                    continue;
                }
                metrics::counter!(m::HTTP_REFUSED, "reason" => "connections").increment(1);
                match refusals.clone().try_acquire_owned() {
                    Ok(permit) => {
                        if let Some(tls) = &tls {
                            let (tls, refuser, h2) = (tls.clone(), refuser.clone(), h2.clone());
                            tokio::spawn(async move {
                                let Some(stream) = tls.accept(stream).await else { return };
                                if crate::tls::is_h2(&stream) {
                                    connection::serve_h2(&h2, stream, connection::refusal(), Terms { stop, bounds, hold: permit }).await;
                                } else {
                                    connection::serve(&refuser, stream, connection::refusal(), Terms { stop, bounds, hold: permit }).await;
                                }
                            });
                            continue;
                        }
                        let refuser = refuser.clone();
                        tokio::spawn(async move {
                            connection::serve(&refuser, stream, connection::refusal(), Terms { stop, bounds, hold: permit }).await;
                        });
                    }
                    Err(_) => {
                        tracing::debug!(listener = name, "too many connections refused at once: closing one unanswered");
                    }
                }
            }
            _ = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    // Every slot back means every served connection has closed.
    let all = u32::try_from(settings.max_connections).unwrap_or(u32::MAX);
    tokio::select! {
        _ = slots.acquire_many(all) => {}
        _ = tokio::time::sleep(settings.shutdown_grace) => {
            tracing::warn!(grace = ?settings.shutdown_grace, "connections still open after the shutdown grace");
        }
    }
}

/// Serves one TLS connection after its handshake: HTTP/2 when the client
/// chose it by ALPN, else HTTP/1.1; every request carries the URI names
/// of the client's certificate (`crate::authz`).
async fn serve_tls(
    stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    app: Router,
    (h1, h2): (
        &hyper::server::conn::http1::Builder,
        &hyper::server::conn::http2::Builder<TokioExecutor>,
    ),
    terms: Terms<connection::Slot>,
) {
    let session = stream.get_ref().1;
    let peer = crate::authz::PeerNames::of(
        session.peer_certificates().and_then(<[_]>::first).map(|c| c.as_ref()),
    );
    let is_h2 = crate::tls::is_h2(&stream);
    let service = TowerToHyperService::new(tower::ServiceExt::map_request(
        app,
        move |mut request: axum::http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(peer.clone());
            request
        },
    ));
    if is_h2 {
        connection::serve_h2(h2, stream, service, terms).await;
    } else {
        connection::serve(h1, stream, service, terms).await;
    }
}

/// A listener on `addr` whose queue of connections not yet accepted holds
/// `backlog` (`--listen-backlog`; the kernel caps it at
/// `net.core.somaxconn`), rather than the 1,024 of `TcpListener::bind`.
pub(crate) fn listen(addr: std::net::SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As `TcpListener::bind` does: a restart may bind while the last
    // process's connections linger in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

/// Installs the log subscriber of `--log` and `--log-format`. An invalid
/// `--log` filter is an error (a usage error: exit 2), after installing
/// the subscriber with the filter `info`, so that the error itself can be
/// logged in the chosen format.
pub fn init_tracing(args: &Args) -> anyhow::Result<()> {
    let (filter, invalid) = match tracing_subscriber::EnvFilter::try_new(&args.log) {
        Ok(filter) => (filter, None),
        Err(e) => (
            tracing_subscriber::EnvFilter::new("info"),
            Some(anyhow::anyhow!("--log / MCS_LOG {:?} is not a valid filter: {e}", args.log)),
        ),
    };
    install_subscriber(args, filter)?;
    invalid.map_or(Ok(()), Err)
}

fn install_subscriber(args: &Args, filter: tracing_subscriber::EnvFilter) -> anyhow::Result<()> {
    crate::shared_cli::install_logs(filter, args.log_format, false).map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests;
