//! List-and-watch: one task per watch follows a section's event stream
//! (docs/api.md, Event watches), or long-polls its list against a registry
//! that streams no events, and hands each new list to a channel.
//!
//! ```text
//!  GET ?watch=events&timeout_secs=N       ADDED.. BOOKMARK: the list; yield it
//!     then batches .. BOOKMARK            apply; yield the list at each bookmark
//!     end / cut / ERROR event ─▶ reconnect with &resource_version=<last bookmark's>
//!                                         and If-None-Match: "<its fingerprint>"
//!     410 ─▶ watch again without them (the list again)
//!     422 naming `watch` (a registry before event streams) ─▶ long-poll:
//!  GET ?watch=true&timeout_secs=N         If-None-Match: "<etag>"
//!     304 ─▶ unchanged, poll again        200 ─▶ new list: yield it, remember its ETag,
//!                                                poll again after `watch_min_interval`
//!     503 / cut connection ─▶ backoff, poll again with the same ETag
//! ```
//!
//! Nothing is yielded before the first complete list (an incomplete list
//! must never read as "these are all the records"). From then on every
//! list whose fingerprint or `complete` differs from the last yielded one
//! is yielded once, at most one per `watch_min_interval`. A reconnect
//! resumes where it was, so it yields nothing unless something changed
//! meanwhile. A list built from events holds its items in the order of
//! their event keys.
//!
//! [`Client::watch_changes`] yields the same moments as [`Update`]s: a
//! whole list where the caller cannot hold the registry's state yet (the
//! first, the first complete one after an incomplete one, after a
//! relist, and every one from a registry without event streams), else
//! only the items added, modified and deleted since the last update. A
//! caller that holds the list by key then costs per change, not per item
//! listed (issue 27 item 9: cloning and comparing whole lists grew with
//! the exports).

use crate::backoff::Attempts;
use crate::stream::Opened;
use crate::{Client, Error, Section};
use mcs_api::{Bookmark, WatchEvent};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
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

/// What [`Client::watch_changes`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Update<L: Section> {
    /// The whole list: replaces whatever the caller held.
    List(L),
    /// What changed since the last update, which was complete.
    Changed(Changes<L::Item>),
}

/// The items of a section that changed between two updates.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes<T> {
    /// Items added or modified, as they are now, in the order of their
    /// event keys.
    pub upserted: Vec<T>,
    /// Items deleted, as they were last.
    pub deleted: Vec<T>,
    /// Whether the list is complete now. After an incomplete one, the next
    /// complete update is a whole [`Update::List`].
    pub complete: bool,
    /// The fingerprint of the list the changes bring it to.
    pub fingerprint: String,
}

/// What a watch hands over: whole lists ([`Client::watch`]) or updates
/// ([`Client::watch_changes`]).
pub trait Yield<L: Section>: Send + 'static {
    /// Whether it takes [`Changes`] where it can.
    const CHANGES: bool;
    /// A whole list.
    fn list(list: L) -> Self;
    /// Changes; `Err` gives them back when it takes lists only.
    fn changed(changes: Changes<L::Item>) -> Result<Self, Changes<L::Item>>
    where
        Self: Sized;
}

impl<L: Section> Yield<L> for L {
    const CHANGES: bool = false;
    fn list(list: L) -> Self {
        list
    }
    fn changed(changes: Changes<L::Item>) -> Result<Self, Changes<L::Item>> {
        Err(changes)
    }
}

impl<L: Section> Yield<L> for Update<L> {
    const CHANGES: bool = true;
    fn list(list: L) -> Self {
        Update::List(list)
    }
    fn changed(changes: Changes<L::Item>) -> Result<Self, Changes<L::Item>> {
        Ok(Update::Changed(changes))
    }
}

impl Client {
    /// Watches the section `L` (`PoolList`, `ExportList`, ...) until
    /// `cancel`: see the [module docs](crate::watch). Must be called within
    /// a tokio runtime; the watch task ends when the [`Watch`] is dropped.
    pub fn watch<L: Section>(&self, cancel: CancellationToken) -> Watch<L> {
        self.watch_as::<L, L>(cancel)
    }

    /// Watches the section `L` as [`Watch::next`] does, yielding the
    /// changes since the last update where the registry streams events
    /// (see the [module docs](crate::watch)).
    pub fn watch_changes<L: Section>(&self, cancel: CancellationToken) -> Watch<Update<L>> {
        self.watch_as::<L, Update<L>>(cancel)
    }

    fn watch_as<L: Section, Y: Yield<L>>(&self, cancel: CancellationToken) -> Watch<Y> {
        let (tx, lists) = mpsc::channel(16);
        tokio::spawn(run::<L, Y>(self.clone(), tx, cancel));
        Watch { lists }
    }
}

async fn run<L: Section, Y: Yield<L>>(
    client: Client,
    tx: mpsc::Sender<Result<Y, Error>>,
    cancel: CancellationToken,
) {
    let mut out = Out {
        tx,
        last: None,
        min_interval: client.config().watch_min_interval,
        held_until: None,
        changed: BTreeMap::new(),
        relisted: true,
    };
    if follow_events(&client, &mut out, &cancel).await == Ended::Fallback {
        tracing::info!(section = L::PATH, "the registry streams no events: long-polling");
        long_poll::<L, Y>(client, out.tx, cancel).await;
    }
}

/// How [`follow_events`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Cancelled, the watch dropped, or an error yielded.
    Done,
    /// The registry streams no events.
    Fallback,
}

/// Where the lists of an event stream go.
struct Out<L: Section, Y> {
    tx: mpsc::Sender<Result<Y, Error>>,
    /// The fingerprint and `complete` of the last list yielded.
    last: Option<(String, bool)>,
    min_interval: Duration,
    held_until: Option<Instant>,
    /// The keys changed since the last list yielded: `None` if the item is
    /// there now, else the item as it was when deleted.
    changed: BTreeMap<String, Option<L::Item>>,
    /// Whether the items were listed again since the last list yielded.
    relisted: bool,
}

impl<L: Section, Y: Yield<L>> Out<L, Y> {
    /// Notes that the item at `key` came, changed or (with the item as it
    /// was) went.
    fn note(&mut self, key: &str, gone: Option<L::Item>) {
        if Y::CHANGES && !self.relisted {
            self.changed.insert(key.to_owned(), gone);
        }
    }

    /// Notes that the stream lists every item again.
    fn relist(&mut self) {
        self.relisted = true;
        self.changed.clear();
    }

    /// When the next list may be yielded, if not now.
    fn held(&self) -> Option<Instant> {
        self.held_until.filter(|until| *until > Instant::now())
    }

    /// Yields the list of `items` at `at` unless it is the last one
    /// yielded, or nothing was yielded yet and it is incomplete; `false`
    /// once the watch is dropped. The items were decoded once, as their
    /// events came: a list is their clones (decoding every item again for
    /// each list was a fifth of mcs-controller's CPU, issue 27 item 9).
    async fn offer(&mut self, items: &BTreeMap<String, L::Item>, at: &Bookmark) -> bool {
        let key = (at.fingerprint.clone(), at.complete);
        if self.last.is_none() && !at.complete {
            return true;
        }
        if self.last.as_ref() == Some(&key) {
            // The same list: what changed came back as it was.
            if !self.relisted {
                self.changed.clear();
            }
            return true;
        }
        // Changes only after a complete list, so that a caller never has
        // to patch a list it did not take as the whole.
        let after_complete = self.last.as_ref().is_some_and(|(_, complete)| *complete);
        let changed = std::mem::take(&mut self.changed);
        let yielded = if Y::CHANGES && after_complete && !self.relisted {
            let (mut upserted, mut deleted) = (Vec::new(), Vec::new());
            for (key, gone) in changed {
                match (gone, items.get(&key)) {
                    (_, Some(item)) => upserted.push(item.clone()),
                    (Some(item), None) => deleted.push(item),
                    (None, None) => {}
                }
            }
            let changes =
                Changes { upserted, deleted, complete: at.complete, fingerprint: key.0.clone() };
            match Y::changed(changes) {
                Ok(yielded) => yielded,
                Err(_) => Y::list(assemble(items, at)),
            }
        } else {
            Y::list(assemble(items, at))
        };
        self.relisted = false;
        self.last = Some(key);
        if !self.min_interval.is_zero() {
            self.held_until = Some(Instant::now() + self.min_interval);
        }
        self.tx.send(Ok(yielded)).await.is_ok()
    }
}

/// The list of `items` at bookmark `at`.
fn assemble<L: Section>(items: &BTreeMap<String, L::Item>, at: &Bookmark) -> L {
    L::assemble(items.values().cloned().collect(), at.complete, at.fingerprint.clone())
}

/// Follows the event stream of `L`, reconnecting and resuming, until
/// cancelled or the registry turns out to stream no events.
async fn follow_events<L: Section, Y: Yield<L>>(
    client: &Client,
    out: &mut Out<L, Y>,
    cancel: &CancellationToken,
) -> Ended {
    let wait = client.config().watch_timeout;
    let mut attempts = Attempts::new(client.config().backoff);
    let mut items: BTreeMap<String, L::Item> = BTreeMap::new();
    let mut at: Option<Bookmark> = None;
    loop {
        let opened = tokio::select! {
            _ = cancel.cancelled() => return Ended::Done,
            _ = out.tx.closed() => return Ended::Done,
            opened = client.open_events::<L>(at.as_ref(), wait) => opened,
        };
        let mut stream = match opened {
            Ok(Opened::Stream(stream)) => stream,
            Ok(Opened::Unsupported) => return Ended::Fallback,
            Ok(Opened::Expired) => {
                tracing::debug!(section = L::PATH, "revision gone: listing again");
                at = None;
                continue;
            }
            Err(error) if error.is_retryable() || matches!(error, Error::Server { .. }) => {
                let delay = attempts.delay(error.retry_after());
                tracing::debug!(section = L::PATH, %error, delay_ms = delay.as_millis() as u64, "watch reconnecting");
                tokio::select! {
                    _ = cancel.cancelled() => return Ended::Done,
                    _ = tokio::time::sleep(delay) => continue,
                }
            }
            Err(error) => {
                tracing::warn!(section = L::PATH, %error, "watch ended");
                let _ = out.tx.send(Err(error)).await;
                return Ended::Done;
            }
        };
        if at.is_none() {
            // The stream starts with the whole list.
            items.clear();
            out.relist();
        }
        // A bookmark not yielded yet, held back by `watch_min_interval`
        // (if the stream ends first, the next one's bookmark brings it).
        let mut pending = false;
        let failed = loop {
            let held = out.held();
            let event = tokio::select! {
                _ = cancel.cancelled() => return Ended::Done,
                _ = out.tx.closed() => return Ended::Done,
                _ = tokio::time::sleep_until(held.unwrap_or_else(Instant::now)), if pending => {
                    pending = false;
                    if let Some(at) = &at && !out.offer(&items, at).await {
                        return Ended::Done;
                    }
                    continue;
                }
                event = stream.next() => event,
            };
            match event {
                Ok(Some(
                    WatchEvent::Added { key, object } | WatchEvent::Modified { key, object },
                )) => {
                    out.note(&key, None);
                    items.insert(key, object);
                }
                Ok(Some(WatchEvent::Deleted { key, .. })) => {
                    if let Some(gone) = items.remove(&key) {
                        out.note(&key, Some(gone));
                    }
                }
                Ok(Some(WatchEvent::Bookmark(bookmark))) => {
                    attempts.reset();
                    let at = at.insert(bookmark);
                    if out.held().is_some() {
                        pending = true;
                    } else if !out.offer(&items, at).await {
                        return Ended::Done;
                    }
                }
                Ok(Some(WatchEvent::Error { object })) => {
                    tracing::debug!(
                        section = L::PATH,
                        message = object.message,
                        "stream ended by the registry"
                    );
                    break None;
                }
                Ok(Some(WatchEvent::Completeness { .. } | WatchEvent::Unknown)) => {}
                Ok(None) => break None,
                Err(error) => break Some(error),
            }
        };
        if let Some(error) = failed {
            let delay = attempts.delay(None);
            tracing::debug!(section = L::PATH, %error, delay_ms = delay.as_millis() as u64, "stream broken: reconnecting");
            if matches!(error, Error::Decode(_)) {
                // What was applied is in doubt: list again. An item that
                // does not decode is the watcher's to know, as a list that
                // did not decode was.
                at = None;
                if out.tx.send(Err(error)).await.is_err() {
                    return Ended::Done;
                }
            }
            tokio::select! {
                _ = cancel.cancelled() => return Ended::Done,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// Long-polls the list of `L` (a registry without event streams).
async fn long_poll<L: Section, Y: Yield<L>>(
    client: Client,
    tx: mpsc::Sender<Result<Y, Error>>,
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
                if tx.send(Ok(Y::list(list))).await.is_err() {
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
