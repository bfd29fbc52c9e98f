//! Every endpoint, the typed errors and the retry rules, against the fake
//! registry (the real router over the memory store).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

mod common;

use common::{client, cluster, config, export, export_key, pool, router};
use mcs_api::{Label, Withdrawal};
use mcs_client::{Client, ClientConfig, Conflict, Error};
use mcs_testkit::fake::FakeRegistry;
use serde_json::json;
use std::time::{Duration, Instant};

fn label(s: &str) -> Label {
    Label::new(s).unwrap()
}

fn by(incarnation: &str) -> Withdrawal {
    Withdrawal {
        incarnation: Some(mcs_api::Incarnation::new(incarnation).unwrap()),
        generation: None,
    }
}

#[tokio::test]
async fn every_endpoint_writes_and_lists_with_the_api_types() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let p = pool("llama", json!({}));
    let registered = c.register_pool(&p).await.unwrap();
    assert_eq!(registered.pool_id, p.pool_key.id());
    c.register_router(&router("r1")).await.unwrap();
    c.register_cluster(&label("east"), &cluster("c1")).await.unwrap();
    let key = export_key("east", "web");
    let accepted = c.put_export(&key, &export("c1")).await.unwrap();
    assert!(!accepted.conditions.is_empty());

    let pools = c.pools().await.unwrap();
    assert!(pools.complete);
    assert_eq!(pools.pools.len(), 1);
    assert_eq!(c.routers().await.unwrap().routers.len(), 1);
    assert_eq!(c.clusters().await.unwrap().clusters.len(), 1);
    assert_eq!(c.exports().await.unwrap().exports.len(), 1);
    assert_eq!(c.imports().await.unwrap().imports.len(), 1);

    c.withdraw_export(&key, &by("c1")).await.unwrap();
    c.withdraw_cluster(&label("east"), &by("c1")).await.unwrap();
    c.withdraw_pool(&p.pool_key.id(), &Withdrawal::default()).await.unwrap();
    c.withdraw_router(&router("r1").router_id, &Withdrawal::default()).await.unwrap();
    assert!(c.pools().await.unwrap().pools.is_empty());
    assert!(c.routers().await.unwrap().routers.is_empty());
    assert!(c.clusters().await.unwrap().clusters.is_empty());
    assert!(c.exports().await.unwrap().exports.is_empty());
}

#[tokio::test]
async fn conflicts_and_not_found_are_typed_with_what_is_stored() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    c.register_pool(&pool("llama", json!({"incarnation": "a"}))).await.unwrap();
    let taken = c.register_pool(&pool("llama", json!({"incarnation": "b"}))).await.unwrap_err();
    match taken {
        Error::Conflict(Conflict::Owned { owner, lease_until_ms }) => {
            assert_eq!(owner.as_deref(), Some("a"));
            assert!(lease_until_ms.is_some());
        }
        other => panic!("expected owned, got {other:?}"),
    }
    // An export of a live cluster is withdrawn only by its lease holder.
    c.register_cluster(&label("east"), &cluster("c1")).await.unwrap();
    let key = export_key("east", "web");
    c.put_export(&key, &export("c1")).await.unwrap();
    let refused = c.withdraw_export(&key, &Withdrawal::default()).await.unwrap_err();
    assert!(
        matches!(refused, Error::Conflict(Conflict::Owned { ref owner, .. }) if owner.as_deref() == Some("c1")),
        "{refused:?}"
    );
    let missing = pool("absent", json!({})).pool_key.id();
    let gone = c.withdraw_pool(&missing, &Withdrawal::default()).await.unwrap_err();
    assert!(matches!(gone, Error::NotFound { .. }), "{gone:?}");
}

#[tokio::test]
async fn injected_503s_are_retried_no_sooner_than_retry_after() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    fake.fail_next_writes(2, 1);
    let started = Instant::now();
    c.register_pool(&pool("llama", json!({}))).await.unwrap();
    assert_eq!(fake.writes_seen(), 3, "two refused attempts and one that succeeded");
    assert!(started.elapsed() >= Duration::from_secs(2), "waited {:?}", started.elapsed());
    assert_eq!(c.pools().await.unwrap().pools.len(), 1);
}

#[tokio::test]
async fn retries_stop_at_the_deadline_with_the_last_unavailable() {
    let fake = FakeRegistry::start().await;
    let mut config = config(&fake);
    config.retry_deadline = Duration::from_millis(1_500);
    let c = Client::new(config).unwrap();
    fake.fail_next_writes(100, 1);
    let error = c.register_pool(&pool("llama", json!({}))).await.unwrap_err();
    assert!(
        matches!(error, Error::Unavailable { retry_after: Some(d), .. } if d == Duration::from_secs(1)),
        "{error:?}"
    );
    // At 0 s and at 1 s; a third at 2 s would be past the deadline.
    assert_eq!(fake.writes_seen(), 2);
}

#[tokio::test]
async fn a_4xx_is_never_retried() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    fake.forget_next_writes(5);
    let error = c.register_pool(&pool("llama", json!({}))).await.unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error:?}");
    assert_eq!(fake.writes_seen(), 1);
}

#[tokio::test]
async fn transport_errors_are_retried_until_the_deadline() {
    // A port nothing listens on: bind one and close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = ClientConfig::new(format!("http://127.0.0.1:{port}"));
    config.allow_insecure_http = true;
    config.retry_deadline = Duration::from_millis(500);
    // Delays drawn from [100, 200] ms: two of them always fit in the
    // deadline, so giving up takes at least 200 ms. (With the default
    // policy the first two could be 50 + 100 ms and the third too long to
    // fit: a give-up at 150 ms was seen, and the bound below failed.)
    config.backoff = mcs_client::Backoff {
        initial: Duration::from_millis(200),
        max: Duration::from_millis(200),
    };
    let c = Client::new(config).unwrap();
    let started = Instant::now();
    let error = c.pools().await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
    // Issue 23, item 5: it read "transport: client error (Connect)". The
    // call and its URL, then every cause.
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("transport: GET http://127.0.0.1:{port}/v1/pools: ")),
        "{message}"
    );
    assert!(message.contains("Connection refused"), "{message}");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "gave up at once: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn plain_http_is_refused_unless_opted_in() {
    let error = Client::new(ClientConfig::new("http://127.0.0.1:1")).unwrap_err();
    assert!(matches!(&error, Error::Config(m) if m.contains("allow_insecure_http")), "{error:?}");
    let mut config = ClientConfig::new("http://127.0.0.1:1");
    config.allow_insecure_http = true;
    assert!(Client::new(config).is_ok());
}

/// Before: `base url scheme None is not https`, which named neither the
/// URL nor the form expected.
#[tokio::test]
async fn a_url_without_https_names_itself_and_the_form_expected() {
    for (url, what) in [("127.0.0.1:8443", "has no scheme"), ("ftp://registry:21", "is ftp://")] {
        let error = Client::new(ClientConfig::new(url)).unwrap_err();
        let Error::Config(message) = &error else { panic!("{error:?}") };
        assert!(message.contains(url) && message.contains(what), "{message}");
        assert!(message.contains("expected https://HOST[:PORT]"), "{message}");
        assert!(!message.contains("http://HOST"), "plain http is not allowed here: {message}");
    }
}

/// Before: a client that allows plain http (mcs-admin status against the
/// embedded default) said `expected https://HOST[:PORT]` for
/// `127.0.0.1:8080`, naming a form that was not the only one it takes.
#[tokio::test]
async fn a_url_without_a_scheme_names_plain_http_where_it_is_allowed() {
    let mut config = ClientConfig::new("127.0.0.1:8080");
    config.allow_insecure_http = true;
    let error = Client::new(config).unwrap_err();
    let Error::Config(message) = &error else { panic!("{error:?}") };
    assert!(
        message.contains("has no scheme: expected http://HOST[:PORT] or https://HOST[:PORT]"),
        "{message}"
    );
}

#[tokio::test]
async fn unreadable_tls_files_are_refused_at_construction() {
    let mut config = ClientConfig::new("https://registry.invalid");
    config.tls = Some(mcs_client::TlsFiles {
        ca_bundle: "/nonexistent/ca.crt".into(),
        client_identity: None,
    });
    let error = Client::new(config).unwrap_err();
    assert!(matches!(&error, Error::Config(m) if m.contains("/nonexistent/ca.crt")), "{error:?}");
}

#[tokio::test]
async fn other_reqwest_clients_of_the_same_build_still_work() {
    // The client's TLS must not switch on a reqwest rustls feature: unified
    // into every reqwest of a build, `Client::new()` would panic for want of
    // a process-wide crypto provider (mcs-admin, mcs-bench, the test kit).
    let fake = FakeRegistry::start().await;
    let reply =
        reqwest::Client::new().get(format!("{}/v1/pools", fake.url())).send().await.unwrap();
    assert!(reply.status().is_success());
}

/// A fence that refuses while `closed` (the controller's is its leadership).
#[derive(Debug, Default)]
struct Gate {
    closed: std::sync::atomic::AtomicBool,
}

impl mcs_client::WriteFence for Gate {
    fn check(&self) -> Result<(), String> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("no longer the leader".into());
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_write_the_fence_refuses_is_not_sent_and_reads_still_are() {
    let fake = FakeRegistry::start().await;
    let gate = std::sync::Arc::new(Gate::default());
    let mut config = config(&fake);
    config.write_fence = Some(gate.clone());
    let c = Client::new(config).unwrap();
    let key = export_key("east", "web");
    c.put_export(&key, &export("c1")).await.unwrap();
    let sent = fake.writes_seen();
    gate.closed.store(true, std::sync::atomic::Ordering::SeqCst);
    let error = c.put_export(&key, &export("c1")).await.unwrap_err();
    assert!(matches!(&error, Error::Fenced(why) if why == "no longer the leader"), "{error:?}");
    assert!(!error.is_retryable());
    assert!(c.withdraw_export(&key, &by("c1")).await.is_err());
    assert_eq!(fake.writes_seen(), sent, "nothing sent once fenced");
    assert!(c.exports().await.unwrap().complete, "reads are not fenced");
}

/// A caller that bounds a call below the retries' deadline (the controller
/// does: 5 s for an export, 10 s for its probe) cancels it between
/// retries, and the refused connection the retries saw was lost: the controller logged `registry unreachable:
/// keeping every import error=no answer within 10 s`, naming neither the
/// registry nor why. `gave_up` names both.
#[tokio::test]
async fn a_call_given_up_by_its_caller_names_the_registry_and_the_last_failure() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let mut config = ClientConfig::new(url.clone());
    config.allow_insecure_http = true;
    config.retry_deadline = std::time::Duration::from_secs(60);
    let client = Client::new(config).unwrap();
    let bound = std::time::Duration::from_millis(700);
    assert_eq!(
        client.gave_up(bound).to_string(),
        format!("transport: no answer from {url} within 0.7 s"),
        "nothing tried yet"
    );
    assert!(tokio::time::timeout(bound, client.imports()).await.is_err(), "still retrying");
    let message = mcs_api::chain(&client.gave_up(bound));
    assert!(
        message.starts_with(&format!(
            "transport: no answer from {url} within 0.7 s; its last failure (of any call): "
        )),
        "{message}"
    );
    assert!(message.contains(&format!("GET {url}/v1/imports")), "{message}");
    assert!(message.contains("Connection refused"), "{message}");
}

#[tokio::test]
async fn a_probe_is_one_head_and_a_refusal_is_told_by_the_registry() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    c.register_cluster(&label("east"), &cluster("c1")).await.unwrap();
    c.put_export(&export_key("east", "web"), &export("c1")).await.unwrap();
    let lists = fake.lists_seen();
    c.reachable::<mcs_api::ImportList>().await.unwrap();
    assert_eq!(fake.heads_seen(), 1, "one HEAD");
    assert_eq!(fake.lists_seen(), lists, "and no list fetched");

    // A refusal (a base URL with a path of its own: `/v1/v1/imports`) is
    // asked again with a GET, for the registry's own message.
    let mut wrong = config(&fake);
    wrong.base_url = format!("{}/v1", fake.url());
    let error = Client::new(wrong).unwrap().reachable::<mcs_api::ImportList>().await.unwrap_err();
    assert!(
        matches!(&error, Error::NotFound { message } if message.contains("no such route: GET /v1/v1/imports")),
        "{error:?}"
    );
    assert_eq!(fake.heads_seen(), 2);

    // No registry at all: a transport error naming the HEAD.
    let url = fake.url().to_owned();
    drop(fake);
    let mut gone = ClientConfig::new(url);
    gone.allow_insecure_http = true;
    gone.retry_deadline = Duration::from_millis(300);
    let error = Client::new(gone).unwrap().reachable::<mcs_api::ImportList>().await.unwrap_err();
    assert!(matches!(&error, Error::Transport(_)), "{error:?}");
    assert!(mcs_api::chain(&error).contains("HEAD "), "{}", mcs_api::chain(&error));
}
