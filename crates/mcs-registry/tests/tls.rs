//! TLS, mTLS and writer authorization against the built binary
//! (docs/design.md §12): certificates made here (mcs_testkit::pki), a TLS
//! client of tokio-rustls speaking HTTP/1.1 by hand.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

use mcs_testkit::pki::{Ca, Dir, Leaf};
use mcs_testkit::{RegistryProcess, eventually, fixtures};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

type Stream = TlsStream<TcpStream>;

const REGISTRY: &str = env!("CARGO_BIN_EXE_mcs-registry");

/// How long a change of the files may take to show (the registry reads
/// them every second).
const RELOAD: Duration = Duration::from_secs(15);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// A client trusting `ca`, presenting `identity` when given, offering `alpn`.
fn client(ca: &Ca, identity: Option<&Leaf>, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        Some(leaf) => builder.with_client_auth_cert(leaf.chain(), leaf.key()).unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

const H1: &[&[u8]] = &[b"http/1.1"];

async fn connect(addr: &str, config: &Arc<ClientConfig>) -> std::io::Result<Stream> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp).await
}

/// Sends one HTTP/1.1 request on `stream` (kept alive) and reads the
/// response: status and JSON body (`null` when empty).
async fn send(
    stream: &mut Stream,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                let status = head[9..12].parse().unwrap();
                let body = &buf[end + 4..end + 4 + len];
                let json = if body.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(body).unwrap()
                };
                return Ok((status, json));
            }
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One request on a connection of its own.
async fn call(
    addr: &str,
    config: &Arc<ClientConfig>,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let mut stream = connect(addr, config).await?;
    send(&mut stream, method, path, body).await
}

/// A registry with `flags`, waited ready on its plaintext admin port;
/// answers it and its API address (`host:port`).
async fn start(flags: &[&str]) -> (RegistryProcess, String) {
    let registry = RegistryProcess::start_listening(REGISTRY, flags).await;
    let http = reqwest::Client::new();
    let readyz = format!("{}/readyz", registry.admin_url());
    eventually(Duration::from_secs(20), "ready", async || {
        http.get(&readyz).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
    let addr = registry.api_url().strip_prefix("http://").unwrap().to_owned();
    (registry, addr)
}

async fn metrics(registry: &RegistryProcess) -> String {
    reqwest::get(format!("{}/metrics", registry.admin_url())).await.unwrap().text().await.unwrap()
}

/// The value of the series `series` (name and labels as exported).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{series} in\n{text}"))
        .parse()
        .unwrap()
}

/// Server files in `dir`: `cert.pem`, `key.pem`; answers the flags.
fn server_files(dir: &Dir, leaf: &Leaf) -> Vec<String> {
    vec![
        "--tls-cert-file".into(),
        dir.write("cert.pem", &leaf.cert_pem),
        "--tls-key-file".into(),
        dir.write("key.pem", &leaf.key_pem),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_the_api_port_with_alpn_and_a_plaintext_admin_port() {
    let ca = Ca::new("ca");
    let dir = Dir::new("tls");
    let flags = server_files(&dir, &ca.server("server"));
    let (registry, addr) = start(&strs(&flags)).await;

    let (status, body) =
        call(&addr, &client(&ca, None, H1), "GET", "/v1/pools", None).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["complete"], json!(true));
    // ALPN: h2 when offered, else HTTP/1.1.
    let h2 = connect(&addr, &client(&ca, None, &[b"h2", b"http/1.1"])).await.unwrap();
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let h1 = connect(&addr, &client(&ca, None, H1)).await.unwrap();
    assert_eq!(h1.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    // TLS 1.2 only is accepted too.
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let tls12 = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (status, _) = call(&addr, &Arc::new(tls12), "GET", "/v1/pools", None).await.unwrap();
    assert_eq!(status, 200);
    // Plain HTTP on the API port gets no answer.
    assert!(reqwest::get(registry.api_url()).await.is_err());
    // A client not trusting the registry's CA refuses it.
    let other = Ca::new("other");
    assert!(call(&addr, &client(&other, None, H1), "GET", "/v1/pools", None).await.is_err());

    let text = metrics(&registry).await;
    assert!(value(&text, "mcs_tls_handshakes_total{listener=\"api\",outcome=\"ok\"}") >= 4.0);
    assert!(value(&text, "mcs_tls_handshakes_total{listener=\"api\",outcome=\"error\"}") >= 2.0);
    let expiry = value(
        &text,
        "mcs_tls_certificate_expiry_timestamp_seconds{certificate=\"server\",index=\"0\"}",
    );
    // rcgen's default notAfter, 4096-01-01 (`date -d 4096-01-01Z +%s`).
    assert_eq!(expiry, 67_090_118_400.0, "{text}");
}

/// One GET over HTTP/2 on `sender`: status and JSON body.
async fn h2_request(
    sender: &mut h2::client::SendRequest<bytes::Bytes>,
    path: &str,
) -> (u16, Value) {
    let request = axum::http::Request::get(format!("https://localhost{path}")).body(()).unwrap();
    let (response, _) = sender.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        bytes.extend_from_slice(&chunk);
    }
    (status, serde_json::from_slice(&bytes).unwrap())
}

/// Starts HTTP/2 on `stream` and sends one GET.
async fn h2_get(stream: Stream, path: &str) -> (u16, Value) {
    let (mut sender, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(connection);
    h2_request(&mut sender, path).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_by_alpn_serves_requests() {
    let ca = Ca::new("ca");
    let dir = Dir::new("h2");
    let flags = server_files(&dir, &ca.server("server"));
    let (_registry, addr) = start(&strs(&flags)).await;
    let stream = connect(&addr, &client(&ca, None, &[b"h2"])).await.unwrap();
    let (mut sender, connection) = h2::client::handshake(stream).await.unwrap();
    tokio::spawn(connection);
    for _ in 0..2 {
        let (status, list) = h2_request(&mut sender, "/v1/pools").await;
        assert_eq!(status, 200, "{list}");
        assert_eq!(list["complete"], json!(true));
    }
}

/// An oversized upload on a new TLS connection to `addr`
/// ([`mcs_testkit::upload::post_oversized`]).
async fn upload(addr: &str, config: &Arc<ClientConfig>, len: usize) -> Result<String, String> {
    let mut stream = connect(addr, config).await.map_err(|e| e.to_string())?;
    mcs_testkit::upload::post_oversized(&mut stream, len).await
}

/// The lingering close of docs/design.md §5 on the TLS stream: the 413 of
/// an upload the registry did not read reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_uploading_too_much_reads_the_413() {
    let ca = Ca::new("ca");
    let dir = Dir::new("linger");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(["--max-body-bytes", "65536"].map(str::to_owned));
    let (_registry, addr) = start(&strs(&flags)).await;
    let config = client(&ca, None, H1);
    let mut failures = Vec::new();
    for round in 0..10 {
        match upload(&addr, &config, 4 << 20).await {
            Ok(response) if response.starts_with("HTTP/1.1 413") => {}
            Ok(response) => failures.push(format!("round {round}: {:.60}", response)),
            Err(e) => failures.push(format!("round {round}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{} of 10 uploads lost the 413: {failures:#?}", failures.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_connection_past_the_cap_is_answered_503() {
    let ca = Ca::new("ca");
    let dir = Dir::new("cap");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(["--max-connections", "1", "--max-watches", "1"].map(str::to_owned));
    let (_registry, addr) = start(&strs(&flags)).await;
    let config = client(&ca, None, H1);
    let mut held = connect(&addr, &config).await.unwrap();
    assert_eq!(send(&mut held, "GET", "/v1/pools", None).await.unwrap().0, 200);
    let (status, body) = call(&addr, &config, "GET", "/v1/pools", None).await.unwrap();
    assert_eq!(status, 503, "{body}");
    // Over HTTP/2 too.
    let stream = connect(&addr, &client(&ca, None, &[b"h2"])).await.unwrap();
    let (status, body) = h2_get(stream, "/v1/pools").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(send(&mut held, "GET", "/v1/pools", None).await.unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_tls_serves_the_admin_port_with_the_same_certificate() {
    let ca = Ca::new("ca");
    let dir = Dir::new("admin-tls");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.push("--admin-tls".into());
    let registry = RegistryProcess::start_listening(REGISTRY, &strs(&flags)).await;
    let admin = registry.admin_url().strip_prefix("http://").unwrap().to_owned();
    let (status, _) = call(&admin, &client(&ca, None, H1), "GET", "/healthz", None).await.unwrap();
    assert_eq!(status, 200);
    assert!(reqwest::get(format!("{}/healthz", registry.admin_url())).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_wants_a_valid_client_certificate_of_the_client_ca() {
    let ca = Ca::new("ca");
    let clients = Ca::new("clients");
    let dir = Dir::new("mtls");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(["--tls-client-ca-file".into(), dir.write("clients.pem", &clients.pem())]);
    let (registry, addr) = start(&strs(&flags)).await;

    let good = clients.client(&["spiffe://example.org/cluster/a"], None);
    let (status, _) =
        call(&addr, &client(&ca, Some(&good), H1), "GET", "/v1/pools", None).await.unwrap();
    assert_eq!(status, 200);
    let refused = [
        ("no certificate", client(&ca, None, H1)),
        ("another CA", client(&ca, Some(&Ca::new("evil").client(&[], None)), H1)),
        ("expired", client(&ca, Some(&clients.client(&[], Some((2020, 1, 1)))), H1)),
    ];
    for (what, config) in &refused {
        let result = call(&addr, config, "GET", "/v1/pools", None).await;
        assert!(result.is_err(), "{what}: {result:?}");
    }
    let text = metrics(&registry).await;
    let refused_count =
        value(&text, "mcs_tls_handshakes_total{listener=\"api\",outcome=\"client_certificate\"}");
    assert_eq!(refused_count, 3.0, "{text}");
    assert!(text.contains(
        "mcs_tls_certificate_expiry_timestamp_seconds{certificate=\"client_ca\",index=\"0\"}"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_server_certificate_is_served_refused_and_its_expiry_exported() {
    let ca = Ca::new("ca");
    let dir = Dir::new("expired");
    let flags = server_files(&dir, &ca.server_until("server", (2021, 6, 1)));
    let (registry, addr) = start(&strs(&flags)).await;
    let result = call(&addr, &client(&ca, None, H1), "GET", "/v1/pools", None).await;
    let error = result.unwrap_err().to_string();
    assert!(error.to_lowercase().contains("expired"), "{error}");
    let text = metrics(&registry).await;
    let expiry = value(
        &text,
        "mcs_tls_certificate_expiry_timestamp_seconds{certificate=\"server\",index=\"0\"}",
    );
    // 2021-06-01T00:00:00Z (`date -d 2021-06-01Z +%s`).
    assert_eq!(expiry, 1_622_505_600.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_client_ca_admits_its_clients_without_restart() {
    let ca = Ca::new("ca");
    let (old, new) = (Ca::new("clients-1"), Ca::new("clients-2"));
    let dir = Dir::new("ca-rotate");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(["--tls-client-ca-file".into(), dir.write("clients.pem", &old.pem())]);
    let (_registry, addr) = start(&strs(&flags)).await;
    let of_old = client(&ca, Some(&old.client(&[], None)), H1);
    let of_new = client(&ca, Some(&new.client(&[], None)), H1);
    assert_eq!(call(&addr, &of_old, "GET", "/v1/pools", None).await.unwrap().0, 200);
    assert!(call(&addr, &of_new, "GET", "/v1/pools", None).await.is_err());

    dir.write("clients.pem", &new.pem());
    eventually(RELOAD, "the new client CA admits its clients", async || {
        call(&addr, &of_new, "GET", "/v1/pools", None).await.is_ok()
    })
    .await;
    assert!(call(&addr, &of_old, "GET", "/v1/pools", None).await.is_err(), "the old CA is gone");
}

/// The DER of the certificate a new handshake presents.
async fn presented(addr: &str, config: &Arc<ClientConfig>) -> Vec<u8> {
    let stream = connect(addr, config).await.unwrap();
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_files_serve_new_handshakes_and_broken_ones_keep_the_old() {
    let ca = Ca::new("ca");
    let dir = Dir::new("rotate");
    let first = ca.server("first");
    let flags = server_files(&dir, &first);
    let (registry, addr) = start(&strs(&flags)).await;
    let config = client(&ca, None, H1);
    assert_eq!(presented(&addr, &config).await, first.der().to_vec());
    let mut established = connect(&addr, &config).await.unwrap();
    assert_eq!(send(&mut established, "GET", "/v1/pools", None).await.unwrap().0, 200);

    // Swap both files, as cert-manager and the kubelet do.
    let second = ca.server("second");
    dir.write("cert.pem", &second.cert_pem);
    dir.write("key.pem", &second.key_pem);
    eventually(RELOAD, "new handshakes present the new certificate", async || {
        presented(&addr, &config).await == second.der().to_vec()
    })
    .await;
    // The connection made before is untouched.
    assert_eq!(send(&mut established, "GET", "/v1/pools", None).await.unwrap().0, 200);
    assert_eq!(
        established.get_ref().1.peer_certificates().unwrap()[0].to_vec(),
        first.der().to_vec()
    );

    // A broken certificate file: the second stays, the failure is counted.
    dir.write("cert.pem", "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    let series = "mcs_tls_reload_failures_total";
    eventually(RELOAD, "the reload failure counted", async || {
        value(&metrics(&registry).await, series) >= 1.0
    })
    .await;
    assert_eq!(presented(&addr, &config).await, second.der().to_vec());
    assert_eq!(value(&metrics(&registry).await, series), 1.0, "counted once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_nothing_is_cut_after_the_handshake_timeout() {
    let ca = Ca::new("ca");
    let dir = Dir::new("timeout");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(["--tls-handshake-timeout-secs".into(), "1".into()]);
    let (registry, addr) = start(&strs(&flags)).await;
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 16];
    // The registry closes it (EOF or reset); a generous bound, not a timing.
    let read = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed by the registry: {read:?}");
    let text = metrics(&registry).await;
    assert_eq!(value(&text, "mcs_tls_handshakes_total{listener=\"api\",outcome=\"timeout\"}"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_tls_connections() {
    let ca = Ca::new("ca");
    let dir = Dir::new("drain");
    let flags = server_files(&dir, &ca.server("server"));
    let (registry, addr) = start(&strs(&flags)).await;
    let config = client(&ca, None, H1);
    let mut stream = connect(&addr, &config).await.unwrap();
    let (_, list) = send(&mut stream, "GET", "/v1/pools", None).await.unwrap();
    let fingerprint = list["fingerprint"].as_str().unwrap().to_owned();
    // A long-poll in flight on a TLS connection when SIGTERM comes.
    let watch = tokio::spawn(async move {
        let path = format!("/v1/pools?watch=true&timeout_secs=60&fingerprint={fingerprint}");
        send(&mut stream, "GET", &path, None).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(registry.terminate().await, Some(0));
    let answered = watch.await.unwrap();
    assert!(answered.is_ok(), "the long-poll was answered before exit: {answered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inconsistent_tls_flags_exit_2_naming_them_and_missing_files_exit_1() {
    for (flags, want, code) in [
        (vec!["--tls-cert-file", "c.pem"], "--tls-key-file", 2),
        (vec!["--authz", "spiffe"], "--tls-client-ca-file", 2),
        (
            vec!["--tls-cert-file", "/nonexistent/c.pem", "--tls-key-file", "/nonexistent/k.pem"],
            "--tls-cert-file",
            1,
        ),
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcs-registry"))
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(&flags)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{flags:?}: {stderr}");
        assert!(stderr.contains(want), "{flags:?}: {stderr}");
    }
}

#[path = "tls/authz.rs"]
mod authz;

#[path = "tls/http2.rs"]
mod http2;
