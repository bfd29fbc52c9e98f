//! The quickstart (issue 25): `scripts/quickstart --check`, the command
//! docs/quickstart.md gives a newcomer, run as they run it, so that neither
//! rots. The script builds the binaries as the README's run commands do,
//! starts two API servers (`scripts/k8s-env`), a registry on memory storage,
//! a controller per cluster and CoreDNS, exports demo/web in east, resolves
//! it in west, unexports it and waits for NXDOMAIN; this test reads what it
//! printed.
//!
//! ```text
//!  scripts/quickstart --check --dir $TMP/mcs-quickstart-…
//!    "ServiceImport ips: <ip>"   west's ServiceImport demo/web
//!    "A answer: <ip>"            dig web.demo.svc.clusterset.local A
//!    "status: NXDOMAIN"          after the unexport
//!    exit 0, DIR removed         the teardown ran
//! ```
//!
//! Without `scripts/k8s-env bin` (no Go) or `dig`, the test skips with a
//! notice, unless the Kubernetes tests are required (`MCS_TEST_REQUIRE_K8S`
//! or `CI`), where it fails. No DynamoDB: the registry runs on memory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Warm, the check takes under a minute (the unexport waits one cluster
/// lease, 30 s); cold, the three `cargo build -p` of the script come first.
const WITHIN: Duration = Duration::from_secs(20 * 60);

/// What the script needs beyond cargo, or why it is not there.
fn environment() -> Result<(), String> {
    let bin = Command::new(mcs_testkit::k8s::script())
        .arg("bin")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("scripts/k8s-env bin: {e}"))?;
    if !bin.status.success() {
        return Err(format!("scripts/k8s-env bin: {}", String::from_utf8_lossy(&bin.stderr)));
    }
    match Command::new("dig").arg("-v").output() {
        Ok(_) => Ok(()),
        Err(e) => Err(format!("dig: {e} (Debian: apt-get install bind9-dnsutils)")),
    }
}

/// Copies `from` line by line into `into`, echoing each line (visible
/// with `--nocapture`, and in the failure's output otherwise).
fn collect(
    from: impl Read + Send + 'static,
    into: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            let mut text = into.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    })
}

/// Waits for `child` until `deadline`; past it, SIGTERM (the script's trap
/// tears everything down) and `None`.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let grace = Instant::now() + Duration::from_secs(60);
            while child.try_wait().unwrap().is_none() && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The text after `prefix` on the first line that holds it, up to ` (`.
fn value<'a>(output: &'a str, prefix: &str) -> Option<&'a str> {
    let line = output.lines().find_map(|l| l.split_once(prefix))?.1;
    Some(line.split(" (").next().unwrap_or(line).trim())
}

#[test]
fn the_quickstart_resolves_the_export_in_the_other_cluster_then_nxdomain() {
    if let Err(why) = environment() {
        assert!(
            !mcs_testkit::k8s::required(),
            "the quickstart's environment is missing but the Kubernetes tests are required \
             ({}=true or CI=true): {why}",
            mcs_testkit::k8s::REQUIRE_ENV
        );
        eprintln!("notice: {why}: this test SKIPS (scripts/test provides both)");
        return;
    }
    let dir = std::env::temp_dir().join(mcs_testkit::dynamo::unique_name("mcs-quickstart"));
    let started = Instant::now();
    let mut child = Command::new(mcs_tests::workspace_root().join("scripts/quickstart"))
        .arg("--check")
        .arg("--dir")
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("scripts/quickstart starts");
    let stdout = Arc::new(Mutex::new(String::new()));
    let stderr = Arc::new(Mutex::new(String::new()));
    let readers = [
        collect(child.stdout.take().unwrap(), stdout.clone()),
        collect(child.stderr.take().unwrap(), stderr.clone()),
    ];
    let status = wait_until(&mut child, started + WITHIN);
    for reader in readers {
        reader.join().unwrap();
    }
    let (out, err) = (stdout.lock().unwrap().clone(), stderr.lock().unwrap().clone());
    let context = format!("stdout:\n{out}\nstderr:\n{err}");

    let status = status.unwrap_or_else(|| panic!("not done within {WITHIN:?}\n{context}"));
    assert!(status.success(), "scripts/quickstart --check: {status}\n{context}");
    let import = value(&out, "ServiceImport ips: ")
        .unwrap_or_else(|| panic!("no ServiceImport ips printed\n{context}"));
    let ipv4: Vec<Ipv4Addr> = import.split_whitespace().filter_map(|ip| ip.parse().ok()).collect();
    assert_eq!(ipv4.len(), 1, "one IPv4 clusterset IP: {import:?}\n{context}");
    let [a, b, ..] = ipv4[0].octets();
    assert_eq!((a, b), (10, 96), "in the clusters' service range 10.96.0.0/16: {import}");
    let answer =
        value(&out, "A answer: ").unwrap_or_else(|| panic!("no A answer printed\n{context}"));
    assert_eq!(answer, ipv4[0].to_string(), "the A answer is the ServiceImport's IP\n{context}");
    assert!(
        out.lines().any(|l| l.trim().starts_with("status: NXDOMAIN")),
        "NXDOMAIN after the unexport\n{context}"
    );
    assert!(out.contains("==> quickstart check passed"), "{context}");
    assert!(!dir.exists(), "the teardown removes {}", dir.display());
    eprintln!("quickstart --check: {:.0} s", started.elapsed().as_secs_f64());
}
