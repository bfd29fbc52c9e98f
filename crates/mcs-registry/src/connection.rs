//! One accepted connection, from accept to close: HTTP/1.1 through hyper
//! while it holds a slot of the connection cap (`--max-connections`), a
//! `503` for one past the cap, and a lingering close for both. With TLS
//! (`crate::tls`), the handshake comes first, holding the slot, and a
//! client that chose HTTP/2 by ALPN is served by [`serve_h2`] instead.
//!
//! ```text
//!  accept ─► slot free? ─ yes ─► [TLS handshake] ─► serve: hyper, keep-alive ─┬─► lingering close
//!                        └ no ─► [TLS handshake] ─► refuse: 503 Retry-After ──┘
//! ```
//!
//! Over TLS the lingering close is the same on the TLS stream: close_notify
//! and FIN, then decrypt and discard what the client still sends, until its
//! close_notify or the bounds below. HTTP/2 needs none: it ends with
//! GOAWAY, and an unread request body is refused per stream
//! (RST_STREAM), never by closing the connection under the client.
//!
//! Every connection is bounded past its accept ([`Bounds`], counted in
//! `mcs_http_connection_timeouts_total` by reason): a write that makes no
//! progress for `--write-timeout-secs` (a client that stopped reading its
//! responses, pipelined or not, watches included) ends it (`write`);
//! HTTP/1.1 waits `--idle-timeout-secs` for each request head (hyper's
//! header read timeout: `idle`). HTTP/2 has no header read timeout, so
//! [`serve_h2`] keeps its own: the client's connection preface within the
//! TLS handshake timeout (`preface`), GOAWAY after `--idle-timeout-secs`
//! with no request in flight (`idle`), and hyper's keep-alive pings, which
//! close a connection whose ping goes unanswered (`keepalive`).
//!
//! Lingering close (nginx's `lingering_close`, Go's `closeWriteAndWait`):
//! when the server answers before reading the whole request body (a `413`,
//! a `503`, a `404` to a POST), closing the socket with unread input makes
//! the kernel send a reset, and a reset makes the client's kernel drop the
//! response the client has not read yet: an uploading client sees a broken
//! pipe instead of the status. So hyper hands the socket back instead of
//! closing it; we send FIN (the client reads the response, then EOF), and
//! read and discard what the client still sends, until it closes, or for at
//! most [`LINGER_MAX_BYTES`], [`LINGER_MAX_TIME`], or [`LINGER_IDLE`]
//! without data, whichever comes first. A lingering connection keeps its
//! slot: it still holds a socket.

use crate::metrics as m;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::{http1, http2};
use hyper::service::{HttpService, Service};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::error::Error as StdError;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::time::{Instant, Sleep};

/// Most bytes discarded by a lingering close.
pub const LINGER_MAX_BYTES: usize = 16 << 20;
/// Longest lingering close.
pub const LINGER_MAX_TIME: Duration = Duration::from_secs(5);
/// A lingering close ends after this long without data from the client.
pub const LINGER_IDLE: Duration = Duration::from_secs(1);
/// How long a connection past the cap may take to send its request head.
pub const REFUSAL_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// The length of the HTTP/2 client connection preface
/// (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, RFC 9113 §3.4): hyper's
/// handshake is done once it is read.
const H2_PREFACE_LEN: u64 = 24;

/// The time bounds of a connection past its accept, and the listener that
/// counts them (see the module's docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// `api` or `admin`, for the metrics.
    pub listener: &'static str,
    /// Longest a write may make no progress (`--write-timeout-secs`).
    pub write: Duration,
    /// HTTP/2: longest without a request in flight (`--idle-timeout-secs`).
    pub idle: Duration,
    /// HTTP/2: longest the client's connection preface may take
    /// (`--tls-handshake-timeout-secs`).
    pub preface: Duration,
    /// HTTP/2: pings after this long without a frame from the client
    /// (`--http2-keepalive-interval-secs`).
    pub keepalive_interval: Duration,
    /// HTTP/2: how long a ping may go unanswered
    /// (`--http2-keepalive-timeout-secs`).
    pub keepalive_timeout: Duration,
}

impl Bounds {
    /// Counts a connection ended by the bound `reason`
    /// ([`m::CONNECTION_TIMEOUT_REASONS`]).
    fn count(&self, reason: &'static str) {
        tracing::debug!(listener = self.listener, reason, "connection timed out");
        metrics::counter!(m::HTTP_CONNECTION_TIMEOUTS, "listener" => self.listener, "reason" => reason)
            .increment(1);
    }

    /// An HTTP/2 server of these bounds' keep-alive pings.
    pub(crate) fn h2_builder(&self) -> http2::Builder<TokioExecutor> {
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(hyper_util::rt::TokioTimer::new())
            .keep_alive_interval(Some(self.keepalive_interval))
            .keep_alive_timeout(self.keepalive_timeout);
        h2
    }
}

/// What one connection has done so far, shared by its stream
/// ([`Bounded`]), its requests ([`Counted`]) and the task that serves it.
#[derive(Debug)]
struct Activity {
    /// When the connection was accepted; the other times count from it.
    started: Instant,
    /// Bytes read from the client.
    read: AtomicU64,
    /// Milliseconds since `started` of the last read (data or EOF).
    last_read_ms: AtomicU64,
    /// Set once a write made no progress for the write bound.
    write_stalled: AtomicBool,
    /// Requests whose response is not yet fully handed to the connection.
    in_flight: AtomicUsize,
    /// Milliseconds since `started` of the last request's start or end.
    last_request_ms: AtomicU64,
}

impl Activity {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            read: AtomicU64::new(0),
            last_read_ms: AtomicU64::new(0),
            write_stalled: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            last_request_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn at(&self, ms: u64) -> Instant {
        self.started + Duration::from_millis(ms)
    }

    /// When the connection turns idle for `idle`: `None` while a request
    /// is in flight.
    fn idle_at(&self, idle: Duration) -> Option<Instant> {
        let last = self.last_request_ms.load(Ordering::Acquire);
        (self.in_flight.load(Ordering::Acquire) == 0).then(|| self.at(last) + idle)
    }

    /// Marks a request begun; it ends when the guard is dropped.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.last_request_ms.store(self.now_ms(), Ordering::Release);
        InFlight(self.clone())
    }
}

/// A request in flight on a connection (see [`Activity::begin`]).
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.last_request_ms.store(self.0.now_ms(), Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's stream, recording its reads in [`Activity`] and failing
/// a write, flush or shutdown that made no progress for the write bound
/// with `TimedOut` (hyper then ends the connection).
#[derive(Debug)]
pub(crate) struct Bounded<I> {
    io: I,
    write_timeout: Duration,
    /// Armed while a write is pending; dropped at its first progress.
    stall: Option<Pin<Box<Sleep>>>,
    activity: Arc<Activity>,
}

impl<I> Bounded<I> {
    fn new(io: I, write_timeout: Duration, activity: Arc<Activity>) -> Self {
        Self { io, write_timeout, stall: None, activity }
    }

    /// Passes a ready write through (and disarms the stall timer); fails a
    /// pending one once it has been pending for the write bound.
    fn bound<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stall = None;
            return polled;
        }
        let timeout = self.write_timeout;
        let stall = self.stall.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stall.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.activity.write_stalled.store(true, Ordering::Release);
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no write progress within --write-timeout-secs",
        )))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Bounded<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if polled.is_ready() {
            let activity = &this.activity;
            activity.read.fetch_add((buf.filled().len() - before) as u64, Ordering::AcqRel);
            activity.last_read_ms.store(activity.now_ms(), Ordering::Release);
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Bounded<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.bound(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.bound(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.bound(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.bound(cx, polled)
    }
}

/// An HTTP/2 service counting its requests in flight in [`Activity`],
/// each until its response body is done (dropped by hyper).
#[derive(Debug)]
struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S, B> Service<hyper::Request<Incoming>> for Counted<S>
where
    S: Service<hyper::Request<Incoming>, Response = hyper::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = hyper::Response<Tracked<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let request_in_flight = self.activity.begin();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Tracked { body, _in_flight: request_in_flight }))
        })
    }
}

/// A response body that keeps its request counted in flight.
#[derive(Debug)]
struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A slot of the connection cap, counted in `mcs_http_connections` while
/// held.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    listener: &'static str,
}

impl Slot {
    pub(crate) fn new(permit: OwnedSemaphorePermit, listener: &'static str) -> Self {
        metrics::gauge!(m::HTTP_CONNECTIONS, "listener" => listener).increment(1.0);
        Self { _permit: permit, listener }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        metrics::gauge!(m::HTTP_CONNECTIONS, "listener" => self.listener).decrement(1.0);
    }
}

/// What a served connection lives under, the same for HTTP/1.1 and
/// HTTP/2: the process's stop signal, the connection's time bounds, and
/// what it holds until it closes (a [`Slot`], a refusal's permit),
/// released last.
pub(crate) struct Terms<H> {
    pub stop: watch::Receiver<bool>,
    pub bounds: Bounds,
    pub hold: H,
}

/// Serves HTTP/1.1 with `builder` on `io` until the connection ends,
/// turning it to a graceful shutdown (finish the request in flight, then
/// close) once `terms.stop` turns true; then closes it lingering. Writes
/// are bounded by `terms.bounds`.
pub(crate) async fn serve<I, S, B, H>(builder: &http1::Builder, io: I, service: S, terms: Terms<H>)
where
    I: AsyncRead + AsyncWrite + Unpin,
    S: HttpService<Incoming, ResBody = B> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let Terms { mut stop, bounds, hold } = terms;
    let activity = Activity::new();
    let io = Bounded::new(io, bounds.write, activity.clone());
    let mut conn = builder.serve_connection(TokioIo::new(io), service);
    let result = {
        let mut stopping = false;
        let mut stopped = pin!(async move { crate::shutdown::stopped(&mut stop).await });
        poll_fn(|cx| {
            if !stopping && stopped.as_mut().poll(cx).is_ready() {
                stopping = true;
                Pin::new(&mut conn).graceful_shutdown();
            }
            conn.poll_without_shutdown(cx)
        })
        .await
    };
    match result {
        Err(_) if activity.write_stalled.load(Ordering::Acquire) => bounds.count("write"),
        // hyper's header read timeout: no request head within the bound.
        Err(error) if error.is_timeout() => bounds.count("idle"),
        Err(error) => tracing::debug!(%error, "connection ended with an error"),
        Ok(()) => {}
    }
    let parts = conn.into_parts();
    linger(parts.io.into_inner()).await;
    drop(hold);
}

/// Where [`serve_h2`] is in its bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum H2Phase {
    /// Waiting for the client's connection preface.
    Preface,
    /// Serving; closed once idle.
    Open,
    /// GOAWAY sent (idle, or shutting down): the connection gets a
    /// keep-alive timeout to end before it is dropped.
    Closing,
}

/// Serves HTTP/2 with `builder` on `io` until the connection ends, within
/// `terms.bounds` (see the module's docs), turning it to a graceful
/// shutdown (GOAWAY, finish the streams in flight) once `terms.stop` turns
/// true.
pub(crate) async fn serve_h2<I, S, B, H>(
    builder: &http2::Builder<TokioExecutor>,
    io: I,
    service: S,
    terms: Terms<H>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<hyper::Request<Incoming>, Response = hyper::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let Terms { mut stop, bounds, hold } = terms;
    let activity = Activity::new();
    let io = Bounded::new(io, bounds.write, activity.clone());
    let service = Counted { inner: service, activity: activity.clone() };
    let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service));
    let mut phase = H2Phase::Preface;
    let mut stopping = false;
    let mut check = activity.started + bounds.preface;
    let result = loop {
        tokio::select! {
            result = conn.as_mut() => break Some(result),
            _ = crate::shutdown::stopped(&mut stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
                if phase == H2Phase::Open {
                    (phase, check) = (H2Phase::Closing, Instant::now() + bounds.keepalive_timeout);
                }
            }
            _ = tokio::time::sleep_until(check) => {
                let now = Instant::now();
                match phase {
                    H2Phase::Preface if activity.read.load(Ordering::Acquire) < H2_PREFACE_LEN => {
                        // No HTTP/2 session yet: nothing to say goodbye with.
                        bounds.count("preface");
                        break None;
                    }
                    // The client did not end the connection after GOAWAY.
                    H2Phase::Closing => break None,
                    _ if stopping => (phase, check) = (H2Phase::Closing, now + bounds.keepalive_timeout),
                    _ => match activity.idle_at(bounds.idle) {
                        Some(idle) if idle <= now => {
                            bounds.count("idle");
                            conn.as_mut().graceful_shutdown();
                            (phase, check) = (H2Phase::Closing, now + bounds.keepalive_timeout);
                        }
                        Some(idle) => (phase, check) = (H2Phase::Open, idle),
                        None => (phase, check) = (H2Phase::Open, now + bounds.idle),
                    },
                }
            }
        }
    };
    // hyper's keep-alive timeout is an error of a private type: told apart
    // by the silence it needs (at least the interval before the ping, then
    // its timeout; the interval alone is margin enough), as every other
    // end of ours is known and every end of the client's (EOF, GOAWAY, a
    // reset) is a read.
    let quiet = activity.now_ms().saturating_sub(activity.last_read_ms.load(Ordering::Acquire));
    let unanswered = !stopping
        && phase != H2Phase::Closing
        && Duration::from_millis(quiet) >= bounds.keepalive_interval;
    match result {
        Some(_) if activity.write_stalled.load(Ordering::Acquire) => bounds.count("write"),
        Some(_) if unanswered => bounds.count("keepalive"),
        Some(Err(error)) => tracing::debug!(%error, "http/2 connection ended with an error"),
        _ => {}
    }
    drop(hold);
}

/// Closes `stream` after a lingering read (see the module's docs); answers
/// how many bytes it discarded.
pub(crate) async fn linger<I: AsyncRead + AsyncWrite + Unpin>(mut stream: I) -> usize {
    if stream.shutdown().await.is_err() {
        return 0;
    }
    let deadline = tokio::time::Instant::now() + LINGER_MAX_TIME;
    let mut buf = vec![0; 64 * 1024];
    let mut discarded = 0;
    while discarded < LINGER_MAX_BYTES {
        let idle = tokio::time::Instant::now() + LINGER_IDLE;
        match tokio::time::timeout_at(idle.min(deadline), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => discarded += n,
            // EOF (the client closed), an error, or out of time.
            _ => break,
        }
    }
    discarded
}

/// A service answering every request with `503` (too many connections).
pub(crate) fn refusal() -> impl Service<
    hyper::Request<Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = std::future::Ready<Result<axum::response::Response, std::convert::Infallible>>,
> + Unpin
+ Send
+ 'static {
    hyper::service::service_fn(|_| {
        std::future::ready(Ok(crate::http::unavailable(
            "too many connections to this registry; retry later",
        )))
    })
}
