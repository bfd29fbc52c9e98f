//! Multi-region scenarios (docs/design.md §1, §9, §10): regional tables of one
//! moto_server, a test replicator between them that can delay, reorder,
//! lose, hold and partition, and one real `mcs-registry` per region. The
//! regions must converge to the same fingerprints, lose no acknowledged
//! write and resurrect nothing.
//!
//! Run with `scripts/with-moto.sh cargo test -p mcs-registry --test
//! multiregion`; without a DynamoDB endpoint every scenario skips with a
//! notice, or fails where the DynamoDB tests are required (`scripts/test`,
//! CI: see `mcs_store::testsuite::dynamodb_endpoint`). The harness and the
//! replicator are `mcs_testkit::multiregion`; the scenarios are one topic
//! a file under `multiregion/` (visibility, convergence, durability, hold),
//! the helpers they share here.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

#[path = "multiregion/convergence.rs"]
mod convergence;
#[path = "multiregion/durability.rs"]
mod durability;
#[path = "multiregion/hold.rs"]
mod hold;
#[path = "multiregion/visibility.rs"]
mod visibility;

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
