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
use hyper::body::{Body, Incoming};
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use hyper_util::rt::TokioIo;
use std::error::Error as StdError;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, watch};

/// Most bytes discarded by a lingering close.
pub const LINGER_MAX_BYTES: usize = 16 << 20;
/// Longest lingering close.
pub const LINGER_MAX_TIME: Duration = Duration::from_secs(5);
/// A lingering close ends after this long without data from the client.
pub const LINGER_IDLE: Duration = Duration::from_secs(1);
/// How long a connection past the cap may take to send its request head.
pub const REFUSAL_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Serves `conn` until it ends, turning it to a graceful shutdown (finish
/// the request in flight, then close) once `stop` turns true; then closes
/// it lingering. `hold` (a [`Slot`], a refusal's permit) is released last.
pub(crate) async fn serve<I, S, B, H>(
    mut conn: http1::Connection<TokioIo<I>, S>,
    mut stop: watch::Receiver<bool>,
    hold: H,
) where
    I: AsyncRead + AsyncWrite + Unpin,
    S: HttpService<Incoming, ResBody = B> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let result = {
        let mut stopping = false;
        let mut stopped = pin!(async move { crate::server::stopped(&mut stop).await });
        poll_fn(|cx| {
            if !stopping && stopped.as_mut().poll(cx).is_ready() {
                stopping = true;
                Pin::new(&mut conn).graceful_shutdown();
            }
            conn.poll_without_shutdown(cx)
        })
        .await
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
    let parts = conn.into_parts();
    linger(parts.io.into_inner()).await;
    drop(hold);
}

/// Serves an HTTP/2 connection until it ends, turning it to a graceful
/// shutdown (GOAWAY, finish the streams in flight) once `stop` turns true.
/// `hold` is released last.
pub(crate) async fn serve_h2<I, S, B, E, H>(
    conn: http2::Connection<TokioIo<I>, S, E>,
    mut stop: watch::Receiver<bool>,
    hold: H,
) where
    I: AsyncRead + AsyncWrite + Unpin,
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    let mut conn = pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = crate::server::stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "http/2 connection ended with an error");
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
pub(crate) fn refusal() -> impl HttpService<
    Incoming,
    ResBody = axum::body::Body,
    Error = std::convert::Infallible,
    Future = std::future::Ready<Result<axum::response::Response, std::convert::Infallible>>,
> + Unpin {
    hyper::service::service_fn(|_| {
        std::future::ready(Ok(crate::http::unavailable(
            "too many connections to this registry; retry later",
        )))
    })
}
