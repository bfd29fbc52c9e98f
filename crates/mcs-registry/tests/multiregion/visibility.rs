//! Propagation between regions: a write visible elsewhere within the
//! replication delay and a refresh; a relay failing over mid-lease stays
//! listed, once, in both regions.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_visible_in_the_other_region_within_replication_delay_and_a_refresh() {
    const DELAY: Duration = Duration::from_millis(200);
    let Some(world) = MultiRegion::start(REGISTRY, "visibility", &[A, B], &[], 1).await else {
        return;
    };
    world.faults().set_all(&LinkFaults { delay: DELAY, ..LinkFaults::default() });
    // Typical, not guaranteed (docs/design.md §9): replication lag plus one
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

/// Renewals keep `changed_at_ms` (docs/design.md §6, "Renewals and the
/// change feed"): the other region learns them only from `lease_ends`,
/// raising the lease it holds to the window's end while the holder renews
/// on time, and stops serving the pool by its stored lease end once the
/// holder stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_outside_the_change_feed_keep_a_pool_live_everywhere_until_its_holder_stops() {
    // A 6 s lease renewed every 2 s, a 1 s lookback: the horizon is
    // max(6 - 2 - 0.2 - 0.5, 1 + 2 * 0.5) = 3.3 s, and a lease renewed on
    // time (at least 4 s left) is absent from every read of lease ends.
    let flags = [
        ("--lease-duration-secs", "6"),
        ("--heartbeat-interval-secs", "2"),
        ("--lookback-ms", "1000"),
        ("--full-resync-interval-secs", "600"),
    ];
    let Some(world) = MultiRegion::start(REGISTRY, "renewals", &[A, B], &flags, 3).await else {
        return;
    };
    const DELAY: Duration = Duration::from_millis(100);
    world.faults().set_all(&LinkFaults { delay: DELAY, ..LinkFaults::default() });
    let relay = pool("c1", "renewed", 2, json!({"incarnation": "relay-1"}));
    let (status, reply) = world.call(A, Method::POST, "/v1/pools", Some(&relay)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply["lease"]["duration_secs"], 6, "{reply}");
    eventually(Duration::from_secs(3), "the pool listed in B", async || {
        pools_of(&world, B).await == ["renewed"]
    })
    .await;
    let item = async || {
        let got = world.dynamodb(A).scan().table_name(world.table()).send().await.unwrap();
        let item = got
            .items()
            .iter()
            .find(|i| {
                i.get("pk").and_then(|v| v.as_s().ok()).is_some_and(|pk| pk.starts_with("POOL#"))
            })
            .cloned()
            .expect("the pool's item");
        let n = |name: &str| item[name].as_n().unwrap().parse::<u64>().unwrap();
        (n("changed_at_ms"), n("lease_until_ms"))
    };
    let (registered_at, first_lease) = item().await;

    // Four leases' worth of heartbeats, watched in both regions.
    let every = Duration::from_millis(25);
    let observers = [world.observe(A, "pools", every), world.observe(B, "pools", every)];
    let until = Instant::now() + Duration::from_secs(24);
    let mut last_beat = Instant::now();
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (status, reply) = world.call(A, Method::POST, "/v1/pools", Some(&relay)).await;
        assert_eq!(status, StatusCode::OK, "heartbeat: {reply}");
        last_beat = Instant::now();
    }
    let (changed_at, lease) = item().await;
    assert_eq!(changed_at, registered_at, "renewals keep changed_at_ms");
    assert!(lease >= first_lease + 20_000, "renewals move the lease: {first_lease} -> {lease}");

    // The holder stops: B serves the pool until its stored end (6 s after
    // the last renewal) and not much longer.
    eventually(Duration::from_secs(10), "the pool gone from B", async || {
        pools_of(&world, B).await.is_empty()
    })
    .await;
    let gone_after = last_beat.elapsed();
    let [in_a, in_b] = observers;
    let (seen_a, seen_b) = (in_a.finish().await, in_b.finish().await);
    for (region, seen) in [(A, &seen_a), (B, &seen_b)] {
        let live: Vec<Observation> = seen.iter().filter(|o| o.at <= last_beat).cloned().collect();
        let (gaps, max_count) = gaps(&live, "renewed");
        assert!(live.len() > 200, "{region} observed {} times", live.len());
        assert_eq!(max_count, 1, "{region} lists the pool once");
        assert!(gaps.is_empty(), "{region} served the pool all along while renewed: {gaps:?}");
        assert!(live.iter().all(|o| o.complete), "{region} stays complete");
    }
    let lease = Duration::from_secs(6);
    assert!(
        gone_after >= lease - Duration::from_millis(600),
        "B dropped the pool {gone_after:?} after its last renewal, before its stored end"
    );
    assert!(
        gone_after <= lease + SKEW + Duration::from_millis(500) + DELAY + Duration::from_secs(2),
        "B served the pool {gone_after:?} after its last renewal"
    );
    let extended = world.metric(B, r#"mcs_reader_leases_confirmed_total{how="extended"}"#).await;
    assert!(extended > 0.0, "B raised the lease from reads of lease ends");
    eprintln!("B dropped the pool {gone_after:?} after the last renewal; {extended} raises in B");
}

/// Change stamps (docs/design.md §6, "Reaching back for late changes"): a
/// write replicated later than a refresh, so that the other region's
/// watermark has passed its `changed_at_ms` when it arrives, is served
/// there at the next poll without a full read; and a region with nothing
/// new reads no changes at all, only their stamps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_replicated_later_than_a_refresh_is_served_by_the_next_poll() {
    const DELAY: Duration = Duration::from_secs(3);
    let flags = [("--lookback-ms", "10000"), ("--full-resync-interval-secs", "600")];
    let Some(world) = MultiRegion::start(REGISTRY, "stamps", &[A, B], &flags, 5).await else {
        return;
    };
    let sample = |op: &str| format!(r#"mcs_store_requests_total{{op="{op}",outcome="ok"}}"#);
    let (changes, stamps) = (sample("query_changes"), sample("query_change_stamps"));
    let full = r#"mcs_reader_polls_total{mode="full",outcome="ok"}"#;
    let late = "mcs_reader_late_changes_total";
    eventually(Duration::from_secs(10), "B polls its change stamps", async || {
        world.metric(B, &stamps).await > 0.0
    })
    .await;

    // Nothing written: B's polls read stamps, never changes.
    let before = (world.metric(B, &changes).await, world.metric(B, &stamps).await);
    tokio::time::sleep(REFRESH * 4).await;
    let after = (world.metric(B, &changes).await, world.metric(B, &stamps).await);
    assert_eq!(after.0, before.0, "an idle poll reads no changes");
    assert!(after.1 >= before.1 + 8.0 * 2.0, "two polls or more read stamps: {before:?} {after:?}");

    world.faults().set_all(&LinkFaults { delay: DELAY, ..LinkFaults::default() });
    let fulls = world.metric(B, full).await;
    let (status, reply) =
        world.call(A, Method::POST, "/v1/pools", Some(&pool("c1", "late", 1, json!({})))).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let acked = Instant::now();
    eventually(DELAY + REFRESH + Duration::from_secs(3), "B lists the late pool", async || {
        pools_of(&world, B).await.contains(&"late".to_owned())
    })
    .await;
    let seen = acked.elapsed();
    assert!(seen >= DELAY, "not before the replication delay: {seen:?}");
    assert_eq!(world.metric(B, full).await, fulls, "no full read served it");
    assert!(world.metric(B, late).await >= 1.0, "B reached back for it");
    eprintln!("a write replicated {DELAY:?} late was listed in B {seen:?} after its ack");
}
