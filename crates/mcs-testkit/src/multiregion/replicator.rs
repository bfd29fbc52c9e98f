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
//! [`MAX_IN_FLIGHT`] deliveries at once.
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

/// One shard's reading position.
#[derive(Debug)]
struct ShardCursor {
    iterator: Option<String>,
}

/// A region's stream, opened at TRIM_HORIZON on every shard.
#[derive(Debug)]
struct OpenStream {
    client: aws_sdk_dynamodbstreams::Client,
    region: String,
    shards: Vec<ShardCursor>,
}

async fn open_stream(endpoint: &str, table: &str, region: &str) -> OpenStream {
    let described = dynamodb_client(endpoint, region)
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap_or_else(|e| panic!("describe table {table} in {region}: {e:?}"));
    let arn = described
        .table()
        .and_then(|t| t.latest_stream_arn())
        .unwrap_or_else(|| panic!("table {table} in {region} has no stream"))
        .to_owned();
    let client = streams_client(endpoint, region);
    let stream = client
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .unwrap_or_else(|e| panic!("describe stream {arn}: {e:?}"));
    let mut shards = Vec::new();
    for shard in stream.stream_description().map(|d| d.shards()).unwrap_or_default() {
        let shard_id = shard.shard_id().unwrap_or_default();
        let iterator = client
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard_id)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap_or_else(|e| panic!("shard iterator of {shard_id} in {region}: {e:?}"));
        shards.push(ShardCursor { iterator: iterator.shard_iterator });
    }
    assert!(!shards.is_empty(), "the stream of {table} in {region} has no shard");
    OpenStream { client, region: region.to_owned(), shards }
}

/// Reads `stream` for ever, handing its region's own images to the links
/// out of it.
async fn tail(shared: Arc<Shared>, region: String, mut stream: OpenStream) {
    let (shortest, longest) = POLL_INTERVAL;
    let mut wait = shortest;
    loop {
        let mut found = 0usize;
        for shard in &mut stream.shards {
            let Some(iterator) = shard.iterator.clone() else { continue };
            let out = match stream.client.get_records().shard_iterator(iterator).send().await {
                Ok(out) => out,
                Err(e) => {
                    eprintln!("replicator: get_records in {}: {e:?}", stream.region);
                    tokio::time::sleep(RETRY_AFTER).await;
                    continue;
                }
            };
            // A closed shard (never on moto) has no next iterator.
            shard.iterator = out.next_shard_iterator;
            let records = out.records.unwrap_or_default();
            found += records.len();
            for record in records {
                route(&shared, &region, record);
            }
        }
        if found == 0 {
            shared.empty_rounds[&region].fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(longest);
        } else if found < 1_000 {
            wait = shortest;
            tokio::time::sleep(wait).await;
        }
    }
}

/// Sends one stream record of `region` on, or counts why not.
fn route(shared: &Shared, region: &str, record: aws_sdk_dynamodbstreams::types::Record) {
    let c = &shared.counters;
    match record.event_name {
        Some(OperationType::Insert | OperationType::Modify) => {}
        Some(OperationType::Remove) => {
            c.removes.fetch_add(1, Ordering::SeqCst);
            return;
        }
        other => panic!("unexpected stream event {other:?}"),
    }
    let image = record.dynamodb.and_then(|d| d.new_image).expect("INSERT/MODIFY has a new image");
    let item: raw::Item = image.into_iter().map(|(k, v)| (k, convert(v))).collect();
    match raw::origin_of(&item) {
        // Items replicated into this region: sending them on would loop.
        Some(origin) if origin != region => {
            c.foreign.fetch_add(1, Ordering::SeqCst);
            return;
        }
        Some(_) => {}
        // The schema item: each region migrates its own.
        None => return,
    }
    c.read.fetch_add(1, Ordering::SeqCst);
    let now = Instant::now();
    for link in shared.links.iter().filter(|l| l.from == region) {
        let seq = shared.sequence.fetch_add(1, Ordering::SeqCst);
        shared.pending.fetch_add(1, Ordering::SeqCst);
        let mut state = link.lock();
        let extra = state.faults.jitter;
        let due = now + state.faults.delay + state.rng.up_to(extra);
        state.queue.insert((due, seq), Delivery { item: item.clone(), losses: 0 });
        drop(state);
        link.wake.notify_one();
    }
}

/// Applies the deliveries of `link` to `target` as they fall due, unless
/// the link is held or cut.
async fn deliver(shared: Arc<Shared>, link: Arc<Link>, target: aws_sdk_dynamodb::Client) {
    loop {
        let (mut batch, wait) = {
            let mut state = link.lock();
            let now = Instant::now();
            if state.faults.held || shared.cut(&link.from, &link.to) || state.queue.is_empty() {
                (Vec::new(), None)
            } else {
                let later = state.queue.split_off(&(now, u64::MAX));
                let due = std::mem::replace(&mut state.queue, later);
                let wait = state.queue.keys().next().map(|(t, _)| *t);
                (due.into_iter().collect::<Vec<_>>(), wait)
            }
        };
        if batch.is_empty() {
            match wait {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = link.wake.notified() => {}
                    }
                }
                None => link.wake.notified().await,
            }
            continue;
        }
        let (loss, redeliver_after) = {
            let mut state = link.lock();
            if state.faults.shuffle {
                state.rng.shuffle(&mut batch);
            }
            (state.faults.loss, state.faults.redeliver_after)
        };
        let mut in_flight = JoinSet::new();
        for ((_, seq), mut delivery) in batch {
            let lost = loss > 0.0 && delivery.losses < MAX_LOSSES && link.lock().rng.unit() < loss;
            if lost {
                shared.counters.lost.fetch_add(1, Ordering::SeqCst);
                delivery.losses += 1;
                link.lock().queue.insert((Instant::now() + redeliver_after, seq), delivery);
                continue;
            }
            while in_flight.len() >= MAX_IN_FLIGHT {
                if let Some(done) = in_flight.join_next().await {
                    settle(&shared, &link, done.expect("a delivery does not panic"));
                }
            }
            let (target, table) = (target.clone(), shared.table.clone());
            in_flight.spawn(async move {
                let outcome = put_if_newer(&target, &table, &delivery.item).await;
                (seq, delivery, outcome)
            });
        }
        while let Some(done) = in_flight.join_next().await {
            settle(&shared, &link, done.expect("a delivery does not panic"));
        }
    }
}

/// Counts a finished delivery, or queues it again when it failed.
fn settle(
    shared: &Shared,
    link: &Link,
    (seq, delivery, outcome): (u64, Delivery, Result<bool, String>),
) {
    match outcome {
        Ok(applied) => {
            let c = &shared.counters;
            let counter = if applied { &c.applied } else { &c.superseded };
            counter.fetch_add(1, Ordering::SeqCst);
            shared.pending.fetch_sub(1, Ordering::SeqCst);
        }
        Err(e) => {
            eprintln!("replicator: put into {}: {e}", link.to);
            shared.counters.errors.fetch_add(1, Ordering::SeqCst);
            link.lock().queue.insert((Instant::now() + RETRY_AFTER, seq), delivery);
        }
    }
}

/// Writes `item` unless the target holds a copy at least as new in the
/// order of `Record::supersedes`: `(gen, writer)`, then lease end, then
/// `changed_at_ms`. One region writes each item and its conditional writes
/// only move forward in that order, so this is the item's commit order —
/// what DynamoDB's replication preserves for an item one region writes.
/// (Ordering by `changed_at_ms` first is not: two registrars of one region
/// with skewed clocks write the same item; mcs-sim found a replica going
/// back to an older generation that way.)
async fn put_if_newer(
    target: &aws_sdk_dynamodb::Client,
    table: &str,
    item: &raw::Item,
) -> Result<bool, String> {
    let attr = |name: &str| item.get(name).cloned().ok_or_else(|| format!("item lacks {name}"));
    let lease = item.get(raw::LEASE_UNTIL_MS).cloned();
    let same_version_later = if lease.is_some() {
        "(attribute_not_exists(#l) OR #l < :l OR (#l = :l AND #c < :c))"
    } else {
        "(attribute_not_exists(#l) AND #c < :c)"
    };
    let mut put = target
        .put_item()
        .table_name(table)
        .set_item(Some(item.clone()))
        .condition_expression(format!(
            "attribute_not_exists(#pk) OR #g < :g OR (#g = :g AND \
             (#w < :w OR (#w = :w AND {same_version_later})))"
        ))
        .expression_attribute_names("#pk", raw::PK)
        .expression_attribute_names("#c", raw::CHANGED_AT_MS)
        .expression_attribute_names("#g", raw::GEN)
        .expression_attribute_names("#w", raw::WRITER)
        .expression_attribute_names("#l", raw::LEASE_UNTIL_MS)
        .expression_attribute_values(":c", attr(raw::CHANGED_AT_MS)?)
        .expression_attribute_values(":g", attr(raw::GEN)?)
        .expression_attribute_values(":w", attr(raw::WRITER)?);
    if let Some(lease) = lease {
        put = put.expression_attribute_values(":l", lease);
    }
    let result = put.send().await;
    match result {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.as_service_error(),
                Some(PutItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(format!("{e:?}")),
    }
}

/// A stream image's value as the DynamoDB API takes it.
fn convert(value: StreamValue) -> AttributeValue {
    match value {
        StreamValue::S(s) => AttributeValue::S(s),
        StreamValue::N(n) => AttributeValue::N(n),
        StreamValue::B(b) => AttributeValue::B(b),
        StreamValue::Bool(b) => AttributeValue::Bool(b),
        StreamValue::Null(b) => AttributeValue::Null(b),
        StreamValue::Ss(v) => AttributeValue::Ss(v),
        StreamValue::Ns(v) => AttributeValue::Ns(v),
        StreamValue::Bs(v) => AttributeValue::Bs(v),
        StreamValue::L(v) => AttributeValue::L(v.into_iter().map(convert).collect()),
        StreamValue::M(m) => {
            AttributeValue::M(m.into_iter().map(|(k, v)| (k, convert(v))).collect())
        }
        other => panic!("unknown attribute value in a stream image: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
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
