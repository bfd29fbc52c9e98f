//! Regression tests of the operator limits (issue 7, defect 8): items too
//! large to store, the watch cap and the watch length.

use super::*;

/// A polled registry on the embedded store whose settings are the test
/// flags with `adjust` applied.
async fn harness_adjusted(adjust: impl FnOnce(&mut Settings)) -> Harness {
    let args = Args::try_parse_from(["mcs-registry", "--writer-id", "reg-a"]).unwrap();
    let mut settings = Settings::from_args(&args).unwrap();
    adjust(&mut settings);
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(T0));
    let mut registry = Registry::new(store.clone(), clock.clone(), &settings);
    registry.reader.poll_once().await;
    Harness { registry, clock, store }
}

/// Defect 8: an export under the body limit whose stored item is over
/// DynamoDB's 400 KB item limit was a 500 (DynamoDB refused the PutItem);
/// on the embedded store it was even accepted. Both stores now refuse it
/// alike, and the API answers 413 naming the field.
#[tokio::test]
async fn an_export_too_large_to_store_answers_413_naming_the_field() {
    let h = harness_adjusted(|s| s.max_body_bytes = 2 << 20).await;
    let endpoint = json!({"addresses": ["10.1.0.5"], "ready": true, "zone": "us-east-1a"});
    let mut big = export("2026-01-01T00:00:00Z", 80);
    big["endpoints"] = Value::Array(vec![endpoint; 10_000]);
    assert!(big.to_string().len() < 2 << 20, "within the body limit");
    let uri = "/v1/clusters/east/exports/llm/web";
    let reply = h.send(Method::PUT, uri, big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.body);
    assert_eq!(reply.body["error"], json!("payload_too_large"));
    assert_eq!(reply.body["field"], json!("endpoints"));
    assert_eq!(h.stored().await, 0, "nothing stored");
    let ok = h.send(Method::PUT, uri, export("2026-01-01T00:00:00Z", 80)).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
}
