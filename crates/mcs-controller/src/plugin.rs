//! `kubectl mcs status` (the `kubectl-mcs` binary, issue 26): what the
//! Multi-Cluster Services objects of a cluster say, from its kubeconfig
//! context: the controller's leader Lease (holder, last renewal, the
//! cluster's registry incarnation), every ServiceExport with its
//! conditions and conflict text, every ServiceImport with its source
//! clusters, ports and clusterset IPs. `--all-contexts` reads every context
//! of the kubeconfig and compares them side by side, service by service.
//!
//! ```text
//!  kubeconfig ─► context(s) ─► gather (Lease, ServiceExports, ServiceImports)
//!                                 └─► ClusterView ─► report (pure, tested)
//! ```

use crate::crd::{ServiceExport, ServiceImport};
use crate::leader::INCARNATION_ANNOTATION;
use crate::shared_kube::{self, request_failure};
use anyhow::Context;
use clap::{Parser, Subcommand};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// kubectl-mcs: the Multi-Cluster Services objects of a cluster, as
/// mcs-controller keeps them (`kubectl mcs status`).
// Its help is the comment above (not the package's description, which is
// the controller's), and its usage reads as kubectl runs it.
#[derive(Debug, Clone, Parser)]
#[command(name = "kubectl-mcs", bin_name = "kubectl mcs", version = crate::config::VERSION)]
pub struct PluginCli {
    /// What to show.
    #[command(subcommand)]
    pub command: PluginCommand,
}

/// The plugin's commands.
#[derive(Debug, Clone, Subcommand)]
pub enum PluginCommand {
    /// The controller's Lease, the ServiceExports and the ServiceImports of
    /// the current context (or of every context).
    Status(StatusArgs),
}

/// `kubectl mcs status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// The kubeconfig context to read (default: the current one).
    #[arg(long, conflicts_with = "all_contexts")]
    pub context: Option<String>,
    /// Read every context of the kubeconfig, and compare them side by side.
    #[arg(long)]
    pub all_contexts: bool,
    /// Name of the controller's leader-election Lease, in any namespace
    /// (`--leader-election-lease` of mcs-controller).
    #[arg(long, env = "MCS_LEADER_ELECTION_LEASE", default_value = "mcs-controller")]
    pub lease_name: String,
    /// `table` or `json`.
    #[arg(short = 'o', long, default_value = "table", value_parser = ["table", "json"])]
    pub output: String,
}

/// The controller's leader, from its Lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leader {
    /// `namespace/name` of the Lease.
    pub lease: String,
    /// The replica holding it.
    pub holder: Option<String>,
    /// When it was last renewed (RFC 3339).
    pub renewed: Option<String>,
    /// The cluster's registry incarnation (annotation).
    pub incarnation: Option<String>,
}

/// A ServiceExport and its conditions (rows sort by service).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ExportRow {
    /// `namespace/name`.
    pub service: String,
    /// `type` → `status` of each condition.
    pub conditions: BTreeMap<String, String>,
    /// The reasons and messages of the conditions that are not as they
    /// should be (`Valid`/`Ready` not `True`, `Conflict` `True`).
    pub problems: Vec<String>,
}

/// A ServiceImport (rows sort by service).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ImportRow {
    /// `namespace/name`.
    pub service: String,
    /// `ClusterSetIP` or `Headless`.
    pub kind: String,
    /// The clusters exporting it.
    pub clusters: Vec<String>,
    /// `name/protocol/port` of each port.
    pub ports: Vec<String>,
    /// The clusterset IPs.
    pub ips: Vec<String>,
}

/// What one context shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterView {
    /// The kubeconfig context.
    pub context: String,
    /// The controller's leader, when its Lease exists.
    pub leader: Option<Leader>,
    /// ServiceExports by namespace and name.
    pub exports: Vec<ExportRow>,
    /// ServiceImports by namespace and name.
    pub imports: Vec<ImportRow>,
}

/// Runs the plugin; its exit code.
pub async fn run(cli: PluginCli) -> anyhow::Result<u8> {
    let PluginCommand::Status(args) = cli.command;
    let kubeconfig = Kubeconfig::read()?;
    let contexts: Vec<String> = if args.all_contexts {
        kubeconfig.contexts.iter().map(|c| c.name.clone()).collect()
    } else {
        match args.context.clone().or_else(|| kubeconfig.current_context.clone()) {
            Some(context) => vec![context],
            None => anyhow::bail!("no current context in the kubeconfig: pass --context"),
        }
    };
    let mut views = Vec::new();
    for context in contexts {
        let options = KubeConfigOptions { context: Some(context.clone()), ..Default::default() };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
            .await
            .with_context(|| format!("context {context}"))?;
        let server = config.cluster_url.clone();
        let client = kube::Client::try_from(config)
            .with_context(|| format!("context {context} ({server})"))?;
        let view = gather(client, &context, &args.lease_name)
            .await
            .with_context(|| format!("context {context} ({server})"))?;
        views.push(view);
    }
    let text =
        if args.output == "json" { serde_json::to_string(&views)? + "\n" } else { report(&views) };
    print!("{text}");
    Ok(0)
}

/// Reads what `context` shows through `client`.
pub async fn gather(
    client: kube::Client,
    context: &str,
    lease_name: &str,
) -> anyhow::Result<ClusterView> {
    let leases: Api<Lease> = Api::all(client.clone());
    let by_name = ListParams::default().fields(&format!("metadata.name={lease_name}"));
    let listed = leases.list(&by_name).await;
    let leases = listed.map_err(|e| anyhow::anyhow!(shared_kube::kube_error(&e)))?;
    let leader = leases.items.into_iter().next().map(|lease| {
        let meta = &lease.metadata;
        let spec = lease.spec.unwrap_or_default();
        Leader {
            lease: format!(
                "{}/{}",
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default()
            ),
            holder: spec.holder_identity,
            renewed: spec.renew_time.map(|t| t.0.to_string()),
            incarnation: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(INCARNATION_ANNOTATION))
                .cloned(),
        }
    });
    let exports: Api<ServiceExport> = Api::all(client.clone());
    let imports: Api<ServiceImport> = Api::all(client);
    // A cluster without the CRDs is told so, with how to install them.
    let listed = exports.list(&ListParams::default()).await;
    let exports = listed.map_err(|e| anyhow::anyhow!(request_failure::<ServiceExport>(&e)))?.items;
    let listed = imports.list(&ListParams::default()).await;
    let imports = listed.map_err(|e| anyhow::anyhow!(request_failure::<ServiceImport>(&e)))?.items;
    Ok(ClusterView {
        context: context.to_owned(),
        leader,
        exports: exports.iter().map(export_row).collect::<BTreeSet<_>>().into_iter().collect(),
        imports: imports.iter().map(import_row).collect::<BTreeSet<_>>().into_iter().collect(),
    })
}

fn service_of(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default()
    )
}

/// The row of a ServiceExport.
pub fn export_row(export: &ServiceExport) -> ExportRow {
    let conditions = export.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let problems = conditions
        .iter()
        .filter(|c| match c.type_.as_str() {
            "Conflict" => c.status == "True",
            _ => c.status != "True",
        })
        .map(|c| format!("{}={} {}: {}", c.type_, c.status, c.reason, c.message))
        .collect();
    ExportRow {
        service: service_of(&export.metadata),
        conditions: conditions.iter().map(|c| (c.type_.clone(), c.status.clone())).collect(),
        problems,
    }
}

/// The row of a ServiceImport.
pub fn import_row(import: &ServiceImport) -> ImportRow {
    ImportRow {
        service: service_of(&import.metadata),
        kind: import.spec.type_.clone(),
        clusters: import
            .status
            .as_ref()
            .map(|s| s.clusters.iter().map(|c| c.cluster.clone()).collect())
            .unwrap_or_default(),
        ports: import
            .spec
            .ports
            .iter()
            .map(|p| {
                format!(
                    "{}/{}/{}",
                    p.name,
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    p.port
                )
            })
            .collect(),
        ips: import.spec.ips.clone(),
    }
}

/// Rows under a header, columns as wide as their widest cell.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    std::iter::once(&header)
        .chain(rows)
        .map(|row| {
            let cells: Vec<String> =
                row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            cells.join("  ").trim_end().to_owned() + "\n"
        })
        .collect()
}

fn or_dash(values: &[String]) -> String {
    if values.is_empty() { "-".to_owned() } else { values.join(",") }
}

/// The views for people: each context, then, with several, the services
/// side by side.
pub fn report(views: &[ClusterView]) -> String {
    let mut text = String::new();
    for view in views {
        text.push_str(&format!("CONTEXT {}\n", view.context));
        match &view.leader {
            Some(l) => text.push_str(&format!(
                "controller  lease {}, leader {}, renewed {}, registry incarnation {}\n",
                l.lease,
                l.holder.as_deref().unwrap_or("none"),
                l.renewed.as_deref().unwrap_or("never"),
                l.incarnation.as_deref().unwrap_or("none")
            )),
            None => {
                text.push_str("controller  no leader Lease found: is mcs-controller running?\n")
            }
        }
        text.push_str(&format!("\nSERVICEEXPORTS ({})\n", view.exports.len()));
        let get =
            |e: &ExportRow, t: &str| e.conditions.get(t).cloned().unwrap_or_else(|| "-".into());
        let rows: Vec<Vec<String>> = view
            .exports
            .iter()
            .map(|e| {
                vec![
                    e.service.clone(),
                    get(e, "Valid"),
                    get(e, "Ready"),
                    get(e, "Conflict"),
                    e.problems.join("; "),
                ]
            })
            .collect();
        text.push_str(&table(&["SERVICE", "VALID", "READY", "CONFLICT", "PROBLEMS"], &rows));
        text.push_str(&format!("\nSERVICEIMPORTS ({})\n", view.imports.len()));
        let rows: Vec<Vec<String>> = view
            .imports
            .iter()
            .map(|i| {
                vec![
                    i.service.clone(),
                    i.kind.clone(),
                    or_dash(&i.clusters),
                    or_dash(&i.ports),
                    or_dash(&i.ips),
                ]
            })
            .collect();
        text.push_str(&table(&["SERVICE", "TYPE", "CLUSTERS", "PORTS", "IPS"], &rows));
        text.push('\n');
    }
    if views.len() > 1 {
        text.push_str(&side_by_side(views));
    }
    text
}

/// Every service of any context, one row each, one column per context:
/// `export Ready=…` and `import <clusters>`, `-` where absent.
fn side_by_side(views: &[ClusterView]) -> String {
    let services: BTreeSet<&str> = views
        .iter()
        .flat_map(|v| {
            v.exports
                .iter()
                .map(|e| e.service.as_str())
                .chain(v.imports.iter().map(|i| i.service.as_str()))
        })
        .collect();
    let rows: Vec<Vec<String>> = services
        .iter()
        .map(|service| {
            std::iter::once((*service).to_owned())
                .chain(views.iter().map(|v| {
                    let export = v.exports.iter().find(|e| e.service == *service).map(|e| {
                        let ready = e.conditions.get("Ready").map_or("-", String::as_str);
                        let conflict = if e.conditions.get("Conflict").is_some_and(|c| c == "True")
                        {
                            " conflict"
                        } else {
                            ""
                        };
                        format!("export Ready={ready}{conflict}")
                    });
                    let import = v
                        .imports
                        .iter()
                        .find(|i| i.service == *service)
                        .map(|i| format!("import from {}", or_dash(&i.clusters)));
                    let cells: Vec<String> = export.into_iter().chain(import).collect();
                    if cells.is_empty() { "-".to_owned() } else { cells.join(", ") }
                }))
                .collect()
        })
        .collect();
    let mut headers = vec!["SERVICE"];
    headers.extend(views.iter().map(|v| v.context.as_str()));
    format!("SIDE BY SIDE\n{}", table(&headers, &rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(context: &str, conflict: &str, clusters: &[&str]) -> ClusterView {
        ClusterView {
            context: context.into(),
            leader: Some(Leader {
                lease: "mcs/mcs-controller".into(),
                holder: Some("pod-1".into()),
                renewed: Some("2026-12-04T19:00:00Z".into()),
                incarnation: Some("east-1".into()),
            }),
            exports: vec![ExportRow {
                service: "llm/web".into(),
                conditions: [("Conflict", conflict), ("Ready", "True"), ("Valid", "True")]
                    .map(|(t, s)| (t.to_owned(), s.to_owned()))
                    .into(),
                problems: if conflict == "True" {
                    vec!["Conflict=True PortConflict: ports differ".into()]
                } else {
                    vec![]
                },
            }],
            imports: vec![ImportRow {
                service: "llm/web".into(),
                kind: "ClusterSetIP".into(),
                clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
                ports: vec!["http/TCP/80".into()],
                ips: vec!["10.96.0.10".into()],
            }],
        }
    }

    #[test]
    fn one_context_shows_the_leader_exports_with_conflicts_and_imports() {
        let text = report(&[view("east", "True", &["east", "west"])]);
        for expected in [
            "CONTEXT east\n",
            "controller  lease mcs/mcs-controller, leader pod-1, renewed 2026-12-04T19:00:00Z, \
             registry incarnation east-1\n",
            "SERVICE  VALID  READY  CONFLICT  PROBLEMS\n\
             llm/web  True   True   True      Conflict=True PortConflict: ports differ\n",
            "SERVICE  TYPE          CLUSTERS   PORTS        IPS\n\
             llm/web  ClusterSetIP  east,west  http/TCP/80  10.96.0.10\n",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(!text.contains("SIDE BY SIDE"), "one context: nothing to compare");
        let mut none = view("east", "False", &[]);
        none.leader = None;
        let text = report(&[none]);
        assert!(text.contains("no leader Lease found"), "{text}");
        assert!(text.contains("ClusterSetIP  -  "), "no clusters: a dash: {text}");
    }

    #[test]
    fn all_contexts_compare_services_side_by_side() {
        let mut west = view("west", "False", &["east"]);
        west.exports.clear();
        let text = report(&[view("east", "True", &["east", "west"]), west]);
        assert!(
            text.contains(
                "SIDE BY SIDE\nSERVICE  east                                               west\n\
                 llm/web  export Ready=True conflict, import from east,west  import from east\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_export_reads_its_conditions_and_problems() {
        let export: ServiceExport = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "metadata": {"namespace": "llm", "name": "web"},
            "status": {"conditions": [
                {"type": "Valid", "status": "True", "reason": "Valid", "message": "ok",
                 "lastTransitionTime": "2026-12-04T19:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "Pending", "message": "NoClusterLease",
                 "lastTransitionTime": "2026-12-04T19:00:00Z"},
                {"type": "Conflict", "status": "False", "reason": "NoConflicts", "message": "none",
                 "lastTransitionTime": "2026-12-04T19:00:00Z"}
            ]}
        }))
        .unwrap();
        let row = export_row(&export);
        assert_eq!(row.service, "llm/web");
        assert_eq!(row.conditions["Ready"], "False");
        assert_eq!(row.problems, ["Ready=False Pending: NoClusterLease"]);
    }
}
