//! Tests of [`serve`] over real TCP connections: the lingering close and
//! the connection cap.

#![allow(clippy::unwrap_used)] // test code: a failed call should fail the test loudly

use super::*;
use crate::clock::ManualClock;
use crate::config::Args;
use clap::Parser;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A registry serving its API on a loopback port, with the test flags plus
/// `extra`; dropping it stops the server.
struct Served {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

async fn served(extra: &[&str]) -> Served {
    let mut argv = vec!["mcs-registry", "--writer-id", "reg-a"];
    argv.extend_from_slice(extra);
    let settings = Settings::from_args(&Args::try_parse_from(argv).unwrap()).unwrap();
    let mut registry =
        Registry::new(Arc::new(MemoryStore::new()), Arc::new(ManualClock::new(0)), &settings);
    registry.reader.poll_once().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = registry.shutdown.clone();
    tokio::spawn(serve(
        listener,
        router(registry.state.clone()),
        settings,
        "api",
        stop.subscribe(),
        None,
    ));
    Served { addr, stop }
}

/// An oversized upload on a new connection to `addr`
/// ([`mcs_testkit::upload::post_oversized`]).
async fn upload(addr: SocketAddr, len: usize) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    mcs_testkit::upload::post_oversized(&mut stream, len).await
}

/// Defect 10: a client uploading a body over the limit sometimes got a
/// reset instead of the 413, because the server closed the connection
/// with the rest of the upload unread (the kernel then resets it, and the
/// reset discards the response the client had not read yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_uploading_too_much_reads_the_413() {
    let server = served(&["--max-body-bytes", "65536"]).await;
    let mut failures = Vec::new();
    for round in 0..20 {
        match upload(server.addr, 4 << 20).await {
            Ok(response) if response.starts_with("HTTP/1.1 413") => {}
            Ok(response) => failures.push(format!("round {round}: {:.60}", response)),
            Err(e) => failures.push(format!("round {round}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{} of 20 uploads lost the 413: {failures:#?}", failures.len());
}

/// Sends `GET path` on `stream` and reads one response (head and
/// `content-length` body).
async fn get(stream: &mut TcpStream, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let mut buf = [0; 4096];
    loop {
        let text = String::from_utf8_lossy(&response).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned)
                })
                .map_or(0, |v| v.trim().parse().unwrap());
            if body.len() >= len {
                return text;
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf));
        let n = read.await.expect("a response within 5 s").unwrap();
        assert!(n > 0, "connection closed mid-response: {text:?}");
        response.extend_from_slice(&buf[..n]);
    }
}

/// Defect 8: nothing capped the connections served at once. Past
/// `--max-connections` a connection is answered 503 with `Retry-After`
/// and the JSON error; once one closes, connections are served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_get_503_and_are_served_again_once_one_closes() {
    let metrics = crate::metrics::install();
    let server = served(&["--max-connections", "2", "--max-watches", "1"]).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        let reply = get(&mut stream, "/healthz").await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        held.push(stream);
    }
    let mut third = TcpStream::connect(server.addr).await.unwrap();
    let refused = get(&mut third, "/healthz").await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    let lower = refused.to_ascii_lowercase();
    assert!(lower.contains("\r\nretry-after: 1\r\n"), "{refused}");
    assert!(lower.contains("\"error\":\"unavailable\""), "{refused}");
    let rendered = metrics.render();
    assert!(rendered.contains("mcs_http_refused_total{reason=\"connections\"}"), "{rendered}");
    assert!(rendered.contains("mcs_http_connections{listener=\"api\"}"), "{rendered}");
    // The two held connections still work.
    assert!(get(&mut held[0], "/healthz").await.starts_with("HTTP/1.1 200"));

    drop(held.pop());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        let reply = get(&mut stream, "/healthz").await;
        if reply.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
        assert!(std::time::Instant::now() < deadline, "never served again after one closed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 22, item 6: nothing bounded a write. A client that pipelines
/// requests and never reads the responses fills the socket buffers, and
/// its connection held a slot of `--max-connections` for as long as it
/// stayed open. Now a write without progress for `--write-timeout-secs`
/// closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_responses_loses_its_slot() {
    let metrics = crate::metrics::install();
    let flags = ["--max-connections", "1", "--max-watches", "1", "--write-timeout-secs", "1"];
    let server = served(&flags).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    // A small window fills fast.
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(server.addr).await.unwrap();
    // About 100 MB of responses, far past what socket buffers hold.
    let requests = "GET /openapi.json HTTP/1.1\r\nhost: test\r\n\r\n".repeat(1_000);
    stalled.write_all(requests.as_bytes()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        if get(&mut stream, "/healthz").await.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the stalled client kept its slot");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_timed_out(&metrics, "write");
    drop(stalled);
}

/// Asserts that `mcs_http_connection_timeouts_total` of the API listener
/// counted `reason` (the recorder is shared by every test of the crate:
/// at least once).
fn assert_timed_out(metrics: &metrics_exporter_prometheus::PrometheusHandle, reason: &str) {
    let rendered = metrics.render();
    let series =
        format!("mcs_http_connection_timeouts_total{{listener=\"api\",reason=\"{reason}\"}}");
    let counted = rendered.lines().find_map(|l| l.strip_prefix(&series)).map(str::trim);
    assert!(counted.is_some_and(|n| n != "0"), "{series} counted: {counted:?}");
}

/// An HTTP/1.1 connection that sends nothing is closed after
/// `--idle-timeout-secs` (hyper's header read timeout), and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http1_connection_is_closed_and_counted() {
    let metrics = crate::metrics::install();
    let server = served(&["--idle-timeout-secs", "1"]).await;
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), idle.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed by the server: {read:?}");
    assert_timed_out(&metrics, "idle");
}

/// `--listen-backlog` is the listener's queue: with a queue of 1 and
/// nothing accepting, connections past it are not completed (the kernel
/// drops their SYNs), while a queue of 64 completes them all.
#[tokio::test]
async fn the_listen_backlog_bounds_the_connections_waiting_to_be_accepted() {
    async fn completed(backlog: u32, tries: usize) -> usize {
        let listener = listen("127.0.0.1:0".parse().unwrap(), backlog).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut open = Vec::new();
        for _ in 0..tries {
            let connect = TcpStream::connect(addr);
            if let Ok(Ok(stream)) =
                tokio::time::timeout(std::time::Duration::from_millis(300), connect).await
            {
                open.push(stream);
            }
        }
        open.len()
    }
    assert!(completed(1, 5).await < 5);
    assert_eq!(completed(64, 5).await, 5);
}
