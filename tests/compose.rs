//! `docker-compose.yml` without Docker (no Docker engine runs on the CI
//! machines): every binary, subcommand and flag the stack uses must exist in
//! the binaries built from this workspace, with values they accept.
//!
//! For each service built from the repository's `Dockerfile`, the
//! entrypoint (the service's own, or the image's `ENTRYPOINT`) names a
//! binary the image installs; its command line is then checked twice:
//! - every `--flag` and the subcommand appear in the binary's `--help`;
//! - the binary parses the whole command line: run with `--help` appended,
//!   clap validates every flag and value before it (an unknown flag or a bad
//!   value exits 2), then prints help and exits 0 without doing anything.
//!
//! Also checked: the published container ports are the ones the registries
//! listen on, the DynamoDB endpoint names the DynamoDB service and its port,
//! and the registries wait for the one-shot migrate to succeed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a malformed file should fail loudly

use mcs_tests::{Binaries, binaries, run, workspace_root};
use serde_norway::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Where the image installs its binaries.
const BIN_DIR: &str = "/usr/local/bin/";

fn compose() -> Value {
    let text = std::fs::read_to_string(workspace_root().join("docker-compose.yml")).unwrap();
    serde_norway::from_str(&text).unwrap()
}

fn dockerfile() -> String {
    std::fs::read_to_string(workspace_root().join("Dockerfile")).unwrap()
}

/// A compose list (or a string, split on whitespace) as strings.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Sequence(items) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => panic!("not a string: {other:?}"),
            })
            .collect(),
        Value::String(s) => s.split_whitespace().map(str::to_owned).collect(),
        Value::Null => vec![],
        other => panic!("not a list or string: {other:?}"),
    }
}

/// The image's `ENTRYPOINT [...]`.
fn image_entrypoint(dockerfile: &str) -> Vec<String> {
    let line = dockerfile
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with("ENTRYPOINT"))
        .expect("the Dockerfile has an ENTRYPOINT");
    let json = line.trim_start().trim_start_matches("ENTRYPOINT").trim();
    serde_json::from_str(json).expect("ENTRYPOINT in exec (JSON) form")
}

/// The binaries the image builds and installs in [`BIN_DIR`].
fn image_binaries(dockerfile: &str) -> Vec<String> {
    ["mcs-registry", "mcs-admin"]
        .into_iter()
        .filter(|b| {
            dockerfile.contains(&format!("-p {b}"))
                && dockerfile.contains(&format!("target/release/{b}"))
                && dockerfile.contains(&format!("{BIN_DIR}{b}"))
        })
        .map(str::to_owned)
        .collect()
}

/// One service of ours: the binary it runs and its arguments.
#[derive(Debug)]
struct Invocation {
    service: String,
    binary: String,
    args: Vec<String>,
}

fn invocations(compose: &Value, dockerfile: &str) -> Vec<Invocation> {
    let installed = image_binaries(dockerfile);
    let services = compose["services"].as_mapping().expect("services");
    let mut found = Vec::new();
    for (name, service) in services {
        if service.get("build").is_none() {
            continue; // another image (DynamoDB Local)
        }
        let entrypoint = match service.get("entrypoint") {
            Some(e) => strings(e),
            None => image_entrypoint(dockerfile),
        };
        let program = entrypoint.first().expect("an entrypoint");
        let binary = program.strip_prefix(BIN_DIR).unwrap_or_else(|| {
            panic!("service {name:?} runs {program:?}, not a binary of {BIN_DIR}")
        });
        assert!(
            installed.iter().any(|b| b == binary),
            "service {name:?} runs {binary}, which the image does not build and install \
             (it installs {installed:?})"
        );
        let mut args: Vec<String> = entrypoint[1..].to_vec();
        args.extend(service.get("command").map(strings).unwrap_or_default());
        found.push(Invocation {
            service: name.as_str().unwrap().to_owned(),
            binary: binary.to_owned(),
            args,
        });
    }
    found
}

fn path_of<'a>(binaries: &'a Binaries, binary: &str) -> &'a Path {
    match binary {
        "mcs-registry" => &binaries.registry,
        "mcs-admin" => &binaries.admin,
        other => panic!("no binary {other} in this workspace"),
    }
}

fn help(binary: &Path, args: &[&str]) -> String {
    let out = run(binary, &[args, &["--help"]].concat());
    assert!(out.status.success(), "{} {args:?} --help: {out:?}", binary.display());
    String::from_utf8(out.stdout).unwrap()
}

/// The `--flag` names of `args` (without their `=value`).
fn flags(args: &[String]) -> Vec<&str> {
    args.iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split_once('=').map_or(a.as_str(), |(flag, _)| flag))
        .collect()
}

/// The first argument that is neither a flag nor a flag's separate value.
fn subcommand(args: &[String]) -> Option<&str> {
    let mut value_next = false;
    for arg in args {
        if value_next {
            value_next = false;
            continue;
        }
        if arg.starts_with('-') {
            value_next = !arg.contains('=');
            continue;
        }
        return Some(arg);
    }
    None
}

/// The flags of `wanted` that `help` does not list.
fn missing<'a>(help: &str, wanted: &[&'a str]) -> Vec<&'a str> {
    wanted
        .iter()
        .filter(|flag| {
            !help
                .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == '=')
                .any(|w| w == **flag)
        })
        .copied()
        .collect()
}

/// Whether `binary` accepts `args`: clap parses them all, then `--help`
/// exits 0.
fn parses(binary: &Path, args: &[String]) -> (bool, String) {
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.push("--help");
    let out = run(binary, &all);
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_binary_subcommand_and_flag_of_the_stack_exists() {
    let compose = compose();
    let dockerfile = dockerfile();
    assert_eq!(image_entrypoint(&dockerfile), vec![format!("{BIN_DIR}mcs-registry")]);
    let invocations = invocations(&compose, &dockerfile);
    let by_binary: BTreeMap<&str, usize> = invocations.iter().fold(BTreeMap::new(), |mut m, i| {
        *m.entry(i.binary.as_str()).or_default() += 1;
        m
    });
    assert_eq!(
        by_binary,
        BTreeMap::from([("mcs-admin", 1), ("mcs-registry", 2)]),
        "a one-shot migrate and two registries: {invocations:#?}"
    );

    let binaries = binaries!();
    for inv in &invocations {
        let binary = path_of(&binaries, &inv.binary);
        let mut scope: Vec<&str> = vec![];
        if inv.binary == "mcs-admin" {
            let sub = subcommand(&inv.args).expect("mcs-admin needs a subcommand");
            let top = help(binary, &[]);
            assert!(
                top.lines().any(|l| l.trim_start().starts_with(&format!("{sub} "))),
                "{}: mcs-admin has no subcommand {sub}:\n{top}",
                inv.service
            );
            scope.push(sub);
        }
        let help = help(binary, &scope);
        let wanted = flags(&inv.args);
        assert!(!wanted.is_empty(), "{}: no flags?", inv.service);
        assert_eq!(missing(&help, &wanted), Vec::<&str>::new(), "{}: {help}", inv.service);
        let (ok, stderr) = parses(binary, &inv.args);
        assert!(ok, "{}: {} refuses {:?}: {stderr}", inv.service, inv.binary, inv.args);
    }
}

#[test]
fn the_checks_catch_what_does_not_exist() {
    let binaries = binaries!();
    let registry_help = help(&binaries.registry, &[]);
    assert_eq!(missing(&registry_help, &["--storage", "--no-such-flag"]), vec!["--no-such-flag"]);
    assert_eq!(missing(&registry_help, &["--listen"]), Vec::<&str>::new());
    // `--listen` is not `--listen-address`, nor the other way round.
    assert_eq!(missing(&registry_help, &["--liste"]), vec!["--liste"]);

    let registry = |args: &[&str]| parses(&binaries.registry, &to_strings(args)).0;
    assert!(registry(&["--storage=dynamodb", "--table=t"]));
    assert!(!registry(&["--storage=dynamodb", "--no-such-flag=1"]), "unknown flag");
    assert!(!registry(&["--storage=dynamo"]), "unknown value");
    assert!(!registry(&["--listen=nowhere"]), "bad address");

    let admin = |args: &[&str]| parses(&binaries.admin, &to_strings(args)).0;
    assert!(admin(&["migrate", "--table=t", "--region=us-east-1"]));
    assert!(!admin(&["migrat", "--table=t"]), "unknown subcommand");
    assert!(!admin(&["migrate", "--tabel=t"]), "misspelt flag");
    assert_eq!(
        subcommand(&to_strings(&["--table", "t", "--region=r", "migrate"])),
        Some("migrate")
    );
}

#[test]
fn ports_endpoints_and_order_line_up() {
    let compose = compose();
    let services = compose["services"].as_mapping().unwrap();
    let invocations = invocations(&compose, &dockerfile());
    // The DynamoDB endpoint is a service of the stack, on its container port.
    let mut endpoints = Vec::new();
    for inv in &invocations {
        let value = |flag: &str| {
            inv.args.iter().find_map(|a| a.strip_prefix(&format!("{flag}="))).map(str::to_owned)
        };
        let endpoint = value("--dynamodb-endpoint").expect("a DynamoDB endpoint");
        let (host, port) =
            endpoint.trim_start_matches("http://").split_once(':').expect("host:port");
        let target = &services[host];
        assert!(!target.is_null(), "{}: endpoint host {host} is no service", inv.service);
        assert!(
            published(target).iter().any(|(_, container)| container == port),
            "{}: {host} does not expose {port}",
            inv.service
        );
        endpoints.push((endpoint, value("--table").expect("a table")));
        if inv.binary != "mcs-registry" {
            continue;
        }
        // Each published container port is one the registry listens on.
        let listening: Vec<String> = ["--listen", "--admin-listen"]
            .iter()
            .map(|f| value(f).expect(f).rsplit_once(':').unwrap().1.to_owned())
            .collect();
        let ports = published(&services[inv.service.as_str()]);
        assert!(!ports.is_empty(), "{} publishes no port", inv.service);
        for (_, container) in ports {
            assert!(
                listening.contains(&container),
                "{}: {container} not in {listening:?}",
                inv.service
            );
        }
        // It starts once the table is migrated.
        let condition = &services[inv.service.as_str()]["depends_on"]["migrate"]["condition"];
        assert_eq!(condition.as_str(), Some("service_completed_successfully"), "{}", inv.service);
    }
    // The migrate starts once DynamoDB answers (a healthcheck, not merely a
    // started container), creates the table explicitly, and retries a
    // refused connection meanwhile.
    let migrate = invocations.iter().find(|i| i.binary == "mcs-admin").expect("a migrate");
    let depends = &services[migrate.service.as_str()]["depends_on"];
    let storage = depends.as_mapping().expect("depends_on with conditions").keys().next().unwrap();
    assert_eq!(depends[storage]["condition"].as_str(), Some("service_healthy"));
    let healthcheck = strings(&services[storage.as_str().unwrap()]["healthcheck"]["test"]);
    assert!(healthcheck.iter().any(|t| t.contains("8000")), "{healthcheck:?}");
    for flag in ["--create", "--storage-connect-timeout-secs="] {
        assert!(migrate.args.iter().any(|a| a.starts_with(flag)), "{flag}: {:?}", migrate.args);
    }
    endpoints.dedup();
    assert_eq!(endpoints.len(), 1, "one table, one endpoint: {endpoints:?}");
    // Two registries on distinct host ports.
    let mut host_ports: Vec<String> = invocations
        .iter()
        .filter(|i| i.binary == "mcs-registry")
        .flat_map(|i| published(&services[i.service.as_str()]))
        .map(|(host, _)| host)
        .collect();
    let count = host_ports.len();
    host_ports.sort();
    host_ports.dedup();
    assert_eq!(host_ports.len(), count, "host ports collide");
    assert!(host_ports.contains(&"8080".to_owned()) && host_ports.contains(&"8081".to_owned()));
}

/// `(host, container)` ports a service publishes.
fn published(service: &Value) -> Vec<(String, String)> {
    service
        .get("ports")
        .map(strings)
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let (host, container) = p.rsplit_once(':').expect("host:container");
            (host.to_owned(), container.to_owned())
        })
        .collect()
}

fn to_strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}
