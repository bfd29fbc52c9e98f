//! Command-line flags (each with an `MCS_*` environment twin) and the
//! settings checked from them at startup.

use crate::shared_cli::{Renamed, with_old_names};
use clap::{Parser, ValueEnum};
use mcs_core::LeasePolicy;
use mcs_store::args::{RetentionArgs, StoreArgs};
use std::net::SocketAddr;
use std::time::Duration;

/// The largest `--max-watch-secs`: one day.
pub const MAX_WATCH_SECS: u64 = 86_400;

/// The largest `--max-connections` (far above what one process's file
/// descriptors allow anyway).
pub const MAX_CONNECTIONS: usize = 1_000_000;

/// Where records are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StorageKind {
    /// Embedded, in this process: single region, nothing survives a restart.
    Memory,
    /// A DynamoDB table (a global table across regions).
    Dynamodb,
}

impl StorageKind {
    /// The kind as `--storage` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageKind::Memory => "memory",
            StorageKind::Dynamodb => "dynamodb",
        }
    }
}

/// Where the served pools and routers come from (docs/design.md §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum PoolDiscovery {
    /// Registrations: PoolRelays and routers register (`POST /v1/pools`).
    Registrations,
    /// EndpointSlices imported the standard MCS way
    /// (`multicluster.kubernetes.io/service-name`).
    Mcs,
    /// EndpointSlices imported the Karmada way (`imported-<cluster>-<slice>`).
    Karmada,
}

impl PoolDiscovery {
    /// Every mode.
    pub const ALL: [PoolDiscovery; 3] =
        [PoolDiscovery::Registrations, PoolDiscovery::Mcs, PoolDiscovery::Karmada];

    /// Its value on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolDiscovery::Registrations => "registrations",
            PoolDiscovery::Mcs => "mcs",
            PoolDiscovery::Karmada => "karmada",
        }
    }

    /// Whether pools and routers come from Kubernetes.
    pub fn is_kubernetes(self) -> bool {
        self != PoolDiscovery::Registrations
    }
}

/// The `--help` heading of the flags of `--pool-discovery mcs` and
/// `karmada` only; a flag under it given in another mode fails at startup.
pub const DISCOVERY_HEADING: &str = "Pool discovery from Kubernetes (--pool-discovery mcs|karmada)";

/// The modes whose flags sit under `heading`; `None`: a heading of flags
/// that work in every mode.
pub fn heading_modes(heading: &str) -> Option<&'static [PoolDiscovery]> {
    (heading == DISCOVERY_HEADING).then_some(&[PoolDiscovery::Mcs, PoolDiscovery::Karmada])
}

/// `--pool-service-suffix` when not given.
pub const DEFAULT_POOL_SERVICE_SUFFIX: &str = "-pool-relay";

/// `--pool-discovery-error-window-secs` when not given: errors spanning a
/// minute make lists incomplete.
pub const DEFAULT_DISCOVERY_ERROR_WINDOW_SECS: u64 = 60;

/// `--pool-discovery-recovery-secs` when not given: two minutes without an
/// error count as recovered.
pub const DEFAULT_DISCOVERY_RECOVERY_SECS: u64 = 120;

pub use crate::shared_cli::LogFormat;

/// `--version`: the package's version and the commit it was built from
/// (`MCS_GIT_COMMIT`, set by `crates/build_commit.rs`).
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("MCS_GIT_COMMIT"), ")");

/// mcs-registry: the multi-cluster service registry.
#[derive(Debug, Clone, Parser)]
#[command(name = "mcs-registry", version = VERSION, about)]
pub struct Args {
    /// Address of the HTTP API.
    #[arg(long, env = "MCS_LISTEN", default_value = "0.0.0.0:8080", value_parser = crate::shared_cli::listen_address)]
    pub listen: SocketAddr,

    /// Address of /metrics, /healthz and /readyz for operators.
    #[arg(long, env = "MCS_ADMIN_LISTEN", default_value = "0.0.0.0:9090", value_parser = crate::shared_cli::listen_address)]
    pub admin_listen: SocketAddr,

    /// Storage backend.
    #[arg(long, env = "MCS_STORAGE", value_enum, default_value = "memory")]
    pub storage: StorageKind,

    /// The table (with --storage dynamodb) and the skew allowance, as
    /// mcs-admin takes them.
    #[command(flatten)]
    pub store: StoreArgs,

    /// How long to wait at startup for storage to answer with a table this
    /// binary may use, retrying with backoff meanwhile (serving, not ready);
    /// then exit 1. 0 waits for ever, as suits Kubernetes (with --storage dynamodb).
    #[arg(long, env = "MCS_STORAGE_CONNECT_TIMEOUT_SECS", default_value_t = 0)]
    pub storage_connect_timeout_secs: u64,

    /// Lease granted to pools, routers and clusters; at most one day.
    #[arg(long, env = "MCS_LEASE_DURATION_SECS", default_value_t = 30)]
    pub lease_duration_secs: u64,

    /// Heartbeat interval asked of lease holders; above zero, below the lease.
    #[arg(long, env = "MCS_HEARTBEAT_INTERVAL_SECS", default_value_t = 10)]
    pub heartbeat_interval_secs: u64,

    /// How often the reader polls storage for changes.
    #[arg(long, env = "MCS_REFRESH_INTERVAL_MS", default_value_t = 2_000)]
    pub refresh_interval_ms: u64,

    /// How often the reader reads the whole table and replaces its state.
    #[arg(long, env = "MCS_FULL_RESYNC_INTERVAL_SECS", default_value_t = 300)]
    pub full_resync_interval_secs: u64,

    /// How far behind its watermark a delta poll reaches, for replication
    /// lag, index lag and clock skew.
    #[arg(long, env = "MCS_LOOKBACK_MS", default_value_t = 10_000)]
    pub lookback_ms: u64,

    /// After this long without a successful poll, lists say `complete: false`.
    #[arg(long, env = "MCS_STALE_AFTER_SECS", default_value_t = 30)]
    pub stale_after_secs: u64,

    /// `/readyz` answers 503 once the last successful poll is older than
    /// this; 0 (the default) keeps a registry that was ready once ready,
    /// serving its last view (see docs/operations.md, Probes).
    #[arg(long, env = "MCS_READY_MAX_STALENESS_SECS", default_value_t = 0)]
    pub ready_max_staleness_secs: u64,

    /// `--retention-secs`, as mcs-admin takes it.
    #[command(flatten)]
    pub retention: RetentionArgs,

    /// How far ahead of this registry's clock a client's own `generation`
    /// may be (generations are Unix milliseconds x 65536); beyond it, 422.
    #[arg(long, env = "MCS_MAX_GENERATION_AHEAD_SECS", default_value_t = 300)]
    pub max_generation_ahead_secs: u64,

    /// Hold expiries back when more than this share of served leases are
    /// due or missed a renewal their heartbeat interval promises (a
    /// replication stall, not the writers); 1 disables holds.
    #[arg(long, env = "MCS_EXPIRY_HOLD_THRESHOLD", default_value_t = 0.5)]
    pub expiry_hold_threshold: f64,

    /// Fewest leases at risk that can be held (at least 2: a lone expiry is
    /// never held).
    #[arg(long, env = "MCS_EXPIRY_HOLD_MIN", default_value_t = 3)]
    pub expiry_hold_min: usize,

    /// How long applied expiries still count toward a wave (about the
    /// heartbeat interval), and how long after a release no hold begins.
    #[arg(long, env = "MCS_EXPIRY_HOLD_WINDOW_SECS", default_value_t = 10)]
    pub expiry_hold_window_secs: u64,

    /// Longest hold; then everything due expires.
    #[arg(long, env = "MCS_EXPIRY_HOLD_MAX_SECS", default_value_t = 30)]
    pub expiry_hold_max_secs: u64,

    /// Largest accepted request body.
    #[arg(long, env = "MCS_MAX_BODY_BYTES", default_value_t = 256 * 1024)]
    pub max_body_bytes: usize,

    /// Largest accepted body of an export (`PUT /v1/clusters/{id}/exports/...`),
    /// which grows with the service's endpoints; the stored item's limit
    /// (about 7,000 endpoints) binds before the default does.
    #[arg(long, env = "MCS_MAX_EXPORT_BODY_BYTES", default_value_t = 2 * 1024 * 1024)]
    pub max_export_body_bytes: usize,

    /// Bound on reading a request body (408 past it) and on a write's
    /// storage round trip (503 past it).
    #[arg(long, env = "MCS_REQUEST_TIMEOUT_MS", default_value_t = 5_000)]
    pub request_timeout_ms: u64,

    /// A connection without a request for this long is closed: HTTP/1.1
    /// an idle keep-alive connection (or one slow to send its headers),
    /// HTTP/2 one with no request in flight.
    #[arg(long, env = "MCS_IDLE_TIMEOUT_SECS", default_value_t = 60)]
    pub idle_timeout_secs: u64,

    /// A connection whose response makes no write progress for this long
    /// (a client that stopped reading, pipelined requests or a watch
    /// included) is closed.
    #[arg(long, env = "MCS_WRITE_TIMEOUT_SECS", default_value_t = 30)]
    pub write_timeout_secs: u64,

    /// HTTP/2: ping a connection after this long without a frame from the
    /// client.
    #[arg(long, env = "MCS_HTTP2_KEEPALIVE_INTERVAL_SECS", default_value_t = 30)]
    pub http2_keepalive_interval_secs: u64,

    /// HTTP/2: close a connection whose ping is not answered within this.
    #[arg(long, env = "MCS_HTTP2_KEEPALIVE_TIMEOUT_SECS", default_value_t = 20)]
    pub http2_keepalive_timeout_secs: u64,

    /// Longest `timeout_secs` a watch may ask for; 1 to 86400.
    #[arg(long, env = "MCS_MAX_WATCH_SECS", default_value_t = 300)]
    pub max_watch_secs: u64,

    /// Length of each listener's queue of connections not yet accepted
    /// (`listen(2)` backlog), 1 to 65535; the kernel caps it at
    /// `net.core.somaxconn`. A reconnect storm past it has its SYNs
    /// dropped and retried on the kernel's back-off (1 s, 3 s, 7 s...).
    #[arg(long, env = "MCS_LISTEN_BACKLOG", default_value_t = 4096)]
    pub listen_backlog: u32,

    /// Connections served at once, per listener (API, admin); past it, 503.
    #[arg(long, env = "MCS_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Watches open at once (long-polls waiting and event streams); past
    /// it, 503. At most --max-connections: each holds a connection of its
    /// own.
    #[arg(long, env = "MCS_MAX_WATCHES", default_value_t = 512)]
    pub max_watches: usize,

    /// How long shutdown waits for requests in flight.
    #[arg(long, env = "MCS_SHUTDOWN_GRACE_SECS", default_value_t = 10)]
    pub shutdown_grace_secs: u64,

    /// This registrar's writer id (breaks generation ties); random by default.
    #[arg(long, env = "MCS_WRITER_ID")]
    pub writer_id: Option<String>,

    /// Log filter, in tracing's `EnvFilter` syntax.
    #[arg(long = "log", env = "MCS_LOG", default_value = "info")]
    pub log: String,

    /// Log line format.
    #[arg(long, env = "MCS_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Where the served pools and routers come from: `registrations`
    /// (`POST /v1/pools`), or the EndpointSlices that a Multi-Cluster
    /// Services implementation imports into this cluster, named the
    /// standard way (`mcs`) or Karmada's (`karmada`).
    // Discovery from EndpointSlices needs the router's Service named.
    #[arg(
        long,
        env = "MCS_POOL_DISCOVERY",
        value_enum,
        default_value = "registrations",
        requires_ifs = ROUTER_FLAGS.iter().flat_map(|id| [("mcs", *id), ("karmada", *id)]),
    )]
    pub pool_discovery: PoolDiscovery,

    /// TLS and authorization (issue 9).
    #[command(flatten)]
    pub tls: crate::tls::TlsArgs,

    /// The namespace of the Global Router's Service.
    #[arg(long, env = "MCS_ROUTER_NAMESPACE", help_heading = DISCOVERY_HEADING)]
    pub router_namespace: Option<String>,

    /// The Global Router's Service, whose imported slices are the router
    /// replicas.
    #[arg(long, env = "MCS_ROUTER_SERVICE", help_heading = DISCOVERY_HEADING)]
    pub router_service: Option<String>,

    /// The name of the router Service's TCP port that routers are reached on.
    #[arg(long, env = "MCS_ROUTER_PORT_NAME", help_heading = DISCOVERY_HEADING)]
    pub router_port_name: Option<String>,

    /// Services named `<dgd>` followed by this suffix are PoolRelays, one
    /// pool per source cluster [default: -pool-relay].
    #[arg(
        long,
        env = "MCS_POOL_SERVICE_SUFFIX",
        help_heading = DISCOVERY_HEADING,
        allow_hyphen_values = true,
        value_parser = clap::builder::NonEmptyStringValueParser::new(),
    )]
    pub pool_service_suffix: Option<String>,

    /// List/watch errors spanning this long make lists `complete: false`
    /// [default: 60].
    #[arg(long, env = "MCS_POOL_DISCOVERY_ERROR_WINDOW_SECS", help_heading = DISCOVERY_HEADING)]
    pub pool_discovery_error_window_secs: Option<u64>,

    /// This long without a list/watch error counts as recovered
    /// [default: 120].
    #[arg(long, env = "MCS_POOL_DISCOVERY_RECOVERY_SECS", help_heading = DISCOVERY_HEADING)]
    pub pool_discovery_recovery_secs: Option<u64>,

    /// Print the shell completion script of mcs-registry for this shell
    /// and exit, e.g. `mcs-registry --completions bash >
    /// /etc/bash_completion.d/mcs-registry`.
    #[arg(long, value_enum, value_name = "SHELL")]
    pub completions: Option<clap_complete::Shell>,

    /// The storage settings (`table`, `region`, `dynamodb_endpoint`,
    /// `storage_connect_timeout_secs`) that came from the environment
    /// rather than the command line ([`Args::from_command_line`]): with
    /// `--storage memory` they are ignored (the environment may be shared
    /// with mcs-admin), where typed flags are an error.
    #[arg(skip)]
    pub from_environment: Vec<String>,

    /// Which old names of renamed flags (`RENAMED`) were used, each as
    /// a note to log ([`Args::from_command_line`]).
    #[arg(skip)]
    pub renamed: Vec<String>,
}

/// The flags `--pool-discovery mcs` and `karmada` require.
const ROUTER_FLAGS: [&str; 3] = ["router_namespace", "router_service", "router_port_name"];

/// The flags renamed to fit one vocabulary across the three binaries
/// (docs/configuration.md, Flag names): the old names still work, hidden,
/// for one release, and using one logs a warning.
const RENAMED: &[Renamed] = &[
    Renamed { id: "tls_cert_file", old_flag: "tls-cert-path", old_env: "MCS_TLS_CERT_PATH" },
    Renamed { id: "tls_key_file", old_flag: "tls-key-path", old_env: "MCS_TLS_KEY_PATH" },
    Renamed {
        id: "tls_client_ca_file",
        old_flag: "tls-client-ca-cert-path",
        old_env: "MCS_TLS_CLIENT_CA_CERT_PATH",
    },
];

/// The storage settings that apply only to `--storage dynamodb`: their
/// clap ids, flags, environment variables, and whether `Args` has them set.
type DynamodbOnly = (&'static str, &'static str, &'static str, fn(&Args) -> bool);
const DYNAMODB_ONLY: [DynamodbOnly; 4] = [
    ("table", "--table", "MCS_TABLE", |a| a.store.table.is_some()),
    ("region", "--region", "MCS_REGION", |a| a.store.region.is_some()),
    ("dynamodb_endpoint", "--dynamodb-endpoint", "MCS_DYNAMODB_ENDPOINT", |a| {
        a.store.dynamodb_endpoint.is_some()
    }),
    (
        "storage_connect_timeout_secs",
        "--storage-connect-timeout-secs",
        "MCS_STORAGE_CONNECT_TIMEOUT_SECS",
        |a| a.storage_connect_timeout_secs != 0,
    ),
];

impl Args {
    /// The process's flags and environment, as [`Parser::parse`] reads
    /// them (exiting 2 on an error), the old names of `RENAMED` flags
    /// included, noting which storage settings came from the environment.
    pub fn from_command_line() -> Self {
        Self::try_parse_with_old_names(std::env::args_os().collect()).unwrap_or_else(|e| e.exit())
    }

    /// `argv` (and the environment) parsed as [`Args::from_command_line`]
    /// does, the old names of `RENAMED` flags included.
    pub fn try_parse_with_old_names(argv: Vec<std::ffi::OsString>) -> Result<Self, clap::Error> {
        use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
        let (command, renamed) = with_old_names(Self::command(), RENAMED, &argv);
        let matches = crate::shared_cli::matches(command, argv)?;
        let mut args = Self::from_arg_matches(&matches)?;
        args.renamed = renamed;
        args.from_environment = DYNAMODB_ONLY
            .iter()
            .filter(|(id, ..)| matches.value_source(id) == Some(ValueSource::EnvVariable))
            .map(|(id, ..)| (*id).to_owned())
            .collect();
        Ok(args)
    }

    /// The shell completion script of mcs-registry for `shell`
    /// (`--completions`).
    pub fn completion_script(shell: clap_complete::Shell) -> String {
        let mut command = <Self as clap::CommandFactory>::command();
        crate::shared_cli::completion_script(shell, &mut command, "mcs-registry")
    }

    /// The DynamoDB-only settings given with `--storage memory`: `Err`
    /// names the first typed on the command line; `Ok` lists those from
    /// the environment, ignored.
    fn memory_storage_extras(&self) -> Result<Vec<String>, String> {
        let mut ignored = Vec::new();
        for (id, flag, env, given) in DYNAMODB_ONLY {
            if !given(self) {
                continue;
            }
            if !self.from_environment.iter().any(|e| e == id) {
                return Err(format!("{flag} needs --storage dynamodb"));
            }
            ignored.push(format!(
                "{env} is set in the environment but applies only to --storage dynamodb: \
                 ignored with --storage memory"
            ));
        }
        Ok(ignored)
    }
}

/// Settings derived from [`Args`], checked for consistency.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The lease granted.
    pub lease: LeasePolicy,
    /// Poll period.
    pub refresh_interval: Duration,
    /// Full read period.
    pub full_resync_interval: Duration,
    /// Delta lookback.
    pub lookback_ms: u64,
    /// Skew allowance on lease expiry.
    pub skew_allowance_ms: u64,
    /// Staleness bound of the view.
    pub stale_after: Duration,
    /// Oldest last successful poll `/readyz` accepts; `None`: no bound.
    pub ready_max_staleness: Option<Duration>,
    /// Retention of dead items.
    pub retention: Duration,
    /// Allowance of a client generation ahead of the clock.
    pub max_generation_ahead_ms: u64,
    /// The mass-expiry hold.
    pub expiry_hold: mcs_core::HoldPolicy,
    /// Body size limit.
    pub max_body_bytes: usize,
    /// Body size limit of an export write.
    pub max_export_body_bytes: usize,
    /// Storage round-trip bound of a write.
    pub request_timeout: Duration,
    /// Idle connection bound.
    pub idle_timeout: Duration,
    /// Bound on a write without progress.
    pub write_timeout: Duration,
    /// HTTP/2 keep-alive ping interval.
    pub http2_keepalive_interval: Duration,
    /// HTTP/2 keep-alive ping timeout.
    pub http2_keepalive_timeout: Duration,
    /// Longest watch.
    pub max_watch: Duration,
    /// Connection cap per listener.
    pub max_connections: usize,
    /// Watch cap.
    pub max_watches: usize,
    /// Shutdown drain bound.
    pub shutdown_grace: Duration,
    /// This registrar's writer id.
    pub writer_id: String,
    /// `--storage`.
    pub storage: StorageKind,
    /// `--region`, when given (the status document names it).
    pub region: Option<String>,
    /// How long to wait for storage at startup; `None`: for ever.
    pub storage_connect_timeout: Option<Duration>,
    /// Logged as warnings at startup: settings from the environment that
    /// do not apply here, each with why, and the old names of renamed
    /// flags used (`RENAMED`).
    pub warnings: Vec<String>,
    /// TLS files (issue 9); `None`: plaintext.
    pub tls: Option<crate::tls::TlsSettings>,
    /// The SPIFFE trust domain of `--authz spiffe`; `None`: no authorization.
    pub spiffe_trust_domain: Option<String>,
    /// Pool discovery from Kubernetes; `None`: registrations.
    pub discovery: Option<DiscoverySettings>,
}

/// The settings of `--pool-discovery mcs|karmada`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoverySettings {
    /// `mcs` or `karmada`.
    pub mode: PoolDiscovery,
    /// The router Service's namespace.
    pub router_namespace: String,
    /// The router Service's name.
    pub router_service: String,
    /// Its port routers are reached on.
    pub router_port_name: String,
    /// The suffix of PoolRelay Services.
    pub pool_service_suffix: String,
    /// Errors spanning this long make lists incomplete.
    pub error_window: Duration,
    /// This long without an error counts as recovered.
    pub recovery: Duration,
}

impl DiscoverySettings {
    /// Checks the discovery flags against `--pool-discovery`: required in a
    /// Kubernetes mode, refused in another (whether given on the command
    /// line or in the environment).
    fn from_args(args: &Args) -> Result<Option<Self>, String> {
        let given = [
            ("--router-namespace", args.router_namespace.is_some()),
            ("--router-service", args.router_service.is_some()),
            ("--router-port-name", args.router_port_name.is_some()),
            ("--pool-service-suffix", args.pool_service_suffix.is_some()),
            ("--pool-discovery-error-window-secs", args.pool_discovery_error_window_secs.is_some()),
            ("--pool-discovery-recovery-secs", args.pool_discovery_recovery_secs.is_some()),
        ];
        let mode = args.pool_discovery;
        if !mode.is_kubernetes() {
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "{flag} needs --pool-discovery mcs or karmada, not {}",
                    mode.as_str()
                ));
            }
            return Ok(None);
        }
        let required = |flag: &str, value: &Option<String>| match value.as_deref() {
            Some(v) if !v.trim().is_empty() => Ok(v.to_owned()),
            _ => Err(format!("--pool-discovery {} needs a non-empty {flag}", mode.as_str())),
        };
        let error_window =
            args.pool_discovery_error_window_secs.unwrap_or(DEFAULT_DISCOVERY_ERROR_WINDOW_SECS);
        let recovery = args.pool_discovery_recovery_secs.unwrap_or(DEFAULT_DISCOVERY_RECOVERY_SECS);
        if error_window == 0 || recovery == 0 {
            return Err("--pool-discovery-error-window-secs and --pool-discovery-recovery-secs \
                        must be above zero"
                .into());
        }
        Ok(Some(Self {
            mode,
            router_namespace: required("--router-namespace", &args.router_namespace)?,
            router_service: required("--router-service", &args.router_service)?,
            router_port_name: required("--router-port-name", &args.router_port_name)?,
            pool_service_suffix: args
                .pool_service_suffix
                .clone()
                .unwrap_or_else(|| DEFAULT_POOL_SERVICE_SUFFIX.to_owned()),
            error_window: Duration::from_secs(error_window),
            recovery: Duration::from_secs(recovery),
        }))
    }
}

impl Settings {
    /// Checks `args`; the error says which flags disagree and how.
    pub fn from_args(args: &Args) -> Result<Self, String> {
        let lease = LeasePolicy::new(args.lease_duration_secs, args.heartbeat_interval_secs)
            .map_err(|e| format!("--lease-duration-secs/--heartbeat-interval-secs: {e}"))?;
        let mut warnings = match args.storage {
            StorageKind::Memory => args.memory_storage_extras()?,
            StorageKind::Dynamodb => {
                if args.store.table.as_deref().is_none_or(str::is_empty) {
                    return Err("--storage dynamodb needs --table".into());
                }
                Vec::new()
            }
        };
        warnings.extend(args.renamed.iter().cloned());
        if args.refresh_interval_ms == 0 {
            return Err("--refresh-interval-ms must be above zero".into());
        }
        if args.full_resync_interval_secs.saturating_mul(1000) < args.refresh_interval_ms {
            return Err(
                "--full-resync-interval-secs must not be below --refresh-interval-ms".into()
            );
        }
        if args.stale_after_secs.saturating_mul(1000) <= args.refresh_interval_ms {
            return Err("--stale-after-secs must be above --refresh-interval-ms".into());
        }
        if args.ready_max_staleness_secs > 0
            && args.ready_max_staleness_secs < args.stale_after_secs
        {
            return Err("--ready-max-staleness-secs must be 0 (no bound) or at least \
                        --stale-after-secs: a view still complete is never unready"
                .into());
        }
        if !(args.expiry_hold_threshold > 0.0 && args.expiry_hold_threshold <= 1.0) {
            return Err("--expiry-hold-threshold must be above 0 and at most 1".into());
        }
        if args.expiry_hold_min < 2 {
            return Err("--expiry-hold-min must be at least 2: a lone expiry is never held".into());
        }
        mcs_core::lease::check_retention(
            args.retention.retention_secs,
            args.store.skew_allowance_ms,
        )
        .map_err(|e| format!("--retention-secs: {e}"))?;
        if args.max_generation_ahead_secs == 0 || args.max_generation_ahead_secs > 86_400 {
            return Err("--max-generation-ahead-secs must be 1 to 86400".into());
        }
        if args.max_body_bytes < 1024 {
            return Err("--max-body-bytes must be at least 1024".into());
        }
        if args.max_export_body_bytes < 1024 {
            return Err("--max-export-body-bytes must be at least 1024".into());
        }
        for (flag, value) in [
            ("--request-timeout-ms", args.request_timeout_ms),
            ("--idle-timeout-secs", args.idle_timeout_secs),
            ("--write-timeout-secs", args.write_timeout_secs),
            ("--http2-keepalive-interval-secs", args.http2_keepalive_interval_secs),
            ("--http2-keepalive-timeout-secs", args.http2_keepalive_timeout_secs),
        ] {
            if value == 0 {
                return Err(format!("{flag} must be above zero"));
            }
        }
        if !(1..=MAX_WATCH_SECS).contains(&args.max_watch_secs) {
            return Err(format!("--max-watch-secs must be 1 to {MAX_WATCH_SECS}"));
        }
        if !(1..=65_535).contains(&args.listen_backlog) {
            return Err("--listen-backlog must be 1 to 65535".into());
        }
        if !(1..=MAX_CONNECTIONS).contains(&args.max_connections) {
            return Err(format!("--max-connections must be 1 to {MAX_CONNECTIONS}"));
        }
        if args.max_watches == 0 || args.max_watches > args.max_connections {
            return Err(
                "--max-watches must be 1 to --max-connections (a watch holds a connection)".into(),
            );
        }
        if args.listen == args.admin_listen && args.listen.port() != 0 {
            return Err("--listen and --admin-listen must differ".into());
        }
        let (tls, spiffe_trust_domain) = args.tls.check()?;
        let discovery = DiscoverySettings::from_args(args)?;
        let writer_id = match &args.writer_id {
            Some(id) if !id.trim().is_empty() => id.clone(),
            Some(_) => return Err("--writer-id must not be blank".into()),
            None => format!("reg-{}", uuid::Uuid::new_v4().simple()),
        };
        Ok(Self {
            lease,
            refresh_interval: Duration::from_millis(args.refresh_interval_ms),
            full_resync_interval: Duration::from_secs(args.full_resync_interval_secs),
            lookback_ms: args.lookback_ms,
            skew_allowance_ms: args.store.skew_allowance_ms,
            stale_after: Duration::from_secs(args.stale_after_secs),
            ready_max_staleness: (args.ready_max_staleness_secs > 0)
                .then(|| Duration::from_secs(args.ready_max_staleness_secs)),
            retention: Duration::from_secs(args.retention.retention_secs),
            max_generation_ahead_ms: args.max_generation_ahead_secs.saturating_mul(1000),
            expiry_hold: mcs_core::HoldPolicy {
                threshold: args.expiry_hold_threshold,
                min_count: args.expiry_hold_min,
                window_ms: args.expiry_hold_window_secs.saturating_mul(1000),
                renewal_slack_ms: args.refresh_interval_ms,
                max_hold_ms: args.expiry_hold_max_secs.saturating_mul(1000),
            },
            max_body_bytes: args.max_body_bytes,
            max_export_body_bytes: args.max_export_body_bytes,
            request_timeout: Duration::from_millis(args.request_timeout_ms),
            idle_timeout: Duration::from_secs(args.idle_timeout_secs),
            write_timeout: Duration::from_secs(args.write_timeout_secs),
            http2_keepalive_interval: Duration::from_secs(args.http2_keepalive_interval_secs),
            http2_keepalive_timeout: Duration::from_secs(args.http2_keepalive_timeout_secs),
            max_watch: Duration::from_secs(args.max_watch_secs),
            max_connections: args.max_connections,
            max_watches: args.max_watches,
            shutdown_grace: Duration::from_secs(args.shutdown_grace_secs),
            writer_id,
            storage: args.storage,
            region: args.store.region.clone(),
            storage_connect_timeout: mcs_store::args::connect_timeout(
                args.storage_connect_timeout_secs,
            ),
            warnings,
            tls,
            spiffe_trust_domain,
            discovery,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Settings, String> {
        let mut argv = vec!["mcs-registry"];
        argv.extend_from_slice(extra);
        Settings::from_args(&Args::try_parse_from(argv).map_err(|e| e.to_string())?)
    }

    #[test]
    fn the_listen_backlog_is_bounded() {
        assert!(parse(&["--listen-backlog", "1"]).is_ok());
        assert!(parse(&["--listen-backlog", "65535"]).is_ok());
        for bad in ["0", "65536"] {
            let error = parse(&["--listen-backlog", bad]).unwrap_err();
            assert!(error.contains("--listen-backlog must be 1 to 65535"), "{error}");
        }
    }

    #[test]
    fn defaults_are_consistent() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.lease.lease().duration_secs, 30);
        assert!(s.writer_id.starts_with("reg-"));
        assert_eq!((s.tls, s.spiffe_trust_domain), (None, None));
    }

    /// Server TLS with client certificates, under `--authz spiffe`.
    const SPIFFE: &[&str] = &[
        "--tls-cert-file",
        "c",
        "--tls-key-file",
        "k",
        "--tls-client-ca-file",
        "ca",
        "--authz",
        "spiffe",
    ];

    #[test]
    fn tls_and_spiffe_flags_that_agree_are_accepted() {
        let more = ["--spiffe-trust-domain", "example.org", "--admin-tls"];
        let s = parse(&[SPIFFE, &more].concat()).unwrap();
        let tls = s.tls.unwrap();
        assert_eq!(tls.client_ca_path.as_deref(), Some(std::path::Path::new("ca")));
        assert!(tls.admin_tls);
        assert_eq!(tls.handshake_timeout, Duration::from_secs(10));
        assert_eq!(s.spiffe_trust_domain.as_deref(), Some("example.org"));
    }

    #[test]
    fn the_old_names_of_renamed_flags_still_work_and_are_logged() {
        let argv = [
            "mcs-registry",
            "--tls-cert-path=/cert",
            "--tls-key-path",
            "/key",
            "--tls-client-ca-cert-path=/ca",
        ];
        let args = Args::try_parse_with_old_names(argv.map(Into::into).to_vec()).unwrap();
        let settings = Settings::from_args(&args).unwrap();
        let tls = settings.tls.unwrap();
        assert_eq!((tls.cert_path.to_str(), tls.key_path.to_str()), (Some("/cert"), Some("/key")));
        assert_eq!(tls.client_ca_path.as_deref().and_then(|p| p.to_str()), Some("/ca"));
        assert_eq!(
            settings.warnings,
            [
                "--tls-cert-path is deprecated: use --tls-cert-file",
                "--tls-key-path is deprecated: use --tls-key-file",
                "--tls-client-ca-cert-path is deprecated: use --tls-client-ca-file",
            ]
        );
        let help = <Args as clap::CommandFactory>::command().render_long_help().to_string();
        assert!(help.contains("--tls-cert-file") && !help.contains("--tls-cert-path"), "{help}");
    }

    #[test]
    fn dynamodb_settings_from_the_environment_are_ignored_with_memory_storage() {
        let mut args = Args::try_parse_from([
            "mcs-registry",
            "--table",
            "t",
            "--region",
            "r",
            "--storage-connect-timeout-secs",
            "5",
        ])
        .unwrap();
        // Typed on the command line: the first is named.
        assert_eq!(
            Settings::from_args(&args).err().as_deref(),
            Some("--table needs --storage dynamodb")
        );
        args.from_environment = vec!["table".into(), "region".into()];
        let err = Settings::from_args(&args).err().unwrap();
        assert_eq!(err, "--storage-connect-timeout-secs needs --storage dynamodb");
        args.from_environment.push("storage_connect_timeout_secs".into());
        let settings = Settings::from_args(&args).unwrap();
        let named: Vec<&str> =
            settings.warnings.iter().filter_map(|n| n.split_whitespace().next()).collect();
        assert_eq!(named, ["MCS_TABLE", "MCS_REGION", "MCS_STORAGE_CONNECT_TIMEOUT_SECS"]);
        // With DynamoDB they apply, and nothing is ignored.
        args.storage = StorageKind::Dynamodb;
        assert!(Settings::from_args(&args).unwrap().warnings.is_empty());
    }

    #[test]
    fn contradictory_or_out_of_range_flags_are_refused() {
        let cases: &[(&[&str], &str)] = &[
            (&["--lease-duration-secs", "86401"], "one day"),
            (&["--heartbeat-interval-secs", "30"], "below"),
            (&["--heartbeat-interval-secs", "0"], "above zero"),
            (&["--table", "t"], "--table needs --storage dynamodb"),
            (&["--storage-connect-timeout-secs", "5"], "needs --storage dynamodb"),
            (&["--storage", "dynamodb"], "needs --table"),
            (&["--refresh-interval-ms", "0"], "--refresh-interval-ms"),
            (&["--stale-after-secs", "1"], "--stale-after-secs"),
            (&["--ready-max-staleness-secs", "10"], "--ready-max-staleness-secs"),
            (&["--max-body-bytes", "10"], "--max-body-bytes"),
            (&["--max-export-body-bytes", "10"], "--max-export-body-bytes"),
            (&["--idle-timeout-secs", "0"], "--idle-timeout-secs must be above zero"),
            (&["--write-timeout-secs", "0"], "--write-timeout-secs must be above zero"),
            (&["--http2-keepalive-interval-secs", "0"], "--http2-keepalive-interval-secs"),
            (&["--http2-keepalive-timeout-secs", "0"], "--http2-keepalive-timeout-secs"),
            (&["--listen", "127.0.0.1:1", "--admin-listen", "127.0.0.1:1"], "must differ"),
            (&["--writer-id", " "], "--writer-id"),
            (&["--expiry-hold-threshold", "0"], "--expiry-hold-threshold"),
            (&["--expiry-hold-threshold", "1.5"], "--expiry-hold-threshold"),
            (&["--expiry-hold-min", "1"], "--expiry-hold-min"),
            (&["--retention-secs", "0"], "--retention-secs"),
            (&["--retention-secs", "86400"], "--retention-secs"),
            (&["--max-generation-ahead-secs", "0"], "--max-generation-ahead-secs"),
            // Defect 8 of issue 7: a huge value panicked on `Instant + timeout`.
            (&["--max-watch-secs", "18446744073709551615"], "--max-watch-secs"),
            (&["--max-watch-secs", "86401"], "--max-watch-secs"),
            (&["--max-watch-secs", "0"], "--max-watch-secs"),
            (&["--max-connections", "0"], "--max-connections"),
            (&["--max-connections", "1000001"], "--max-connections"),
            (&["--max-watches", "0"], "--max-watches"),
            (&["--max-connections", "10", "--max-watches", "11"], "--max-watches"),
            // TLS and authorization (issue 9).
            (&["--tls-cert-file", "c"], "--tls-cert-file needs --tls-key-file"),
            (&["--tls-key-file", "k"], "--tls-key-file needs --tls-cert-file"),
            (&["--tls-client-ca-file", "ca"], "--tls-client-ca-file needs --tls-cert-file"),
            (&["--admin-tls"], "--admin-tls needs --tls-cert-file"),
            (&["--tls-handshake-timeout-secs", "0"], "--tls-handshake-timeout-secs"),
            (&["--authz", "spiffe"], "--authz spiffe needs --tls-client-ca-file"),
            (SPIFFE, "--authz spiffe needs --spiffe-trust-domain"),
            (
                &["--spiffe-trust-domain", "example.org"],
                "--spiffe-trust-domain needs --authz spiffe",
            ),
        ];
        for (argv, want) in cases {
            let err = parse(argv).unwrap_err();
            assert!(err.contains(want), "{argv:?}: {err}");
        }
        let err = parse(&[SPIFFE, &["--spiffe-trust-domain", "Ex/a"]].concat()).unwrap_err();
        assert!(err.contains("--spiffe-trust-domain"), "{err}");
    }

    const DISCOVERY: [&str; 6] = mcs_testkit::fixtures::ROUTER_FLAGS;

    fn in_mode(mode: PoolDiscovery, extra: &[&str]) -> Result<Settings, String> {
        let mut argv = vec!["--pool-discovery", mode.as_str()];
        if mode.is_kubernetes() {
            for pair in DISCOVERY.chunks(2) {
                if !extra.contains(&pair[0]) {
                    argv.extend_from_slice(pair);
                }
            }
        }
        argv.extend_from_slice(extra);
        parse(&argv)
    }

    #[test]
    fn discovery_modes_need_the_router_flags_and_take_the_suffix_as_given() {
        use clap::error::ErrorKind;
        for mode in ["mcs", "karmada"] {
            let err = Args::try_parse_from(["mcs-registry", "--pool-discovery", mode]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument, "{mode}");
            assert_eq!(err.exit_code(), 2);
        }
        let s = in_mode(PoolDiscovery::Karmada, &[]).unwrap().discovery.unwrap();
        assert_eq!(s.mode, PoolDiscovery::Karmada);
        assert_eq!(s.pool_service_suffix, DEFAULT_POOL_SERVICE_SUFFIX);
        assert_eq!(
            (s.error_window, s.recovery),
            (Duration::from_secs(60), Duration::from_secs(120))
        );
        // A value starting with a hyphen is the flag's value, as a separate argument.
        let s = in_mode(PoolDiscovery::Mcs, &["--pool-service-suffix", "-relay"]).unwrap();
        assert_eq!(s.discovery.unwrap().pool_service_suffix, "-relay");
        let err = in_mode(PoolDiscovery::Mcs, &["--pool-service-suffix", ""]).unwrap_err();
        assert!(err.contains("--pool-service-suffix"), "{err}");
        let err = in_mode(PoolDiscovery::Mcs, &["--router-service", " "]).unwrap_err();
        assert!(err.contains("--router-service"), "{err}");
        assert_eq!(parse(&[]).unwrap().discovery, None);
    }

    /// The value a flag is given in [`every_flag_works_in_every_mode_or_sits_under_a_mode_heading`].
    fn sample_value(arg: &clap::Arg) -> Option<String> {
        if !arg.get_action().takes_values() {
            return None;
        }
        if let Some(value) = arg.get_possible_values().first() {
            return Some(value.get_name().to_owned());
        }
        Some(
            arg.get_default_values()
                .first()
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_else(|| "1".to_owned()),
        )
    }

    /// Every flag either works the same in every `--pool-discovery` mode
    /// (given alone, it is accepted or refused alike) or sits under one
    /// mode's heading, where it works in its modes and fails in the others:
    /// a new flag cannot skip the check of its mode.
    #[test]
    fn every_flag_works_in_every_mode_or_sits_under_a_mode_heading() {
        let cmd = <Args as clap::CommandFactory>::command();
        let mut headed = 0;
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "pool-discovery" | "help" | "version") {
                continue;
            }
            let flag = format!("--{long}");
            let mut argv = vec![flag.clone()];
            argv.extend(sample_value(arg));
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            match arg.get_help_heading().and_then(heading_modes) {
                Some(modes) => {
                    headed += 1;
                    for mode in PoolDiscovery::ALL {
                        let result = in_mode(mode, &argv);
                        if modes.contains(&mode) {
                            assert!(result.is_ok(), "{flag} in {mode:?}: {result:?}");
                        } else {
                            let err = result.unwrap_err();
                            assert!(err.contains(&flag), "{flag} in {mode:?} refused: {err}");
                        }
                    }
                }
                None => {
                    let outcomes: Vec<Option<String>> =
                        PoolDiscovery::ALL.map(|mode| in_mode(mode, &argv).err()).into();
                    assert!(
                        outcomes.iter().all(|o| o == &outcomes[0]),
                        "{flag} behaves differently by --pool-discovery mode, yet is under no \
                         mode's heading: {outcomes:?}"
                    );
                }
            }
        }
        assert_eq!(headed, 6, "the discovery flags sit under their heading");
        let mode = cmd.get_arguments().find(|a| a.get_long() == Some("pool-discovery")).unwrap();
        assert_eq!(mode.get_help_heading(), None, "--pool-discovery is among the general options");
        let help = cmd.clone().render_long_help().to_string();
        let at = help.find(DISCOVERY_HEADING).expect("--help shows the discovery heading");
        for flag in ["--router-namespace", "--router-service", "--router-port-name"] {
            assert!(help[at..].contains(flag), "{flag} under the heading");
        }
    }
}
