//! What the client's tests share: a client of a fake registry and typed
//! requests built from the test kit's JSON fixtures.

#![allow(dead_code)]

use mcs_api::{
    ClusterRegistration, ExportKey, ExportRequest, PoolRegistration, RouterRegistration,
};
use mcs_client::{Backoff, Client, ClientConfig};
use mcs_testkit::fake::FakeRegistry;
use mcs_testkit::fixtures;
use serde_json::{Value, json};
use std::time::Duration;

/// A client of `fake` (plain http, opted in) with fast backoff and short
/// watches.
pub fn client(fake: &FakeRegistry) -> Client {
    Client::new(config(fake)).expect("client of the fake")
}

pub fn config(fake: &FakeRegistry) -> ClientConfig {
    let mut config = ClientConfig::new(fake.url());
    config.allow_insecure_http = true;
    config.backoff =
        Backoff { initial: Duration::from_millis(20), max: Duration::from_millis(200) };
    config.watch_timeout = Duration::from_secs(1);
    config
}

fn parse<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("fixture parses")
}

/// Pool `llm/{dgd}` of cluster `east`, with extra fields.
pub fn pool(dgd: &str, extra: Value) -> PoolRegistration {
    parse(fixtures::with(fixtures::pool("east", dgd, 2), extra))
}

pub fn router(id: &str) -> RouterRegistration {
    parse(fixtures::router(id))
}

pub fn cluster(incarnation: &str) -> ClusterRegistration {
    parse(fixtures::cluster(incarnation))
}

pub fn export(incarnation: &str) -> ExportRequest {
    parse(fixtures::with(
        fixtures::export("ClusterSetIP", "2026-12-02T08:00:00Z", "10.1.0.5"),
        json!({"incarnation": incarnation}),
    ))
}

pub fn export_key(cluster: &str, name: &str) -> ExportKey {
    parse(json!({"cluster_id": cluster, "namespace": "llm", "name": name}))
}
