//! API tests through `router(state).oneshot(..)`: every endpoint, every
//! error status, on the embedded store with a hand-driven clock.

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

mod hardening;
mod limits;
mod openapi_contract;

#[tokio::test]
async fn register_list_and_withdraw_a_pool() {
    let h = harness().await;
    let reply = h.send(Method::POST, "/v1/pools", pool("llama")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let pool_id = reply.body["pool_id"].as_str().unwrap().to_owned();
    assert_eq!(reply.body["lease"], json!({"duration_secs": 30, "heartbeat_interval_secs": 10}));
    assert!(reply.body["generation"].as_u64().unwrap() >= T0 << 16);

    // Read-your-writes: no reader poll in between.
    let list = h.get("/v1/pools").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["pools"][0]["pool_id"], json!(pool_id));
    assert_eq!(list.body["pools"][0]["model"], json!("meta-llama/Llama-3.1-8B"));
    assert_eq!(list.body["complete"], json!(true));
    let etag = list.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, format!("\"{}\"", fingerprint(&list)));

    let deleted = h.call(Method::DELETE, &format!("/v1/pools/{pool_id}"), None, &[]).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    assert!(
        deleted.body["generation"].as_u64().unwrap() > reply.body["generation"].as_u64().unwrap()
    );
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]));
    let again = h.call(Method::DELETE, &format!("/v1/pools/{pool_id}"), None, &[]).await;
    assert_eq!(again.status, StatusCode::OK, "withdrawing twice is idempotent");
    assert_eq!(again.body["generation"], deleted.body["generation"]);
}

#[tokio::test]
async fn unversioned_aliases_serve_the_same_lists() {
    let h = harness().await;
    assert_eq!(h.send(Method::POST, "/pools", pool("a")).await.status, StatusCode::OK);
    let v1 = h.get("/v1/pools").await;
    let alias = h.get("/pools").await;
    assert_eq!(alias.body, v1.body);
    assert_eq!(alias.body["pools"].as_array().unwrap().len(), 1);
    let reg = json!({"router_id": "gr-0", "address": "10.0.0.9:8080"});
    assert_eq!(h.send(Method::POST, "/v1/routers", reg).await.status, StatusCode::OK);
    assert_eq!(h.get("/routers").await.body, h.get("/v1/routers").await.body);
    assert_eq!(h.get("/healthz").await.body["status"], json!("ok"));
}

#[tokio::test]
async fn routers_register_list_and_withdraw() {
    let h = harness().await;
    let reg = json!({"router_id": "gr-0.us-east-1", "address": "10.0.0.9:8080", "incarnation": "r1",
                     "lease": {"duration_secs": 60, "heartbeat_interval_secs": 20}});
    let reply = h.send(Method::POST, "/v1/routers", reg).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["lease"]["duration_secs"], json!(60), "the lease asked for is granted");
    let list = h.get("/v1/routers").await;
    assert_eq!(list.body["routers"][0]["address"], json!("10.0.0.9:8080"));
    let other =
        h.call(Method::DELETE, "/v1/routers/gr-0.us-east-1?incarnation=r2", None, &[]).await;
    assert_eq!(other.status, StatusCode::CONFLICT, "another incarnation may not withdraw it");
    h.clock.advance(60_000 + SKEW - 1);
    assert_eq!(
        h.get("/v1/routers").await.body["routers"].as_array().unwrap().len(),
        1,
        "60 s lease"
    );
    let mine = h.call(Method::DELETE, "/v1/routers/gr-0.us-east-1?incarnation=r1", None, &[]).await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.body);
    assert_eq!(h.get("/v1/routers").await.body["routers"], json!([]));
}

#[tokio::test]
async fn clusters_exports_and_imports() {
    let h = harness().await;
    let early = h
        .send(Method::PUT, "/v1/clusters/east/exports/llm/web", export("2026-12-01T00:00:00Z", 80))
        .await;
    assert_eq!(early.status, StatusCode::OK, "{}", early.body);
    assert_eq!(early.body["conditions"][1]["reason"], json!("NoClusterLease"));
    assert_eq!(h.get("/v1/imports").await.body["imports"], json!([]), "no cluster lease yet");

    for cluster in ["east", "west"] {
        let reply = h
            .send(
                Method::PUT,
                &format!("/v1/clusters/{cluster}"),
                json!({"incarnation": format!("{cluster}-1"), "generation": 17}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["generation"], json!(17));
    }
    assert_eq!(h.get("/v1/clusters").await.body["clusters"].as_array().unwrap().len(), 2);
    let west = h
        .send(
            Method::PUT,
            "/v1/clusters/west/exports/llm/web",
            export("2026-12-02T00:00:00Z", 8080),
        )
        .await;
    assert_eq!(west.status, StatusCode::OK);
    let conflict = &west.body["conditions"][2];
    assert_eq!(
        (conflict["type"].as_str(), conflict["status"].as_str(), conflict["reason"].as_str()),
        (Some("Conflict"), Some("True"), Some("PortConflict"))
    );

    let imports = h.get("/v1/imports").await;
    let import = &imports.body["imports"][0];
    assert_eq!(import["ports"][0]["port"], json!(80), "the oldest export's port wins");
    assert_eq!(import["clusters"].as_array().unwrap().len(), 2);
    let exports = h.get("/v1/exports").await;
    for e in exports.body["exports"].as_array().unwrap() {
        assert_eq!(
            e["conditions"][2]["status"],
            json!("True"),
            "every export reports the conflict"
        );
    }

    let gone = h
        .call(Method::DELETE, "/v1/clusters/east/exports/llm/web?incarnation=east-1", None, &[])
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    let imports = h.get("/v1/imports").await;
    assert_eq!(imports.body["imports"][0]["ports"][0]["port"], json!(8080));
    assert_eq!(
        h.get("/v1/exports").await.body["exports"][0]["conditions"][2]["status"],
        json!("False")
    );

    let left = h
        .call(Method::DELETE, "/v1/clusters/west?incarnation=west-1&generation=18", None, &[])
        .await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.body);
    assert_eq!(
        h.get("/v1/imports").await.body["imports"],
        json!([]),
        "exports live on their cluster"
    );
    assert_eq!(h.get("/v1/exports").await.body["exports"], json!([]));
}

#[tokio::test]
async fn an_export_is_withdrawn_only_by_its_cluster_lease_holder_while_it_is_live() {
    let h = harness().await;
    let reply = h.send(Method::PUT, "/v1/clusters/east", json!({"incarnation": "east-1"})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = h
        .send(Method::PUT, "/v1/clusters/east/exports/llm/web", export("2026-12-01T00:00:00Z", 80))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    for query in ["", "?incarnation=east-0"] {
        let uri = format!("/v1/clusters/east/exports/llm/web{query}");
        let refused = h.call(Method::DELETE, &uri, None, &[]).await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{query}: {}", refused.body);
        assert_eq!(refused.body["error"], json!("owned"));
        assert_eq!(refused.body["owner"], json!("east-1"));
        assert!(refused.body["lease_until_ms"].is_u64(), "{}", refused.body);
    }
    assert_eq!(h.get("/v1/exports").await.body["exports"].as_array().unwrap().len(), 1);

    // Once the cluster is withdrawn its exports are no longer served, and
    // anyone may withdraw them (cleaning up what a removed cluster left).
    let left = h.call(Method::DELETE, "/v1/clusters/east?incarnation=east-1", None, &[]).await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.body);
    assert_eq!(h.get("/v1/exports").await.body["exports"], json!([]));
    let cleaned = h.call(Method::DELETE, "/v1/clusters/east/exports/llm/web", None, &[]).await;
    assert_eq!(cleaned.status, StatusCode::OK, "{}", cleaned.body);
}

#[tokio::test]
async fn a_cluster_body_must_match_its_path() {
    let h = harness().await;
    let reply = h
        .send(Method::PUT, "/v1/clusters/east", json!({"cluster_id": "west", "incarnation": "i"}))
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.body["field"], json!("cluster_id"));
    let reply = h.send(Method::PUT, "/v1/clusters/East", json!({"incarnation": "i"})).await;
    assert_eq!(reply.body["field"], json!("cluster_id"));
    let reply = h
        .send(Method::PUT, "/v1/clusters/east/exports/LLM/web", export("2026-12-01T00:00:00Z", 80))
        .await;
    assert_eq!(
        (reply.status, reply.body["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("namespace"))
    );
    assert_eq!(h.stored().await, 0);
}

#[tokio::test]
async fn ownership_blocks_other_incarnations_until_the_lease_expires() {
    let h = harness().await;
    let by_x = with(pool("a"), "incarnation", json!("x"));
    assert_eq!(h.send(Method::POST, "/v1/pools", by_x).await.status, StatusCode::OK);
    let by_y = with(with(pool("a"), "incarnation", json!("y")), "model", json!("other"));
    let refused = h.send(Method::POST, "/v1/pools", by_y.clone()).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.body["error"], json!("owned"));
    assert_eq!(refused.body["owner"], json!("x"));
    assert_eq!(refused.body["lease_until_ms"], json!(T0 + 30_000));
    assert_eq!(
        h.get("/v1/pools").await.body["pools"][0]["model"],
        json!("meta-llama/Llama-3.1-8B")
    );

    h.clock.advance(30_000);
    let taken = h.send(Method::POST, "/v1/pools", by_y).await;
    assert_eq!(taken.status, StatusCode::OK, "{}", taken.body);
    assert_eq!(h.get("/v1/pools").await.body["pools"][0]["model"], json!("other"));
}

#[tokio::test]
async fn heartbeats_and_repeats_keep_the_fingerprint() {
    let h = harness().await;
    let first = h.send(Method::POST, "/v1/pools", pool("a")).await;
    let fp = fingerprint(&h.get("/v1/pools").await);
    h.clock.advance(10_000);
    let beat = h.send(Method::POST, "/v1/pools", pool("a")).await;
    assert_eq!(
        beat.body["generation"], first.body["generation"],
        "a heartbeat keeps the generation"
    );
    assert_eq!(fingerprint(&h.get("/v1/pools").await), fp);
    // The heartbeat moved the lease: still served past the first lease's end.
    h.clock.advance(25_000);
    assert_eq!(h.get("/v1/pools").await.body["pools"].as_array().unwrap().len(), 1);
    h.clock.advance(5_000 + SKEW);
    let expired = h.get("/v1/pools").await;
    assert_eq!(expired.body["pools"], json!([]), "expired after lease plus skew");
    assert_ne!(fingerprint(&expired), fp);

    // The same content in a fresh registry gives the same fingerprint.
    let other = harness().await;
    other.send(Method::POST, "/v1/pools", pool("a")).await;
    assert_eq!(fingerprint(&other.get("/v1/pools").await), fp);
}

#[tokio::test]
async fn after_a_withdrawal_an_older_generation_is_refused() {
    let h = harness().await;
    let reg = with(with(pool("a"), "incarnation", json!("x")), "generation", json!(5));
    assert_eq!(h.send(Method::POST, "/v1/pools", reg).await.status, StatusCode::OK);
    let pool_id = h.get("/v1/pools").await.body["pools"][0]["pool_id"].as_str().unwrap().to_owned();
    let gone = h
        .call(Method::DELETE, &format!("/v1/pools/{pool_id}?incarnation=x&generation=6"), None, &[])
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    assert_eq!(gone.body["generation"], json!(6));
    let late = with(with(pool("a"), "incarnation", json!("x")), "generation", json!(5));
    let refused = h.send(Method::POST, "/v1/pools", late).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.body["error"], json!("stale_generation"));
    assert_eq!(refused.body["stored_generation"], json!(6));
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]), "stays withdrawn");
}

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_stored() {
    let h = harness().await;
    let cases: Vec<(Option<String>, StatusCode, Option<&str>)> = vec![
        (Some("{\"pool_key\":".into()), StatusCode::BAD_REQUEST, None),
        (Some("not json".into()), StatusCode::BAD_REQUEST, None),
        (Some(String::new()), StatusCode::BAD_REQUEST, None),
        (Some(format!("{} trailing", pool("a"))), StatusCode::BAD_REQUEST, None),
        (
            Some(with(pool("a"), "model", json!("  ")).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("model"),
        ),
        (
            Some(
                {
                    let mut p = pool("a");
                    p["pool_key"]["namespace"] = json!("Bad_NS");
                    p
                }
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("pool_key.namespace"),
        ),
        (
            Some(
                with(
                    pool("a"),
                    "lease",
                    json!({"duration_secs": 10, "heartbeat_interval_secs": 10}),
                )
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("lease"),
        ),
        (
            Some(
                with(
                    pool("a"),
                    "lease",
                    json!({"duration_secs": 90000, "heartbeat_interval_secs": 10}),
                )
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("lease.duration_secs"),
        ),
        (
            Some(
                {
                    let mut p = pool("a");
                    p["capacity"]["workers"] = json!(-1);
                    p
                }
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("capacity.workers"),
        ),
        (
            Some(with(pool("a"), "relay_address", json!("nowhere")).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("relay_address"),
        ),
        (
            Some(
                {
                    let mut p = pool("a");
                    p.as_object_mut().unwrap().remove("model");
                    p
                }
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("model"),
        ),
        (
            Some(with(pool("a"), "generation", json!(3)).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("incarnation"),
        ),
        (
            Some(with(pool("a"), "relay_identities", json!(["x".repeat(4096)])).to_string()),
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
        ),
    ];
    for (body, status, field) in cases {
        let shown = body.clone().unwrap_or_default().chars().take(80).collect::<String>();
        let reply = h.call(Method::POST, "/v1/pools", body, &[]).await;
        assert_eq!(reply.status, status, "{shown}: {}", reply.body);
        if let Some(field) = field {
            assert_eq!(reply.body["field"], json!(field), "{shown}");
            assert_eq!(reply.body["error"], json!("invalid_argument"));
        }
        assert!(
            reply.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{shown}: a message"
        );
    }
    assert_eq!(h.stored().await, 0, "nothing is stored");
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]));
}

#[tokio::test]
async fn unknown_routes_records_and_methods() {
    let h = harness().await;
    let missing = h.call(Method::DELETE, &format!("/v1/pools/{}", "0".repeat(32)), None, &[]).await;
    assert_eq!(
        (missing.status, missing.body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let bad_id = h.call(Method::DELETE, "/v1/pools/xyz", None, &[]).await;
    assert_eq!(
        (bad_id.status, bad_id.body["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("pool_id"))
    );
    assert_eq!(h.get("/v2/everything").await.status, StatusCode::NOT_FOUND);
    let wrong = h.call(Method::PATCH, "/v1/pools", None, &[]).await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(wrong.body["message"].is_string());
    let bad_query = h.get("/v1/pools?watch=maybe").await;
    assert_eq!(
        (bad_query.status, bad_query.body["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("watch"))
    );
    let bad_delete = h
        .call(Method::DELETE, &format!("/v1/pools/{}?generation=4", "0".repeat(32)), None, &[])
        .await;
    assert_eq!(bad_delete.body["field"], json!("incarnation"));
}

#[tokio::test]
async fn storage_outage_answers_503_and_recovers() {
    let mut h = harness().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    h.store.set_unavailable(true);
    let refused = h.send(Method::POST, "/v1/pools", pool("b")).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.body["error"], json!("unavailable"));
    assert_eq!(refused.headers["retry-after"], "1");
    // Reads keep serving the last view; it turns incomplete once stale.
    h.clock.advance(31_000);
    h.registry.reader.poll_once().await;
    let list = h.get("/v1/pools").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["complete"], json!(false));
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/v1/pools").await.body["complete"], json!(true));
    assert_eq!(h.send(Method::POST, "/v1/pools", pool("b")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn readiness_waits_for_the_first_full_read() {
    let mut h = unready_harness();
    assert_eq!(h.get("/readyz").await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(h.get("/v1/pools").await.body["complete"], json!(false));
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
    assert_eq!(h.get("/v1/pools").await.body["complete"], json!(true));
}

/// Issue 14, defect 6: readiness as docs/operations.md (Probes) defines it.
/// With storage down, a ready registry stays ready by default (its stale
/// view is worth serving), and says how stale it is.
#[tokio::test]
async fn readiness_reports_staleness_and_survives_a_storage_outage_by_default() {
    let mut h = harness().await;
    let ready = h.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.body["complete"], json!(true));
    assert_eq!(ready.body["holding_expiries"], json!(false));
    assert_eq!(ready.body["last_poll_age_ms"], json!(0));
    h.store.set_unavailable(true);
    h.clock.advance(31_000);
    h.registry.reader.poll_once().await;
    let stale = h.get("/readyz").await;
    assert_eq!(stale.status, StatusCode::OK, "a stale view is still served");
    assert_eq!(stale.body["complete"], json!(false));
    assert_eq!(stale.body["last_poll_age_ms"], json!(31_000));
    h.clock.advance(3_600_000);
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK, "no bound by default");
}

/// With `--ready-max-staleness-secs`, a registry whose last successful poll
/// is older than the bound leaves the load balancer, and comes back with
/// the next successful poll.
#[tokio::test]
async fn readiness_with_a_staleness_bound_follows_storage() {
    let mut h = unready_harness_with(&["--ready-max-staleness-secs", "40"]);
    h.registry.reader.poll_once().await;
    h.store.set_unavailable(true);
    h.clock.advance(40_000);
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK, "at the bound: still ready");
    h.clock.advance(1);
    let out = h.get("/readyz").await;
    assert_eq!(out.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(out.body["error"], json!("unavailable"));
    assert!(out.body["message"].as_str().unwrap().contains("--ready-max-staleness-secs"));
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn etags_and_long_polls() {
    let h = harness().await;
    let list = h.get("/v1/pools").await;
    let etag = list.headers["etag"].to_str().unwrap().to_owned();
    let cached = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &etag)]).await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);
    assert_eq!(cached.headers["etag"].to_str().unwrap(), etag);

    // A watch with nothing changing ends with 304 at its timeout.
    let started = std::time::Instant::now();
    let idle = h
        .call(Method::GET, "/v1/pools?watch=true&timeout_secs=1", None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(idle.status, StatusCode::NOT_MODIFIED);
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));

    // A watch returns the new list as soon as a write changes it.
    let state = h.registry.state.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let request = Request::post("/v1/pools").body(Body::from(pool("w").to_string())).unwrap();
        router(state).oneshot(request).await.unwrap().status()
    });
    let woken = h
        .call(
            Method::GET,
            "/v1/pools?watch=true&timeout_secs=30",
            None,
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(writer.await.unwrap(), StatusCode::OK);
    assert_eq!(woken.status, StatusCode::OK);
    assert_eq!(woken.body["pools"].as_array().unwrap().len(), 1);
    assert_ne!(woken.headers["etag"].to_str().unwrap(), etag);

    // Shutdown ends waiting long-polls at once.
    let etag = woken.headers["etag"].to_str().unwrap().to_owned();
    let stop = h.registry.shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        stop.send_replace(true);
    });
    let started = std::time::Instant::now();
    let ended = h
        .call(
            Method::GET,
            "/v1/pools?watch=true&timeout_secs=30",
            None,
            &[("if-none-match", &etag)],
        )
        .await;
    assert_eq!(ended.status, StatusCode::NOT_MODIFIED);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test]
async fn a_mass_expiry_is_held_then_released_and_a_lone_one_is_not() {
    let mut h = harness().await;
    for name in ["a", "b", "c", "d", "e", "f"] {
        assert_eq!(h.send(Method::POST, "/v1/pools", pool(name)).await.status, StatusCode::OK);
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
                    Some(lease) => with(pool(name), "lease", lease.clone()),
                    None => pool(name),
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

#[tokio::test]
async fn writes_are_later_than_what_they_follow_even_against_a_fast_clock() {
    let h = harness().await;
    // A record written by a registrar whose clock runs 5 s ahead.
    let mut ahead = mcs_core::fixtures::mk_pool("a", 1, "reg-fast", None, Some(T0 + 60_000));
    ahead.body = mcs_core::Body::Pool(
        serde_json::from_value(with(pool("a"), "pool_id", json!(ahead_id()))).unwrap(),
    );
    ahead.changed_at_ms = T0 + 5_000;
    ahead.key = mcs_core::Key::Pool { pool_id: mcs_api::PoolId::parse(&ahead_id()).unwrap() };
    h.store.put(&ahead, T0).await.unwrap();
    h.registry.state.view.apply(ahead.clone());
    let reply = h.send(Method::POST, "/v1/pools", with(pool("a"), "model", json!("changed"))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let stored = h.store.get(&ahead.key).await.unwrap().unwrap();
    assert_eq!(stored.changed_at_ms, T0 + 5_001, "after the record it replaced, not at this clock");
    assert!(stored.version > ahead.version);
}

fn ahead_id() -> String {
    let key: mcs_api::PoolKey = serde_json::from_value(pool("a")["pool_key"].clone()).unwrap();
    key.id().to_string()
}

#[tokio::test]
async fn a_withdrawal_fences_its_incarnation_against_late_registrations() {
    let h = harness().await;
    let by_x = with(pool("a"), "incarnation", json!("x"));
    let first = h.send(Method::POST, "/v1/pools", by_x.clone()).await;
    let pool_id = first.body["pool_id"].as_str().unwrap().to_owned();
    let gone =
        h.call(Method::DELETE, &format!("/v1/pools/{pool_id}?incarnation=x"), None, &[]).await;
    assert_eq!(gone.status, StatusCode::OK);
    // A heartbeat x sent before withdrawing, arriving late.
    let late = h.send(Method::POST, "/v1/pools", by_x).await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.body);
    assert_eq!(late.body["stored_generation"], gone.body["generation"]);
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]), "stays withdrawn");
    let by_y = with(pool("a"), "incarnation", json!("y"));
    assert_eq!(
        h.send(Method::POST, "/v1/pools", by_y).await.status,
        StatusCode::OK,
        "a new incarnation may"
    );
}

#[tokio::test]
async fn an_etag_taken_while_complete_does_not_match_an_incomplete_list() {
    let mut h = stale_after_5s().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    let list = h.get("/v1/pools").await;
    let etag = list.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, format!("\"{}\"", fingerprint(&list)));
    let cached = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &etag)]).await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);

    // An outage outlasts --stale-after-secs, not the lease: same content,
    // incomplete.
    h.store.set_unavailable(true);
    h.clock.advance(6_000);
    h.registry.reader.poll_once().await;
    let stale = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &etag)]).await;
    assert_eq!(stale.status, StatusCode::OK, "a 304 would hide complete: false");
    assert_eq!(stale.body["complete"], json!(false));
    assert_eq!(fingerprint(&stale), fingerprint(&list), "the body's fingerprint stays plain");
    let incomplete = stale.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(incomplete, format!("\"{}-incomplete\"", fingerprint(&list)));
    let cached = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &incomplete)]).await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);

    // Recovery: the incomplete validator no longer matches.
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    let back = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &incomplete)]).await;
    assert_eq!(back.status, StatusCode::OK);
    assert_eq!(back.body["complete"], json!(true));
    assert_eq!(back.headers["etag"].to_str().unwrap(), etag);
}

#[tokio::test]
async fn a_flip_of_complete_wakes_watchers_both_ways() {
    let h = stale_after_5s().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    let etag = h.get("/v1/pools").await.headers["etag"].to_str().unwrap().to_owned();
    let h = Arc::new(tokio::sync::Mutex::new(h));

    // Each step flips completeness 200 ms into a watch that would otherwise
    // wait 10 s: the outage, then the recovery.
    async fn watch_through(
        h: &Arc<tokio::sync::Mutex<Harness>>,
        etag: &str,
        outage: bool,
    ) -> (Reply, std::time::Duration) {
        let (state, store, clock) = {
            let h = h.lock().await;
            (h.registry.state.clone(), h.store.clone(), h.clock.clone())
        };
        let flipper = {
            let h = h.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                store.set_unavailable(outage);
                if outage {
                    clock.advance(6_000);
                }
                h.lock().await.registry.reader.poll_once().await;
            })
        };
        let started = std::time::Instant::now();
        let request = Request::get("/v1/pools?watch=true&timeout_secs=10")
            .header("if-none-match", etag)
            .body(Body::empty())
            .unwrap();
        let response = router(state).oneshot(request).await.unwrap();
        let waited = started.elapsed();
        flipper.await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let body =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
        (Reply { status, headers, body }, waited)
    }

    let (woken, waited) = watch_through(&h, &etag, true).await;
    assert_eq!(woken.status, StatusCode::OK, "woken by the turn to incomplete");
    assert_eq!(woken.body["complete"], json!(false));
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    let incomplete = woken.headers["etag"].to_str().unwrap().to_owned();

    let (woken, waited) = watch_through(&h, &incomplete, false).await;
    assert_eq!(woken.status, StatusCode::OK, "woken by the turn back to complete");
    assert_eq!(woken.body["complete"], json!(true));
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    assert_eq!(woken.headers["etag"].to_str().unwrap(), etag);
}

/// A ready harness whose view turns incomplete 5 s after its last
/// successful poll, well within the 30 s leases.
async fn stale_after_5s() -> Harness {
    let mut h = unready_harness_with(&["--stale-after-secs", "5"]);
    h.registry.reader.poll_once().await;
    h
}
