//! The bounds of an HTTP/2 connection (issue 22, item 5): HTTP/2 has no
//! header read timeout, so a client that chose `h2` and then said nothing,
//! or kept its connection without requests, held a slot of
//! `--max-connections` for ever.

use super::*;

/// `mcs_http_connection_timeouts_total` of the API listener for `reason`.
async fn timeouts(registry: &RegistryProcess, reason: &str) -> f64 {
    let series =
        format!("mcs_http_connection_timeouts_total{{listener=\"api\",reason=\"{reason}\"}}");
    value(&metrics(registry).await, &series)
}

/// A registry over TLS with `extra` flags, its address, a client offering
/// `h2`, and the directory of its certificate files (to be kept).
async fn start_h2(name: &str, extra: &[&str]) -> (RegistryProcess, String, Arc<ClientConfig>, Dir) {
    let ca = Ca::new("ca");
    let dir = Dir::new(name);
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(extra.iter().map(|f| (*f).to_owned()));
    let (registry, addr) = start(&strs(&flags)).await;
    (registry, addr, client(&ca, None, &[b"h2"]), dir)
}

/// Before the fix the registry waited for the connection preface for ever
/// (keep-alive pings start only after it), so 1,024 such sockets locked
/// every client out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_sends_no_preface_is_cut_after_the_handshake_timeout() {
    let (registry, addr, h2, _dir) = start_h2(
        "preface",
        &["--tls-handshake-timeout-secs", "1", "--max-connections", "1", "--max-watches", "1"],
    )
    .await;
    let mut silent = connect(&addr, &h2).await.unwrap();
    // The registry's SETTINGS, then its close (EOF or reset); a generous
    // bound, not a timing.
    let mut seen = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut seen)).await;
    assert!(read.is_ok(), "closed by the registry, after {} bytes", seen.len());
    assert_eq!(timeouts(&registry, "preface").await, 1.0);
    // Its slot is free again.
    let (status, body) = h2_get(connect(&addr, &h2).await.unwrap(), "/v1/pools").await;
    assert_eq!(status, 200, "{body}");
}

/// Before the fix a client that answered the keep-alive pings kept an
/// HTTP/2 connection without requests for ever; `--idle-timeout-secs`
/// bounded only HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_connection_without_requests_is_closed_after_the_idle_timeout() {
    let (registry, addr, h2, _dir) = start_h2("idle", &["--idle-timeout-secs", "1"]).await;
    let stream = connect(&addr, &h2).await.unwrap();
    let (mut sender, connection) = h2::client::handshake(stream).await.unwrap();
    // The driver answers pings; it ends when the registry closes.
    let connection = tokio::spawn(connection);
    let (status, body) = h2_request(&mut sender, "/v1/pools").await;
    assert_eq!(status, 200, "{body}");
    // A generous bound, not a timing: under a loaded CI machine the GOAWAY
    // and the close took over 10 s once.
    let ended = tokio::time::timeout(Duration::from_secs(30), connection).await;
    assert!(ended.is_ok(), "the registry closed the idle connection");
    assert_eq!(timeouts(&registry, "idle").await, 1.0);
    assert_eq!(timeouts(&registry, "keepalive").await, 0.0);
}

/// A client that stops reading (a dead peer) is found by the keep-alive
/// pings, with the intervals of `--http2-keepalive-*`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_that_stops_answering_pings_is_closed() {
    let flags = ["--http2-keepalive-interval-secs", "1", "--http2-keepalive-timeout-secs", "1"];
    let (registry, addr, h2, _dir) = start_h2("keepalive", &flags).await;
    let stream = connect(&addr, &h2).await.unwrap();
    let (mut sender, mut connection) = h2::client::handshake(stream).await.unwrap();
    let (status, body) = tokio::select! {
        answered = h2_request(&mut sender, "/v1/pools") => answered,
        ended = &mut connection => panic!("connection ended: {ended:?}"),
    };
    assert_eq!(status, 200, "{body}");
    // From now on nothing reads the connection: the pings go unanswered.
    eventually(Duration::from_secs(10), "closed by keep-alive", async || {
        timeouts(&registry, "keepalive").await == 1.0
    })
    .await;
    assert_eq!(timeouts(&registry, "idle").await, 0.0);
    drop(connection);
}
