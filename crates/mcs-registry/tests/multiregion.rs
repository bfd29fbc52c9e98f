//! Multi-region scenarios (DESIGN §2, §10, §11): regional tables of one
//! moto_server, a test replicator between them that can delay, reorder,
//! lose, hold and partition, and one real `mcs-registry` per region. The
//! regions must converge to the same fingerprints, lose no acknowledged
//! write and resurrect nothing.
//!
//! Run with `scripts/with-moto.sh cargo test -p mcs-registry --test
//! multiregion`; without a DynamoDB endpoint every scenario skips with a
//! notice, or fails where the DynamoDB tests are required (`scripts/test`,
//! CI: see `mcs_store::testsuite::dynamodb_endpoint`). The harness and the
//! replicator are `mcs_testkit::multiregion`.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

use mcs_testkit::multiregion::{self as harness, LinkFaults, MultiRegion, Observation};
use mcs_testkit::{eventually, fixtures};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// The binary under test.
const REGISTRY: &str = env!("CARGO_BIN_EXE_mcs-registry");

const A: &str = "us-east-1";
const B: &str = "eu-west-1";
const C: &str = "ap-south-1";

/// The registries' refresh interval (the harness default). Each delta
/// poll is 8 queries (one per shard), and moto_server answers one request
/// at a time, 100 to 400 a second depending on the machine's load: 500 ms
/// keeps the polls of three registries and the replicator well below that.
const REFRESH: Duration = Duration::from_millis(500);
/// The registries' skew allowance (the harness default).
const SKEW: Duration = Duration::from_millis(200);

/// A pool registration; `extra` fields are merged in.
fn pool(cluster: &str, dgd: &str, workers: u32, extra: Value) -> Value {
    fixtures::with(fixtures::pool(cluster, dgd, workers), extra)
}

/// The dgd names of a list's pools, sorted.
fn dgd_names(pools: &[Value]) -> Vec<String> {
    let mut names: Vec<String> =
        pools.iter().map(|p| p["pool_key"]["dgd_name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

async fn pools_of(world: &MultiRegion, region: &str) -> Vec<String> {
    dgd_names(world.list(region, "pools").await["pools"].as_array().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_visible_in_the_other_region_within_replication_delay_and_a_refresh() {
    const DELAY: Duration = Duration::from_millis(200);
    let Some(world) = MultiRegion::start(REGISTRY, "visibility", &[A, B], &[], 1).await else {
        return;
    };
    world.faults().set_all(&LinkFaults { delay: DELAY, ..LinkFaults::default() });
    // Typical, not guaranteed (DESIGN §10): replication lag plus one
    // refresh; the slack covers the stream poll and a loaded machine.
    let bound = DELAY + REFRESH + Duration::from_secs(2);

    let mut seen = Vec::new();
    for i in 0..6 {
        let (from, to) = if i % 2 == 0 { (A, B) } else { (B, A) };
        let name = format!("vis-{i}");
        let (status, reply) = world
            .call(from, Method::POST, "/v1/pools", Some(&pool("c1", &name, 1, json!({}))))
            .await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        let acked = Instant::now();
        assert!(pools_of(&world, from).await.contains(&name), "read-your-writes in {from}");
        eventually(bound, &format!("{name} written in {from} listed in {to}"), async || {
            pools_of(&world, to).await.contains(&name)
        })
        .await;
        seen.push(acked.elapsed());
    }
    seen.sort();
    eprintln!(
        "cross-region visibility (delay {DELAY:?}, refresh {REFRESH:?}): min {:?} median {:?} max {:?}",
        seen[0],
        seen[seen.len() / 2],
        seen[seen.len() - 1]
    );
    assert!(seen[0] >= DELAY, "not before the replication delay: {seen:?}");

    let (took, snapshot) = world.await_converged(Duration::from_secs(5)).await;
    let pools = snapshot.lists[A]["pools"]["pools"].as_array().unwrap().len();
    assert_eq!(pools, 6);
    eprintln!(
        "fingerprints equal {took:?} after the last visibility; {:?}",
        world.replicator().stats()
    );
}

/// The spans in which the pool `dgd` was not listed after it first was
/// (from the first observation without it to the next with it), and the
/// most entries it ever had in one list.
fn gaps(seen: &[Observation], dgd: &str) -> (Vec<Duration>, usize) {
    let mut gaps = Vec::new();
    let mut max_count = 0;
    let mut appeared = false;
    let mut absent_since: Option<Instant> = None;
    for o in seen {
        let count = o.items.iter().filter(|p| p["pool_key"]["dgd_name"] == dgd).count();
        max_count = max_count.max(count);
        if count > 0 {
            if let Some(since) = absent_since.take() {
                gaps.push(o.at - since);
            }
            appeared = true;
        } else if appeared && absent_since.is_none() {
            absent_since = Some(o.at);
        }
    }
    if let (Some(since), Some(last)) = (absent_since, seen.last()) {
        gaps.push(last.at - since);
    }
    (gaps, max_count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_failing_over_mid_lease_stays_live_and_single_in_both_regions() {
    let Some(world) = MultiRegion::start(REGISTRY, "failover", &[A, B], &[], 2).await else {
        return;
    };
    // Replication with a delay and reordering: heartbeats (300 ms apart)
    // overtake each other; the conditional puts keep the newest of each item.
    world.faults().set_all(&LinkFaults {
        delay: Duration::from_millis(150),
        jitter: Duration::from_millis(900),
        shuffle: true,
        ..LinkFaults::default()
    });
    let relay = pool(
        "c1",
        "relay",
        4,
        json!({"incarnation": "relay-b-1", "lease": {"duration_secs": 4, "heartbeat_interval_secs": 1}}),
    );
    let heartbeat = async |region: &str, until: Instant| {
        let mut beats = 0;
        while Instant::now() < until {
            let (status, reply) = world.call(region, Method::POST, "/v1/pools", Some(&relay)).await;
            assert_eq!(status, StatusCode::OK, "heartbeat {beats} in {region}: {reply}");
            beats += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        beats
    };

    // The relay beats in A until both regions list it; then observe both.
    let (status, reply) = world.call(A, Method::POST, "/v1/pools", Some(&relay)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    eventually(Duration::from_secs(3), "the relay's pool listed in B", async || {
        pools_of(&world, B).await == ["relay"]
    })
    .await;
    let every = Duration::from_millis(25);
    let observers = [world.observe(A, "pools", every), world.observe(B, "pools", every)];

    // A for 1.5 s, a silent second (mid-lease), then B for 5 s: longer than
    // the lease, so A's own item expires and A serves the pool from B's.
    let in_a = heartbeat(A, Instant::now() + Duration::from_millis(1_500)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let in_b = heartbeat(B, Instant::now() + Duration::from_secs(5)).await;
    // Another incarnation is fenced off in A by the lease the relay now
    // renews in B.
    let impostor = pool("c1", "relay", 4, json!({"incarnation": "relay-b-2"}));
    let (status, reply) = world.call(A, Method::POST, "/v1/pools", Some(&impostor)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{reply}");
    let [in_a_seen, in_b_seen] = observers;
    let (seen_a, seen_b) = (in_a_seen.finish().await, in_b_seen.finish().await);

    for (region, seen) in [(A, &seen_a), (B, &seen_b)] {
        let (gaps, max_count) = gaps(seen, "relay");
        assert!(seen.len() > 100, "{region} observed {} times", seen.len());
        assert_eq!(max_count, 1, "{region} never lists the pool twice");
        assert!(gaps.iter().all(|g| *g <= SKEW), "{region}: gaps {gaps:?}");
        assert!(seen.iter().all(|o| o.complete), "{region} stays complete");
        eprintln!("{region}: {} observations, gaps {gaps:?}", seen.len());
    }
    // Heartbeats and the failover change nothing served: one fingerprint
    // in both regions all along.
    let prints: BTreeSet<&str> =
        seen_a.iter().chain(&seen_b).map(|o| o.fingerprint.as_str()).collect();
    assert_eq!(prints.len(), 1, "one fingerprint throughout: {prints:?}");
    let (took, snapshot) = world.await_converged(Duration::from_secs(3)).await;
    let listed = &snapshot.lists[B]["pools"]["pools"];
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["capacity"]["workers"], 4);
    let stats = world.replicator().stats();
    eprintln!("{in_a} beats in A, {in_b} in B; converged {took:?} after the last beat; {stats:?}");
}

/// Registers a cluster, its export, a router and a pool in `region`.
async fn register_side(world: &MultiRegion, region: &str, side: &str, export: Value) {
    let writes = [
        (Method::POST, "/v1/pools".to_owned(), pool("c1", &format!("{side}-only"), 1, json!({}))),
        (Method::POST, "/v1/routers".to_owned(), fixtures::router(&format!("gr-{side}"))),
        (Method::PUT, format!("/v1/clusters/c-{side}"), fixtures::cluster(&format!("ctl-{side}"))),
        (Method::PUT, format!("/v1/clusters/c-{side}/exports/llm/svc"), export),
    ];
    for (method, path, body) in writes {
        let (status, reply) = world.call(region, method.clone(), &path, Some(&body)).await;
        assert_eq!(status, StatusCode::OK, "{method} {path} in {region}: {reply}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regions_written_on_both_sides_of_a_partition_converge_once_it_heals() {
    let Some(world) = MultiRegion::start(REGISTRY, "partition", &[A, B, C], &[], 3).await else {
        return;
    };
    // Lossy, reordering links: every delivery may be dropped and resent.
    world.faults().set_all(&LinkFaults {
        delay: Duration::from_millis(50),
        jitter: Duration::from_millis(100),
        loss: 0.3,
        redeliver_after: Duration::from_millis(200),
        ..LinkFaults::default()
    });
    let (status, _) =
        world.call(A, Method::POST, "/v1/pools", Some(&pool("c1", "shared", 1, json!({})))).await;
    assert_eq!(status, StatusCode::OK);
    world.await_converged(Duration::from_secs(5)).await;

    world.faults().partition(&[&[A], &[B, C]]);
    register_side(
        &world,
        A,
        "a",
        fixtures::export("ClusterSetIP", "2026-01-01T00:00:00Z", "10.1.0.1"),
    )
    .await;
    register_side(&world, B, "b", fixtures::export("Headless", "2026-01-02T00:00:00Z", "10.2.0.1"))
        .await;
    let (status, _) =
        world.call(C, Method::POST, "/v1/pools", Some(&pool("c1", "c-only", 1, json!({})))).await;
    assert_eq!(status, StatusCode::OK);
    // The shared pool, updated on both sides; registrar-assigned versions.
    let mut updates = Vec::new();
    for (region, workers) in [(A, 2), (B, 3)] {
        let body = pool("c1", "shared", workers, json!({}));
        let (status, reply) = world.call(region, Method::POST, "/v1/pools", Some(&body)).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        let generation = reply["generation"].as_u64().unwrap();
        updates.push(((generation, harness::writer_id(region)), workers));
    }
    let winner = updates.iter().max().unwrap().1;

    // The B side replicates within itself, never across the cut.
    eventually(Duration::from_secs(5), "C lists B's pool", async || {
        pools_of(&world, C).await.contains(&"b-only".to_owned())
    })
    .await;
    eventually(Duration::from_secs(5), "B lists C's pool", async || {
        pools_of(&world, B).await.contains(&"c-only".to_owned())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pools_of(&world, A).await, ["a-only", "shared"]);
    assert_eq!(pools_of(&world, C).await, ["b-only", "c-only", "shared"]);
    let split = world.snapshot().await;
    assert_ne!(
        split.lists[A]["pools"]["fingerprint"], split.lists[C]["pools"]["fingerprint"],
        "the sides differ while cut"
    );

    world.faults().heal();
    let healed = Instant::now();
    world.replicator().quiesce(Duration::from_secs(10)).await;
    let drained = healed.elapsed();
    let (_, snapshot) = world.await_converged(Duration::from_secs(10)).await;
    eprintln!(
        "replication drained {drained:?} and regions converged {:?} after healing; {:?}",
        healed.elapsed(),
        world.replicator().stats()
    );
    let lists = &snapshot.lists[C];
    let pools = lists["pools"]["pools"].as_array().unwrap();
    assert_eq!(dgd_names(pools), ["a-only", "b-only", "c-only", "shared"]);
    let shared = pools.iter().find(|p| p["pool_key"]["dgd_name"] == "shared").unwrap();
    assert_eq!(shared["capacity"]["workers"], winner, "the higher version wins: {updates:?}");
    assert_eq!(lists["routers"]["routers"].as_array().unwrap().len(), 2);
    assert_eq!(lists["clusters"]["clusters"].as_array().unwrap().len(), 2);
    let exports = lists["exports"]["exports"].as_array().unwrap();
    assert_eq!(exports.len(), 2);
    for e in exports {
        let conflict = e["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Conflict");
        assert_eq!(conflict.unwrap()["status"], "True", "both exports report the conflict: {e}");
    }
    let imports = lists["imports"]["imports"].as_array().unwrap();
    assert_eq!(imports.len(), 1);
    assert_eq!(imports[0]["type"], "ClusterSetIP", "the oldest export wins the type");
    assert_eq!(imports[0]["clusters"].as_array().unwrap().len(), 2);
    assert!(world.replicator().stats().lost > 0, "the links did lose deliveries");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawal_is_not_undone_by_an_older_write_still_in_flight() {
    let Some(world) = MultiRegion::start(REGISTRY, "withdrawal", &[A, B], &[], 4).await else {
        return;
    };
    world
        .faults()
        .set_all(&LinkFaults { delay: Duration::from_millis(100), ..LinkFaults::default() });
    let relay = |generation: u64, workers: u32| {
        pool(
            "c1",
            "withdrawn",
            workers,
            json!({"incarnation": "relay-d", "generation": generation}),
        )
    };
    let (status, reply) = world.call(A, Method::POST, "/v1/pools", Some(&relay(1, 1))).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let pool_id = reply["pool_id"].as_str().unwrap().to_owned();
    world.await_converged(Duration::from_secs(5)).await;

    // The relay, now talking to B, writes gen 5 there; B → A holds it.
    world.faults().hold(B, A);
    let (status, reply) = world.call(B, Method::POST, "/v1/pools", Some(&relay(5, 5))).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    eventually(Duration::from_secs(5), "gen 5 read from B's stream and held", async || {
        world.faults().pending() == 1
    })
    .await;
    tokio::time::sleep(REFRESH * 2).await;
    let in_a = world.list(A, "pools").await;
    assert_eq!(in_a["pools"][0]["capacity"]["workers"], 1, "A has not seen gen 5: {in_a}");

    // A withdraws at gen 6 before gen 5 arrives.
    let path = format!("/v1/pools/{pool_id}?incarnation=relay-d&generation=6");
    let (status, reply) = world.call(A, Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["generation"], 6);
    assert!(pools_of(&world, A).await.is_empty(), "withdrawn in A at once");

    let full_polls = r#"mcs_reader_polls_total{mode="full",outcome="ok"}"#;
    let full_before = [world.metric(A, full_polls).await, world.metric(B, full_polls).await];
    let observers = [
        world.observe(A, "pools", Duration::from_millis(25)),
        world.observe(B, "pools", Duration::from_millis(25)),
    ];
    world.faults().release(B, A);
    world.replicator().quiesce(Duration::from_secs(5)).await;
    // Through at least one full resync in each region.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let [in_a_seen, in_b_seen] = observers;
    let (seen_a, seen_b) = (in_a_seen.finish().await, in_b_seen.finish().await);
    for (i, region) in [A, B].into_iter().enumerate() {
        let after = world.metric(region, full_polls).await;
        assert!(after > full_before[i], "{region} did a full resync meanwhile");
    }
    assert!(seen_a.iter().all(|o| o.items.is_empty()), "A never lists the pool again");
    // B lists gen 5 until the tombstone arrives, then never again.
    let first_gone = seen_b.iter().position(|o| o.items.is_empty()).expect("B drops the pool");
    assert!(
        seen_b[first_gone..].iter().all(|o| o.items.is_empty()),
        "B never lists the pool again once withdrawn"
    );
    world.await_converged(Duration::from_secs(3)).await;

    // Both items are in A's table: the tombstone (A) and gen 5 (B), which
    // did arrive; the merge keeps the tombstone.
    let scan = world.dynamodb(A).scan().table_name(world.table()).send().await.unwrap();
    let mut versions: Vec<(String, u64, bool)> = scan
        .items()
        .iter()
        .filter(|i| !mcs_store::dynamo::raw::is_meta(i))
        .map(|i| {
            let origin = mcs_store::dynamo::raw::origin_of(i).unwrap();
            let record = mcs_store::dynamo::raw::decode(i.clone()).unwrap();
            (origin, record.version.generation, record.is_tombstone())
        })
        .collect();
    versions.sort();
    assert_eq!(versions, [(B.to_owned(), 5, false), (A.to_owned(), 6, true)]);

    // A retry of gen 5 anywhere is refused: nothing resurrects it.
    for region in [A, B] {
        let (status, reply) =
            world.call(region, Method::POST, "/v1/pools", Some(&relay(5, 5))).await;
        assert_eq!(status, StatusCode::CONFLICT, "gen 5 retried in {region}: {reply}");
    }
    tokio::time::sleep(REFRESH * 3).await;
    for region in [A, B] {
        assert!(pools_of(&world, region).await.is_empty(), "still withdrawn in {region}");
    }
}

/// What a writer of many registrations saw.
#[derive(Debug, Default)]
struct Tally {
    /// Every pool it tried.
    tried: Vec<String>,
    /// Requests that failed or were refused.
    failed: usize,
}

/// Writers of many registrations to one region, whose registry may be
/// killed and restarted under them.
#[derive(Clone)]
struct Writers {
    http: reqwest::Client,
    /// The registry's API; a restarted one listens elsewhere.
    target: Arc<RwLock<String>>,
    /// Pools whose registration was acknowledged with a 2xx, in order.
    acked: Arc<Mutex<Vec<String>>>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Writers {
    fn acked(&self) -> Vec<String> {
        self.acked.lock().unwrap().clone()
    }

    /// Waits until `more` registrations beyond `since` were acknowledged.
    async fn await_acks(&self, since: usize, more: usize) -> usize {
        let what = format!("{more} more registrations acknowledged");
        eventually(Duration::from_secs(15), &what, async || self.acked().len() >= since + more)
            .await;
        self.acked().len()
    }

    /// Registers pools `{prefix}-0`, `{prefix}-1`, … until stopped.
    async fn run(self, prefix: &str) -> Tally {
        let mut tally = Tally::default();
        for i in 0.. {
            if *self.stop.borrow() {
                break;
            }
            let name = format!("{prefix}-{i}");
            let lease = json!({"lease": {"duration_secs": 600, "heartbeat_interval_secs": 60}});
            let body = pool("c1", &name, 1, lease);
            let url = format!("{}/v1/pools", self.target.read().unwrap());
            tally.tried.push(name.clone());
            let sent = self.http.post(url).json(&body).timeout(Duration::from_secs(3)).send().await;
            match sent {
                Ok(reply) if reply.status().is_success() => self.acked.lock().unwrap().push(name),
                Ok(_) | Err(_) => tally.failed += 1,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tally
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_killed_mid_load_loses_no_acknowledged_write() {
    let Some(mut world) = MultiRegion::start(REGISTRY, "sigkill", &[A, B], &[], 5).await else {
        return;
    };
    world.faults().set_all(&LinkFaults {
        delay: Duration::from_millis(100),
        jitter: Duration::from_millis(100),
        ..LinkFaults::default()
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let writers = |region: &str| Writers {
        http: world.http().clone(),
        target: Arc::new(RwLock::new(world.api(region))),
        acked: Arc::new(Mutex::new(Vec::new())),
        stop: stopped.clone(),
    };
    let (to_a, to_b) = (writers(A), writers(B));
    let tasks = [(to_a.clone(), "ka0"), (to_a.clone(), "ka1"), (to_b.clone(), "kb0")]
        .map(|(w, prefix)| tokio::spawn(async move { w.run(prefix).await }));

    // Phases by progress, not time: the machine may be slow. Replication
    // stalls before the kill, so A's last acknowledged writes are only in
    // its own table when it dies.
    let acks = to_a.await_acks(0, 10).await;
    world.faults().stall();
    to_a.await_acks(acks, 5).await;
    world.kill(A).await;
    let killed = Instant::now();
    let acked_before_kill = to_a.acked();
    tokio::time::sleep(Duration::from_millis(300)).await;
    world.restart(A).await;
    *to_a.target.write().unwrap() = world.api(A);
    let down = killed.elapsed();
    let listed = pools_of(&world, A).await;
    let lost: Vec<&String> =
        acked_before_kill.iter().filter(|n| listed.binary_search(n).is_err()).collect();
    assert!(lost.is_empty(), "restarted A lists what it acknowledged before the kill: {lost:?}");
    world.faults().resume();
    to_a.await_acks(acked_before_kill.len(), 10).await;
    stop.send(true).unwrap();
    let mut tallies = Vec::new();
    for task in tasks {
        tallies.push(task.await.unwrap());
    }
    let acked: Vec<String> = to_a.acked().into_iter().chain(to_b.acked()).collect();
    let tried: BTreeSet<&String> = tallies.iter().flat_map(|t| &t.tried).collect();
    let failed: Vec<usize> = tallies.iter().map(|t| t.failed).collect();
    assert!(failed[0] + failed[1] > 0, "A's writers saw it down for {down:?}");
    assert!(!to_b.acked().is_empty(), "B took writes meanwhile");

    world.replicator().quiesce(Duration::from_secs(15)).await;
    for region in [A, B] {
        let what = format!("every acknowledged pool listed in {region}");
        eventually(Duration::from_secs(10), &what, async || {
            let listed = pools_of(&world, region).await;
            acked.iter().all(|name| listed.binary_search(name).is_ok())
        })
        .await;
        let listed = pools_of(&world, region).await;
        assert!(listed.iter().all(|n| tried.contains(n)), "nothing listed that was never sent");
    }
    let (_, snapshot) = world.await_converged(Duration::from_secs(5)).await;
    let pools = snapshot.lists[A]["pools"]["pools"].as_array().unwrap().len();
    eprintln!(
        "A down {down:?}; {} tried, {} acknowledged ({} before the kill), {failed:?} failed, \
         {pools} listed everywhere; {:?}",
        tried.len(),
        acked.len(),
        acked_before_kill.len(),
        world.replicator().stats()
    );
}

/// Many pools heartbeat in A; A → B stalls; B sees their leases run out
/// together, holds the expiries (lists stay, `complete: false`) for at most
/// --expiry-hold-max-secs, then lets them go; replication resumes and B
/// lists them again.
///
/// And the hold as DESIGN §5 states it: B keeps every pool until the
/// release, none of the wave served as expired before the hold. Leases
/// never run out in the same instant (their renewals were spread over a
/// heartbeat round), but by the first expiry every lease has missed a
/// renewal, so all are at risk and held together. B must have seen the
/// pools renew (it learns their heartbeat interval from renewals); a stall
/// before that is held only once more than --expiry-hold-threshold of the
/// leases have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_stall_holds_every_pool_listed_then_releases_the_expiries() {
    const POOLS: usize = 8;
    const MAX_HOLD: Duration = Duration::from_secs(3);
    let flags = [
        ("--expiry-hold-threshold", "0.5"),
        ("--expiry-hold-min", "3"),
        ("--expiry-hold-window-secs", "2"),
        ("--expiry-hold-max-secs", "3"),
    ];
    let Some(world) = MultiRegion::start(REGISTRY, "hold", &[A, B], &flags, 6).await else {
        return;
    };
    world
        .faults()
        .set_all(&LinkFaults { delay: Duration::from_millis(100), ..LinkFaults::default() });
    // A lease well above a heartbeat round, however slow moto is today.
    let lease = json!({"lease": {"duration_secs": 5, "heartbeat_interval_secs": 1}});
    let bodies: Vec<Value> =
        (0..POOLS).map(|i| pool("c1", &format!("held-{i:02}"), 1, lease.clone())).collect();

    // Every pool heartbeats in A every 1.5 s, all along.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let heartbeats = {
        let http = world.http().clone();
        let url = format!("{}/v1/pools", world.api(A));
        let bodies = bodies.clone();
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            while !*stopped.borrow() {
                let round = Instant::now();
                for body in &bodies {
                    let (status, reply) =
                        harness::send(&http, Method::POST, &url, Some(body)).await;
                    assert_eq!(status, StatusCode::OK, "{reply}");
                }
                slowest = slowest.max(round.elapsed());
                tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(round.elapsed()))
                    .await;
            }
            slowest
        })
    };
    eventually(Duration::from_secs(10), "B lists every pool, complete", async || {
        let list = world.list(B, "pools").await;
        list["pools"].as_array().unwrap().len() == POOLS && list["complete"] == json!(true)
    })
    .await;
    // B learns how often each pool renews from the renewals it sees (a lease
    // is at risk once it missed one): let two heartbeat rounds reach it.
    tokio::time::sleep(Duration::from_millis(3_500)).await;

    let every = Duration::from_millis(50);
    let observers = [world.observe(A, "pools", every), world.observe(B, "pools", every)];
    world.faults().hold(A, B);
    let stalled = Instant::now();
    // B's leases run out 5 s (plus skew) after the last renewal it got;
    // then the hold, at most MAX_HOLD; then the release.
    eventually(Duration::from_secs(15), "B lets the held expiries go", async || {
        let list = world.list(B, "pools").await;
        list["pools"].as_array().unwrap().is_empty() && list["complete"] == json!(true)
    })
    .await;
    let released_after = stalled.elapsed();
    let [in_a, in_b] = observers;
    let (seen_a, seen_b) = (in_a.finish().await, in_b.finish().await);

    let in_a: Vec<(usize, bool)> = seen_a.iter().map(|o| (o.items.len(), o.complete)).collect();
    assert!(in_a.iter().all(|o| *o == (POOLS, true)), "A serves every pool throughout: {in_a:?}");
    let held: Vec<&Observation> = seen_b.iter().filter(|o| !o.complete).collect();
    assert!(!held.is_empty(), "B reported a hold (complete: false)");
    let held_counts: BTreeSet<usize> = held.iter().map(|o| o.items.len()).collect();
    let counts: Vec<usize> = seen_b.iter().map(|o| o.items.len()).collect();
    let hold_span = held.last().unwrap().at - held[0].at;
    eprintln!(
        "stall to release {released_after:?}; B held {held_counts:?} pools for about {hold_span:?}; \
         pool counts seen in B {:?}",
        counts.iter().collect::<BTreeSet<_>>()
    );
    assert_eq!(held_counts.len(), 1, "nothing expires while held: {held_counts:?}");
    assert!(held_counts.first().is_some_and(|n| *n > 0), "B holds pools: {held_counts:?}");
    assert!(hold_span <= MAX_HOLD + Duration::from_secs(1), "held at most --expiry-hold-max-secs");
    assert!(
        hold_span >= MAX_HOLD - Duration::from_millis(500),
        "held until the maximum: no renewal came"
    );
    assert!(
        counts.windows(2).all(|w| w[1] <= w[0]),
        "B never lists a pool again during the stall: {counts:?}"
    );
    assert_eq!(held_counts, BTreeSet::from([POOLS]), "B keeps every pool while it holds");
    assert!(
        counts.iter().all(|n| *n == 0 || *n == POOLS),
        "B drops the pools together: {counts:?}"
    );
    assert_eq!(world.metric(B, "mcs_view_expiry_holds_total").await, 1.0);

    // Replication resumes: B gets the renewals and lists the pools again.
    world.faults().release(A, B);
    eventually(Duration::from_secs(10), "B lists every pool again", async || {
        world.list(B, "pools").await["pools"].as_array().unwrap().len() == POOLS
    })
    .await;
    world.await_converged(Duration::from_secs(5)).await;
    stop.send(true).unwrap();
    let slowest = heartbeats.await.unwrap();
    eprintln!("slowest heartbeat round {slowest:?}; {:?}", world.replicator().stats());
}

/// Two registry processes in one region, sharing its table (hardening,
/// defect 2): relay x withdraws through the first; a heartbeat it sent
/// before, arriving late through the second (whose view still holds the
/// live pool), is refused, and the pool stays withdrawn in every process
/// and region, through a full resync.
#[tokio::test]
async fn a_withdrawal_holds_across_two_registrars_of_one_region() {
    let flags = [("--full-resync-interval-secs", "3")];
    let Some(mut world) = MultiRegion::start(REGISTRY, "tworeg", &[A, B], &flags, 7).await else {
        return;
    };
    let second = world.launch_second(A).await;
    let by_x = pool("c1", "shared", 1, json!({"incarnation": "relay-x"}));
    let (status, registered) = world.call(A, Method::POST, "/v1/pools", Some(&by_x)).await;
    assert_eq!(status, StatusCode::OK, "{registered}");
    let pool_id = registered["pool_id"].as_str().unwrap().to_owned();
    eventually(Duration::from_secs(10), "the second process sees the pool", async || {
        world.list(&second, "pools").await["pools"].as_array().unwrap().len() == 1
    })
    .await;

    let (status, gone) = world
        .call(A, Method::DELETE, &format!("/v1/pools/{pool_id}?incarnation=relay-x"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    // At once, before the second process polls again.
    let (status, late) = world.call(&second, Method::POST, "/v1/pools", Some(&by_x)).await;
    assert_eq!(status, StatusCode::CONFLICT, "the late heartbeat is refused: {late}");
    assert_eq!(late["stored_generation"], gone["generation"]);

    tokio::time::sleep(Duration::from_secs(4)).await; // past a full resync
    for at in [A, second.as_str(), B] {
        let pools = world.list(at, "pools").await;
        assert_eq!(pools["pools"], json!([]), "{at} serves the withdrawn pool: {pools}");
    }
}
