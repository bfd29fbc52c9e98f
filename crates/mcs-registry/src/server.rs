//! Wiring and serving: build the registry from its settings, serve the API
//! and admin ports over HTTP/1.1 with idle timeouts, and shut down
//! gracefully on SIGTERM or SIGINT (long-polls end at once, requests in
//! flight are drained).

use crate::clock::{Clock, SystemClock};
use crate::config::{Args, LogFormat, Settings, StorageKind};
use crate::http::{AppState, admin_router, router};
use crate::live::LiveView;
use crate::reader::{Reader, ReaderConfig};
use crate::registrar::Registrar;
use anyhow::Context;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use mcs_store::{DynamoConfig, DynamoStore, MemoryStore, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

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
        let view = Arc::new(LiveView::new(
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
            },
        );
        let state = Arc::new(AppState {
            view,
            registrar,
            max_watch: settings.max_watch,
            max_body_bytes: settings.max_body_bytes,
            request_timeout: settings.request_timeout,
            ready_max_staleness: settings.ready_max_staleness,
            shutdown: shutdown_rx,
        });
        Self { state, reader, shutdown }
    }
}

/// Runs the registry until SIGTERM or SIGINT.
pub async fn run(args: Args, settings: Settings) -> anyhow::Result<()> {
    init_tracing(&args)?;
    let metrics = crate::metrics::install();
    let store = open_store(&args, &settings).await?;
    let registry = Registry::new(store, Arc::new(SystemClock), &settings);
    let api = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    let admin = TcpListener::bind(args.admin_listen)
        .await
        .with_context(|| format!("binding --admin-listen {}", args.admin_listen))?;
    tracing::info!(
        api = %api.local_addr()?,
        admin = %admin.local_addr()?,
        storage = ?args.storage,
        writer = %settings.writer_id,
        "mcs-registry listening"
    );
    let stop = registry.state.shutdown.clone();
    let reader = tokio::spawn(registry.reader.run(stop.clone()));
    let api_task =
        tokio::spawn(serve(api, router(registry.state.clone()), settings.clone(), stop.clone()));
    let admin_task = tokio::spawn(serve(
        admin,
        admin_router(registry.state.clone(), metrics),
        settings.clone(),
        stop,
    ));

    shutdown_signal().await;
    tracing::info!("shutting down: draining requests");
    registry.shutdown.send_replace(true);
    let _ = tokio::join!(api_task, admin_task, reader);
    tracing::info!("stopped");
    Ok(())
}

/// Opens the configured store; a DynamoDB table must exist at the schema
/// version this binary writes, else startup fails naming the problem.
async fn open_store(args: &Args, settings: &Settings) -> anyhow::Result<Arc<dyn Store>> {
    match args.storage {
        StorageKind::Memory => Ok(Arc::new(MemoryStore::new())),
        StorageKind::Dynamodb => {
            let mut config = DynamoConfig::new(args.table.clone().unwrap_or_default());
            config.region = args.region.clone();
            config.endpoint = args.dynamodb_endpoint.clone();
            config.retention = settings.retention;
            let store = DynamoStore::connect(config).await.context("configuring DynamoDB")?;
            let version = store
                .ensure_schema()
                .await
                .with_context(|| format!("checking table {}", store.table()))?;
            tracing::info!(
                table = store.table(),
                schema_version = version,
                "table schema is current"
            );
            Ok(Arc::new(store))
        }
    }
}

/// Accepts connections on `listener` until `stop` turns true, then waits up
/// to the shutdown grace for open connections to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: Settings,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(settings.idle_timeout).keep_alive(true);
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
                let connection = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                });
            }
            _ = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(settings.shutdown_grace) => {
            tracing::warn!(grace = ?settings.shutdown_grace, "connections still open after the shutdown grace");
        }
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: drop it here, not across
    // an await of the caller.
    let _ = stop.wait_for(|stopping| *stopping).await;
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

fn init_tracing(args: &Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .with_context(|| format!("--log / MCS_LOG {:?} is not a valid filter", args.log))?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let result = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))
}
