//! Event journals (docs/design.md §6, Event watches): per served section,
//! its changes as batches of newline-delimited events, each encoded once
//! and shared as one [`Bytes`] by every event watcher, with a bounded
//! history to resume from.
//!
//! ```text
//!  LiveView changes ─► sync (one task) ─► Journal(section): diff by item digest
//!                                           ├─► history: the last HISTORY batches
//!                                           └─► broadcast ─► every stream (same Bytes)
//! ```
//!
//! A batch holds the `ADDED`, `MODIFIED` and `DELETED` events of one
//! observed change (changes that land between two looks are one batch), a
//! `COMPLETENESS` event if `complete` flipped, and a closing `BOOKMARK`
//! with the revision and fingerprint it brings the list to. Revisions count
//! batches of this process: a `resource_version` names the process
//! (a random instance tag) and the revision, so another replica's never
//! reads as one of ours.

use crate::live::LiveView;
use crate::metrics as m;
use bytes::Bytes;
use mcs_api::{Bookmark, ErrorBody, ErrorCode, WatchEvent};
use mcs_core::SectionKind;
use mcs_core::fingerprint::ItemDigest;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::broadcast;

/// Batches kept per section to resume from: a watcher that reconnects
/// within this many changes of its last bookmark gets only what it missed.
pub const HISTORY: usize = 1024;

/// Bytes of batches kept per section at most, whatever their number: a
/// full re-read that replaces a large section is one large batch.
pub const HISTORY_BYTES: usize = 64 << 20;

/// Batches a watcher may fall behind the newest before it is disconnected
/// with an `ERROR` event: the shared buffer's length, the same for all, so
/// a slow watcher costs memory for no one.
pub const LAG: usize = 256;

/// One change of a section as sent: its events and closing bookmark.
#[derive(Debug)]
pub struct Batch {
    /// The revision it brings the section to.
    pub revision: u64,
    /// The encoded events, newline-terminated.
    pub bytes: Bytes,
}

/// Where a new stream starts.
#[derive(Debug, Default)]
pub struct Resume<'a> {
    /// The client's `resource_version`, if any.
    pub resource_version: Option<&'a str>,
    /// Fingerprints the client holds the list of (from `If-None-Match`):
    /// if the section's is one of them, the stream starts from now.
    pub fingerprints: &'a [String],
}

/// A `resource_version` neither in the history nor another name of the
/// section's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired;

/// A started stream: what to send first, then every later batch.
#[derive(Debug)]
pub struct Subscription {
    /// The whole list as `ADDED` events, or the batches missed since the
    /// client's revision; then a bookmark.
    pub first: Bytes,
    /// Later batches.
    pub batches: broadcast::Receiver<Arc<Batch>>,
}

/// The journals of every section of one process.
#[derive(Debug)]
pub struct Journals {
    instance: u64,
    journals: [Journal; SectionKind::ALL.len()],
    running: AtomicBool,
}

impl Default for Journals {
    fn default() -> Self {
        // A random tag per process, from the standard library's per-process
        // hash keys: no clock, no dependency.
        let instance = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Self::with_instance(instance)
    }
}

impl Journals {
    fn with_instance(instance: u64) -> Self {
        Self {
            instance,
            journals: SectionKind::ALL.map(Journal::new),
            running: AtomicBool::new(false),
        }
    }

    fn journal(&self, section: SectionKind) -> &Journal {
        &self.journals[section.index()]
    }

    /// Starts a stream of `section` from `resume`: with a revision of the
    /// history, the batches after it; with a fingerprint the section has,
    /// nothing missed; with neither a revision, the whole list. A revision
    /// out of the history (older, or another process's) is [`Expired`]
    /// unless the fingerprint says the client is current.
    ///
    /// Starts the task that keeps journals up to date, on first use.
    pub fn subscribe(
        self: &Arc<Self>,
        view: &Arc<LiveView>,
        section: SectionKind,
        resume: &Resume<'_>,
    ) -> Result<Subscription, Expired> {
        let journals = self;
        journals.start(view);
        view.expire_due();
        let journal = journals.journal(section);
        journal.active.store(true, Ordering::SeqCst);
        let mut state = journal.sync(view, journals.instance);
        let revision = resume.resource_version.and_then(|rv| parse_revision(rv, journals.instance));
        let first = match revision {
            Some(after) if state.holds_since(after) => state.since(after, journals.instance),
            _ if resume.fingerprints.iter().any(|f| f == state.fingerprint.as_str()) => {
                Bytes::from(state.bookmark(journals.instance))
            }
            _ if resume.resource_version.is_some() => return Err(Expired),
            _ => state.snapshot(journals.instance),
        };
        let batches = journal.sender.subscribe();
        drop(state);
        Ok(Subscription { first, batches })
    }

    /// Brings every journal that has been streamed from up to date with
    /// the view, expiring due leases first as a list read does.
    pub fn sync(&self, view: &LiveView) {
        view.expire_due();
        for journal in self.journals.iter().filter(|j| j.active.load(Ordering::SeqCst)) {
            drop(journal.sync(view, self.instance));
        }
    }

    /// Spawns, once, the task that syncs journals on every change of the
    /// view; it ends with the view or the journals.
    fn start(self: &Arc<Self>, view: &Arc<LiveView>) {
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak: Weak<LiveView> = Arc::downgrade(view);
        let journals: Weak<Journals> = Arc::downgrade(self);
        let mut changes = view.subscribe();
        tokio::spawn(async move {
            loop {
                // Marked seen before the look, so a change during it is
                // looked at again.
                changes.borrow_and_update();
                let (Some(view), Some(journals)) = (weak.upgrade(), journals.upgrade()) else {
                    return;
                };
                journals.sync(&view);
                drop((view, journals));
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The `ERROR` event that ends the stream of a watcher that fell more than
/// [`LAG`] batches behind.
pub fn lagged_event() -> Bytes {
    metrics::counter!(m::WATCH_LAGGED).increment(1);
    let body = ErrorBody::new(
        ErrorCode::Expired,
        format!(
            "this watcher fell more than {LAG} changes behind; resume from the last bookmark \
             or list again"
        ),
    );
    Bytes::from(encode(&WatchEvent::<()>::Error { object: body }))
}

/// The journal of one section.
#[derive(Debug)]
struct Journal {
    section: SectionKind,
    /// Set by the first stream of this section: until then, its changes
    /// cost nothing (a stream starts from the list, not from history).
    active: AtomicBool,
    state: Mutex<State>,
    sender: broadcast::Sender<Arc<Batch>>,
}

/// What a journal last saw of its section, and its history.
#[derive(Debug, Default)]
struct State {
    /// The section version and completeness last synced; `None` before
    /// the first sync.
    synced: Option<(u64, bool)>,
    revision: u64,
    fingerprint: String,
    complete: bool,
    /// Each served item's key, digest and JSON.
    items: BTreeMap<String, (ItemDigest, Bytes)>,
    history: VecDeque<Arc<Batch>>,
    /// The bytes of `history`'s batches.
    history_bytes: usize,
    /// The whole list as events, at a revision.
    snapshot: Option<(u64, Bytes)>,
}

impl Journal {
    fn new(section: SectionKind) -> Self {
        Self {
            section,
            active: AtomicBool::new(false),
            state: Mutex::default(),
            sender: broadcast::channel(LAG).0,
        }
    }

    /// The state, synced with `view`: if the section changed since the last
    /// look, its events are encoded once, kept and broadcast.
    fn sync(&self, view: &LiveView, instance: u64) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let complete = view.is_complete();
        let read = view.read();
        let version = self.section.version(&read);
        if state.synced == Some((version, complete)) {
            return state;
        }
        let first = state.synced.is_none();
        let mut events = Vec::new();
        if state.synced.map(|(v, _)| v) != Some(version) {
            let served = self.section.of(&read);
            let known = &state.items;
            let items = served
                .items(&mut |key, digest| known.get(key).is_none_or(|(old, _)| old != digest));
            state.fingerprint = served.fingerprint();
            drop(read);
            let mut old = std::mem::take(&mut state.items);
            for item in items {
                let previous = old.remove(&item.key);
                let entry = match (item.json, previous) {
                    (Some(json), previous) => {
                        let json = Bytes::from(json);
                        let kind = if previous.is_some() { "MODIFIED" } else { "ADDED" };
                        push_event(&mut events, kind, &item.key, &json);
                        (item.digest, json)
                    }
                    (None, Some(unchanged)) => unchanged,
                    // Asked for every key not known: not reached.
                    (None, None) => continue,
                };
                state.items.insert(item.key, entry);
            }
            for (key, (_, json)) in old {
                push_event(&mut events, "DELETED", &key, &json);
            }
        } else {
            drop(read);
        }
        if state.complete != complete && !first {
            events.extend_from_slice(&encode(&WatchEvent::<()>::Completeness { complete }));
        }
        state.complete = complete;
        state.synced = Some((version, complete));
        if first {
            // Nothing was sent before: the first state is revision 1, sent
            // to each stream as its snapshot.
            state.revision = 1;
            return state;
        }
        if events.is_empty() {
            // Changed and changed back between two looks.
            return state;
        }
        state.revision += 1;
        events.extend_from_slice(&state.bookmark(instance));
        let batch = Arc::new(Batch { revision: state.revision, bytes: Bytes::from(events) });
        state.keep(batch.clone());
        state.snapshot = None;
        // No receiver: nobody watches now; the history keeps it.
        let _ = self.sender.send(batch);
        state
    }
}

impl State {
    /// Adds `batch` to the history, dropping the oldest past [`HISTORY`]
    /// batches or [`HISTORY_BYTES`] (the newest is always kept).
    fn keep(&mut self, batch: Arc<Batch>) {
        self.history_bytes += batch.bytes.len();
        self.history.push_back(batch);
        while self.history.len() > HISTORY
            || (self.history_bytes > HISTORY_BYTES && self.history.len() > 1)
        {
            if let Some(oldest) = self.history.pop_front() {
                self.history_bytes -= oldest.bytes.len();
            }
        }
    }

    /// Whether the history holds every batch after `revision`.
    fn holds_since(&self, revision: u64) -> bool {
        let oldest = self.history.front().map_or(self.revision + 1, |b| b.revision);
        revision <= self.revision && revision + 1 >= oldest
    }

    /// The batches after `revision` (a bookmark if there are none).
    fn since(&self, revision: u64, instance: u64) -> Bytes {
        let missed: Vec<&Arc<Batch>> =
            self.history.iter().filter(|b| b.revision > revision).collect();
        match missed.as_slice() {
            [] => Bytes::from(self.bookmark(instance)),
            [one] => one.bytes.clone(),
            many => {
                Bytes::from(many.iter().flat_map(|b| b.bytes.iter().copied()).collect::<Vec<u8>>())
            }
        }
    }

    /// The whole list as `ADDED` events and a bookmark, encoded once per
    /// revision.
    fn snapshot(&mut self, instance: u64) -> Bytes {
        if let Some((revision, bytes)) = &self.snapshot
            && *revision == self.revision
        {
            return bytes.clone();
        }
        let size: usize =
            self.items.iter().map(|(key, (_, json))| key.len() + json.len() + 48).sum();
        let mut out = Vec::with_capacity(size + 160);
        for (key, (_, json)) in &self.items {
            push_event(&mut out, "ADDED", key, json);
        }
        out.extend_from_slice(&self.bookmark(instance));
        let bytes = Bytes::from(out);
        self.snapshot = Some((self.revision, bytes.clone()));
        bytes
    }

    fn bookmark(&self, instance: u64) -> Vec<u8> {
        encode(&WatchEvent::<()>::Bookmark(Bookmark {
            resource_version: format_revision(instance, self.revision),
            fingerprint: self.fingerprint.clone(),
            complete: self.complete,
        }))
    }
}

/// `{"type":"<kind>","key":"<key>","object":<json>}` and a newline.
fn push_event(out: &mut Vec<u8>, kind: &str, key: &str, object: &[u8]) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"key\":");
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.extend_from_slice(b",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
}

fn encode(event: &WatchEvent<()>) -> Vec<u8> {
    // Serializing plain data types into a Vec cannot fail.
    let mut out = serde_json::to_vec(event).unwrap_or_default();
    out.push(b'\n');
    out
}

/// `<instance, 16 hex digits>-<revision>`.
fn format_revision(instance: u64, revision: u64) -> String {
    format!("{instance:016x}-{revision}")
}

/// The revision `resource_version` names, if it is one of this process's.
fn parse_revision(resource_version: &str, instance: u64) -> Option<u64> {
    let (tag, revision) = resource_version.split_once('-')?;
    (u64::from_str_radix(tag, 16).ok()? == instance).then_some(())?;
    revision.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_read_back_only_by_their_process() {
        let rv = format_revision(0xabc, 42);
        assert_eq!(rv, "0000000000000abc-42");
        assert_eq!(parse_revision(&rv, 0xabc), Some(42));
        assert_eq!(parse_revision(&rv, 0xabd), None);
        for bad in ["", "-", "abc", "0000000000000abc-", "0000000000000abc-x", "zz-1"] {
            assert_eq!(parse_revision(bad, 0xabc), None, "{bad}");
        }
        assert_ne!(Journals::default().instance, Journals::default().instance);
    }

    #[test]
    fn the_history_holds_what_followed_a_revision_it_still_has() {
        let mut state = State { revision: 5, ..State::default() };
        assert!(state.holds_since(5), "nothing missed");
        assert!(!state.holds_since(4), "an empty history holds no batch");
        assert!(!state.holds_since(6), "a revision not reached yet");
        for revision in 3..=5 {
            state.keep(Arc::new(Batch { revision, bytes: Bytes::from(format!("{revision}\n")) }));
        }
        assert!(state.holds_since(2));
        assert!(!state.holds_since(1));
        assert_eq!(state.since(3, 1), Bytes::from("4\n5\n"));
        assert_eq!(state.since(4, 1), Bytes::from("5\n"));
    }

    #[test]
    fn the_history_is_bounded_in_batches_and_in_bytes() {
        let mut state = State::default();
        for revision in 1..=HISTORY as u64 + 2 {
            state.keep(Arc::new(Batch { revision, bytes: Bytes::from_static(b"x\n") }));
        }
        assert_eq!(state.history.len(), HISTORY);
        assert_eq!(state.history.front().unwrap().revision, 3);
        assert_eq!(state.history_bytes, 2 * HISTORY);
        let big = Bytes::from(vec![b'y'; HISTORY_BYTES / 2 + 1]);
        for revision in 2000..2003 {
            state.keep(Arc::new(Batch { revision, bytes: big.clone() }));
        }
        assert_eq!(state.history.len(), 1, "two halves and more are over the bound");
        assert_eq!(state.history_bytes, big.len());
        let huge = Bytes::from(vec![b'z'; HISTORY_BYTES + 1]);
        state.keep(Arc::new(Batch { revision: 3000, bytes: huge }));
        assert_eq!(state.history.len(), 1, "the newest stays, whatever its size");
        assert_eq!(state.history.back().unwrap().revision, 3000);
    }
}
