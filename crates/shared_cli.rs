//! What the command lines of the three binaries share: their shell
//! completion scripts, the old names of renamed flags, and how they log
//! (`--log-format`). One file
//! included by the three crates (`#[path]`), as `crates/build_commit.rs` is
//! their one build script: they share no crate that knows clap.
#![allow(dead_code)] // mcs-admin renamed nothing

use std::ffi::OsString;

/// The completion script for `shell` of `command`, run as `name`.
pub fn completion_script(
    shell: clap_complete::Shell,
    command: &mut clap::Command,
    name: &str,
) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, command, name, &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    if shell != clap_complete::Shell::Bash {
        return script;
    }
    // clap_complete 4.6 (clap-rs/clap#6421): for a name with a hyphen, the
    // bash script's `case` arms spell a subcommand's state
    // `mcs__subcmd__admin__subcmd__ls` where its loop builds
    // `mcs__admin__subcmd__ls`, so no subcommand's flags ever complete. The
    // arms are spelt as the loop spells them (a no-op once fixed upstream).
    let arm = format!("{}__subcmd__", name.replace('-', "__subcmd__"));
    let state = format!("{}__subcmd__", name.replace('-', "__"));
    script.replace(&arm, &state)
}

/// A flag renamed to fit the one vocabulary of the three binaries
/// (docs/configuration.md, Flag names). Its old name and old `MCS_*`
/// variable keep working, hidden from `--help`, for one release.
#[derive(Debug, Clone, Copy)]
pub struct Renamed {
    /// The clap id of the argument (its field's name).
    pub id: &'static str,
    /// The old long flag, without `--`.
    pub old_flag: &'static str,
    /// The old environment variable.
    pub old_env: &'static str,
}

/// `command` with each of `renamed` also answering to its old flag (a
/// hidden alias) and, when its own variable is unset in this process's
/// environment, reading its old one; and one note for each old name `argv`
/// or the environment uses, to log.
pub fn with_old_names(
    mut command: clap::Command,
    renamed: &[Renamed],
    argv: &[OsString],
) -> (clap::Command, Vec<String>) {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut notes = Vec::new();
    for r in renamed {
        let Some(arg) = command.get_arguments().find(|a| a.get_id() == r.id) else {
            panic!("no argument {} to rename", r.id)
        };
        let new_flag = arg.get_long().unwrap_or_default().to_owned();
        let new_env = arg.get_env().map(|e| e.to_string_lossy().into_owned()).unwrap_or_default();
        let old = format!("--{}", r.old_flag);
        let typed = argv.iter().filter_map(|a| a.to_str()).any(|a| {
            a == old || a.strip_prefix(old.as_str()).is_some_and(|rest| rest.starts_with('='))
        });
        if typed {
            notes.push(format!("{old} is deprecated: use --{new_flag}"));
        }
        let old_env = env(&new_env).is_none() && env(r.old_env).is_some();
        if old_env {
            notes.push(format!("{} is deprecated: use {new_env}", r.old_env));
        }
        command = command.mut_arg(r.id, |arg| {
            let arg = arg.alias(r.old_flag);
            if old_env { arg.env(r.old_env) } else { arg }
        });
    }
    (command, notes)
}

/// A listen address (`--listen`, `--admin-listen`): `IP:PORT`. clap's own
/// refusal says only `invalid socket address syntax`, not the form.
pub fn listen_address(value: &str) -> Result<std::net::SocketAddr, String> {
    value.parse().map_err(|_| {
        "expected IP:PORT, e.g. 0.0.0.0:8080, 127.0.0.1:8080 or [::]:8080 (an address: a \
         host name such as localhost is not resolved)"
            .to_owned()
    })
}

/// `argv` (and the environment) matched against `command`, as
/// `try_get_matches_from` does, except that a value refused from an
/// environment variable is told as such: clap names the flag, which the
/// user never typed (`invalid value 'abc' for '--refresh-interval-ms
/// <REFRESH_INTERVAL_MS>'` when `MCS_REFRESH_INTERVAL_MS=abc`).
pub fn matches(
    mut command: clap::Command,
    argv: Vec<OsString>,
) -> Result<clap::ArgMatches, clap::Error> {
    let typed: Vec<String> = argv.iter().filter_map(|a| a.to_str().map(str::to_owned)).collect();
    command
        .try_get_matches_from_mut(argv)
        .map_err(|error| from_environment(error, &command, &typed))
}

/// `error`, naming the environment variable when the value it refuses came
/// from one: its flag is not among `typed` and its variable is set.
fn from_environment(error: clap::Error, command: &clap::Command, typed: &[String]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(error.kind(), ErrorKind::InvalidValue | ErrorKind::ValueValidation) {
        return error;
    }
    let Some(ContextValue::String(shown)) = error.get(ContextKind::InvalidArg) else {
        return error;
    };
    let long = shown.split_whitespace().next().unwrap_or_default().trim_start_matches("--");
    let Some(arg) = find_long(command, long) else { return error };
    let Some(variable) = arg.get_env().map(|v| v.to_string_lossy().into_owned()) else {
        return error;
    };
    let flags: Vec<String> = std::iter::once(long)
        .chain(arg.get_all_aliases().unwrap_or_default())
        .map(|name| format!("--{name}"))
        .collect();
    let was_typed = typed.iter().any(|a| {
        flags
            .iter()
            .any(|f| a == f || a.strip_prefix(f.as_str()).is_some_and(|r| r.starts_with('=')))
    });
    if was_typed || std::env::var_os(&variable).is_none() {
        return error;
    }
    let text = error.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text).replacen(
        &format!("'{shown}'"),
        &format!("{variable} (set in the environment; the flag --{long})"),
        1,
    );
    clap::Error::raw(error.kind(), text)
}

/// The argument of `command` or of any of its subcommands whose long flag
/// is `long`.
fn find_long<'a>(command: &'a clap::Command, long: &str) -> Option<&'a clap::Arg> {
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .or_else(|| command.get_subcommands().find_map(|c| find_long(c, long)))
}

/// How a binary writes its log lines to stderr (`--log-format`,
/// `MCS_LOG_FORMAT`), the same in the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// What kube logs that the binaries leave out unless the filter names its
/// target (see [`install_logs`]): the target and the directive that quiets it.
const QUIETED: [(&str, &str); 2] = [
    // A line per failed request, without its cause or URL.
    ("kube_client", "kube_client::client::builder=off"),
    // The span `reconciling object` of every reconcile, at INFO.
    ("kube_runtime", "kube_runtime::controller=warn"),
];

/// `filter` with [`QUIETED`]'s directives for the crates it does not name.
fn quieted(filter: tracing_subscriber::EnvFilter) -> Result<tracing_subscriber::EnvFilter, String> {
    let named = filter.to_string();
    QUIETED.iter().filter(|(target, _)| !named.contains(target)).try_fold(
        filter,
        |filter, (_, directive)| {
            Ok(filter.add_directive(directive.parse().map_err(|e| format!("{e}"))?))
        },
    )
}

/// Installs the process's log subscriber: lines to stderr, as `filter`
/// lets through, in `format`; colours only when stderr is a terminal,
/// never into a file. `bare` text lines are the message alone (no time,
/// level or target: mcs-admin's notices, which read as its output).
///
/// Unless `filter` names their crates, two things of kube's are left out:
/// - kube's client logs each failed request at ERROR as `failed with error
///   client error (Connect)`, without its cause or URL; the binaries log
///   the same failure themselves, with its cause chain and the object;
/// - kube's controller runtime opens an INFO span for every reconcile
///   (`reconciling object`, with the object's reference). The controller's
///   lines name their object themselves; the span was about 2.5 % of the
///   samples of a profile of the controller (docs/benchmarks.md §8).
pub fn install_logs(
    filter: tracing_subscriber::EnvFilter,
    format: LogFormat,
    bare: bool,
) -> Result<(), String> {
    let filter = quieted(filter)?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match (format, bare) {
        (LogFormat::Text, false) => builder.try_init(),
        (LogFormat::Text, true) => {
            builder.without_time().with_level(false).with_target(false).try_init()
        }
        (LogFormat::Json, _) => builder.json().try_init(),
    }
    .map_err(|e| format!("installing the log subscriber: {e}"))
}

#[cfg(test)]
mod quieted_tests {
    use super::*;
    use tracing::Level;

    /// What `enabled` answers under a subscriber filtered by `filter`
    /// (with [`quieted`]'s additions).
    fn under(filter: &str, enabled: impl FnOnce() -> bool) -> bool {
        let filter = quieted(tracing_subscriber::EnvFilter::new(filter)).unwrap();
        let subscriber = tracing_subscriber::fmt().with_env_filter(filter).finish();
        tracing::subscriber::with_default(subscriber, enabled)
    }

    fn reconcile_span() -> bool {
        tracing::span_enabled!(target: "kube_runtime::controller", Level::INFO)
    }

    fn request_line() -> bool {
        tracing::event_enabled!(target: "kube_client::client::builder", Level::ERROR)
    }

    #[test]
    fn kube_s_reconcile_span_and_request_lines_are_left_out_unless_named() {
        assert!(!under("info", reconcile_span));
        assert!(!under("debug", request_line));
        assert!(under("info", || tracing::event_enabled!(target: "mcs", Level::INFO)));
        assert!(under("info,kube_runtime=info", reconcile_span));
        assert!(under("info,kube_client=error", request_line));
    }
}
