//! The mass-expiry hold under a replication stall.

use super::*;

/// Many pools heartbeat in A; A → B stalls; B sees their leases run out
/// together, holds the expiries (lists stay, `complete: false`) for at most
/// --expiry-hold-max-secs, then lets them go; replication resumes and B
/// lists them again.
///
/// And the hold as docs/design.md §6 states it: B keeps every pool until the
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
    // Pools of two clusters: a wave spans two holders or more.
    let bodies: Vec<Value> = (0..POOLS)
        .map(|i| pool(&format!("c{}", i % 2), &format!("held-{i:02}"), 1, lease.clone()))
        .collect();

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
