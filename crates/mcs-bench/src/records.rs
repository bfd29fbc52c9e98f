//! Records and registrations of realistic size for the benchmarks: pool `i`
//! always has the same key, and `workers` changes its served content.

use mcs_api::{
    Capacity, HostPort, Label, Lease, Location, NonBlank, Pool, PoolKey, PoolRegistration,
};
use mcs_core::view::LeaseWindow;
use mcs_core::{Body, Key, LeaseTerms, Record, Version};

fn label(value: String) -> Label {
    // Only ever called with "cluster-NN", "llm" and "pool-N": valid labels.
    Label::new(value).unwrap_or_else(|e| panic!("benchmark labels are valid: {e}"))
}

fn non_blank(value: &str) -> NonBlank {
    NonBlank::new(value).unwrap_or_else(|e| panic!("benchmark values are not blank: {e}"))
}

/// The key of pool `i`: 16 clusters, one namespace, a deployment per pool.
pub fn pool_key(i: usize) -> PoolKey {
    PoolKey {
        cluster_id: label(format!("cluster-{:02}", i % 16)),
        namespace: label("llm".to_owned()),
        dgd_name: label(format!("pool-{i}")),
    }
}

fn relay_ip(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff)
}

/// Pool `i` as served, with `workers` workers.
pub fn pool(i: usize, workers: u32) -> Pool {
    let key = pool_key(i);
    let ip = relay_ip(i);
    Pool {
        pool_id: key.id(),
        pool_key: key,
        model: non_blank("meta-llama/Llama-3.1-8B-Instruct"),
        location: Location { region: non_blank("us-east-1"), zone: Some(non_blank("us-east-1a")) },
        capacity: Capacity { workers },
        relay_address: HostPort::new(format!("{ip}:9000"))
            .unwrap_or_else(|e| panic!("benchmark addresses are valid: {e}")),
        relay_identities: vec![non_blank(&ip)],
    }
}

/// The stored record of pool `i`, leased under the registry's default
/// terms (30 s, renewed every 10 s) as the registrar records them.
pub fn pool_record(
    i: usize,
    workers: u32,
    version: Version,
    changed_at_ms: u64,
    lease_until_ms: u64,
) -> Record {
    let body = pool(i, workers);
    Record {
        key: Key::Pool { pool_id: body.pool_id.clone() },
        version,
        owner: Some(format!("relay-{i}")),
        lease_until_ms: Some(lease_until_ms),
        changed_at_ms,
        terms: Some(LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 }),
        body: Body::Pool(body),
    }
}

/// `POST /v1/pools` of pool `i` with `workers` workers and, when given, a
/// lease of its own.
pub fn registration(i: usize, workers: u32, lease: Option<Lease>) -> PoolRegistration {
    let pool = pool(i, workers);
    PoolRegistration {
        pool_key: pool.pool_key,
        model: pool.model,
        location: pool.location,
        capacity: pool.capacity,
        relay_address: pool.relay_address,
        relay_identities: pool.relay_identities,
        lease,
        incarnation: None,
        generation: None,
    }
}

/// Milliseconds since the epoch by the system clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The registry's defaults a reader polls with: its refresh interval, its
/// lookback, and the lease horizon of a 30 s lease renewed every 10 s.
pub const REFRESH_MS: u64 = 2_000;
pub const LOOKBACK_MS: u64 = 10_000;
pub const HORIZON_MS: u64 = 17_000;

/// `n` pools renewed on time before `now_ms`, spread over the last heartbeat
/// interval as holders renew, under the default terms ([`pool_record`]).
pub fn renewing_pools(n: usize, now_ms: u64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let renewed = now_ms - (i as u64 * 10_000 / n as u64);
            pool_record(i, 4, Version::new(1, "w"), renewed, renewed + 30_000)
        })
        .collect()
}

/// The window of lease ends a reader with the defaults reads at the poll
/// starting at `polled_at` (one refresh after the last).
pub fn lease_window(polled_at: u64) -> LeaseWindow {
    LeaseWindow {
        from_ms: polled_at - REFRESH_MS - LOOKBACK_MS,
        to_ms: polled_at + HORIZON_MS,
        settled_ms: polled_at - LOOKBACK_MS,
        polled_at_ms: polled_at,
        raise_by_ms: polled_at + 2 * REFRESH_MS,
    }
}
