//! Command-line flags: global ones (each `long`, with an `MCS_*` environment
//! twin; those of the table and `--retention-secs` are the registry's own,
//! from `mcs_store::args`) and one subcommand per operation.

use crate::output::Format;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use mcs_core::SectionKind;
use mcs_store::args::{RetentionArgs, StoreArgs};
use std::path::PathBuf;

/// mcs-admin: migrate, inspect, compare, back up and clean the DynamoDB
/// table of mcs-registry. Liveness is judged by the registry's own merge
/// rules, so "live" here is exactly what the registry serves.
///
/// Exit codes: 0 ok, 1 a problem was found or the operation failed, 2 usage
/// error.
/// `--version`: the package's version and the commit it was built from
/// (`MCS_GIT_COMMIT`, set by `crates/build_commit.rs`).
pub const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("MCS_GIT_COMMIT"), ")");

#[derive(Debug, Clone, Parser)]
#[command(
    name = "mcs-admin",
    version = VERSION,
    about,
    long_about = None,
    after_help = "Exit codes: 0 ok, 1 a problem was found or the operation failed, 2 usage error."
)]
pub struct Cli {
    /// Flags every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The process's flags and environment, as [`Parser::parse`] reads them
    /// (exiting 2 on an error), a value refused from an environment
    /// variable told as the variable's (`shared_cli::matches`).
    pub fn from_command_line() -> Self {
        use clap::{CommandFactory, FromArgMatches};
        crate::shared_cli::matches(Self::command(), std::env::args_os().collect())
            .and_then(|matches| Self::from_arg_matches(&matches))
            .unwrap_or_else(|e| e.exit())
    }
}

/// Flags every subcommand takes; they may come before or after it.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// The table (`--table` required) and the skew allowance, as the
    /// registry takes them.
    #[command(flatten)]
    pub store: StoreArgs,

    /// How long to retry reaching storage (refused connections, timeouts)
    /// before giving up; 0 retries for ever, as with mcs-registry.
    #[arg(long, env = "MCS_STORAGE_CONNECT_TIMEOUT_SECS", default_value_t = 10, global = true)]
    pub storage_connect_timeout_secs: u64,

    /// Output format.
    #[arg(
        short = 'o',
        long,
        env = "MCS_OUTPUT",
        value_enum,
        default_value = "table",
        global = true
    )]
    pub output: Format,

    /// Notices and errors on stderr: text lines, or one JSON object per
    /// line (as the registry's and the controller's logs).
    #[arg(long, env = "MCS_LOG_FORMAT", value_enum, default_value = "text", global = true)]
    pub log_format: crate::LogFormat,
}

/// The operations.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Apply the table's missing migrations and repair what drifted from
    /// them (TTL, stream, index); with --create, create the table if absent.
    Migrate(MigrateArgs),
    /// Schema version, item counts, index, TTL, stream and replicas.
    Describe,
    /// List what the registry serves (or, with --all, every record).
    Ls(LsArgs),
    /// One record: as merged from its items (one per writing region), and
    /// each item's raw attributes.
    Get(GetArgs),
    /// Every record (merged per key) as JSON lines on stdout, between a
    /// header line and a trailer with the record count, for restore. Only
    /// JSON: `-o yaml` and `-o wide` are refused.
    Dump,
    /// Write records from a dump; never overwrites a newer item, skips
    /// records older than the retention unless --force.
    Restore(RestoreArgs),
    /// Check the table's health; exit 1 when a problem is found.
    Doctor(DoctorArgs),
    /// Delete this region's items of tombstones, expired records and exports
    /// of clusters gone past the retention; other regions' items are left to
    /// gc in their region.
    Gc(GcArgs),
    /// Compare what two replicas serve, section by section; exit 1 when they
    /// differ.
    Diff(DiffArgs),
    /// Ask a registry (not the table) how the clusterset is: its status
    /// document, findings first; exit 1 when a finding is critical.
    Status(StatusArgs),
    /// Tail a section of a registry (not the table): one line per item
    /// added, changed or removed, with the time and its owner, until
    /// interrupted.
    Watch(WatchArgs),
    /// Print the shell completion script of mcs-admin for SHELL, e.g.
    /// `mcs-admin completions bash > /etc/bash_completion.d/mcs-admin`.
    Completions(CompletionsArgs),
}

/// The registry `status` and `watch` ask, over its API.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// The registry's base URL (its API port): `http://localhost:8080` for
    /// the embedded default, `https://registry.example:8080` with TLS.
    #[arg(long, env = "MCS_REGISTRY_URL")]
    pub registry: String,

    /// CA bundle (PEM) that signs an `https` registry's certificate.
    #[arg(long, env = "MCS_REGISTRY_CA")]
    pub registry_ca: Option<PathBuf>,

    /// Client certificate chain (PEM) for a registry that asks for one
    /// (`--authz spiffe`: an identity of its trust domain); with
    /// --registry-client-key.
    #[arg(long, env = "MCS_REGISTRY_CLIENT_CERT", requires = "registry_client_key")]
    pub registry_client_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, env = "MCS_REGISTRY_CLIENT_KEY", requires = "registry_client_cert")]
    pub registry_client_key: Option<PathBuf>,
}

/// `status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `watch`.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Which list (singular or plural: `pools` or `pool`).
    #[arg(value_parser = section_parser())]
    pub section: SectionKind,

    /// The registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `migrate`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// Create the table when it does not exist at this region and endpoint;
    /// without it, an absent table is an error (a wrong --region or
    /// --dynamodb-endpoint would otherwise create an empty table there).
    #[arg(long)]
    pub create: bool,
    /// Stop at this schema version (default: this binary's): a rolling
    /// upgrade migrates to the version the running registries accept
    /// first (docs/operations.md). A table already there or beyond has
    /// nothing to do.
    #[arg(long, value_name = "VERSION", value_parser = clap::value_parser!(u32).range(1..))]
    pub to: Option<u32>,
}

impl Command {
    /// The subcommand's name, as on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Migrate(_) => "migrate",
            Command::Describe => "describe",
            Command::Ls(_) => "ls",
            Command::Get(_) => "get",
            Command::Dump => "dump",
            Command::Restore(_) => "restore",
            Command::Doctor(_) => "doctor",
            Command::Gc(_) => "gc",
            Command::Diff(_) => "diff",
            Command::Status(_) => "status",
            Command::Watch(_) => "watch",
            Command::Completions(_) => "completions",
        }
    }
}

/// Parses a section by its name or its singular (`pools` or `pool`), and
/// lists the names, each with its path, in help and errors.
fn section_parser() -> impl TypedValueParser<Value = SectionKind> {
    PossibleValuesParser::new(SectionKind::ALL.map(|section| {
        let derived = if section.record_kind().is_none() {
            " (derived from live exports; no records of its own)"
        } else {
            ""
        };
        PossibleValue::new(section.name())
            .alias(section.singular())
            .help(format!("`GET /v1/{}`{derived}", section.name()))
    }))
    // Only the possible values reach here, and each parses.
    .try_map(|name| name.parse::<SectionKind>())
}

/// `ls`.
#[derive(Debug, Clone, Args)]
pub struct LsArgs {
    /// Which list (singular or plural: `pools` or `pool`).
    #[arg(value_parser = section_parser())]
    pub section: SectionKind,

    /// Also list expired records and tombstones, with the reason each is or
    /// is not served (`-o wide` adds each one's version).
    #[arg(long)]
    pub all: bool,
}

/// A kind of stored record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecordKind {
    /// KEY: pool_id, or cluster_id/namespace/dgd_name.
    #[value(alias = "pools")]
    Pool,
    /// KEY: router_id.
    #[value(alias = "routers")]
    Router,
    /// KEY: cluster_id.
    #[value(alias = "clusters")]
    Cluster,
    /// KEY: cluster_id/namespace/name.
    #[value(alias = "exports")]
    Export,
}

impl RecordKind {
    /// The kind's name, as on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Pool => "pool",
            RecordKind::Router => "router",
            RecordKind::Cluster => "cluster",
            RecordKind::Export => "export",
        }
    }
}

impl std::fmt::Display for RecordKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `get`.
#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    /// The record's kind (singular or plural: `pool` or `pools`).
    #[arg(value_enum)]
    pub kind: RecordKind,

    /// pool_id (or cluster_id/namespace/dgd_name), router_id, cluster_id, or
    /// cluster_id/namespace/name for an export.
    pub key: String,
}

/// `restore`.
#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    /// A file written by `mcs-admin dump`, or `-` for standard input.
    pub file: PathBuf,

    /// Added to a restored record's expiry for its `ttl`; records older
    /// than it are skipped (see --force).
    #[command(flatten)]
    pub retention: RetentionArgs,

    /// Accept a dump without the header line and record count (written by
    /// an mcs-admin before they existed): a truncated one then restores
    /// what it holds, undetected.
    #[arg(long)]
    pub allow_headerless: bool,

    /// Judge every record against the table as a restore does, say what
    /// would be written, and write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Also restore records older than the retention (last written, for a
    /// lease or a tombstone; last known current, for an export): their newer
    /// tombstones may have been collected already, so they may bring back
    /// what was withdrawn.
    #[arg(long)]
    pub force: bool,
}

/// `doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// How long past its `ttl` an item may still be present before it is a
    /// problem (DynamoDB deletes expired items within about two days); and
    /// an orphaned export past the retention, before gc not having
    /// collected it is one.
    #[arg(long, env = "MCS_TTL_GRACE_SECS", default_value_t = 172_800)]
    pub ttl_grace_secs: u64,

    /// The registry's, to find what gc in another region would collect.
    #[command(flatten)]
    pub retention: RetentionArgs,
}

/// `gc`.
#[derive(Debug, Clone, Args)]
pub struct GcArgs {
    /// List what would be deleted, and delete nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Tombstones and expired records are kept this long past their expiry.
    #[command(flatten)]
    pub retention: RetentionArgs,
}

/// `diff`.
#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// Region of the other replica (default: --region). At least one of
    /// --other-region, --other-table and --other-endpoint names the other
    /// replica.
    #[arg(long, env = "MCS_OTHER_REGION")]
    pub other_region: Option<String>,

    /// Endpoint of the other replica (default: --dynamodb-endpoint).
    #[arg(long, env = "MCS_OTHER_ENDPOINT")]
    pub other_endpoint: Option<String>,

    /// Table name of the other replica (default: --table, as in a global
    /// table).
    #[arg(long, env = "MCS_OTHER_TABLE")]
    pub other_table: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_before_or_after_the_subcommand() {
        let before = Cli::try_parse_from(["mcs-admin", "--table=t", "-o", "json", "migrate"]);
        let after = Cli::try_parse_from(["mcs-admin", "migrate", "--table=t", "-o", "json"]);
        for cli in [before.unwrap(), after.unwrap()] {
            assert_eq!(cli.global.store.table.as_deref(), Some("t"));
            assert_eq!(cli.global.output, Format::Json);
            assert!(matches!(
                cli.command,
                Command::Migrate(MigrateArgs { create: false, to: None })
            ));
        }
    }

    #[test]
    fn kinds_and_sections_are_singular_or_plural() {
        for (argv, want) in [
            (&["mcs-admin", "ls", "pool"][..], SectionKind::Pools),
            (&["mcs-admin", "ls", "pools"], SectionKind::Pools),
            (&["mcs-admin", "ls", "export"], SectionKind::Exports),
            (&["mcs-admin", "ls", "imports"], SectionKind::Imports),
        ] {
            match Cli::try_parse_from(argv).unwrap().command {
                Command::Ls(args) => assert_eq!(args.section, want, "{argv:?}"),
                other => panic!("{other:?}"),
            }
        }
        for (argv, want) in [
            (&["mcs-admin", "get", "pools", "k"][..], RecordKind::Pool),
            (&["mcs-admin", "get", "pool", "k"], RecordKind::Pool),
            (&["mcs-admin", "get", "clusters", "k"], RecordKind::Cluster),
        ] {
            match Cli::try_parse_from(argv).unwrap().command {
                Command::Get(args) => assert_eq!(args.kind, want, "{argv:?}"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn every_command_names_itself_as_clap_does() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            let argv: Vec<&str> = match sub.get_name() {
                "ls" => vec!["mcs-admin", "ls", "pools"],
                "get" => vec!["mcs-admin", "get", "pool", "k"],
                "restore" => vec!["mcs-admin", "restore", "-"],
                "diff" => vec!["mcs-admin", "diff"],
                "completions" => vec!["mcs-admin", "completions", "bash"],
                "status" => vec!["mcs-admin", "status", "--registry", "http://r"],
                "watch" => vec!["mcs-admin", "watch", "pools", "--registry", "http://r"],
                name => vec!["mcs-admin", name],
            };
            let parsed = Cli::try_parse_from(&argv).unwrap();
            assert_eq!(parsed.command.name(), sub.get_name());
        }
    }

    #[test]
    fn usage_errors_are_refused_by_clap() {
        for argv in [
            &["mcs-admin"][..],
            &["mcs-admin", "ls", "things"],
            &["mcs-admin", "get", "pool"],
            &["mcs-admin", "-o", "xml", "describe"],
            &["mcs-admin", "status"],
            &["mcs-admin", "watch", "things", "--registry", "http://r"],
            &["mcs-admin", "status", "--registry", "http://r", "--registry-client-cert", "c"],
        ] {
            assert!(Cli::try_parse_from(argv).is_err(), "{argv:?}");
        }
    }
}
