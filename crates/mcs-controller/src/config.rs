//! The controller's flags, each with an `MCS_*` environment twin, and the
//! checks clap cannot make (exit 2 with one line naming the flag).
//! docs/configuration.md lists them.

use crate::Settings;
use crate::shared_cli::{Renamed, with_old_names};
use clap::{Args, Parser, Subcommand};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `--version`: the package's version and the commit it was built from
/// (`MCS_GIT_COMMIT`, set by `crates/build_commit.rs`).
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("MCS_GIT_COMMIT"), ")");

/// How often at most each registry watch (exports, imports) hands over a
/// new list while changes stream in: each list is read whole (every
/// export or import of the clusterset), so one per change made the
/// controller's CPU grow with the square of the exports while a thousand
/// were being exported (issue 27). A change after a quiet spell still
/// comes at once.
pub const REGISTRY_WATCH_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// `mcs-controller`: runs the controller, or prints what deploying it needs.
#[derive(Debug, Parser)]
#[command(name = "mcs-controller", version = VERSION, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Something to print instead of running.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The controller's flags.
    #[command(flatten)]
    pub run: RunArgs,

    /// Which old names of renamed flags (`RENAMED`) were used, each as a
    /// note to log.
    #[arg(skip)]
    pub renamed: Vec<String>,
}

/// The flags renamed to fit one vocabulary across the three binaries
/// (docs/configuration.md, Flag names): the old names still work, hidden,
/// for one release, and using one logs a warning.
const RENAMED: &[Renamed] = &[
    Renamed {
        id: "registry_client_cert_file",
        old_flag: "registry-client-cert",
        old_env: "MCS_REGISTRY_CLIENT_CERT",
    },
    Renamed {
        id: "registry_client_key_file",
        old_flag: "registry-client-key",
        old_env: "MCS_REGISTRY_CLIENT_KEY",
    },
    Renamed { id: "admin_listen", old_flag: "metrics-listen", old_env: "MCS_METRICS_LISTEN" },
];

impl Cli {
    /// The command line of this process, with the old names of
    /// `RENAMED` flags; exits as clap does on a usage error.
    pub fn from_command_line() -> Self {
        Self::try_parse_with_old_names(std::env::args_os().collect()).unwrap_or_else(|e| e.exit())
    }

    /// `argv` (and the environment) parsed with the old names of
    /// `RENAMED` flags too.
    pub fn try_parse_with_old_names(argv: Vec<OsString>) -> Result<Self, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let (command, renamed) = with_old_names(Self::command(), RENAMED, &argv);
        let mut cli = Self::from_arg_matches(&crate::shared_cli::matches(command, argv)?)?;
        cli.renamed = renamed;
        Ok(cli)
    }

    /// The shell completion script of mcs-controller for `shell`
    /// (`completions`).
    pub fn completion_script(shell: clap_complete::Shell) -> String {
        let mut command = <Self as clap::CommandFactory>::command();
        crate::shared_cli::completion_script(shell, &mut command, "mcs-controller")
    }
}

/// What `mcs-controller` can do instead of running: print what deploying
/// it needs, or configure the cluster's CoreDNS.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// The ServiceExport and ServiceImport CRDs (YAML).
    Crds,
    /// Exactly the permissions the controller uses (YAML): a ClusterRole, a
    /// Role for the leader-election Lease in its namespace, and their
    /// bindings to the controller's ServiceAccount.
    Rbac(RbacArgs),
    /// Makes the cluster's CoreDNS answer the clusterset zone from
    /// ServiceImports (`configure`), or undoes exactly that
    /// (`unconfigure`): the Corefile in its ConfigMap, edited in place.
    #[command(subcommand)]
    Coredns(CorednsCommand),
    /// The shell completion script of mcs-controller for SHELL, e.g.
    /// `mcs-controller completions bash > /etc/bash_completion.d/mcs-controller`.
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Where the printed RBAC binds and grants (`mcs_controller::rbac::Install`).
#[derive(Debug, Clone, Args)]
pub struct RbacArgs {
    /// Name of the ClusterRole, the Role and their bindings.
    #[arg(long, default_value = crate::rbac::NAME)]
    pub name: String,
    /// Namespace of the controller's ServiceAccount and of its
    /// leader-election Lease (`--leader-election-namespace`).
    #[arg(long, default_value = "mcs-system")]
    pub namespace: String,
    /// The controller's ServiceAccount.
    #[arg(long, default_value = "mcs-controller")]
    pub service_account: String,
    /// Name of the leader-election Lease (`--leader-election-lease`).
    #[arg(long, default_value = "mcs-controller")]
    pub leader_election_lease: String,
}

impl RbacArgs {
    /// The install these flags describe.
    pub fn install(&self) -> crate::rbac::Install {
        crate::rbac::Install {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            service_account: self.service_account.clone(),
            lease: self.leader_election_lease.clone(),
        }
    }
}

/// `mcs-controller coredns …` (`mcs_controller::coredns`).
#[derive(Debug, Clone, Subcommand)]
pub enum CorednsCommand {
    /// Adds the zone to the Corefile's `kubernetes` block of cluster.local
    /// (after cluster.local, and the line `multicluster <zone>`), recording
    /// what it added in an annotation of the ConfigMap; a second run writes
    /// nothing.
    Configure {
        /// The ConfigMap.
        #[command(flatten)]
        target: CorednsTarget,
        /// The clusterset zone.
        #[arg(long, default_value = "clusterset.local")]
        zone: String,
    },
    /// Removes what `configure` recorded, and the record; nothing else.
    Unconfigure {
        /// The ConfigMap.
        #[command(flatten)]
        target: CorednsTarget,
    },
}

/// The ConfigMap of CoreDNS's Corefile, and how to log.
#[derive(Debug, Clone, Args)]
pub struct CorednsTarget {
    /// Namespace of CoreDNS's ConfigMap.
    #[arg(long, default_value = "kube-system")]
    pub namespace: String,
    /// CoreDNS's ConfigMap.
    #[arg(long, default_value = "coredns")]
    pub configmap: String,
    /// Key of the Corefile in the ConfigMap.
    #[arg(long, default_value = "Corefile")]
    pub key: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl CorednsCommand {
    /// The ConfigMap's flags.
    pub fn target_args(&self) -> &CorednsTarget {
        match self {
            Self::Configure { target, .. } | Self::Unconfigure { target } => target,
        }
    }

    /// The ConfigMap, once the flags are checked (the message names the flag).
    pub fn resolve(&self) -> Result<crate::coredns::Target, String> {
        if let Self::Configure { zone, .. } = self
            && let Some(problem) = crate::coredns::zone_problem(zone)
        {
            return Err(format!("--zone {zone:?}: {problem}"));
        }
        let t = self.target_args();
        for (flag, value) in
            [("--namespace", &t.namespace), ("--configmap", &t.configmap), ("--key", &t.key)]
        {
            if value.is_empty() {
                return Err(format!("{flag} is empty"));
            }
        }
        Ok(crate::coredns::Target {
            namespace: t.namespace.clone(),
            name: t.configmap.clone(),
            key: t.key.clone(),
        })
    }
}

pub use crate::shared_cli::LogFormat;

/// Installs the controller's log subscriber (the three binaries' one way:
/// `shared_cli::install_logs`).
pub fn install_logs(
    filter: tracing_subscriber::EnvFilter,
    format: LogFormat,
) -> Result<(), String> {
    crate::shared_cli::install_logs(filter, format, false)
}

/// The flags of a running controller.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// This cluster's id, a DNS label; else the `cluster.clusterset.k8s.io`
    /// ClusterProperty's value. Both given and different: refused.
    #[arg(long, env = "MCS_CLUSTER_ID")]
    pub cluster_id: Option<String>,
    /// The registry's base URL, `https://…` (or `http://…` with
    /// `--registry-allow-insecure-http`).
    #[arg(long, env = "MCS_REGISTRY_URL")]
    pub registry_url: Option<String>,
    /// CA bundle (PEM) trusted for the registry's certificate.
    #[arg(long, env = "MCS_REGISTRY_CA_FILE")]
    pub registry_ca_file: Option<PathBuf>,
    /// Client certificate chain (PEM) presented to the registry (mTLS).
    #[arg(long, env = "MCS_REGISTRY_CLIENT_CERT_FILE", requires = "registry_client_key_file")]
    pub registry_client_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, env = "MCS_REGISTRY_CLIENT_KEY_FILE", requires = "registry_client_cert_file")]
    pub registry_client_key_file: Option<PathBuf>,
    /// Allows a plain `http://` registry URL (evaluation only).
    #[arg(long, env = "MCS_REGISTRY_ALLOW_INSECURE_HTTP")]
    pub registry_allow_insecure_http: bool,
    /// Period of the full reconcile of exports and imports, jittered by up
    /// to a tenth.
    #[arg(long, env = "MCS_RESYNC_INTERVAL_SECS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub resync_interval_secs: u64,
    /// How long the importer holds back a complete list that would remove
    /// half or more of the imported services at once (a registry that
    /// lost its records, docs/design.md §13); unset, the cluster's lease
    /// as the registry grants it, at most 300 s.
    #[arg(long, env = "MCS_IMPORT_REMOVAL_HOLD_SECS",
          value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub import_removal_hold_secs: Option<u64>,
    /// Label selector of the Services exported without a ServiceExport of
    /// their own (the controller creates one, and deletes only those);
    /// unset, auto-export is off. Never in the system namespaces nor
    /// `default/kubernetes` (`autoexport::excluded`).
    #[arg(long, env = "MCS_AUTO_EXPORT_SELECTOR")]
    pub auto_export_selector: Option<String>,
    /// Endpoints per imported EndpointSlice.
    #[arg(long, env = "MCS_MAX_ENDPOINTS_PER_SLICE", default_value_t = 100,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub max_endpoints_per_slice: u16,
    /// Threads of the async runtime. One, a current-thread runtime
    /// (`run::runtime`), cost 10 to 15 % less CPU per export than two,
    /// which wake each other for every event (docs/benchmarks.md §8);
    /// more let CPU-bound steps (a large list decoded at start) run
    /// beside the rest.
    #[arg(long, env = "MCS_WORKER_THREADS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// Address of `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, env = "MCS_ADMIN_LISTEN", default_value = "0.0.0.0:9091", value_parser = crate::shared_cli::listen_address)]
    pub admin_listen: SocketAddr,
    /// Namespace of the leader-election Lease; else the pod's own
    /// (`POD_NAMESPACE` or the service account's), else `default`.
    #[arg(long, env = "MCS_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the leader-election Lease.
    #[arg(long, env = "MCS_LEADER_ELECTION_LEASE", default_value = "mcs-controller")]
    pub leader_election_lease: String,
    /// How long a leader's Lease lasts without renewal.
    #[arg(long, env = "MCS_LEADER_ELECTION_LEASE_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(3..=300))]
    pub leader_election_lease_secs: u64,
    /// Log filter (`tracing` syntax), e.g. `info,mcs_controller=debug`.
    #[arg(long, env = "MCS_LOG", default_value = "info")]
    pub log: String,
    /// Log format.
    #[arg(long, env = "MCS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// What the flags resolve to, once checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// The client's configuration.
    pub registry: mcs_client::ClientConfig,
    /// `--cluster-id`, if given.
    pub cluster_id: Option<String>,
    /// The parts' settings.
    pub settings: Settings,
    /// Where `/metrics` is served.
    pub admin_listen: SocketAddr,
    /// The Lease's namespace, if given.
    pub lease_namespace: Option<String>,
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's duration.
    pub lease_duration: Duration,
}

impl RunArgs {
    /// Checks what clap cannot; the message names the flag.
    pub fn resolve(&self) -> Result<Config, String> {
        let url =
            self.registry_url.clone().ok_or("--registry-url (MCS_REGISTRY_URL) is required")?;
        if url.starts_with("http://") && !self.registry_allow_insecure_http {
            return Err(format!(
                "--registry-url {url:?} is plain http: pass --registry-allow-insecure-http \
                 (MCS_REGISTRY_ALLOW_INSECURE_HTTP=true) to allow it, or use https"
            ));
        }
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(format!("--registry-url {url:?} must start with https:// or http://"));
        }
        if url.starts_with("https://") && self.registry_ca_file.is_none() {
            return Err("--registry-ca-file is required with an https:// --registry-url".into());
        }
        let mut registry = mcs_client::ClientConfig::new(url);
        registry.allow_insecure_http = self.registry_allow_insecure_http;
        registry.watch_min_interval = REGISTRY_WATCH_MIN_INTERVAL;
        registry.tls = self.registry_ca_file.clone().map(|ca| mcs_client::TlsFiles {
            ca_bundle: ca,
            client_identity: self
                .registry_client_cert_file
                .clone()
                .zip(self.registry_client_key_file.clone()),
        });
        if let Some(id) = &self.cluster_id {
            mcs_api::Label::new(id.as_str()).map_err(|e| format!("--cluster-id: {e}"))?;
        }
        let selector = self.auto_export_selector.clone();
        if let Some(text) = &selector {
            if text.trim().is_empty() {
                return Err("--auto-export-selector is empty: leave it unset to keep auto-export \
                            off"
                .into());
            }
            crate::autoexport::parse_selector(text)
                .map_err(|e| format!("--auto-export-selector: {e}"))?;
        }
        Ok(Config {
            registry,
            cluster_id: self.cluster_id.clone(),
            settings: Settings {
                resync_interval: Duration::from_secs(self.resync_interval_secs),
                auto_export_selector: selector,
                max_endpoints_per_slice: usize::from(self.max_endpoints_per_slice),
                removal_hold: self.import_removal_hold_secs.map(Duration::from_secs),
            },
            admin_listen: self.admin_listen,
            lease_namespace: self.leader_election_namespace.clone(),
            lease_name: self.leader_election_lease.clone(),
            lease_duration: Duration::from_secs(self.leader_election_lease_secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["mcs-controller"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.run.resolve()
    }

    #[test]
    fn the_old_names_of_renamed_flags_still_work_and_are_noted() {
        let argv = [
            "mcs-controller",
            "--registry-url=https://r",
            "--registry-ca-file=/ca",
            "--registry-client-cert",
            "/c",
            "--registry-client-key=/k",
            "--metrics-listen=127.0.0.1:9100",
        ];
        let cli = Cli::try_parse_with_old_names(argv.map(OsString::from).to_vec()).unwrap();
        assert_eq!(
            cli.renamed,
            [
                "--registry-client-cert is deprecated: use --registry-client-cert-file",
                "--registry-client-key is deprecated: use --registry-client-key-file",
                "--metrics-listen is deprecated: use --admin-listen",
            ]
        );
        let config = cli.run.resolve().unwrap();
        assert_eq!(config.admin_listen, "127.0.0.1:9100".parse().unwrap());
        let tls = config.registry.tls.unwrap();
        assert_eq!(tls.client_identity, Some(("/c".into(), "/k".into())));
        // Hidden from help: only the new names are documented.
        let help = <Cli as clap::CommandFactory>::command().render_long_help().to_string();
        assert!(help.contains("--admin-listen") && !help.contains("--metrics-listen"), "{help}");
        // Old and new names of one flag are one flag, as clap sees it.
        let both = ["mcs-controller", "--metrics-listen=127.0.0.1:1", "--admin-listen=127.0.0.1:2"];
        assert!(Cli::try_parse_with_old_names(both.map(OsString::from).to_vec()).is_err());
    }

    #[test]
    fn plain_http_needs_the_explicit_opt_in() {
        let err = parse(&["--registry-url", "http://r:8080"]).unwrap_err();
        assert!(err.contains("--registry-allow-insecure-http"), "{err}");
        let ok = parse(&["--registry-url", "http://r:8080", "--registry-allow-insecure-http"]);
        assert!(ok.unwrap().registry.allow_insecure_http);
    }

    #[test]
    fn https_needs_a_ca_and_a_client_cert_needs_its_key() {
        let err = parse(&["--registry-url", "https://r:8443"]).unwrap_err();
        assert!(err.contains("--registry-ca-file"), "{err}");
        let with_cert = [
            "--registry-url",
            "https://r:8443",
            "--registry-ca-file",
            "/ca",
            "--registry-client-cert-file",
            "/c",
        ];
        let err = parse(&with_cert).unwrap_err();
        assert!(err.contains("--registry-client-key-file"), "{err}");
        let config =
            parse(&[&with_cert[..], &["--registry-client-key-file", "/k"]].concat()).unwrap();
        let tls = config.registry.tls.unwrap();
        assert_eq!(tls.client_identity, Some(("/c".into(), "/k".into())));
    }

    #[test]
    fn bounds_and_labels_are_checked() {
        let base = ["--registry-url", "http://r", "--registry-allow-insecure-http"];
        let with = |extra: &[&str]| {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            parse(&v)
        };
        assert!(with(&["--resync-interval-secs", "0"]).unwrap_err().contains("resync"));
        assert!(with(&["--max-endpoints-per-slice", "1001"]).unwrap_err().contains("1001"));
        assert!(with(&["--cluster-id", "East_1"]).unwrap_err().contains("--cluster-id"));
        assert!(with(&["--auto-export-selector", " "]).unwrap_err().contains("unset"));
        let config = with(&["--resync-interval-secs", "60"]).unwrap();
        assert_eq!(config.settings.resync_interval, Duration::from_secs(60));
        assert_eq!(config.settings.max_endpoints_per_slice, 100);
    }

    #[test]
    fn the_runtime_has_the_workers_asked_for() {
        let threads = |extra: &[&str]| {
            let argv = [&["mcs-controller"], extra].concat();
            Cli::try_parse_from(argv).map(|cli| cli.run.worker_threads).map_err(|e| e.to_string())
        };
        assert_eq!(threads(&[]), Ok(1));
        assert_eq!(threads(&["--worker-threads", "2"]), Ok(2));
        let err = threads(&["--worker-threads", "0"]).unwrap_err();
        assert!(err.contains("--worker-threads") && err.contains("1..=256"), "{err}");
    }

    /// Issue 29 item 11 (before: the default selected
    /// `multicluster.x-k8s.io/export=true`, so anyone who could label a
    /// Service exported it).
    #[test]
    fn auto_export_is_off_unless_a_selector_is_given() {
        let base = ["--registry-url", "http://r", "--registry-allow-insecure-http"];
        assert_eq!(parse(&base).unwrap().settings.auto_export_selector, None);
        let mut with = base.to_vec();
        with.extend(["--auto-export-selector", "mcs=yes"]);
        assert_eq!(parse(&with).unwrap().settings.auto_export_selector.as_deref(), Some("mcs=yes"));
    }

    #[test]
    fn subcommands_take_no_run_flags() {
        let cli = Cli::try_parse_from(["mcs-controller", "crds"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Crds)));
        assert!(Cli::try_parse_from(["mcs-controller", "--cluster-id", "a", "rbac"]).is_err());
        let cli = Cli::try_parse_from([
            "mcs-controller",
            "rbac",
            "--namespace",
            "mcs",
            "--leader-election-lease",
            "l",
        ])
        .unwrap();
        let Some(Command::Rbac(args)) = cli.command else { panic!("{:?}", cli.command) };
        let install = args.install();
        assert_eq!((install.namespace.as_str(), install.lease.as_str()), ("mcs", "l"));
        assert_eq!(install.service_account, "mcs-controller");
    }

    #[test]
    fn coredns_takes_its_configmap_and_zone_with_kubeadms_defaults() {
        let cli = Cli::try_parse_from(["mcs-controller", "coredns", "configure"]).unwrap();
        let Some(Command::Coredns(command)) = cli.command else { panic!("{:?}", cli.command) };
        let target = command.resolve().unwrap();
        assert_eq!(
            (target.namespace.as_str(), target.name.as_str(), target.key.as_str()),
            ("kube-system", "coredns", "Corefile")
        );
        assert!(
            matches!(&command, CorednsCommand::Configure { zone, .. } if zone == "clusterset.local")
        );
        let argv = ["mcs-controller", "coredns", "configure", "--zone", "bad zone"];
        let Some(Command::Coredns(command)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("a coredns command")
        };
        assert!(command.resolve().unwrap_err().starts_with("--zone \"bad zone\""));
        // unconfigure removes what was recorded, whatever its zone.
        let argv = ["mcs-controller", "coredns", "unconfigure", "--zone", "clusterset.local"];
        assert!(Cli::try_parse_from(argv).is_err());
        let argv = ["mcs-controller", "coredns", "unconfigure", "--configmap", "dns", "--key", ""];
        let Some(Command::Coredns(command)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("a coredns command")
        };
        assert_eq!(command.resolve().unwrap_err(), "--key is empty");
    }
}
