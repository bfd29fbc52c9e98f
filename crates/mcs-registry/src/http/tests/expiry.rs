//! Lease expiry and the mass-expiry hold: a lone dead pool goes at its
//! lease end, a stall of every holder is held.

use super::*;

/// Pool `dgd` in a cluster of its own (`c-{dgd}`): a wave needs the leases
/// of two holders or more.
fn pool_in_own_cluster(dgd: &str) -> Value {
    with(
        pool(dgd),
        "pool_key",
        json!({"cluster_id": format!("c-{dgd}"), "namespace": "llm", "dgd_name": dgd}),
    )
}

#[tokio::test]
async fn a_mass_expiry_is_held_then_released_and_a_lone_one_is_not() {
    let mut h = harness().await;
    for name in ["a", "b", "c", "d", "e", "f"] {
        let body = pool_in_own_cluster(name);
        assert_eq!(h.send(Method::POST, "/v1/pools", body).await.status, StatusCode::OK);
    }
    h.clock.advance(30_000 + SKEW);
    h.registry.reader.poll_once().await;
    let held = h.get("/v1/pools").await;
    assert_eq!(held.body["pools"].as_array().unwrap().len(), 6, "all six expire at once: held");
    assert_eq!(held.body["complete"], json!(false), "a hold is reported");
    h.clock.advance(30_000);
    h.registry.reader.poll_once().await;
    let released = h.get("/v1/pools").await;
    assert_eq!(released.body["pools"], json!([]), "released after --expiry-hold-max-secs");
    assert_eq!(released.body["complete"], json!(true));

    let mut lone = harness().await;
    lone.send(Method::POST, "/v1/pools", pool("a")).await;
    lone.clock.advance(30_000 + SKEW);
    lone.registry.reader.poll_once().await;
    let gone = lone.get("/v1/pools").await;
    assert_eq!(gone.body["pools"], json!([]), "a lone expiry is never held");
    assert_eq!(gone.body["complete"], json!(true));
}

/// Drives `h` for `secs` seconds in steps of 500 ms: pools `alive` renew
/// every `every_ms` (with `lease` in the body when given), `stopped` stop
/// renewing after `stop_ms`; the reader polls every step. Returns, per step,
/// the time, the listed pools' dgd names, `complete`, and whether a hold is
/// in force.
async fn heartbeat_run(
    h: &mut Harness,
    pools: &[(&str, Option<Value>, Option<u64>)],
    every_ms: u64,
    secs: u64,
) -> Vec<(u64, Vec<String>, bool, bool)> {
    let mut seen = Vec::new();
    for step in 0..=secs * 2 {
        let t = step * 500;
        if t % every_ms == 0 {
            for (name, lease, stop_ms) in pools {
                if stop_ms.is_some_and(|stop| t > stop) {
                    continue;
                }
                let body = match lease {
                    Some(lease) => with(pool_in_own_cluster(name), "lease", lease.clone()),
                    None => pool_in_own_cluster(name),
                };
                assert_eq!(h.send(Method::POST, "/v1/pools", body).await.status, StatusCode::OK);
            }
        }
        h.registry.reader.poll_once().await;
        let list = h.get("/v1/pools").await;
        let names = list.body["pools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pool_key"]["dgd_name"].as_str().unwrap().to_owned())
            .collect();
        let complete = list.body["complete"] == json!(true);
        seen.push((t, names, complete, h.registry.state.view.is_holding()));
        h.clock.advance(500);
    }
    seen
}

/// Issue 14, defect 1, with the README walkthrough's flags (6 s leases,
/// heartbeats every 2 s, the default 10 s hold window): four pools
/// heartbeat, one stops. Only the stopped pool missed a renewal, so its
/// lone expiry is not held: it disappears at its lease end plus the skew
/// allowance, and lists stay complete throughout.
#[tokio::test]
async fn one_dead_pool_among_short_healthy_leases_is_not_held() {
    let mut h =
        unready_harness_with(&["--lease-duration-secs", "6", "--heartbeat-interval-secs", "2"]);
    h.registry.reader.poll_once().await;
    let pools = [("a", None, None), ("b", None, None), ("c", None, None), ("d", None, Some(4_000))];
    let seen = heartbeat_run(&mut h, &pools, 2_000, 20).await;
    // d renewed last at 4 s: served until 4 + 6 + 1 (skew) = 11 s.
    for (t, names, complete, holding) in &seen {
        assert!(complete, "complete at {t} ms: {seen:?}");
        assert!(!holding, "no hold at {t} ms");
        assert_eq!(names.contains(&"d".to_owned()), *t < 11_000, "d at {t} ms: {names:?}");
        assert_eq!(names.len(), if *t < 11_000 { 4 } else { 3 }, "at {t} ms");
    }
}

/// The same with the default flags (30 s leases, 10 s hold window) and
/// clients that asked for short leases of mixed lengths in their requests.
#[tokio::test]
async fn one_dead_pool_among_client_chosen_short_leases_is_not_held() {
    let mut h = harness().await;
    let three = json!({"duration_secs": 3, "heartbeat_interval_secs": 1});
    let five = json!({"duration_secs": 5, "heartbeat_interval_secs": 1});
    let pools = [
        ("a", Some(three.clone()), None),
        ("b", Some(five.clone()), None),
        ("c", None, None),
        ("d", Some(three), None),
        ("e", Some(five), Some(3_000)),
    ];
    let seen = heartbeat_run(&mut h, &pools, 1_000, 15).await;
    // e renewed last at 3 s: served until 3 + 5 + 1 = 9 s.
    for (t, names, complete, holding) in &seen {
        assert!(*complete && !holding, "complete, no hold at {t} ms: {seen:?}");
        assert_eq!(names.contains(&"e".to_owned()), *t < 9_000, "e at {t} ms: {names:?}");
        assert_eq!(names.len(), if *t < 9_000 { 5 } else { 4 }, "at {t} ms");
    }
}

/// A real stall (here: every holder stops renewing at once) is still held
/// with short leases: every lease misses its renewals before the first
/// one runs out.
#[tokio::test]
async fn every_short_lease_missing_its_renewals_is_held() {
    let mut h =
        unready_harness_with(&["--lease-duration-secs", "6", "--heartbeat-interval-secs", "2"]);
    h.registry.reader.poll_once().await;
    let stop = Some(4_000);
    let pools = [("a", None, stop), ("b", None, stop), ("c", None, stop), ("d", None, stop)];
    let seen = heartbeat_run(&mut h, &pools, 2_000, 20).await;
    for (t, names, complete, holding) in &seen {
        match *t {
            ..11_000 => assert!(*complete && names.len() == 4, "before the expiry, {t} ms"),
            // Held from the expiry at 11 s for --expiry-hold-max-secs (30 s).
            11_000.. => {
                assert!(!complete && *holding && names.len() == 4, "held at {t} ms: {seen:?}")
            }
        }
    }
}

/// Issue 22, item 8: any authorized writer could flip every list to
/// `complete: false` for the whole hold, again and again, by registering a
/// dozen pools with 2 s leases that lapse together. They are one holder's
/// (one cluster's) leases: they expire, and nothing is held for the others.
#[tokio::test]
async fn one_writers_short_leases_lapsing_together_hold_nothing() {
    let mut h = harness().await;
    for name in ["x", "y"] {
        let body = pool_in_own_cluster(name);
        assert_eq!(h.send(Method::POST, "/v1/pools", body).await.status, StatusCode::OK);
    }
    let short = json!({"duration_secs": 2, "heartbeat_interval_secs": 1});
    for n in 0..12 {
        let body = with(pool(&format!("burst-{n}")), "lease", short.clone());
        assert_eq!(h.send(Method::POST, "/v1/pools", body).await.status, StatusCode::OK);
    }
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/v1/pools").await.body["pools"].as_array().unwrap().len(), 14);
    h.clock.advance(2_000 + SKEW + 1);
    h.registry.reader.poll_once().await;
    let after = h.get("/v1/pools").await;
    assert_eq!(after.body["complete"], json!(true), "no hold: {}", after.body);
    let names: Vec<&str> = after.body["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pool_key"]["dgd_name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "the burst expired, the others stay: {names:?}");
}
