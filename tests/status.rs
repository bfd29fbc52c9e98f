//! One look at the clusterset (issue 26), three views of one document:
//! the real `mcs-registry` on its own moto_server, with a conflict (two
//! clusters exporting a service on different ports), a mass-expiry hold
//! (six pools of six clusters whose short leases lapse together) and a
//! stale reader (moto_server stopped: polls hang), checked in `GET
//! /v1/status`, in `mcs-admin status` (JSON and the terminal's table, exit
//! 1 on its critical findings) and in the `/status` page as headless
//! Chromium renders it (its DOM; a screenshot is kept under
//! `target/status/`). And `mcs-admin status` and `watch` against the
//! embedded default registry.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use mcs_api::Status;
use mcs_testkit::moto::MotoServer;
use mcs_testkit::{dynamo, eventually, fixtures};
use mcs_tests::{RegistryProcess, binaries, run, workspace_root};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

fn export(exported_at: &str, port: u16, incarnation: &str) -> Value {
    json!({
        "type": "ClusterSetIP",
        "ports": [{"name": "http", "protocol": "TCP", "port": port}],
        "session_affinity": "None",
        "exported_at": exported_at,
        "endpoints": [{"addresses": ["10.1.0.5"], "ready": true}],
        "incarnation": incarnation,
    })
}

/// `GET /v1/status` of the registry at `api`.
async fn document(http: &reqwest::Client, api: &str) -> Status {
    let reply = http.get(format!("{api}/v1/status")).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    reply.json().await.unwrap()
}

/// The facts the three views must agree on: the findings' codes and
/// runbooks, the clusters with their exports and conflicts, the conflicting
/// services and their clusters, the hold and what it holds, the pools by
/// cluster.
fn facts(status: &Status) -> Value {
    json!({
        "findings": status.findings.iter().map(|f| (&f.code, f.severity.as_str(), &f.runbook)).collect::<Vec<_>>(),
        "clusters": status.clusters.iter().map(|c| (c.cluster_id.as_str(), c.exports, c.conflicts)).collect::<Vec<_>>(),
        "conflicts": status.conflicts.iter().map(|c| (format!("{}/{}", c.namespace, c.name), &c.clusters)).collect::<Vec<_>>(),
        "hold": (status.hold.active, status.hold.held_leases),
        "pools": status.pools.per_cluster.iter().map(|g| (g.cluster_id.as_str(), g.pools)).collect::<Vec<_>>(),
        "incomplete_because": status.view.incomplete_because.iter().map(|w| w.as_str()).collect::<Vec<_>>(),
    })
}

/// Headless Chromium (Debian's `chromium`), or `None` with a notice
/// outside CI; under `CI=true` a missing one fails the test
/// (`scripts/test` installs it).
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].into_iter().find_map(|name| {
        Command::new("which")
            .arg(name)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_owned()))
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "chromium is required under CI=true (apt-get install chromium; scripts/test does)"
        );
        eprintln!("NOTICE: chromium not found: the /status page is not checked in a browser");
    }
    found
}

/// Chromium's flags for a headless run as root in a container.
const HEADLESS: [&str; 5] =
    ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"];

/// The DOM of `url` once Chromium has loaded it.
fn dump_dom(chromium: &PathBuf, url: &str) -> String {
    let out = Command::new(chromium)
        .args(HEADLESS)
        .args(["--dump-dom", url])
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium --dump-dom: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A screenshot of `url` at `path`.
fn screenshot(chromium: &PathBuf, url: &str, path: &std::path::Path) {
    let out = Command::new(chromium)
        .args(HEADLESS)
        .args(["--window-size=1280,1800", &format!("--screenshot={}", path.display()), url])
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium --screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_the_terminal_and_the_page_show_a_conflict_a_hold_and_a_stale_reader() {
    // Its own moto_server, to stop it (scripts/with-moto.sh makes the venv).
    let Some(moto) = MotoServer::start().await else { return };
    let binaries = binaries!();
    let table = dynamo::fresh_table(moto.endpoint(), "status").await;
    let mut args = dynamo::registry_args(moto.endpoint(), &table);
    args.extend(["--refresh-interval-ms", "200", "--stale-after-secs", "1"].map(str::to_owned));
    let registry = RegistryProcess::start(&binaries.registry, &args).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let api = registry.api_url().to_owned();

    // The conflict: east's export is the older, on port 80; west's on 8080.
    for (cluster, at, port) in
        [("east", "2026-12-01T00:00:00Z", 80), ("west", "2026-12-02T00:00:00Z", 8080)]
    {
        let incarnation = format!("{cluster}-1");
        let lease = json!({"incarnation": incarnation, "lease": {"duration_secs": 600, "heartbeat_interval_secs": 60}});
        let reply =
            http.put(format!("{api}/v1/clusters/{cluster}")).json(&lease).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
        let uri = format!("{api}/v1/clusters/{cluster}/exports/llm/web");
        let reply = http.put(uri).json(&export(at, port, &incarnation)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
    // The hold: six pools of six clusters, 3 s leases that nobody renews.
    for n in 0..6 {
        let mut pool = fixtures::pool(&format!("c{n}"), "llama", 1);
        pool["lease"] = json!({"duration_secs": 3, "heartbeat_interval_secs": 1});
        pool["incarnation"] = json!(format!("relay-{n}"));
        let reply = http.post(format!("{api}/v1/pools")).json(&pool).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
    eventually(Duration::from_secs(15), "the six lapsed leases are held", async || {
        document(&http, &api).await.hold.active
    })
    .await;
    // The stale reader: storage stops answering.
    moto.signal("-STOP");
    eventually(Duration::from_secs(10), "the view turns stale", async || {
        document(&http, &api).await.view.incomplete_because.iter().any(|w| w.as_str() == "stale")
    })
    .await;

    let doc = document(&http, &api).await;
    let want = facts(&doc);
    assert_eq!(
        want,
        json!({
            "findings": [
                ["stale", "critical", "docs/operations.md#503s-from-storage"],
                ["expiry_hold", "critical", "docs/operations.md#an-expiry-hold"],
                ["conflict", "warning", "docs/operations.md#runbook-exports-not-ready"],
            ],
            "clusters": [["east", 1, 1], ["west", 1, 1]],
            "conflicts": [["llm/web", ["east", "west"]]],
            "hold": [true, 6],
            "pools": [["c0", 1], ["c1", 1], ["c2", 1], ["c3", 1], ["c4", 1], ["c5", 1]],
            "incomplete_because": ["stale", "hold"],
        }),
        "{doc:#?}"
    );
    assert_eq!(doc.pools.count, 6, "held, so still served");

    // The terminal: the same document as JSON, and as the operator reads it.
    let admin = |extra: &[&str]| {
        run(&binaries.admin, &[&["status", "--registry", &api][..], extra].concat())
    };
    let out = admin(&["-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "a critical finding: exit 1");
    let printed: Status = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(facts(&printed), want);
    let out = admin(&[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "no colour into a pipe");
    for expected in [
        "CRITICAL  stale  the last successful poll of storage was",
        "    runbook: docs/operations.md#503s-from-storage",
        "CRITICAL  expiry_hold  expiries of 6 leases held back",
        "WARNING  conflict  service llm/web is exported by east, west",
        "hold      holding expiries of 6 leases",
        "view      incomplete: stale, hold",
        "llm/web  east,west  PortConflict",
        "POOLS BY CLUSTER (6)\nCLUSTER  POOLS  EXPIRING SOON\nc0       1      1\n",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
    for cluster in ["east ", "west "] {
        assert!(text.lines().any(|l| l.starts_with(cluster)), "{cluster} missing from\n{text}");
    }

    // The page, in a real browser.
    if let Some(chromium) = chromium() {
        let url = format!("{}/status", registry.admin_url());
        let dom = dump_dom(&chromium, &url);
        for expected in [
            r#"<tr data-cluster="east">"#,
            r#"<tr data-cluster="west">"#,
            r#"<tr data-service="llm/web">"#,
            r#"<li class="finding critical" data-code="stale">"#,
            r#"<li class="finding critical" data-code="expiry_hold">"#,
            r#"<li class="finding warning" data-code="conflict">"#,
            r#"<p class="critical hold-active"><strong>Holding expiries</strong> of 6 leases"#,
            "Lists are incomplete: stale, hold.",
            r#"<tr data-pool-cluster="c5"><th scope="row">c5</th><td>1</td><td class="warning">1</td></tr>"#,
            "docs/operations.md#an-expiry-hold",
        ] {
            assert!(dom.contains(expected), "{expected:?} missing from the DOM:\n{dom}");
        }
        let dir = workspace_root().join("target/status");
        std::fs::create_dir_all(&dir).unwrap();
        let shot = dir.join("status-page.png");
        let _ = std::fs::remove_file(&shot);
        screenshot(&chromium, &url, &shot);
        let png = std::fs::read(&shot).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "a screenshot: {} bytes",
            png.len()
        );
        eprintln!("screenshot of /status: {}", shot.display());
    }
    moto.signal("-CONT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_watch_against_the_embedded_default() {
    let binaries = binaries!();
    // The embedded default: memory storage, the README's flags.
    let registry = RegistryProcess::start(&binaries.registry, &[] as &[&str]).await;
    let api = registry.api_url().to_owned();
    let out = run(&binaries.admin, &["status", "--registry", &api]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("No findings"), "{text}");
    assert!(text.contains("storage memory"), "{text}");

    // A registry that does not answer: exit 1, saying whom it asked.
    let refused = mcs_testkit::net::RefusedPort::new();
    let closed = refused.url();
    let out = run(&binaries.admin, &["status", "--registry", &closed]);
    assert_eq!(out.status.code(), Some(1));
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(error.contains(&format!("asking {closed} for its status")), "{error}");

    let mut watch = tokio::process::Command::new(&binaries.admin)
        .args(["watch", "pools", "--registry", &api])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    let first = next().await;
    assert!(first.contains("complete=true  pools  (0 items)"), "{first}");
    let http = reqwest::Client::new();
    let mut pool = fixtures::pool("east", "llama", 1);
    pool["incarnation"] = json!("relay-1");
    let reply = http.post(format!("{api}/v1/pools")).json(&pool).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    let added = next().await;
    assert!(added.ends_with("added     pools  east/llm/llama  owner=east"), "{added}");
    pool["capacity"] = json!({"workers": 2});
    http.post(format!("{api}/v1/pools")).json(&pool).send().await.unwrap();
    let changed = next().await;
    assert!(changed.contains("changed (capacity)  pools  east/llm/llama  owner=east"), "{changed}");
    let reply = http
        .delete(format!("{api}/v1/pools/{}?incarnation=relay-1", pool_id(&http, &api).await))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let removed = next().await;
    assert!(removed.contains("removed   pools  east/llm/llama  owner=east"), "{removed}");
    let time = removed.split_whitespace().next().unwrap();
    assert!(
        time.starts_with("20") && time.ends_with('Z') && time.contains('T'),
        "a time first: {removed}"
    );
    watch.kill().await.unwrap();
}

async fn pool_id(http: &reqwest::Client, api: &str) -> String {
    let list: Value =
        http.get(format!("{api}/v1/pools")).send().await.unwrap().json().await.unwrap();
    list["pools"][0]["pool_id"].as_str().unwrap().to_owned()
}
