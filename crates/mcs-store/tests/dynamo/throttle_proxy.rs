//! A raw HTTP/1.1 proxy in front of moto_server that answers the first N
//! requests as a throttled DynamoDB would (and, if told, every request of
//! one operation as access denied), then forwards the rest, counting
//! both. Every forwarded exchange uses a connection of its own (`Connection:
//! close` both ways), so counts are exact.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const THROTTLED_BODY: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#;
const DENIED_BODY: &str =
    r#"{"__type":"com.amazon.coral.service#AccessDeniedException","message":"not authorized"}"#;

#[derive(Debug, Default)]
struct Counts {
    throttle_first: usize,
    /// The `x-amz-target` (lowercase) of the operation denied, if any.
    deny: Option<String>,
    seen: AtomicUsize,
    throttled: AtomicUsize,
    forwarded: AtomicUsize,
}

/// The running proxy; it stops with the test's runtime.
#[derive(Debug)]
pub struct ThrottleProxy {
    /// Where clients reach it: `http://127.0.0.1:<port>`.
    pub url: String,
    counts: Arc<Counts>,
}

impl ThrottleProxy {
    /// Proxies to `upstream` (`http://host:port`), throttling the first
    /// `throttle_first` requests.
    pub async fn start(upstream: &str, throttle_first: usize) -> Self {
        Self::run(upstream, Counts { throttle_first, ..Counts::default() }).await
    }

    /// Proxies to `upstream`, answering every request of `operation`
    /// (`UpdateItem`, …) as a role without that permission would be.
    pub async fn denying(upstream: &str, operation: &str) -> Self {
        let deny = Some(format!("x-amz-target: dynamodb_20120810.{}", operation.to_lowercase()));
        Self::run(upstream, Counts { deny, ..Counts::default() }).await
    }

    async fn run(upstream: &str, counts: Counts) -> Self {
        let upstream = upstream
            .strip_prefix("http://")
            .expect("an http:// endpoint")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(counts);
        let shared = counts.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let (upstream, counts) = (upstream.clone(), shared.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, &upstream, &counts).await {
                        eprintln!("throttle proxy: {e}");
                    }
                });
            }
        });
        Self { url, counts }
    }

    /// Requests answered with a throttling error.
    pub fn throttled(&self) -> usize {
        self.counts.throttled.load(Ordering::SeqCst)
    }

    /// Requests forwarded to the upstream.
    pub fn forwarded(&self) -> usize {
        self.counts.forwarded.load(Ordering::SeqCst)
    }
}

async fn serve(mut client: TcpStream, upstream: &str, counts: &Counts) -> io::Result<()> {
    loop {
        let Some(request) = read_request(&mut client).await? else {
            return Ok(());
        };
        let head = String::from_utf8_lossy(&request).to_ascii_lowercase();
        if counts.deny.as_ref().is_some_and(|d| head.contains(d.as_str())) {
            refuse(&mut client, "denied", DENIED_BODY).await?;
            continue;
        }
        if counts.seen.fetch_add(1, Ordering::SeqCst) < counts.throttle_first {
            counts.throttled.fetch_add(1, Ordering::SeqCst);
            refuse(&mut client, "throttled", THROTTLED_BODY).await?;
            continue;
        }
        counts.forwarded.fetch_add(1, Ordering::SeqCst);
        let mut server = TcpStream::connect(upstream).await?;
        server.write_all(&closing(&request)).await?;
        let mut response = Vec::new();
        server.read_to_end(&mut response).await?;
        client.write_all(&closing(&response)).await?;
        client.shutdown().await?;
        return Ok(());
    }
}

/// Answers a request with a DynamoDB error `body` (a 400).
async fn refuse(client: &mut TcpStream, request_id: &str, body: &str) -> io::Result<()> {
    let response = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\n\
         x-amzn-requestid: {request_id}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await
}

/// One request (head and `content-length` body) or `None` at end of stream.
async fn read_request(conn: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let body_len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap_or(0));
    while buf.len() < head_end + body_len {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(buf))
}

/// `message` with its `connection` header replaced by `Connection: close`.
fn closing(message: &[u8]) -> Vec<u8> {
    let Some(i) = find(message, b"\r\n\r\n") else {
        return message.to_vec();
    };
    let head = String::from_utf8_lossy(&message[..i]);
    let mut out: Vec<u8> = head
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .flat_map(|l| [l.as_bytes(), b"\r\n"].concat())
        .collect();
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out.extend_from_slice(&message[i + 4..]);
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
