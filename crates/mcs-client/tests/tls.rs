//! The client over TLS and mTLS against the fake registry, with
//! certificates made in the test: a trusted server, a refused client
//! without a certificate, a wrong CA, and TLS files reloaded on change.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use mcs_client::{Client, ClientConfig, Error, TlsFiles};
use mcs_testkit::fake::{FakeRegistry, FakeTls};
use mcs_testkit::pki::{Issued, TestPki};
use std::time::Duration;

struct Setup {
    pki: TestPki,
    ca: Issued,
    client: Issued,
    fake: FakeRegistry,
}

/// A fake serving mTLS: server certificate and client CA from one CA.
async fn mtls() -> Setup {
    let pki = TestPki::new();
    let ca = pki.ca("ca");
    let server = pki.server("server", &ca);
    let client = pki.client("client", &ca, "spiffe://test/cluster/east");
    let tls = FakeTls { cert: server.cert, key: server.key, client_ca: Some(ca.cert.clone()) };
    let fake = FakeRegistry::start_tls(&tls).await;
    Setup { pki, ca, client, fake }
}

fn config(url: &str, tls: TlsFiles) -> ClientConfig {
    let mut config = ClientConfig::new(url);
    config.tls = Some(tls);
    config.retry_deadline = Duration::from_millis(300);
    config.tls_reload_check = Duration::ZERO;
    config
}

#[tokio::test]
async fn mtls_with_the_ca_and_a_client_certificate_works() {
    let s = mtls().await;
    assert!(s.fake.url().starts_with("https://"));
    let identity = Some((s.client.cert.clone(), s.client.key.clone()));
    let c = Client::new(config(
        s.fake.url(),
        TlsFiles { ca_bundle: s.ca.cert.clone(), client_identity: identity },
    ))
    .unwrap();
    assert!(c.pools().await.unwrap().complete);
}

#[tokio::test]
async fn without_a_client_certificate_the_handshake_is_refused() {
    let s = mtls().await;
    let c = Client::new(config(
        s.fake.url(),
        TlsFiles { ca_bundle: s.ca.cert.clone(), client_identity: None },
    ))
    .unwrap();
    let error = c.pools().await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
}

#[tokio::test]
async fn a_rotated_ca_bundle_is_used_without_a_new_client() {
    let s = mtls().await;
    // The client starts trusting another CA: the server is refused.
    let other = s.pki.ca("other");
    let bundle = s.pki.dir().join("bundle.crt");
    std::fs::copy(&other.cert, &bundle).unwrap();
    let identity = Some((s.client.cert.clone(), s.client.key.clone()));
    let c = Client::new(config(
        s.fake.url(),
        TlsFiles { ca_bundle: bundle.clone(), client_identity: identity },
    ))
    .unwrap();
    let error = c.pools().await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
    // The bundle is rotated in place to the right CA: the same client now
    // connects. A broken file in between keeps the last good one.
    std::fs::write(&bundle, "not a certificate").unwrap();
    assert!(matches!(c.pools().await.unwrap_err(), Error::Transport(_)));
    std::fs::copy(&s.ca.cert, &bundle).unwrap();
    assert!(c.pools().await.unwrap().complete);
}

#[tokio::test]
async fn an_https_client_without_the_ca_does_not_trust_the_server() {
    let s = mtls().await;
    let other = s.pki.ca("other");
    let c = Client::new(config(
        s.fake.url(),
        TlsFiles { ca_bundle: other.cert, client_identity: None },
    ))
    .unwrap();
    let error = c.pools().await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
    // Issue 29 item 9 (before: "transport: client error (Connect)").
    let text = error.to_string();
    assert!(text.contains("invalid peer certificate: UnknownIssuer"), "{text}");
    assert!(
        text.contains("hint: the registry's certificate is not signed by a CA of the CA bundle"),
        "{text}"
    );
}

/// Issue 29 item 9 (before: "transport: client error (Connect)").
#[tokio::test]
async fn https_against_a_plain_http_registry_says_so() {
    let fake = FakeRegistry::start().await;
    let pki = TestPki::new();
    let ca = pki.ca("ca");
    let url = fake.url().replacen("http://", "https://", 1);
    let c =
        Client::new(config(&url, TlsFiles { ca_bundle: ca.cert, client_identity: None })).unwrap();
    let error = c.pools().await.unwrap_err();
    assert!(matches!(error, Error::Transport(_)), "{error:?}");
    let text = error.to_string();
    assert!(text.contains("InvalidContentType"), "{text}");
    assert!(
        text.contains("hint: the registry did not answer TLS: does it serve plain http?"),
        "{text}"
    );
}
