//! A fake registry for the tests of callers (the client, the controller):
//! the *real* registry router ([`mcs_registry::Registry`]) over a
//! [`MemoryStore`] and the system clock, served in-process on a free
//! loopback port, with faults a test switches on and off:
//!
//! ```text
//!  client ──HTTP──▶ fault layer ──▶ registry router ──▶ registrar/view ──▶ MemoryStore
//!                   │ latency                                    ▲
//!                   │ next N writes: 503 + Retry-After            │ reader (polls every 50 ms)
//!                   │ next N writes: 404 (the record is "forgotten")
//!                   │ next N watches: connection dropped mid-poll
//!                   │ event watches refused as a registry before them did
//!                   └ storage outage: lists turn `complete: false` after 1 s
//! ```
//!
//! Faults are counted down as they fire, so "the next two writes fail" is
//! exact. The fake serves plain HTTP, or TLS (with client certificates
//! required when a client CA is given) with [`FakeRegistry::start_tls`];
//! its TLS files are read once, at start.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, Response, StatusCode, header};
use clap::Parser;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcs_registry::clock::SystemClock;
use mcs_registry::config::{Args, Settings};
use mcs_registry::http::router;
use mcs_registry::server::Registry;
use mcs_store::MemoryStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// How long a cut watch is held open before its connection is dropped.
const CUT_AFTER: Duration = Duration::from_millis(50);

/// The flags of the fake: a short lease, a fast reader, and lists that
/// turn incomplete one second into a storage outage.
const FLAGS: &[&str] = &[
    "mcs-registry",
    "--lease-duration-secs",
    "4",
    "--heartbeat-interval-secs",
    "1",
    "--refresh-interval-ms",
    "50",
    "--stale-after-secs",
    "1",
    "--writer-id",
    "fake",
];

/// The switchable faults and what the fake has seen; shared with the
/// serving task.
#[derive(Debug, Default)]
pub struct Faults {
    unavailable_writes: AtomicU32,
    retry_after_secs: AtomicU64,
    forgotten_writes: AtomicU32,
    cut_watches: AtomicU32,
    latency_ms: AtomicU64,
    writes_seen: AtomicU64,
    watches_seen: AtomicU64,
    event_watches_seen: AtomicU64,
    lists_seen: AtomicU64,
    heads_seen: AtomicU64,
    before_event_watches: AtomicBool,
}

/// Takes one from `counter` if it is above zero.
fn take(counter: &AtomicU32) -> bool {
    counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
}

/// The real registry on a free port; stops when dropped.
#[derive(Debug)]
pub struct FakeRegistry {
    url: String,
    store: Arc<MemoryStore>,
    faults: Arc<Faults>,
    registry_shutdown: tokio::sync::watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl FakeRegistry {
    /// Starts the fake with its default flags; ready (first full read
    /// done) when this returns.
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// Starts the fake with `extra` registry flags after its defaults (a
    /// later flag wins, as clap takes the last occurrence).
    pub async fn start_with(extra: &[&str]) -> Self {
        Self::start_on(extra, None, None).await
    }

    /// Starts the fake serving TLS with `tls` (`https://127.0.0.1:<port>`).
    pub async fn start_tls(tls: &FakeTls) -> Self {
        Self::start_on(&[], Some(tls.acceptor()), None).await
    }

    /// A registry restarted on empty storage (plain http, default flags):
    /// the fake stops, and a new one with a new store serves the same
    /// address. Faults are reset.
    pub async fn restart_empty(&mut self) {
        let addr = self.url.trim_start_matches("http://").to_owned();
        let _ = self.registry_shutdown.send(true);
        self.tasks.shutdown().await;
        *self = Self::start_on(&[], None, Some(&addr)).await;
    }

    async fn start_on(extra: &[&str], tls: Option<TlsAcceptor>, bind: Option<&str>) -> Self {
        let argv: Vec<&str> = FLAGS.iter().chain(extra).copied().collect();
        let args = Args::try_parse_from(argv).expect("fake registry flags parse");
        let settings = Settings::from_args(&args).expect("fake registry flags are valid");
        let store = Arc::new(MemoryStore::new());
        let mut registry = Registry::new(store.clone(), Arc::new(SystemClock), &settings);
        registry.reader.poll_once().await;
        let app = router(registry.state.clone());
        let listener =
            TcpListener::bind(bind.unwrap_or("127.0.0.1:0")).await.expect("bind a loopback port");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().expect("local address"));
        let faults = Arc::new(Faults::default());
        faults.retry_after_secs.store(1, Ordering::SeqCst);
        let mut tasks = JoinSet::new();
        tasks.spawn(registry.reader.run(registry.shutdown.subscribe()));
        tasks.spawn(accept(listener, tls, app, faults.clone()));
        Self { url, store, faults, registry_shutdown: registry.shutdown, tasks }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The store behind the registry, for assertions and outages.
    pub fn store(&self) -> &Arc<MemoryStore> {
        &self.store
    }

    /// The next `n` writes (POST, PUT, DELETE) answer `503 unavailable`
    /// with `Retry-After: retry_after_secs`, reaching nothing behind.
    pub fn fail_next_writes(&self, n: u32, retry_after_secs: u64) {
        self.faults.retry_after_secs.store(retry_after_secs, Ordering::SeqCst);
        self.faults.unavailable_writes.store(n, Ordering::SeqCst);
    }

    /// The next `n` registrations (POST, PUT) answer `404 not_found`, as a
    /// registry that lost the record would; nothing is stored.
    pub fn forget_next_writes(&self, n: u32) {
        self.faults.forgotten_writes.store(n, Ordering::SeqCst);
    }

    /// The next `n` watches (`?watch=true` or `?watch=events`) are cut:
    /// the connection is dropped mid-poll without a reply.
    pub fn cut_next_watches(&self, n: u32) {
        self.faults.cut_watches.store(n, Ordering::SeqCst);
    }

    /// Every request waits `latency` before it is handled.
    pub fn set_latency(&self, latency: Duration) {
        self.faults.latency_ms.store(latency.as_millis() as u64, Ordering::SeqCst);
    }

    /// A storage outage (`true`) or its end: writes answer 503 at once and
    /// lists say `complete: false` once the last poll is over a second old.
    pub fn set_storage_unavailable(&self, unavailable: bool) {
        self.store.set_unavailable(unavailable);
    }

    /// Writes that reached the fake (including those a fault answered).
    pub fn writes_seen(&self) -> u64 {
        self.faults.writes_seen.load(Ordering::SeqCst)
    }

    /// Watches that reached the fake (including those cut).
    pub fn watches_seen(&self) -> u64 {
        self.faults.watches_seen.load(Ordering::SeqCst)
    }

    /// Event watches (`?watch=events`) that reached the fake (including
    /// those cut or refused).
    pub fn event_watches_seen(&self) -> u64 {
        self.faults.event_watches_seen.load(Ordering::SeqCst)
    }

    /// `GET`s that are no watch (a list, a status) that reached the fake.
    pub fn lists_seen(&self) -> u64 {
        self.faults.lists_seen.load(Ordering::SeqCst)
    }

    /// `HEAD` requests that reached the fake.
    pub fn heads_seen(&self) -> u64 {
        self.faults.heads_seen.load(Ordering::SeqCst)
    }

    /// Whether the fake answers as a registry released before event
    /// watches: `?watch=events` is `422` naming `watch`, as its query
    /// parser refused it.
    pub fn set_before_event_watches(&self, before: bool) {
        self.faults.before_event_watches.store(before, Ordering::SeqCst);
    }

    /// Watches still to be cut.
    pub fn watches_left_to_cut(&self) -> u32 {
        self.faults.cut_watches.load(Ordering::SeqCst)
    }
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        let _ = self.registry_shutdown.send(true);
        self.tasks.abort_all();
    }
}

async fn accept(listener: TcpListener, tls: Option<TlsAcceptor>, app: Router, faults: Arc<Faults>) {
    // Dropping this set (the task aborted) drops every connection.
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let app = app.clone();
        let faults = faults.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            match tls {
                // A refused handshake just closes the connection.
                Some(tls) => {
                    if let Ok(stream) = tls.accept(stream).await {
                        serve_connection(stream, app, faults).await;
                    }
                }
                None => serve_connection(stream, app, faults).await,
            }
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn serve_connection<S>(stream: S, app: Router, faults: Arc<Faults>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        handle(request, app.clone(), faults.clone())
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The fake's TLS files: its certificate chain and key and, to require
/// client certificates, the CA that signs them.
#[derive(Debug, Clone)]
pub struct FakeTls {
    /// The server certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA of client certificates; `None` asks for none.
    pub client_ca: Option<PathBuf>,
}

impl FakeTls {
    fn acceptor(&self) -> TlsAcceptor {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .expect("read the fake's certificate")
            .collect::<Result<_, _>>()
            .expect("parse the fake's certificate");
        let key = PrivateKeyDer::from_pem_file(&self.key).expect("read the fake's key");
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("tls versions");
        let builder = match &self.client_ca {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(ca).expect("read the client ca") {
                    roots.add(cert.expect("parse the client ca")).expect("add the client ca");
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .expect("client verifier");
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(chain, key).expect("the fake's certificate and key");
        TlsAcceptor::from(Arc::new(config))
    }
}

/// The fault layer in front of the real router. An `Err` makes hyper drop
/// the connection without a reply: that is how a watch is cut.
async fn handle(
    request: Request<Incoming>,
    app: Router,
    faults: Arc<Faults>,
) -> Result<Response<Body>, std::io::Error> {
    let latency = faults.latency_ms.load(Ordering::SeqCst);
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    let method = request.method().clone();
    let is_write = matches!(method, Method::POST | Method::PUT | Method::DELETE);
    let watch = |value: &str| {
        method == Method::GET
            && request.uri().query().is_some_and(|q| q.split('&').any(|p| p == value))
    };
    let is_events = watch("watch=events");
    let is_watch = is_events || watch("watch=true");
    if method == Method::HEAD {
        faults.heads_seen.fetch_add(1, Ordering::SeqCst);
    } else if method == Method::GET && !is_watch {
        faults.lists_seen.fetch_add(1, Ordering::SeqCst);
    }
    if is_write {
        faults.writes_seen.fetch_add(1, Ordering::SeqCst);
        if take(&faults.unavailable_writes) {
            let secs = faults.retry_after_secs.load(Ordering::SeqCst);
            return Ok(error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", Some(secs)));
        }
        if method != Method::DELETE && take(&faults.forgotten_writes) {
            return Ok(error(StatusCode::NOT_FOUND, "not_found", None));
        }
    }
    if is_events {
        faults.event_watches_seen.fetch_add(1, Ordering::SeqCst);
        if faults.before_event_watches.load(Ordering::SeqCst) {
            let body = r#"{"error":"invalid_argument","message":"watch: unknown variant `events`, expected `true` or `false`","field":"watch"}"#;
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return Ok(response);
        }
    }
    if is_watch {
        faults.watches_seen.fetch_add(1, Ordering::SeqCst);
        if take(&faults.cut_watches) {
            tokio::time::sleep(CUT_AFTER).await;
            return Err(std::io::Error::other("watch cut by the fake registry"));
        }
    }
    let response = app.oneshot(request.map(Body::new)).await.unwrap_or_else(|never| match never {});
    Ok(response)
}

/// A JSON error reply as the registry writes it.
fn error(status: StatusCode, code: &str, retry_after_secs: Option<u64>) -> Response<Body> {
    let body = format!(r#"{{"error":"{code}","message":"injected by the fake registry"}}"#);
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(secs) = retry_after_secs {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}
