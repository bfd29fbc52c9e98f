use super::*;

/// Every section's fingerprint, as an admin reads them.
async fn fingerprints(addr: &str, admin: &Arc<ClientConfig>) -> Vec<Value> {
    let mut all = Vec::new();
    for section in ["pools", "routers", "clusters", "exports"] {
        let (status, body) =
            call(addr, admin, "GET", &format!("/v1/{section}"), None).await.unwrap();
        assert_eq!(status, 200, "{body}");
        all.push(body["fingerprint"].clone());
    }
    all
}

/// A write: method, path, body, the identities allowed in the order
/// they write.
type Row = (&'static str, String, Option<Value>, Vec<&'static str>);

/// Each row: every identity not allowed gets 403 and nothing is stored;
/// then each allowed one writes. Answers the last pool id registered.
async fn run(
    addr: &str,
    identities: &[(&str, &Arc<ClientConfig>)],
    admin: &Arc<ClientConfig>,
    table: Vec<Row>,
) -> Option<String> {
    let mut pool_path = None;
    for (method, path, body, allowed) in table {
        let before = fingerprints(addr, admin).await;
        for (name, config) in identities.iter().filter(|(n, _)| !allowed.contains(n)) {
            let (status, reply) = call(addr, config, method, &path, body.as_ref()).await.unwrap();
            assert_eq!(status, 403, "{name} {method} {path}: {reply}");
            assert_eq!(reply["error"], json!("forbidden"), "{reply}");
            assert!(reply["identity"].is_string() && reply["scope"].is_string(), "{reply}");
        }
        assert_eq!(
            fingerprints(addr, admin).await,
            before,
            "nothing stored on 403: {method} {path}"
        );
        for name in &allowed {
            let config = identities.iter().find(|(n, _)| n == name).unwrap().1;
            let (status, reply) = call(addr, config, method, &path, body.as_ref()).await.unwrap();
            assert_eq!(status, 200, "{name} {method} {path}: {reply}");
            if let Some(id) = reply["pool_id"].as_str() {
                pool_path = Some(format!("/v1/pools/{id}"));
            }
        }
    }
    pool_path
}

/// The flags of a registry of `ca`'s server certificate under `--authz
/// spiffe` in the trust domain `example.org`, trusting clients of `clients`.
fn spiffe_flags(dir: &Dir, ca: &Ca, clients: &Ca) -> Vec<String> {
    let mut flags = server_files(dir, &ca.server("server"));
    flags.extend(
        [
            "--tls-client-ca-file",
            &dir.write("clients.pem", &clients.pem()),
            "--authz",
            "spiffe",
            "--spiffe-trust-domain",
            "example.org",
        ]
        .map(str::to_owned),
    );
    flags
}

/// A registry of [`spiffe_flags`].
async fn start_spiffe(dir: &Dir, ca: &Ca, clients: &Ca) -> (RegistryProcess, String) {
    start(&strs(&spiffe_flags(dir, ca, clients))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_against_each_write_route() {
    let ca = Ca::new("ca");
    let clients = Ca::new("clients");
    let dir = Dir::new("authz");
    let (registry, addr) = start_spiffe(&dir, &ca, &clients).await;
    let id = |uris: &[&str]| client(&ca, Some(&clients.client(uris, None)), H1);
    let cluster_a = id(&["spiffe://example.org/cluster/a"]);
    let cluster_b = id(&["spiffe://example.org/cluster/b"]);
    let router = id(&["spiffe://example.org/router/gr-0"]);
    let admin = id(&["spiffe://example.org/admin/ops"]);
    let foreign = id(&["spiffe://evil.org/cluster/a"]);
    let unknown = id(&["spiffe://example.org/pool/a"]);
    let no_san = id(&[]);
    let identities = [
        ("cluster/a", &cluster_a),
        ("cluster/b", &cluster_b),
        ("router/gr-0", &router),
        ("admin/ops", &admin),
        ("evil.org", &foreign),
        ("pool/a", &unknown),
        ("no SAN", &no_san),
    ];

    // Reads: every identity of the trust domain; nothing else.
    for (name, config) in identities {
        let (status, body) = call(&addr, config, "GET", "/v1/pools", None).await.unwrap();
        let allowed = !matches!(name, "evil.org" | "pool/a" | "no SAN");
        assert_eq!(status, if allowed { 200 } else { 403 }, "{name} reads: {body}");
    }

    let pool = fixtures::pool("a", "d", 1);
    // Written by the holder of cluster a's lease, as only it may.
    let export = fixtures::with(
        fixtures::export("ClusterSetIP", "2026-12-01T00:00:00Z", "10.1.0.5"),
        json!({"incarnation": "a-1"}),
    );
    let router_reg = fixtures::with(fixtures::router("gr-0"), json!({"incarnation": "r1"}));
    let cluster_reg = fixtures::cluster("a-1");

    // (method, path, body, the identities allowed, in the order they write).
    let table: Vec<Row> = vec![
        ("PUT", "/v1/clusters/a".into(), Some(cluster_reg), vec!["cluster/a", "admin/ops"]),
        (
            "PUT",
            "/v1/clusters/a/exports/llm/web".into(),
            Some(export),
            vec!["cluster/a", "admin/ops"],
        ),
        ("POST", "/v1/pools".into(), Some(pool.clone()), vec!["cluster/a", "admin/ops"]),
        ("POST", "/pools".into(), Some(pool), vec!["cluster/a", "admin/ops"]),
        ("POST", "/v1/routers".into(), Some(router_reg), vec!["router/gr-0", "admin/ops"]),
        (
            "DELETE",
            "/v1/routers/gr-0?incarnation=r1".into(),
            None,
            vec!["router/gr-0", "admin/ops"],
        ),
    ];
    let pool_path = run(&addr, &identities, &admin, table).await.unwrap();
    run(
        &addr,
        &identities,
        &admin,
        vec![
            ("DELETE", pool_path, None, vec!["cluster/a", "admin/ops"]),
            (
                "DELETE",
                "/v1/clusters/a/exports/llm/web?incarnation=a-1".into(),
                None,
                vec!["cluster/a", "admin/ops"],
            ),
            (
                "DELETE",
                "/v1/clusters/a?incarnation=a-1".into(),
                None,
                vec!["cluster/a", "admin/ops"],
            ),
        ],
    )
    .await;

    // A pool the registry does not know: its cluster cannot be checked,
    // so a cluster identity gets the 404 the withdrawal would answer.
    let unknown_pool = "/v1/pools/0123456789abcdef0123456789abcdef";
    let (status, reply) = call(&addr, &cluster_b, "DELETE", unknown_pool, None).await.unwrap();
    assert_eq!(status, 404, "{reply}");
    // The 403's message names the identity and the scope.
    let (status, reply) =
        call(&addr, &cluster_b, "PUT", "/v1/clusters/a", Some(&fixtures::cluster("b")))
            .await
            .unwrap();
    assert_eq!(status, 403);
    assert_eq!(
        reply["message"],
        json!("identity cluster b may not write cluster a (its lease, exports and pools)")
    );

    let text = metrics(&registry).await;
    assert!(
        value(&text, "mcs_authz_denials_total{identity=\"cluster\",route=\"/v1/routers\"}") >= 1.0,
        "{text}"
    );
    assert!(value(&text, "mcs_authz_denials_total{identity=\"none\",route=\"/v1/pools\"}") >= 1.0);
    assert!(
        value(
            &text,
            "mcs_authz_denials_total{identity=\"other\",route=\"/v1/clusters/{cluster_id}\"}"
        ) >= 1.0
    );
}

/// Issue 22, item 10: a certificate with two URI SANs, the second not
/// UTF-8, read as the single identity `cluster/a` (the hand-written DER
/// walk dropped the name it could not decode) and wrote cluster a. Every
/// certificate that names anything but exactly one well-formed `spiffe://`
/// URI is refused `403` with the reason, and nothing is stored; a chain
/// through an expired intermediate is refused at the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_naming_no_single_identity_is_refused_with_the_reason() {
    let ca = Ca::new("ca");
    let clients = Ca::new("clients");
    let dir = Dir::new("authz-names");
    let (registry, addr) = start_spiffe(&dir, &ca, &clients).await;
    let admin = client(&ca, Some(&clients.client(&["spiffe://example.org/admin/ops"], None)), H1);
    let cluster_a: &[u8] = b"spiffe://example.org/cluster/a";
    let raw =
        |extensions: &[&[&[u8]]]| client(&ca, Some(&clients.client_with_raw_uris(extensions)), H1);
    let cases = [
        (
            "a second URI SAN that is not UTF-8",
            raw(&[&[cluster_a, b"spiffe://\xff\xfe"]]),
            "URI SAN that is not ASCII",
        ),
        (
            "a single URI SAN that is not ASCII",
            raw(&[&["spiffe://example.org/cluster/\u{430}".as_bytes()]]),
            "URI SAN that is not ASCII",
        ),
        ("the same URI SAN twice", raw(&[&[cluster_a, cluster_a]]), "2 URI SANs"),
        (
            "a SPIFFE ID with an escaped slash",
            client(&ca, Some(&clients.client(&["spiffe://example.org/cluster/a%2Fb"], None)), H1),
            "not a well-formed SPIFFE ID",
        ),
    ];
    let before = fingerprints(&addr, &admin).await;
    for (what, config, reason) in &cases {
        for (method, path, body) in
            [("GET", "/v1/pools", None), ("PUT", "/v1/clusters/a", Some(fixtures::cluster("a-1")))]
        {
            let (status, reply) = match call(&addr, config, method, path, body.as_ref()).await {
                Ok(answer) => answer,
                Err(error) => panic!("{what}: {method} {path}: {error}"),
            };
            assert_eq!(status, 403, "{what}: {method} {path}: {reply}");
            assert_eq!(reply["error"], json!("forbidden"), "{what}: {reply}");
            let identity = reply["identity"].as_str().unwrap_or_default();
            assert!(identity.contains(reason), "{what}: {identity:?} says {reason:?}");
            assert!(reply["message"].as_str().unwrap_or_default().contains(reason), "{reply}");
        }
    }
    assert_eq!(fingerprints(&addr, &admin).await, before, "nothing stored on 403");
    let text = metrics(&registry).await;
    let invalid =
        "mcs_authz_denials_total{identity=\"invalid\",route=\"/v1/clusters/{cluster_id}\"}";
    assert_eq!(value(&text, invalid), cases.len() as f64, "{text}");

    // A chain through an intermediate: admitted while it is valid, refused
    // at the handshake once it expired.
    let live = clients.intermediate("live", None);
    let expired = clients.intermediate("expired", Some((2020, 1, 1)));
    let via = |issuer: &Ca| {
        client(&ca, Some(&issuer.client(&["spiffe://example.org/cluster/a"], None)), H1)
    };
    let (status, reply) = call(&addr, &via(&live), "GET", "/v1/pools", None).await.unwrap();
    assert_eq!(status, 200, "{reply}");
    let refused = call(&addr, &via(&expired), "GET", "/v1/pools", None).await;
    assert!(refused.is_err(), "an expired intermediate: {refused:?}");
}

/// The status document (`/v1/status`, either port) and the admin port's
/// `/status` page are reads like any list under `--authz spiffe` (issue
/// 26): every identity of the trust domain, nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_document_and_page_are_reads_on_either_port() {
    let ca = Ca::new("ca");
    let clients = Ca::new("clients");
    let dir = Dir::new("authz-status");
    let mut flags = spiffe_flags(&dir, &ca, &clients);
    flags.push("--admin-tls".to_owned());
    let registry = RegistryProcess::start_listening(REGISTRY, &strs(&flags)).await;
    let api = registry.api_url().strip_prefix("http://").unwrap().to_owned();
    let admin_port = registry.admin_url().strip_prefix("http://").unwrap().to_owned();
    let id = |uris: &[&str]| client(&ca, Some(&clients.client(uris, None)), H1);
    let cluster = id(&["spiffe://example.org/cluster/a"]);
    let foreign = id(&["spiffe://evil.org/cluster/a"]);
    eventually(Duration::from_secs(20), "ready", async || {
        call(&admin_port, &cluster, "GET", "/readyz", None).await.is_ok_and(|(s, _)| s == 200)
    })
    .await;
    for addr in [&api, &admin_port] {
        let (status, body) = call(addr, &cluster, "GET", "/v1/status", None).await.unwrap();
        assert_eq!(status, 200, "{addr}: {body}");
        assert_eq!(body["process"]["ready"], json!(true), "{body}");
        let (status, body) = call(addr, &foreign, "GET", "/v1/status", None).await.unwrap();
        assert_eq!(status, 403, "{addr}: {body}");
        assert_eq!(body["error"], json!("forbidden"), "{body}");
    }
    let (status, body) = call(&admin_port, &foreign, "GET", "/status", None).await.unwrap();
    assert_eq!((status, &body["error"]), (403, &json!("forbidden")), "{body}");
}
