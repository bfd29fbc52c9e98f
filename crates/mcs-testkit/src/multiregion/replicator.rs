//! A stand-in for DynamoDB global-table replication between the regional
//! tables of one moto_server, with faults it can inject.
//!
//! ```text
//!  region A table ── stream ──► tailer(A) ──┬─► link A→B ─► conditional PutItem ─► region B table
//!                                           └─► link A→C ─► …
//!  (one tailer per region; one link, a queue and a delivery task, per ordered pair)
//! ```
//!
//! A tailer reads its region's stream from TRIM_HORIZON (DescribeTable →
//! LatestStreamArn, DescribeStream → shards, GetShardIterator, GetRecords
//! every 50 to 100 ms: [`POLL_INTERVAL`]) and hands every INSERT or MODIFY image whose
//! sort key names its own region as origin to the links out of it. Items
//! replicated into a region show up in its stream too; their origin is
//! another region, so they are never sent on (no loops). REMOVE events are
//! counted and ignored: nothing on the registry's write path deletes items.
//!
//! A link applies a delivery with a PutItem conditioned on the stored copy
//! being older in the item's commit order (see `put_if_newer`), so a delivery that lost a
//! race with a newer one (reordering, redelivery) never overwrites it: last
//! writer wins per item, as in a global table. Since the outcome does not
//! depend on the order of application, a link applies up to
//! `MAX_IN_FLIGHT` deliveries at once.
//!
//! Faults ([`Faults`]): per-link delay, jitter (deliveries overtake each
//! other), shuffled batches, loss with redelivery, held links, partitions
//! and a full stall. Random choices come from a seeded generator per link,
//! so a schedule's decisions repeat for a given seed (not its timing).

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{
    AttributeValue as StreamValue, OperationType, ShardIteratorType,
};
use mcs_store::dynamo::raw;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// How long a tailer waits between polls of its stream: the shortest
/// after a poll that found records, doubling up to the longest while
/// nothing comes. moto_server answers one request at a time for every
/// registry and tailer, so polls are spaced even when busy (one GetRecords
/// returns up to 1,000 records).
pub const POLL_INTERVAL: (Duration, Duration) =
    (Duration::from_millis(50), Duration::from_millis(100));

/// Most deliveries a link has in flight at once. Last writer wins per item
/// whatever the order of application, so they need not be sequential.
const MAX_IN_FLIGHT: usize = 4;

/// After this many losses a delivery goes through: loss delays, never
/// drops for good.
const MAX_LOSSES: u32 = 8;

/// Wait before retrying a delivery that failed (not refused) at the target.
const RETRY_AFTER: Duration = Duration::from_millis(50);

use crate::dynamo::{client as dynamodb_client, streams_client};

mod link;
mod stream;

use link::deliver;
use stream::{open_stream, tail};

/// The faults of one link (an ordered pair of regions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkFaults {
    /// Every delivery waits this long after the tailer read it.
    pub delay: Duration,
    /// …and a further random `0..=jitter`, so deliveries overtake each other.
    pub jitter: Duration,
    /// Deliveries due together are applied in a random order.
    pub shuffle: bool,
    /// Chance (0 to 1) that a delivery attempt is dropped; a dropped one is
    /// delivered again after `redeliver_after`.
    pub loss: f64,
    /// When a lost delivery is tried again.
    pub redeliver_after: Duration,
    /// Deliveries queue until the link is released.
    pub held: bool,
}

/// Counters of a replicator's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Images of a region's own items read from its stream.
    pub read: u64,
    /// Deliveries written into a target table.
    pub applied: u64,
    /// Deliveries refused because the target held a newer copy.
    pub superseded: u64,
    /// Delivery attempts dropped (and queued for redelivery).
    pub lost: u64,
    /// Delivery attempts that failed at the target and were retried.
    pub errors: u64,
    /// Stream images of items replicated into a region, not sent on.
    pub foreign: u64,
    /// REMOVE events ignored.
    pub removes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    read: AtomicU64,
    applied: AtomicU64,
    superseded: AtomicU64,
    lost: AtomicU64,
    errors: AtomicU64,
    foreign: AtomicU64,
    removes: AtomicU64,
}

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: Duration) -> Duration {
        let ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 { Duration::ZERO } else { Duration::from_millis(self.next() % (ms + 1)) }
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = usize::try_from(self.next() % (i as u64 + 1)).unwrap_or(0);
            items.swap(i, j);
        }
    }
}

/// One item on its way over a link.
#[derive(Debug)]
struct Delivery {
    item: raw::Item,
    losses: u32,
}

#[derive(Debug)]
struct LinkState {
    faults: LinkFaults,
    rng: Rng,
    /// Deliveries by `(due, sequence)`.
    queue: BTreeMap<(Instant, u64), Delivery>,
}

#[derive(Debug)]
struct Link {
    from: String,
    to: String,
    state: Mutex<LinkState>,
    wake: Notify,
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug)]
struct Shared {
    table: String,
    links: Vec<Arc<Link>>,
    /// Sides of the current partition; empty when healed.
    partition: Mutex<Vec<BTreeSet<String>>>,
    stalled: AtomicBool,
    counters: Counters,
    /// Deliveries read but not yet applied or superseded.
    pending: AtomicU64,
    /// Per region: poll rounds that found no new record.
    empty_rounds: HashMap<String, AtomicU64>,
    sequence: AtomicU64,
}

impl Shared {
    fn cut(&self, from: &str, to: &str) -> bool {
        if self.stalled.load(Ordering::SeqCst) {
            return true;
        }
        let sides = self.partition.lock().unwrap_or_else(|p| p.into_inner());
        let side_of = |r: &str| sides.iter().position(|s| s.contains(r));
        match (side_of(from), side_of(to)) {
            _ if sides.is_empty() => false,
            (Some(a), Some(b)) => a != b,
            // A region on no side is cut from every other.
            _ => true,
        }
    }

    fn wake_all(&self) {
        for link in &self.links {
            link.wake.notify_one();
        }
    }
}

/// The control handle of a running replicator's faults. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

impl Faults {
    /// Changes the faults of the link `from → to`.
    pub fn update(&self, from: &str, to: &str, change: impl FnOnce(&mut LinkFaults)) {
        let link = self
            .shared
            .links
            .iter()
            .find(|l| l.from == from && l.to == to)
            .unwrap_or_else(|| panic!("no link {from} -> {to}"));
        change(&mut link.lock().faults);
        link.wake.notify_one();
    }

    /// Sets the faults of every link.
    pub fn set_all(&self, faults: &LinkFaults) {
        for link in &self.shared.links {
            link.lock().faults = faults.clone();
            link.wake.notify_one();
        }
    }

    /// Holds the link `from → to`: its deliveries queue until released.
    pub fn hold(&self, from: &str, to: &str) {
        self.update(from, to, |f| f.held = true);
    }

    /// Releases a held link.
    pub fn release(&self, from: &str, to: &str) {
        self.update(from, to, |f| f.held = false);
    }

    /// Cuts the regions into `sides`: nothing crosses between two sides
    /// until [`Faults::heal`]; a region named on no side is cut from all.
    pub fn partition(&self, sides: &[&[&str]]) {
        let sides =
            sides.iter().map(|s| s.iter().map(|r| (*r).to_owned()).collect::<BTreeSet<_>>());
        *self.shared.partition.lock().unwrap_or_else(|p| p.into_inner()) = sides.collect();
        self.shared.wake_all();
    }

    /// Ends the partition.
    pub fn heal(&self) {
        self.shared.partition.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.shared.wake_all();
    }

    /// Stops every link.
    pub fn stall(&self) {
        self.shared.stalled.store(true, Ordering::SeqCst);
        self.shared.wake_all();
    }

    /// Ends a stall.
    pub fn resume(&self) {
        self.shared.stalled.store(false, Ordering::SeqCst);
        self.shared.wake_all();
    }

    /// Deliveries read but not yet applied.
    pub fn pending(&self) -> u64 {
        self.shared.pending.load(Ordering::SeqCst)
    }
}

/// A running replicator; its tasks end when it is dropped.
#[derive(Debug)]
pub struct Replicator {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Replicator {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Replicator {
    /// Replicates `table` between every pair of `regions` of the server at
    /// `endpoint`, without faults; `seed` seeds each link's randomness.
    pub async fn start(endpoint: &str, table: &str, regions: &[&str], seed: u64) -> Self {
        let mut links = Vec::new();
        for (i, from) in regions.iter().enumerate() {
            for (j, to) in regions.iter().enumerate() {
                if i == j {
                    continue;
                }
                let link_seed = seed ^ ((i as u64) << 32 | j as u64).wrapping_mul(0x9E37_79B9);
                links.push(Arc::new(Link {
                    from: (*from).to_owned(),
                    to: (*to).to_owned(),
                    state: Mutex::new(LinkState {
                        faults: LinkFaults::default(),
                        rng: Rng(link_seed),
                        queue: BTreeMap::new(),
                    }),
                    wake: Notify::new(),
                }));
            }
        }
        let shared = Arc::new(Shared {
            table: table.to_owned(),
            links,
            partition: Mutex::new(Vec::new()),
            stalled: AtomicBool::new(false),
            counters: Counters::default(),
            pending: AtomicU64::new(0),
            empty_rounds: regions.iter().map(|r| ((*r).to_owned(), AtomicU64::new(0))).collect(),
            sequence: AtomicU64::new(0),
        });
        let mut tasks = Vec::new();
        for region in regions {
            let shards = open_stream(endpoint, table, region).await;
            tasks.push(tokio::spawn(tail(shared.clone(), (*region).to_owned(), shards)));
        }
        for link in &shared.links {
            let target = dynamodb_client(endpoint, &link.to);
            tasks.push(tokio::spawn(deliver(shared.clone(), link.clone(), target)));
        }
        Self { shared, tasks }
    }

    /// The fault controls.
    pub fn faults(&self) -> Faults {
        Faults { shared: self.shared.clone() }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Stats {
            read: get(&c.read),
            applied: get(&c.applied),
            superseded: get(&c.superseded),
            lost: get(&c.lost),
            errors: get(&c.errors),
            foreign: get(&c.foreign),
            removes: get(&c.removes),
        }
    }

    /// Waits until everything written so far has been delivered: every
    /// tailer has found its stream drained by a poll begun after this call,
    /// and no delivery is pending. Held or cut links never drain.
    pub async fn quiesce(&self, within: Duration) {
        let started = Instant::now();
        let marks: HashMap<&String, u64> =
            self.shared.empty_rounds.iter().map(|(r, n)| (r, n.load(Ordering::SeqCst))).collect();
        loop {
            // The first empty round after the mark may have begun before
            // it; the second began after it.
            let drained = self
                .shared
                .empty_rounds
                .iter()
                .all(|(r, n)| n.load(Ordering::SeqCst) >= marks[r] + 2);
            if drained && self.shared.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            assert!(
                started.elapsed() < within,
                "replication not drained within {within:?}: {} pending, {:?}",
                self.shared.pending.load(Ordering::SeqCst),
                self.stats()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::link::put_if_newer;
    use super::*;

    #[tokio::test]
    async fn an_older_copy_never_overwrites_a_newer_one() {
        let Some(endpoint) = crate::dynamo::dynamodb_endpoint() else { return };
        let region = "eu-west-1";
        let table = super::super::create_table(&endpoint, "lww", &[region]).await;
        let client = dynamodb_client(&endpoint, region);
        let copy = |changed: u64, generation: u64, writer: &str, note: &str| -> raw::Item {
            let n = |v: u64| AttributeValue::N(v.to_string());
            let s = |v: &str| AttributeValue::S(v.to_owned());
            HashMap::from([
                (raw::PK.to_owned(), s("POOL#x")),
                (raw::SK.to_owned(), s("#@us-east-1")),
                (raw::CHANGED_AT_MS.to_owned(), n(changed)),
                (raw::GEN.to_owned(), n(generation)),
                (raw::WRITER.to_owned(), s(writer)),
                ("note".to_owned(), s(note)),
            ])
        };
        let cases = [
            (copy(200, 5, "w", "first"), true),
            (copy(100, 9, "w", "higher gen from a clock behind"), true),
            (copy(300, 4, "w", "lower gen from a clock ahead"), false),
            (copy(100, 9, "w", "the same again"), false),
            (copy(100, 9, "x", "same gen, higher writer"), true),
            (copy(150, 9, "x", "same version written later"), true),
            (copy(120, 9, "x", "same version written earlier"), false),
        ];
        for (item, want) in &cases {
            let got = put_if_newer(&client, &table, item).await.unwrap();
            assert_eq!(got, *want, "{:?}", item["note"]);
        }
        let stored = client
            .get_item()
            .table_name(&table)
            .key(raw::PK, AttributeValue::S("POOL#x".into()))
            .key(raw::SK, AttributeValue::S("#@us-east-1".into()))
            .send()
            .await
            .unwrap();
        assert_eq!(
            stored.item.unwrap()["note"],
            AttributeValue::S("same version written later".into())
        );
    }

    #[test]
    fn the_generator_is_seeded_and_shuffles_everything() {
        let (mut a, mut b) = (Rng(7), Rng(7));
        assert_eq!((a.next(), a.next()), (b.next(), b.next()));
        let mut items: Vec<u32> = (0..50).collect();
        a.shuffle(&mut items);
        assert_ne!(items, (0..50).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..50).collect::<Vec<_>>());
        assert!((0..1000).map(|_| a.unit()).all(|u| (0.0..1.0).contains(&u)));
        assert!((0..1000).all(|_| a.up_to(Duration::from_millis(5)) <= Duration::from_millis(5)));
    }
}
