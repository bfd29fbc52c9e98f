//! What operators scrape and ship: the `/metrics` of a started registry
//! against the table of docs/configuration.md (neither may have a series
//! the other lacks), and the metric names of the Prometheus alerting rules
//! and the Grafana dashboard in deploy/ against what the registry exports.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

use mcs_testkit::RegistryProcess;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The binary under test.
const REGISTRY: &str = env!("CARGO_BIN_EXE_mcs-registry");

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The metric names in a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    mcs_testkit::metrics::exported_names(text)
}

/// The metric names of the table under "## Metrics" in
/// docs/configuration.md: the first cell of each row, in backquotes.
fn documented() -> BTreeSet<String> {
    mcs_testkit::metrics::documented_names(&read("docs/configuration.md"), "## Metrics")
}

/// Words that look like metric names of the registry in a file.
fn referenced(text: &str) -> BTreeSet<String> {
    mcs_testkit::metrics::referenced_names(text, &["mcs_", "process_"])
}

/// A registry with some traffic behind it: a registration, a list, a watch,
/// a withdrawal of an unknown pool; then its `/metrics`.
async fn scrape() -> String {
    let registry = RegistryProcess::start(REGISTRY, &[] as &[&str]).await;
    let http = reqwest::Client::new();
    let api = registry.api_url();
    let pool = json!({
        "pool_key": {"cluster_id": "us-east-1a", "namespace": "llm", "dgd_name": "a"},
        "model": "m",
        "location": {"region": "us-east-1"},
        "capacity": {"workers": 1},
        "relay_address": "10.0.1.7:9000"
    });
    let reply = http.post(format!("{api}/v1/pools")).json(&pool).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    let list = http.get(format!("{api}/v1/pools")).send().await.unwrap();
    let etag = list.headers()["etag"].clone();
    let watched = http
        .get(format!("{api}/v1/pools?watch=true&timeout_secs=1"))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(watched.status(), 304);
    let unknown = "0123456789abcdef0123456789abcdef";
    let gone = http.delete(format!("{api}/v1/pools/{unknown}")).send().await.unwrap();
    assert_eq!(gone.status(), 404);
    let ready: Value =
        http.get(format!("{api}/readyz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["status"], json!("ready"));
    http.get(format!("{}/metrics", registry.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_exported_series_is_documented_and_every_documented_one_exported() {
    let text = scrape().await;
    let exported = exported(&text);
    let documented = documented();
    // Only a DynamoDB store times its requests; the embedded one has none.
    // Certificates exist only with TLS, denials only with --authz spiffe
    // (tests/tls.rs scrapes both).
    let dynamo_only = BTreeSet::from(
        [
            "mcs_store_request_duration_seconds",
            "mcs_tls_certificate_expiry_timestamp_seconds",
            "mcs_authz_denials_total",
        ]
        .map(str::to_owned),
    );
    let missing: Vec<_> =
        documented.difference(&exported).filter(|n| !dynamo_only.contains(*n)).collect();
    assert!(missing.is_empty(), "documented but not exported: {missing:?}\n{text}");
    let undocumented: Vec<_> = exported.difference(&documented).collect();
    assert!(undocumented.is_empty(), "exported but not documented: {undocumented:?}");
    // Issue 23, item 7: process_cpu_seconds_total was a gauge. Every type
    // as the page says and as the Prometheus conventions name it.
    let problems =
        mcs_testkit::metrics::type_mismatches(&text, &read("docs/configuration.md"), "## Metrics");
    assert!(problems.is_empty(), "{problems:#?}");

    // The series the issue asked for, with the values startup gives them.
    for line in [
        "mcs_view_expiry_holds_total 0",
        "mcs_reader_late_arrivals_total 0",
        "mcs_store_requests_total{op=\"put\",outcome=\"error\"} 0",
        "mcs_registrar_writes_total{kind=\"pool\",outcome=\"error\"} 0",
        "mcs_registrar_writes_total{kind=\"pool\",outcome=\"not_found\"} 1",
        "mcs_registrar_writes_total{kind=\"pool\",outcome=\"applied\"} 1",
        "mcs_reader_polls_total{mode=\"full\",outcome=\"error\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
    assert!(text.contains("mcs_build_info{version=\""), "{text}");
    // The watch is timed apart from the other requests.
    assert!(
        text.contains("mcs_http_watch_duration_seconds_count{route=\"/v1/pools\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "mcs_http_request_duration_seconds_count{route=\"/v1/pools\",method=\"GET\"} 1"
        ),
        "one plain GET: {text}"
    );
    let last_poll = text
        .lines()
        .find_map(|l| l.strip_prefix("mcs_reader_last_success_timestamp_seconds "))
        .unwrap()
        .parse::<f64>()
        .unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    assert!((now.as_secs_f64() - last_poll).abs() < 30.0, "a recent poll: {last_poll}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerting_rules_and_the_dashboard_reference_only_exported_series() {
    let text = scrape().await;
    let mut exported = exported(&text);
    // Exported wherever storage is DynamoDB, or TLS is on (and documented
    // as such).
    exported.insert("mcs_store_request_duration_seconds".to_owned());
    exported.insert("mcs_tls_certificate_expiry_timestamp_seconds".to_owned());
    for path in ["deploy/prometheus/alerts.yaml", "deploy/grafana/mcs-registry.json"] {
        let file = read(path);
        let names = referenced(&file);
        assert!(names.len() >= 5, "{path} references metrics: {names:?}");
        let unknown: Vec<_> = names.iter().filter(|n| !exported.contains(*n)).collect();
        assert!(unknown.is_empty(), "{path} references series nobody exports: {unknown:?}");
    }
    let dashboard: Value = serde_json::from_str(&read("deploy/grafana/mcs-registry.json")).unwrap();
    assert!(dashboard["panels"].as_array().is_some_and(|p| !p.is_empty()));
    let rules = read("deploy/prometheus/alerts.yaml");
    for alert in [
        "McsRegistryViewIncomplete",
        "McsRegistryExpiryHold",
        "McsRegistryStorageErrors",
        "McsRegistryPollStale",
        "McsRegistryWatchersSaturated",
    ] {
        assert!(rules.contains(&format!("alert: {alert}")), "{alert} in alerts.yaml");
    }
}

/// The series of a Prometheus text exposition (comments left out).
fn series_count(text: &str) -> usize {
    text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).count()
}

/// Issue 22, item 7: the request metrics were labelled with the method
/// verbatim, so every made-up method was a new series for the life of the
/// process (20,000 random methods made `/metrics` 31 MB). Labels now come
/// from closed sets: 1,000 distinct methods and paths add no series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_methods_and_paths_add_no_series() {
    let registry = RegistryProcess::start(REGISTRY, &[] as &[&str]).await;
    let http = reqwest::Client::new();
    let api = registry.api_url();
    let send = async |method: &str, path: &str| {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        http.request(method, format!("{api}{path}")).send().await.unwrap().status().as_u16()
    };
    let scrape = async || {
        let metrics = format!("{}/metrics", registry.admin_url());
        http.get(metrics).send().await.unwrap().text().await.unwrap()
    };
    // Once each, so that every series these requests may touch exists: an
    // unknown route (404), a known one (405).
    assert_eq!(send("WARMUP", "/unknown/warmup").await, 404);
    assert_eq!(send("WARMUP", "/v1/pools").await, 405);
    let before = scrape().await;
    for i in 0..1_000 {
        let path = if i % 2 == 0 { format!("/unknown/{i}") } else { "/v1/pools".to_owned() };
        assert!([404, 405].contains(&send(&format!("M{i}"), &path).await), "{i}");
    }
    let after = scrape().await;
    assert_eq!(series_count(&after), series_count(&before), "{after}");
    assert!(
        after.contains(
            "mcs_http_requests_total{route=\"/v1/pools\",method=\"other\",status=\"405\"} 501"
        ),
        "{after}"
    );
}
