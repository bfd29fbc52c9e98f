//! API tests through `router(state).oneshot(..)`: every endpoint, every
//! error status, on the embedded store with a hand-driven clock. This file
//! holds the harness and the request bodies; the tests are one topic a
//! file under `tests/`: resources, ownership, validation, readiness,
//! watch, expiry, limits, hardening and the OpenAPI contract.

use super::*;
use crate::clock::ManualClock;
use crate::config::{Args, Settings};
use crate::server::Registry;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use clap::Parser;
use mcs_store::{MemoryStore, Store};
use serde_json::{Value, json};
use tower::ServiceExt;

const T0: u64 = 1_800_000_000_000;
const SKEW: u64 = 1_000;

struct Harness {
    registry: Registry,
    clock: Arc<ManualClock>,
    store: Arc<MemoryStore>,
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

async fn harness() -> Harness {
    let h = unready_harness();
    let mut h = h;
    h.registry.reader.poll_once().await;
    h
}

fn unready_harness() -> Harness {
    unready_harness_with(&[])
}

/// A harness whose flags are the defaults below plus `extra`.
fn unready_harness_with(extra: &[&str]) -> Harness {
    harness_on(Arc::new(MemoryStore::new()), Arc::new(ManualClock::new(T0)), "reg-a", extra)
}

/// A registry (not yet polled) on `store`, as writer `writer`, with the
/// test flags plus `extra`.
fn harness_on(
    store: Arc<MemoryStore>,
    clock: Arc<ManualClock>,
    writer: &str,
    extra: &[&str],
) -> Harness {
    let mut argv = vec![
        "mcs-registry",
        "--lease-duration-secs",
        "30",
        "--heartbeat-interval-secs",
        "10",
        "--skew-allowance-ms",
        "1000",
        "--max-body-bytes",
        "4096",
        "--writer-id",
        writer,
    ];
    // A flag in `extra` replaces its default above.
    let mut i = 1;
    while i + 1 < argv.len() {
        if extra.contains(&argv[i]) {
            argv.drain(i..i + 2);
        } else {
            i += 2;
        }
    }
    argv.extend_from_slice(extra);
    let args = Args::try_parse_from(argv).unwrap();
    let settings = Settings::from_args(&args).unwrap();
    let registry = Registry::new(store.clone(), clock.clone(), &settings);
    Harness { registry, clock, store }
}

impl Harness {
    async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<String>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(body.map_or_else(Body::empty, Body::from)).unwrap();
        let response = router(self.registry.state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let body =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
        Reply { status, headers, body }
    }

    async fn get(&self, uri: &str) -> Reply {
        self.call(Method::GET, uri, None, &[]).await
    }

    /// A long-poll of the pools (30 s at most) past the list of `etag`.
    async fn watch_pools(&self, etag: &str) -> Reply {
        let uri = "/v1/pools?watch=true&timeout_secs=30";
        self.call(Method::GET, uri, None, &[("if-none-match", etag)]).await
    }

    async fn send(&self, method: Method, uri: &str, body: Value) -> Reply {
        self.call(method, uri, Some(body.to_string()), &[]).await
    }

    async fn stored(&self) -> usize {
        self.store.read_all().await.unwrap().len()
    }
}

fn pool(dgd: &str) -> Value {
    json!({
        "pool_key": {"cluster_id": "us-east-1a", "namespace": "llm", "dgd_name": dgd},
        "model": "meta-llama/Llama-3.1-8B",
        "location": {"region": "us-east-1", "zone": "us-east-1a"},
        "capacity": {"workers": 4},
        "relay_address": "10.0.1.7:9000",
        "relay_identities": ["10.0.1.7"]
    })
}

fn with(mut value: Value, field: &str, v: Value) -> Value {
    value[field] = v;
    value
}

fn export(exported_at: &str, port: u16) -> Value {
    json!({
        "type": "ClusterSetIP",
        "ports": [{"name": "http", "protocol": "TCP", "port": port}],
        "session_affinity": "None",
        "exported_at": exported_at,
        "endpoints": [{"addresses": ["10.1.0.5"], "ready": true, "zone": "us-east-1a"}]
    })
}

fn fingerprint(reply: &Reply) -> String {
    reply.body["fingerprint"].as_str().unwrap().to_owned()
}

mod compression;
mod discovery;
mod events;
mod expiry;
mod faulty;
mod hardening;
mod limits;
mod openapi_contract;
mod ownership;
mod reach_back;
mod readiness;
mod resources;
mod status;
mod validation;
mod watch;
