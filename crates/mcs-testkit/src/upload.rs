//! An oversized upload as an ordinary client sends it, for the tests of the
//! lingering close (docs/design.md §5) over plain TCP and over TLS.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Sends on `stream` the head of a `POST /v1/pools` whose body is `len`
/// bytes, then the body in 64 KiB chunks, then reads the response to its
/// end (within 10 s), as a client does that reads only once it has sent
/// its request: a failed write fails it, naming how far it got.
pub async fn post_oversized<S>(stream: &mut S, len: usize) -> Result<String, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let head = format!(
        "POST /v1/pools HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {len}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.map_err(|e| format!("writing the head: {e}"))?;
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < len {
        let n = chunk.len().min(len - sent);
        stream.write_all(&chunk[..n]).await.map_err(|e| format!("after {sent} bytes: {e}"))?;
        sent += n;
    }
    stream.flush().await.map_err(|e| format!("flushing: {e}"))?;
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response));
    match read.await {
        Ok(Ok(_)) => Ok(String::from_utf8_lossy(&response).into_owned()),
        Ok(Err(e)) => Err(format!("reading the response ({} bytes read): {e}", response.len())),
        Err(_) => Err("no response within 10 s".into()),
    }
}
