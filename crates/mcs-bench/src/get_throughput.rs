//! `get-throughput`: `GET /v1/pools` of a registry holding 1,000 pools
//! (embedded storage) against nginx serving the identical body bytes from a
//! file, with the same load generator (wrk) and settings, in one run.
//!
//! Placement on a small machine: each server in turn is pinned to the
//! server CPUs (the registry's runtime then has one worker per CPU given;
//! nginx runs one process), wrk and this process to the client CPUs. The
//! servers alternate over several rounds so that drifting background load
//! falls on both. Besides requests per second, each server's CPU time per
//! request tells which side was the bottleneck.
//!
//! Two references explain the ratio rather than set it: nginx with
//! `sendfile off` (it then copies the body from user memory into the
//! socket, as a server writing it from its own memory does), and the
//! same servers answering `304` to `If-None-Match` (per-request cost
//! without the body).
//!
//! The compressed list (`Accept-Encoding: gzip`): the registry's gzip body,
//! compressed once per change, against nginx's `gzip_static` serving the
//! same compressed bytes from `pools.json.gz`.

use crate::cpu;
use crate::records::registration;
use crate::report::{self, Table, f, ratio, verdict};
use anyhow::{Context, bail, ensure};
use clap::Parser;
use mcs_testkit::dynamo::unique_name;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// Options of `get-throughput`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Pools registered.
    #[arg(long, default_value_t = 1000)]
    pub pools: usize,
    /// Seconds of each wrk run.
    #[arg(long, default_value_t = 10)]
    pub duration_secs: u64,
    /// wrk connections.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    /// wrk threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Rounds; each runs wrk once against each server.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The nginx binary.
    #[arg(long, default_value = "/usr/sbin/nginx")]
    pub nginx: PathBuf,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["get-throughput"])
    }
}

/// What one wrk run reported.
#[derive(Debug, Clone, Default)]
struct WrkRun {
    requests_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: String,
    server_cpu: Duration,
}

/// Parses a wrk latency such as `1.23ms`, `850.00us` or `1.02s` into ms.
fn latency_ms(text: &str) -> Option<f64> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("m") {
        (n, 60_000.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    number.trim().parse::<f64>().ok().map(|v| v * scale)
}

fn parse_wrk(output: &str) -> anyhow::Result<WrkRun> {
    let mut run = WrkRun::default();
    for line in output.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            run.requests_per_sec = v.trim().parse().context("Requests/sec")?;
        } else if let Some(v) = line.strip_prefix("50%") {
            run.p50_ms = latency_ms(v).context("50% latency")?;
        } else if let Some(v) = line.strip_prefix("99%") {
            run.p99_ms = latency_ms(v).context("99% latency")?;
        } else if line.starts_with("Non-2xx") || line.starts_with("Socket errors") {
            run.errors.push_str(line);
            run.errors.push(' ');
        }
    }
    ensure!(run.requests_per_sec > 0.0, "wrk printed no Requests/sec:\n{output}");
    Ok(run)
}

/// A server under load.
#[derive(Debug, Clone)]
struct Server {
    name: &'static str,
    url: String,
    pid: u32,
    /// Its `ETag` for the body (each server makes its own).
    etag: String,
}

/// What a run asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Plain GET: the whole body.
    Full,
    /// GET with the server's own ETag in If-None-Match: `304`, no body.
    NotModified,
    /// GET with `Accept-Encoding: gzip`: the compressed body.
    Gzip,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Full => "200, full body",
            Variant::NotModified => "304, If-None-Match",
            Variant::Gzip => "200, gzip",
        }
    }
}

async fn wrk(
    options: &Options,
    cpus: &str,
    server: &Server,
    variant: Variant,
    seconds: u64,
) -> anyhow::Result<WrkRun> {
    let before = cpu::process_cpu(server.pid)?;
    let mut command = Command::new("taskset");
    command
        .args(["-c", cpus, "wrk", "--latency"])
        .arg(format!("-t{}", options.threads))
        .arg(format!("-c{}", options.connections))
        .arg(format!("-d{seconds}s"));
    match variant {
        Variant::NotModified => {
            command.arg("-H").arg(format!("If-None-Match: {}", server.etag));
        }
        Variant::Gzip => {
            command.arg("-H").arg("Accept-Encoding: gzip");
        }
        Variant::Full => {}
    }
    let out =
        command.arg(&server.url).output().await.context("running wrk (apt-get install -y wrk)")?;
    let after = cpu::process_cpu(server.pid)?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut run = parse_wrk(&text)?;
    run.server_cpu = after.saturating_sub(before);
    Ok(run)
}

/// nginx serving `dir/pools.json` at `/v1/pools` on `port`, one process;
/// `sendfile` as given; `dir/pools.json.gz` to a client that accepts gzip
/// (`gzip_static`).
async fn start_nginx(
    nginx: &Path,
    cpus: &str,
    dir: &Path,
    port: u16,
    sendfile: bool,
) -> anyhow::Result<Child> {
    let d = dir.display();
    let sendfile = if sendfile { "on" } else { "off" };
    let config = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx-{port}.pid;\n\
         error_log {d}/error-{port}.log warn;\nevents {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  sendfile {sendfile};\n  tcp_nopush on;\n  tcp_nodelay on;\n\
         \x20 keepalive_timeout 65;\n  keepalive_requests 100000000;\n\
         \x20 client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         \x20 fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n\
         \x20 scgi_temp_path {d}/scgi;\n  default_type application/json;\n\
         \x20 server {{\n    listen 127.0.0.1:{port};\n    root {d};\n\
         \x20   location = /v1/pools {{\n      add_header Cache-Control no-cache;\n\
         \x20     gzip_static on;\n      gzip_vary on;\n      try_files /pools.json =404;\n    }}\n  }}\n}}\n"
    );
    let conf = dir.join(format!("nginx-{port}.conf"));
    std::fs::write(&conf, config)?;
    let child = Command::new("taskset")
        .args(["-c", cpus])
        .arg(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} (apt-get install -y nginx)", nginx.display()))?;
    Ok(child)
}

fn free_port() -> anyhow::Result<u16> {
    let socket = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(socket.local_addr()?.port())
}

/// GETs `url` until it answers (up to 5 s): its body and ETag.
async fn fetch(http: &reqwest::Client, url: &str) -> anyhow::Result<(Vec<u8>, String)> {
    fetch_encoded(http, url, "identity").await
}

/// [`fetch`] with `Accept-Encoding: encoding`; the body as sent (this
/// client decompresses nothing).
async fn fetch_encoded(
    http: &reqwest::Client,
    url: &str,
    encoding: &str,
) -> anyhow::Result<(Vec<u8>, String)> {
    for _ in 0..100 {
        if let Ok(reply) =
            http.get(url).header(reqwest::header::ACCEPT_ENCODING, encoding).send().await
        {
            if encoding == "gzip" {
                let coding = reply.headers().get(reqwest::header::CONTENT_ENCODING);
                ensure!(
                    coding.is_some_and(|c| c == "gzip"),
                    "{url} answered Accept-Encoding: gzip without gzip"
                );
            }
            let etag = reply
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .context("an ETag")?
                .to_owned();
            return Ok((reply.bytes().await?.to_vec(), etag));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{url} did not answer")
}

/// Runs `get-throughput`.
pub async fn run(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    report::begin("get-throughput", "GET /v1/pools vs nginx serving the same bytes, wrk");
    cpu::pin_self(&env.client_cpus)?;
    let dir = std::env::temp_dir().join(unique_name("mcs-bench-nginx"));
    std::fs::create_dir_all(&dir)?;
    let result = measure(env, options, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    cpu::unpin_self()?;
    result?;
    report::end("get-throughput");
    Ok(())
}

async fn measure(env: &crate::Env, options: &Options, dir: &Path) -> anyhow::Result<()> {
    let long = ["--lease-duration-secs", "3600", "--heartbeat-interval-secs", "60"];
    let registry = env.start_registry(Some(&env.server_cpus), &long.map(str::to_owned)).await?;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/pools", registry.api_url());
    for i in 0..options.pools {
        let reply = http.post(&url).json(&registration(i, 4, None)).send().await?;
        ensure!(reply.status().is_success(), "registering pool {i}: {}", reply.status());
    }
    let (body, registry_etag) = fetch(&http, &url).await?;
    let listed: serde_json::Value = serde_json::from_slice(&body)?;
    ensure!(
        listed["pools"].as_array().map(Vec::len) == Some(options.pools)
            && listed["complete"] == true,
        "the registry does not list {} pools, complete",
        options.pools
    );
    std::fs::write(dir.join("pools.json"), &body)?;
    let (gzip, _) = fetch_encoded(&http, &url, "gzip").await?;
    std::fs::write(dir.join("pools.json.gz"), &gzip)?;

    let mut servers = vec![Server {
        name: "mcs-registry",
        url,
        pid: registry.pid().context("the registry's pid")?,
        etag: registry_etag,
    }];
    let mut nginxes = Vec::new();
    for (name, sendfile) in [("nginx (baseline)", true), ("nginx, sendfile off", false)] {
        let port = free_port()?;
        let child = start_nginx(&options.nginx, &env.server_cpus, dir, port, sendfile).await?;
        let url = format!("http://127.0.0.1:{port}/v1/pools");
        let (served, etag) = fetch(&http, &url).await?;
        ensure!(served == body, "{name} serves other bytes than the registry");
        let (served, _) = fetch_encoded(&http, &url, "gzip").await?;
        ensure!(served == gzip, "{name} serves other gzip bytes than the registry");
        servers.push(Server { name, url, pid: child.id().context("nginx's pid")?, etag });
        nginxes.push(child);
    }

    for server in &servers {
        wrk(options, &env.client_cpus, server, Variant::Full, 2)
            .await
            .with_context(|| format!("warming up {}", server.name))?;
    }
    let variants = [Variant::Full, Variant::NotModified, Variant::Gzip];
    let mut runs: Vec<Vec<Vec<WrkRun>>> = vec![vec![Vec::new(); servers.len()]; variants.len()];
    for round in 0..options.rounds.max(1) {
        for (v, variant) in variants.iter().enumerate() {
            for (k, server) in servers.iter().enumerate() {
                let run =
                    wrk(options, &env.client_cpus, server, *variant, options.duration_secs).await?;
                eprintln!(
                    "get-throughput: round {round} {} {}: {:.0} req/s, server CPU {:.1} s, load {}",
                    variant.name(),
                    server.name,
                    run.requests_per_sec,
                    run.server_cpu.as_secs_f64(),
                    report::load_average()
                );
                runs[v][k].push(run);
            }
        }
    }
    for mut child in nginxes {
        let _ = child.kill().await;
    }
    registry.kill().await;

    let mean = |runs: &[WrkRun], f: fn(&WrkRun) -> f64| {
        runs.iter().map(f).sum::<f64>() / runs.len().max(1) as f64
    };
    let rps = |r: &WrkRun| r.requests_per_sec;
    let mut table = Table::new(&[
        "request",
        "server",
        "req/s (mean)",
        "rounds req/s",
        "p50 ms",
        "p99 ms",
        "server CPU %",
        "server CPU µs/req",
        "vs nginx",
    ]);
    for (v, variant) in variants.iter().enumerate() {
        let baseline = mean(&runs[v][1], rps);
        for (k, server) in servers.iter().enumerate() {
            let r = &runs[v][k];
            let cpu_secs: f64 = r.iter().map(|x| x.server_cpu.as_secs_f64()).sum();
            let requests: f64 =
                r.iter().map(|x| x.requests_per_sec * options.duration_secs as f64).sum();
            let wall = (options.duration_secs * r.len() as u64) as f64;
            let errors: String = r.iter().map(|x| x.errors.clone()).collect();
            table.row(vec![
                variant.name().to_owned(),
                if errors.is_empty() {
                    server.name.to_owned()
                } else {
                    format!("{} ({errors})", server.name)
                },
                f(mean(r, rps), 0),
                r.iter().map(|x| f(x.requests_per_sec, 0)).collect::<Vec<_>>().join(", "),
                f(mean(r, |x| x.p50_ms), 3),
                f(mean(r, |x| x.p99_ms), 3),
                f(100.0 * cpu_secs / wall, 0),
                f(1e6 * cpu_secs / requests.max(1.0), 1),
                ratio(mean(r, rps) / baseline),
            ]);
        }
    }
    table.print();
    println!(
        "body {} bytes ({} pools), gzip {} bytes ({:.1}x smaller); wrk -t{} -c{} -d{}s --latency; each server in turn pinned \
         to CPUs {} ({} rounds, servers alternating), wrk and this process to CPUs {}; nginx: \
         one process (master_process off), keep-alive without a request limit; server CPU: \
         utime+stime of the server process over the run.",
        body.len(),
        options.pools,
        gzip.len(),
        body.len() as f64 / gzip.len().max(1) as f64,
        options.threads,
        options.connections,
        options.duration_secs,
        env.server_cpus,
        options.rounds.max(1),
        env.client_cpus
    );
    let ratio_value = mean(&runs[0][0], rps) / mean(&runs[0][1], rps);
    println!(
        "target: GET /v1/pools at least 0.8x nginx: {} ({})",
        ratio(ratio_value),
        verdict(ratio_value >= 0.8)
    );
    let gzip_ratio = mean(&runs[2][0], rps) / mean(&runs[2][1], rps);
    println!(
        "target: the gzip list at least 1.0x nginx's gzip_static: {} ({})",
        ratio(gzip_ratio),
        verdict(gzip_ratio >= 1.0)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_is_parsed() {
        let out = "Running 10s test @ http://127.0.0.1:1/v1/pools\n  1 threads and 16 connections\n\
                   Latency Distribution\n     50%  850.00us\n     75%    1.20ms\n     99%    3.10ms\n\
                   Requests/sec:  12345.67\nTransfer/sec:      3.21GB\n";
        let run = parse_wrk(out).unwrap();
        assert_eq!(run.requests_per_sec, 12345.67);
        assert!((run.p50_ms - 0.85).abs() < 1e-9);
        assert!((run.p99_ms - 3.1).abs() < 1e-9);
        assert_eq!(latency_ms("1.02s"), Some(1020.0));
    }
}
