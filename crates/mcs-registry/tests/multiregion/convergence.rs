//! Convergence: regions written on both sides of a partition, a withdrawal
//! against an older write still in flight, and a withdrawal across two
//! registrars of one region.

use super::*;

/// Registers a cluster, its export, a router and a pool in `region`.
async fn register_side(world: &MultiRegion, region: &str, side: &str, export: Value) {
    let writes = [
        (Method::POST, "/v1/pools".to_owned(), pool("c1", &format!("{side}-only"), 1, json!({}))),
        (Method::POST, "/v1/routers".to_owned(), fixtures::router(&format!("gr-{side}"))),
        (Method::PUT, format!("/v1/clusters/c-{side}"), fixtures::cluster(&format!("ctl-{side}"))),
        (
            Method::PUT,
            format!("/v1/clusters/c-{side}/exports/llm/svc"),
            fixtures::with(export, json!({"incarnation": format!("ctl-{side}")})),
        ),
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

/// Issue 22, item 1, two regions (docs/design.md §3, "Invariant (issue
/// 22)"): an export put through A (item `@A`, no `ttl`) and withdrawn
/// through B (tombstone `@B`), both replicated, then TTL run ten days on in
/// both tables. The tombstone carries no `ttl`, so it still hides `@A`
/// everywhere: once the cluster (whose record TTL deleted) registers
/// again, neither the running registries after a full read nor fresh ones
/// serve the export, and the regions agree. Before the fix TTL deleted
/// the tombstone and every full read served `@A` again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_withdrawn_in_another_region_stays_withdrawn_after_ttl() {
    let Some(mut world) = MultiRegion::start(REGISTRY, "ttl", &[A, B], &[], 8).await else {
        return;
    };
    register_cluster(&world).await;
    let path = "/v1/clusters/c1/exports/llm/svc";
    let export = fixtures::with(
        fixtures::export("ClusterSetIP", "2026-01-01T00:00:00Z", "10.1.0.1"),
        json!({"incarnation": "ctl-1"}),
    );
    let (status, reply) = world.call(A, Method::PUT, path, Some(&export)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    eventually(Duration::from_secs(10), "B serves A's export", async || {
        exports_of(&world, B).await == 1
    })
    .await;

    let withdraw = format!("{path}?incarnation=ctl-1");
    let (status, reply) = world.call(B, Method::DELETE, &withdraw, None).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    world.replicator().quiesce(Duration::from_secs(10)).await;
    world.await_converged(Duration::from_secs(10)).await;
    assert_eq!(exports_of(&world, A).await, 0, "withdrawn in A too");
    // The hazard: each table holds A's live export under B's tombstone.
    let both = [(B.to_owned(), true), (A.to_owned(), false)]; // sorted by origin
    for region in [A, B] {
        assert_eq!(export_items(&world, region).await, both, "{region} before TTL");
    }

    // What TTL deleted is checked last, after what the registries serve.
    let deleted = world.emulate_ttl(mcs_testkit::dynamo::TEN_DAYS).await;
    let full = r#"mcs_reader_polls_total{mode="full",outcome="ok"}"#;
    let before = [world.metric(A, full).await, world.metric(B, full).await];
    eventually(Duration::from_secs(10), "a full read in both regions", async || {
        world.metric(A, full).await > before[0] && world.metric(B, full).await > before[1]
    })
    .await;
    // The controller's next heartbeat registers the cluster again: an
    // export of it left live would be served.
    register_cluster(&world).await;
    for fresh in [false, true] {
        eventually(Duration::from_secs(10), "both regions serve the cluster", async || {
            clusters_of(&world, A).await == 1 && clusters_of(&world, B).await == 1
        })
        .await;
        let (_, snapshot) = world.await_converged(Duration::from_secs(10)).await;
        for region in [A, B] {
            let served = &snapshot.lists[region]["exports"];
            assert_eq!(served["exports"], json!([]), "{region} (fresh: {fresh}): {served}");
        }
        if !fresh {
            for region in [A, B] {
                world.kill(region).await;
                world.restart(region).await;
            }
        }
    }
    let cluster_only = [(A.to_owned(), 1), (B.to_owned(), 1)].into_iter().collect();
    assert_eq!(deleted, cluster_only, "TTL deleted the cluster's record, not the withdrawal");
    for region in [A, B] {
        assert_eq!(export_items(&world, region).await, both, "{region} after TTL");
    }
}

/// `PUT /v1/clusters/c1` by controller `ctl-1` through A.
async fn register_cluster(world: &MultiRegion) {
    let cluster = fixtures::cluster("ctl-1");
    let (status, reply) = world.call(A, Method::PUT, "/v1/clusters/c1", Some(&cluster)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
}

async fn exports_of(world: &MultiRegion, region: &str) -> usize {
    world.list(region, "exports").await["exports"].as_array().unwrap().len()
}

async fn clusters_of(world: &MultiRegion, region: &str) -> usize {
    world.list(region, "clusters").await["clusters"].as_array().unwrap().len()
}

/// The items of export `c1/llm/svc` in `region`'s table: (origin, whether a
/// tombstone), sorted.
async fn export_items(world: &MultiRegion, region: &str) -> Vec<(String, bool)> {
    let spec = mcs_core::fixtures::mk_export_spec(0, vec![]);
    let key = mcs_core::fixtures::mk_export("c1", "svc", 1, spec).key;
    let items = world.store(region).await.items_of(&key).await.unwrap();
    let mut held: Vec<(String, bool)> = items
        .into_iter()
        .map(|i| {
            let origin = mcs_store::dynamo::raw::origin_of(&i).unwrap();
            (origin, mcs_store::dynamo::raw::decode(i).unwrap().is_tombstone())
        })
        .collect();
    held.sort();
    held
}
