//! One event stream of a list (`GET /v1/<section>?watch=events`), read a
//! line at a time; `crate::watch` keeps the list it describes.

use crate::{Client, Error, Section};
use bytes::{Buf, Bytes, BytesMut};
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mcs_api::{Bookmark, ErrorCode, WatchEvent};
use std::time::Duration;
use tokio::time::Instant;

/// The media type of an event stream.
const NDJSON: &str = "application/x-ndjson";

/// Longest line accepted (one item, or a bookmark): far above any item a
/// registry serves (its bodies are bounded well below it).
const MAX_LINE: usize = 16 << 20;

/// What opening a stream came to.
#[derive(Debug)]
pub(crate) enum Opened {
    /// The stream, from the start (the list first) or resumed.
    Stream(EventStream),
    /// The registry does not stream events (a release before them, which
    /// refuses `watch=events` with `422` naming `watch`): long-poll.
    Unsupported,
    /// `410`: the revision is gone; watch again without it.
    Expired,
}

/// An open event stream.
#[derive(Debug)]
pub(crate) struct EventStream {
    body: Incoming,
    buffered: BytesMut,
    deadline: Instant,
}

impl EventStream {
    /// The next event; `Ok(None)` once the registry ended the stream.
    pub(crate) async fn next<T: serde::de::DeserializeOwned>(
        &mut self,
    ) -> Result<Option<WatchEvent<T>>, Error> {
        loop {
            if let Some(end) = self.buffered.iter().position(|b| *b == b'\n') {
                let line = self.buffered.split_to(end + 1);
                let event = serde_json::from_slice(&line[..end]).map_err(Error::Decode)?;
                return Ok(Some(event));
            }
            if self.buffered.len() > MAX_LINE {
                return Err(transport(format!("an event line over {MAX_LINE} bytes")));
            }
            let frame = tokio::time::timeout_at(self.deadline, self.body.frame()).await;
            let Ok(frame) = frame else {
                return Err(transport("the stream outlived its timeout".into()));
            };
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(Error::Transport(Box::new(e))),
                Some(Ok(frame)) => {
                    if let Ok(mut data) = frame.into_data() {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            self.buffered.extend_from_slice(chunk);
                            let n = chunk.len();
                            data.advance(n);
                        }
                    }
                }
            }
        }
    }
}

fn transport(message: String) -> Error {
    Error::Transport(Box::new(std::io::Error::new(std::io::ErrorKind::TimedOut, message)))
}

impl Client {
    /// Opens the event stream of `L`, resumed after `at` when given (its
    /// revision, and its fingerprint for another replica), streaming up
    /// to `wait`.
    pub(crate) async fn open_events<L: Section>(
        &self,
        at: Option<&Bookmark>,
        wait: Duration,
    ) -> Result<Opened, Error> {
        let secs = wait.as_secs().max(1);
        let mut path = self.path(&["v1", L::PATH]);
        path.push_str(&format!("?watch=events&timeout_secs={secs}"));
        let mut request = Request::get(&path);
        if let Some(at) = at {
            let query = serde_urlencoded::to_string([("resource_version", &at.resource_version)])
                .map_err(|e| Error::Config(format!("watch query: {e}")))?;
            path.push('&');
            path.push_str(&query);
            request = Request::get(&path)
                .header(header::IF_NONE_MATCH, format!("\"{}\"", at.fingerprint));
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| Error::Config(format!("request: {e}")))?;
        let timeout = self.config().request_timeout;
        let at_url = |e: Box<dyn std::error::Error + Send + Sync>| {
            Error::Transport(Box::new(crate::error::AtUrl {
                target: format!("GET {path}"),
                source: e,
            }))
        };
        let http = self.transport_http();
        let response = match tokio::time::timeout(timeout, http.request(request)).await {
            Ok(response) => response.map_err(|e| at_url(e.into()))?,
            Err(_) => {
                return Err(at_url(format!("no reply within {} ms", timeout.as_millis()).into()));
            }
        };
        let (parts, body) = response.into_parts();
        let streams = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(NDJSON));
        if parts.status == StatusCode::OK && streams {
            let deadline = Instant::now() + Duration::from_secs(secs) + timeout;
            return Ok(Opened::Stream(EventStream { body, buffered: BytesMut::new(), deadline }));
        }
        let read = tokio::time::timeout(timeout, body.collect()).await;
        let reply = match read {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) => return Err(at_url(e.into())),
            Err(_) => Bytes::new(),
        };
        if parts.status == StatusCode::OK {
            // A list, not a stream: the registry ignored `watch=events`.
            return Ok(Opened::Unsupported);
        }
        let retry_after = parts
            .headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        match Error::from_reply(&format!("GET {path}"), parts.status, retry_after, &reply) {
            Error::Invalid { status: StatusCode::GONE, .. } => Ok(Opened::Expired),
            Error::Invalid { code: ErrorCode::InvalidArgument, field: Some(field), .. }
                if field == "watch" =>
            {
                Ok(Opened::Unsupported)
            }
            error => Err(error),
        }
    }
}
