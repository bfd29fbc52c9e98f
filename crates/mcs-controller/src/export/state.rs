//! What the export reconciler remembers between reconciles, and the
//! decisions made from it (pure, so tested without an API server): what
//! was sent, the registry's view of this cluster's exports, generations.

use super::build::content_hash;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as Shown;
use mcs_api::{Condition, Export, ExportList, ExportSpec, Label};
use mcs_client::Changes;
use std::collections::HashMap;

/// A ServiceExport's namespace and name.
pub type Id = (String, String);

/// One export as last accepted by the registry.
#[derive(Debug, Clone)]
struct Sent {
    hash: String,
    /// The registration count when it was sent.
    registration: u64,
    /// The resync epoch it was last sent or checked in.
    epoch: u64,
    /// The conditions the registry answered with.
    conditions: Vec<Condition>,
}

/// This cluster's exports in the registry's view (`GET /v1/exports`):
/// content hash, conditions and content of each (the content, so that the
/// next list's unchanged exports are not hashed again).
#[derive(Debug, Clone, Default)]
struct View {
    complete: bool,
    exports: HashMap<Id, Held>,
}

/// One export in the view: its content hash, conditions and content.
type Held = (String, Vec<Condition>, ExportSpec);

/// The id of the ServiceExport behind a registry export.
fn id_of(e: &Export) -> Id {
    (e.namespace.to_string(), e.name.to_string())
}

/// The view's entry of export `e`, its hash taken from `old`'s entry when
/// the content is the same (hashing is the costly part).
fn held(old: Option<&View>, e: Export) -> (Id, Held) {
    let id = id_of(&e);
    let hash = match old.and_then(|v| v.exports.get(&id)) {
        Some((hash, _, spec)) if *spec == e.spec => hash.clone(),
        _ => content_hash(&e.spec),
    };
    (id, (hash, e.conditions, e.spec))
}

/// A write of this controller that the ServiceExport store may not show
/// yet: what was written over which version of the object.
#[derive(Debug, Clone)]
struct Written<T> {
    /// The `resourceVersion` of the object the write was based on.
    over: String,
    what: T,
}

/// The export reconciler's memory.
#[derive(Debug, Default)]
pub struct State {
    sent: HashMap<Id, Sent>,
    /// `None` until the first list.
    view: Option<View>,
    /// Bumped by each periodic resync.
    epoch: u64,
    /// The last generation used, in the registry's units.
    last_generation: u64,
    /// Consecutive failures per export, for the backoff.
    failures: HashMap<Id, u32>,
    /// The conditions of each export (type, status), for the gauge.
    statuses: HashMap<Id, Vec<(String, String)>>,
    /// How many exports show each (type, status): the gauge, kept as
    /// `statuses` changes rather than counted over every export.
    counts: HashMap<(String, String), usize>,
    /// The last status conditions written to each ServiceExport.
    status_written: HashMap<Id, Written<Vec<Shown>>>,
    /// Whether the controller's ServiceExport store has been filled (its
    /// first reconcile ran): until then no export is an orphan.
    synced: bool,
}

impl State {
    /// A periodic resync begins: each sent export is checked against the
    /// registry's copy once more.
    pub fn next_epoch(&mut self) {
        self.epoch += 1;
    }

    /// Whether the export of `id` with content `hash` must be (re-)sent:
    /// never sent (or its last send failed), new content, a re-registration
    /// since (`registration` is the current count), or, once per resync
    /// epoch, a registry copy that is missing or differs (or no complete
    /// view to tell).
    pub fn needs_send(&mut self, id: &Id, hash: &str, registration: u64) -> bool {
        let epoch = self.epoch;
        let drifted = match &self.view {
            Some(v) if v.complete => v.exports.get(id).is_none_or(|(h, _, _)| h != hash),
            _ => true,
        };
        match self.sent.get_mut(id) {
            None => true,
            Some(s) if s.hash != hash || s.registration != registration => true,
            Some(s) if s.epoch != epoch => {
                s.epoch = epoch;
                drifted
            }
            Some(_) => false,
        }
    }

    /// Records an export the registry accepted.
    pub fn sent(&mut self, id: Id, hash: String, registration: u64, conditions: Vec<Condition>) {
        let epoch = self.epoch;
        self.sent.insert(id, Sent { hash, registration, epoch, conditions });
    }

    /// Forgets what was sent for `id` (a failed send, a withdrawal): the
    /// next reconcile sends again.
    pub fn forget(&mut self, id: &Id) {
        self.sent.remove(id);
    }

    /// Forgets everything of a deleted ServiceExport.
    pub fn remove(&mut self, id: &Id) {
        self.sent.remove(id);
        self.failures.remove(id);
        self.shown(id.clone(), Vec::new());
        self.statuses.remove(id);
        self.status_written.remove(id);
    }

    /// Whether the registry may hold this cluster's export of `id` (so a
    /// withdrawal is needed): sent, in the view, or no complete view.
    pub fn registry_may_hold(&self, id: &Id) -> bool {
        self.sent.contains_key(id)
            || match &self.view {
                Some(v) if v.complete => v.exports.contains_key(id),
                _ => true,
            }
    }

    /// The registry's conditions of a sent export: its view's once that
    /// holds what was sent, else the reply to the send.
    pub fn registry_conditions(&self, id: &Id) -> Vec<Condition> {
        let Some(sent) = self.sent.get(id) else { return Vec::new() };
        conditions_in(self.view.as_ref().and_then(|v| v.exports.get(id)), sent).to_vec()
    }

    /// Takes in a registry list; the exports of `cluster` that need a
    /// reconcile, sorted: those sent whose conditions as
    /// [`registry_conditions`](Self::registry_conditions) gives them
    /// changed (a view that only confirms what a send's reply said, or
    /// that changes another export, changes nothing of theirs), and those
    /// not sent (a send that failed, or timed out but may have landed)
    /// whose copy in the registry appeared or changed: the registry
    /// answers again, so their send is tried again without waiting out
    /// its backoff.
    pub fn take_view(&mut self, cluster: &Label, list: ExportList) -> Vec<Id> {
        let old = self.view.take();
        let exports: HashMap<Id, Held> = list
            .exports
            .into_iter()
            .filter(|e| e.cluster_id == *cluster)
            .map(|e| held(old.as_ref(), e))
            .collect();
        let mut ids: Vec<Id> = self.sent.keys().chain(exports.keys()).cloned().collect();
        ids.sort();
        ids.dedup();
        let was = |id: &Id| old.as_ref().and_then(|v| v.exports.get(id));
        let changed =
            ids.into_iter().filter(|id| self.reconcile_for(id, was(id), exports.get(id))).collect();
        self.view = Some(View { complete: list.complete, exports });
        changed
    }

    /// Takes in what changed in the registry's list since the last one
    /// taken (a complete one; [`mcs_client::Update`]) as
    /// [`take_view`](Self::take_view) takes a list, looking at the exports
    /// changed only.
    pub fn take_changes(&mut self, cluster: &Label, changes: Changes<Export>) -> Vec<Id> {
        // Changes come after a list; without one, what they make is no
        // complete view.
        let listed = self.view.is_some();
        let mut view = self.view.take().unwrap_or_default();
        let ours = |e: &Export| e.cluster_id == *cluster;
        let mut touched: Vec<(Id, Option<Held>)> = Vec::new();
        for e in changes.upserted.into_iter().filter(ours) {
            let (id, now) = held(Some(&view), e);
            touched.push((id.clone(), view.exports.insert(id, now)));
        }
        for e in changes.deleted.iter().filter(|e| ours(e)) {
            let id = id_of(e);
            let was = view.exports.remove(&id);
            touched.push((id, was));
        }
        view.complete = changes.complete && listed;
        let mut changed: Vec<Id> = touched
            .into_iter()
            .filter(|(id, was)| self.reconcile_for(id, was.as_ref(), view.exports.get(id)))
            .map(|(id, _)| id)
            .collect();
        self.view = Some(view);
        changed.sort();
        changed.dedup();
        changed
    }

    /// Whether the export `id` needs a reconcile for its entry in the
    /// registry's view turning from `old` to `new` (see
    /// [`take_view`](Self::take_view)).
    fn reconcile_for(&self, id: &Id, old: Option<&Held>, new: Option<&Held>) -> bool {
        match self.sent.get(id) {
            Some(sent) => conditions_in(old, sent) != conditions_in(new, sent),
            None => new.is_some() && old != new,
        }
    }

    /// The ServiceExport store is filled: the controller reconciles only
    /// once it is.
    pub fn synced(&mut self) {
        self.synced = true;
    }

    /// This cluster's exports in the (complete) view for which `exists`
    /// finds no ServiceExport (in a filled store): deleted while no
    /// controller ran, or while a tombstone's withdrawal had not yet run
    /// when a re-list dropped it (sent, then).
    pub fn orphans(&self, exists: impl Fn(&Id) -> bool) -> Vec<Id> {
        if !self.synced {
            return Vec::new();
        }
        let Some(view) = self.view.as_ref().filter(|v| v.complete) else { return Vec::new() };
        let mut orphans: Vec<Id> = view.exports.keys().filter(|id| !exists(id)).cloned().collect();
        orphans.sort();
        orphans
    }

    /// `max(now_ms << 16, last + 1)`: a generation in the registry's
    /// units (docs/api.md), above every one used or seen.
    pub fn next_generation(&mut self, now_ms: u64) -> u64 {
        self.last_generation = (now_ms << 16).max(self.last_generation + 1);
        self.last_generation
    }

    /// A generation the registry has stored (a `409 stale_generation`):
    /// the next one goes above it.
    pub fn observe_generation(&mut self, stored: u64) {
        self.last_generation = self.last_generation.max(stored);
    }

    /// One more consecutive failure of `id`; how many now.
    pub fn failed(&mut self, id: &Id) -> u32 {
        let n = self.failures.entry(id.clone()).or_default();
        *n += 1;
        *n
    }

    /// `id` reconciled without error.
    pub fn succeeded(&mut self, id: &Id) {
        self.failures.remove(id);
    }

    /// Records the conditions shown on `id`.
    pub fn shown(&mut self, id: Id, conditions: Vec<(String, String)>) {
        for c in &conditions {
            *self.counts.entry(c.clone()).or_default() += 1;
        }
        for c in self.statuses.insert(id, conditions).into_iter().flatten() {
            if let Some(n) = self.counts.get_mut(&c) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// How many exports show `condition` with `status`.
    pub fn count(&self, condition: &str, status: &str) -> usize {
        self.counts.get(&(condition.to_owned(), status.to_owned())).copied().unwrap_or(0)
    }

    /// The conditions the ServiceExport `id` shows, `stored` being those
    /// of its copy in the store at `resource_version`: `stored`, unless
    /// this controller wrote others over that very version, which the
    /// store has not caught up with yet (a reconcile woken before the
    /// watch event of its own write): then those written, so that the same
    /// write is not made twice.
    pub fn status_shown<'a>(
        &'a mut self,
        id: &Id,
        resource_version: Option<&str>,
        stored: &'a [Shown],
    ) -> &'a [Shown] {
        let current =
            self.status_written.get(id).map(|w| Some(w.over.as_str()) == resource_version);
        if current == Some(false) {
            // The store moved past the write: it is the truth again.
            self.status_written.remove(id);
        }
        match self.status_written.get(id) {
            Some(w) => &w.what,
            None => stored,
        }
    }

    /// Records the status conditions written to `id` over its version
    /// `resource_version`.
    pub fn status_written(&mut self, id: Id, resource_version: Option<String>, what: Vec<Shown>) {
        match resource_version {
            Some(over) => self.status_written.insert(id, Written { over, what }),
            None => self.status_written.remove(&id),
        };
    }
}

/// The registry's conditions of an export `sent` as its entry in the
/// view, `held`, gives them (see [`State::registry_conditions`]).
fn conditions_in<'a>(held: Option<&'a Held>, sent: &'a Sent) -> &'a [Condition] {
    match held {
        Some((hash, conditions, _)) if *hash == sent.hash => conditions,
        _ => &sent.conditions,
    }
}

#[cfg(test)]
mod tests;
