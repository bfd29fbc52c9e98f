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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_identity_against_each_write_route() {
    let ca = Ca::new("ca");
    let clients = Ca::new("clients");
    let dir = Dir::new("authz");
    let mut flags = server_files(&dir, &ca.server("server"));
    flags.extend(
        [
            "--tls-client-ca-cert-path",
            &dir.write("clients.pem", &clients.pem()),
            "--authz",
            "spiffe",
            "--spiffe-trust-domain",
            "example.org",
        ]
        .map(str::to_owned),
    );
    let (registry, addr) = start(&strs(&flags)).await;
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
    let export = fixtures::export("ClusterSetIP", "2026-12-01T00:00:00Z", "10.1.0.5");
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
