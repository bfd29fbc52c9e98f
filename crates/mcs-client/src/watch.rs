//! List-and-watch: one task per watch long-polls a section's list with its
//! `ETag` and hands each new list to a channel.
//!
//! ```text
//!  GET /v1/<section>                      first list (and its ETag)
//!  GET ?watch=true&timeout_secs=N         If-None-Match: "<etag>"
//!     304 ─▶ unchanged, poll again        200 ─▶ new list: yield it, remember its ETag,
//!                                                poll again after `watch_min_interval`
//!     503 / cut connection ─▶ backoff, poll again with the same ETag
//! ```
//!
//! Nothing is yielded before the first complete list (an incomplete list
//! must never read as "these are all the records"). From then on every
//! list whose `ETag` differs from the last yielded one is yielded once, so
//! a flip of `complete` arrives as a list with `complete` changed (the
//! `ETag` carries `-incomplete`). A reconnect asks with the last `ETag`, so
//! it yields nothing unless something changed meanwhile.

use crate::backoff::Attempts;
use crate::{Client, Error, Section};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The lists of one section as they change; ends when the token is
/// cancelled, or after yielding an error that retrying cannot cure (a
/// `4xx`: a refused identity, a wrong URL).
#[derive(Debug)]
pub struct Watch<L> {
    lists: mpsc::Receiver<Result<L, Error>>,
}

impl<L> Watch<L> {
    /// The next list, or `None` once the watch has ended.
    pub async fn next(&mut self) -> Option<Result<L, Error>> {
        self.lists.recv().await
    }

    /// The channel behind the watch (for `select!` or a stream adapter).
    pub fn into_receiver(self) -> mpsc::Receiver<Result<L, Error>> {
        self.lists
    }
}

impl Client {
    /// Watches the section `L` (`PoolList`, `ExportList`, ...) until
    /// `cancel`: see the [module docs](crate::watch). Must be called within
    /// a tokio runtime; the watch task ends when the [`Watch`] is dropped.
    pub fn watch<L: Section>(&self, cancel: CancellationToken) -> Watch<L> {
        let (tx, lists) = mpsc::channel(16);
        tokio::spawn(run::<L>(self.clone(), tx, cancel));
        Watch { lists }
    }
}

async fn run<L: Section>(
    client: Client,
    tx: mpsc::Sender<Result<L, Error>>,
    cancel: CancellationToken,
) {
    let wait = client.config().watch_timeout;
    let min_interval = client.config().watch_min_interval;
    let mut attempts = Attempts::new(client.config().backoff);
    let mut etag: Option<String> = None;
    let mut started = false;
    loop {
        let poll = client.poll::<L>(etag.as_deref(), etag.as_ref().map(|_| wait));
        let polled = tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tx.closed() => return,
            polled = poll => polled,
        };
        match polled {
            Ok(None) => attempts.reset(),
            Ok(Some((list, new_etag))) => {
                attempts.reset();
                if etag.as_ref() == Some(&new_etag) {
                    continue;
                }
                etag = Some(new_etag);
                if !started && !list.complete() {
                    tracing::debug!(
                        section = L::PATH,
                        "list incomplete: waiting for a complete one"
                    );
                    continue;
                }
                started = true;
                if tx.send(Ok(list)).await.is_err() {
                    return;
                }
                if !min_interval.is_zero() {
                    // Changes meanwhile come together in the next list.
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tx.closed() => return,
                        _ = tokio::time::sleep(min_interval) => {}
                    }
                }
            }
            Err(error) if error.is_retryable() || matches!(error, Error::Server { .. }) => {
                let delay = attempts.delay(error.retry_after());
                tracing::debug!(section = L::PATH, %error, delay_ms = delay.as_millis() as u64, "watch reconnecting");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            Err(error) => {
                tracing::warn!(section = L::PATH, %error, "watch ended");
                let _ = tx.send(Err(error)).await;
                return;
            }
        }
    }
}
