//! `status --registry URL`: the registry's status document (`GET
//! /v1/status`, docs/api.md) as the operator's first look: findings first,
//! each with its runbook, then the process, view, reader, hold, clusters,
//! conflicts and sections. `-o json|yaml` prints the document itself.
//! Exit 1 when a finding is critical, so scripts and CI can gate on it.
//! Colour (the severities) only on a terminal, and never with `NO_COLOR`.

use crate::Exit;
use crate::cli::{GlobalArgs, RegistryArgs, StatusArgs};
use crate::output::{self, Table};
use anyhow::Context as _;
use mcs_api::status::{PollKind, Severity, Status, human_ms};
use mcs_client::{Client, ClientConfig, TlsFiles};
use std::io::IsTerminal as _;
use std::time::Duration;

pub(super) async fn run(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<Exit> {
    let client = client(&args.registry)?;
    let status = client
        .status()
        .await
        .with_context(|| format!("asking {} for its status", args.registry.registry))?;
    let text = match output::structured(global.output, &status)? {
        Some(text) => text,
        None => report(&status, colour()),
    };
    output::print(&text)?;
    Ok(if status.is_critical() { Exit::Problem } else { Exit::Ok })
}

/// A client of the registry `args` name, retries for 5 s. Plain `http` is
/// taken as the URL says (the embedded default on loopback), so a URL
/// without a scheme is refused naming both forms.
pub(super) fn client(args: &RegistryArgs) -> anyhow::Result<Client> {
    let mut config = ClientConfig::new(args.registry.clone());
    config.allow_insecure_http = !args.registry.starts_with("https://");
    config.retry_deadline = Duration::from_secs(5);
    config.tls = args.registry_ca.as_ref().map(|ca| TlsFiles {
        ca_bundle: ca.clone(),
        client_identity: args.registry_client_cert.clone().zip(args.registry_client_key.clone()),
    });
    Client::new(config).map_err(|e| crate::UsageError::invalid(format!("--registry: {e}")).into())
}

/// Whether stdout takes colours: a terminal, and no `NO_COLOR`.
fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A severity as the terminal shows it, in its colour when `colour`.
fn severity(s: Severity, colour: bool) -> String {
    let (word, code) = match s {
        Severity::Critical => ("CRITICAL", "1;31"),
        Severity::Warning => ("WARNING", "33"),
    };
    if colour { format!("\x1b[{code}m{word}\x1b[0m") } else { word.to_owned() }
}

fn ago(ms: Option<u64>) -> String {
    ms.map_or("never".to_owned(), |ms| format!("{} ago", human_ms(ms)))
}

/// The document for people. Pure: the tests read it as printed.
pub(crate) fn report(status: &Status, colour: bool) -> String {
    let p = &status.process;
    let r = &status.reader;
    let h = &status.hold;
    let mut text = String::new();
    if status.findings.is_empty() {
        text.push_str(
            "No findings: the registry serves complete lists and nothing needs an operator.\n",
        );
    } else {
        text.push_str(&format!("FINDINGS ({})\n", status.findings.len()));
        for f in &status.findings {
            text.push_str(&format!(
                "{}  {}  {}\n    runbook: {}\n",
                severity(f.severity, colour),
                f.code,
                f.message,
                f.runbook
            ));
        }
    }
    let why: Vec<&str> = status.view.incomplete_because.iter().map(|w| w.as_str()).collect();
    let errors: Vec<String> =
        r.storage_errors.iter().map(|e| format!("{} {}", e.count, e.kind)).collect();
    let poll = |kind: Option<PollKind>| match kind {
        Some(PollKind::Full) => " (full)",
        Some(PollKind::Delta) => " (delta)",
        None => "",
    };
    text.push('\n');
    text.push_str(&output::fields([
        (
            "registry",
            format!(
                "{}writer {}, storage {}, version {}, schema {}, up {}, ready: {}",
                p.region.as_ref().map_or(String::new(), |r| format!("region {r}, ")),
                p.writer_id,
                p.storage,
                p.version,
                p.schema_version,
                human_ms(p.uptime_secs.saturating_mul(1000)),
                if p.ready { "yes" } else { "no" }
            ),
        ),
        (
            "view",
            if status.view.complete {
                "complete".to_owned()
            } else {
                format!("incomplete: {}", why.join(", "))
            },
        ),
        (
            "reader",
            format!(
                "last poll {}{}, last full read {}, {} failed in a row, storage errors: {}",
                ago(r.last_poll_age_ms),
                poll(r.last_poll),
                ago(r.last_full_read_age_ms),
                r.failed_polls_in_a_row,
                if errors.is_empty() { "none".to_owned() } else { errors.join(", ") }
            ),
        ),
        (
            "hold",
            if h.active {
                format!(
                    "holding expiries of {} leases{} (at most {})",
                    h.held_leases,
                    h.since_ms_ago.map_or(String::new(), |ms| format!(" for {}", human_ms(ms))),
                    human_ms(h.max_hold_ms)
                )
            } else {
                "none".to_owned()
            },
        ),
        ("pools", format!("{} ({} expiring soon)", status.pools.count, status.pools.expiring_soon)),
        (
            "routers",
            format!("{} ({} expiring soon)", status.routers.count, status.routers.expiring_soon),
        ),
    ]));
    text.push_str(&format!("\nCLUSTERS ({})\n", status.clusters.len()));
    let mut clusters = Table::new([
        "CLUSTER",
        "INCARNATION",
        "RENEWED",
        "EXPIRES IN",
        "EXPORTS",
        "CONFLICTS",
        "POOLS",
    ]);
    for c in &status.clusters {
        clusters.row([
            format!("{}{}", c.cluster_id, if c.at_risk { " (at risk)" } else { "" }),
            c.incarnation.clone(),
            ago(c.renewed_ms_ago),
            c.expires_in_ms.map_or("?".to_owned(), human_ms),
            c.exports.to_string(),
            c.conflicts.to_string(),
            c.pools.to_string(),
        ]);
    }
    text.push_str(&clusters.render());
    text.push_str(&format!("\nPOOLS BY CLUSTER ({})\n", status.pools.per_cluster.len()));
    let mut groups = Table::new(["CLUSTER", "POOLS", "EXPIRING SOON"]);
    for g in &status.pools.per_cluster {
        groups.row([g.cluster_id.to_string(), g.pools.to_string(), g.expiring_soon.to_string()]);
    }
    text.push_str(&groups.render());
    if !status.conflicts.is_empty() {
        text.push_str(&format!("\nCONFLICTS ({})\n", status.conflicts.len()));
        let mut conflicts = Table::new(["SERVICE", "CLUSTERS", "REASON", "MESSAGE"]);
        for c in &status.conflicts {
            let clusters: Vec<&str> = c.clusters.iter().map(|l| l.as_str()).collect();
            conflicts.row([
                format!("{}/{}", c.namespace, c.name),
                clusters.join(","),
                c.reason.clone(),
                c.message.clone(),
            ]);
        }
        text.push_str(&conflicts.render());
    }
    text.push_str("\nSECTIONS\n");
    let mut sections = Table::new(["SECTION", "ITEMS", "FINGERPRINT"]);
    for s in &status.view.sections {
        sections.row([s.section.clone(), s.items.to_string(), s.fingerprint.clone()]);
    }
    text.push_str(&sections.render());
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_api::status::*;

    /// Before: `127.0.0.1:8080` was refused with `expected https://HOST[:PORT]`,
    /// though `http://127.0.0.1:8080` (the embedded default) is taken.
    #[test]
    fn a_registry_url_without_a_scheme_is_refused_naming_both_forms() {
        let args = |url: &str| RegistryArgs {
            registry: url.into(),
            registry_ca: None,
            registry_client_cert: None,
            registry_client_key: None,
        };
        let error = client(&args("127.0.0.1:8080")).unwrap_err().to_string();
        assert!(error.starts_with("--registry: "), "{error}");
        assert!(error.contains("expected http://HOST[:PORT] or https://HOST[:PORT]"), "{error}");
        assert!(client(&args("http://127.0.0.1:8080")).is_ok());
        assert!(client(&args("https://registry.example:8080")).is_ok());
    }

    /// mcs-api's healthy document, in a hold, with a conflict.
    fn status() -> Status {
        let mut status = fixtures::healthy();
        status.process.region = None;
        status.process.version = "0.1.0".into();
        status.process.uptime_secs = 90;
        status.process.now_ms = 0;
        status.view.complete = false;
        status.view.incomplete_because = vec![Incomplete::Hold];
        status.view.sections[0].items = 6;
        status.view.sections[0].fingerprint = "f00".into();
        let reader = &mut status.reader;
        reader.last_poll_age_ms = Some(400);
        reader.last_full_read_age_ms = None;
        reader.storage_errors = vec![ErrorCount { kind: "unavailable".into(), count: 2 }];
        let cluster = &mut status.clusters[0];
        cluster.incarnation = "east-1".into();
        (cluster.renewed_ms_ago, cluster.expires_in_ms) = (Some(3_000), Some(28_000));
        (cluster.at_risk, cluster.conflicts, cluster.pools) = (true, 1, 6);
        status.pools.count = 6;
        status.pools.expiring_soon = 6;
        status.pools.per_cluster[0].pools = 6;
        status.pools.per_cluster[0].expiring_soon = 6;
        status.hold = HoldStatus {
            active: true,
            since_ms_ago: Some(4_000),
            held_leases: 6,
            max_hold_ms: 30_000,
        };
        status.conflicts = vec![fixtures::conflict("llm", "web", "PortConflict")];
        status.findings = findings(&status);
        status
    }

    #[test]
    fn the_report_puts_findings_first_with_their_runbooks() {
        let text = report(&status(), false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "FINDINGS (2)");
        assert!(
            lines[1].starts_with("CRITICAL  expiry_hold  expiries of 6 leases held back for 4 s")
        );
        assert_eq!(lines[2], "    runbook: docs/operations.md#an-expiry-hold");
        assert!(
            lines[3].starts_with("WARNING  conflict  service llm/web is exported by east, west")
        );
        for expected in [
            "view      incomplete: hold",
            "hold      holding expiries of 6 leases for 4 s (at most 30 s)",
            "reader    last poll 400 ms ago (delta), last full read never, 0 failed in a row, \
             storage errors: 2 unavailable",
            "pools     6 (6 expiring soon)",
            "CLUSTER         INCARNATION  RENEWED  EXPIRES IN  EXPORTS  CONFLICTS  POOLS\n\
             east (at risk)  east-1       3 s ago  28 s        1        1          6\n",
            "POOLS BY CLUSTER (1)\nCLUSTER  POOLS  EXPIRING SOON\neast     6      6\n",
            "llm/web  east,west  PortConflict  ports differ",
            "pools    6      f00",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(!text.contains('\x1b'), "no colour unless asked");
    }

    #[test]
    fn colour_marks_the_severities_only() {
        let text = report(&status(), true);
        assert!(text.contains("\x1b[1;31mCRITICAL\x1b[0m  expiry_hold"), "{text}");
        assert!(text.contains("\x1b[33mWARNING\x1b[0m  conflict"), "{text}");
        assert_eq!(text.matches('\x1b').count(), 4);
    }

    #[test]
    fn a_healthy_registry_reports_no_findings() {
        let mut healthy = status();
        healthy.hold =
            HoldStatus { active: false, since_ms_ago: None, held_leases: 0, max_hold_ms: 1 };
        healthy.conflicts.clear();
        healthy.view.incomplete_because.clear();
        healthy.view.complete = true;
        healthy.pools.expiring_soon = 0;
        healthy.clusters[0].at_risk = false;
        healthy.findings = findings(&healthy);
        let text = report(&healthy, false);
        assert!(text.starts_with("No findings"), "{text}");
        assert!(text.contains("view      complete\n"), "{text}");
        assert!(text.contains("hold      none\n"), "{text}");
        assert!(!text.contains("CONFLICTS ("), "no conflicts, no table of them: {text}");
    }

    #[test]
    fn a_plain_http_registry_is_taken_and_a_bad_url_is_a_usage_error() {
        let args = |url: &str| RegistryArgs {
            registry: url.to_owned(),
            registry_ca: None,
            registry_client_cert: None,
            registry_client_key: None,
        };
        assert!(client(&args("http://localhost:8080")).is_ok());
        let error = client(&args("ftp://x")).unwrap_err();
        assert!(error.downcast_ref::<crate::UsageError>().is_some(), "{error}");
    }
}
