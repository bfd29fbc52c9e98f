//! mcs-admin: the operator's tool for the DynamoDB table of mcs-registry
//! (docs/design.md §8). It reads the table through mcs-store's own layout and judges
//! liveness with mcs-core's [`View`](mcs_core::View), the very merge rules
//! the registry serves from, so what it calls live is what the registry
//! serves.
//!
//! ```text
//!  Cli ─► run ─► commands::<op> ─► DynamoStore (read_all, put, schema)
//!                      │       └─► DynamoStore's raw calls (scan_items, items_of,
//!                      │           delete_if_unchanged, table_facts); items: dynamo::raw
//!                      └─► View (records at now) ─► report ─► output (table | json | yaml)
//! ```
//!
//! `main.rs` parses [`Cli`] and calls [`run`]; everything else is here so
//! that tests can reach it. Exit codes: 0 ok, 1 a problem was found or the
//! operation failed, 2 usage error.

pub mod cli;
pub mod commands;
pub mod connect;
pub mod liveness;
pub mod output;
pub mod progress;
pub mod scan;
#[path = "../../shared_cli.rs"]
mod shared_cli;
#[cfg(test)]
pub(crate) mod testing;

pub use cli::Cli;

use clap::CommandFactory;
use std::fmt;

/// How a command that ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// All good: exit 0.
    Ok,
    /// The command ran and found a problem (doctor), or a difference (diff),
    /// or could not do all it was asked (dump, restore): exit 1.
    Problem,
}

/// Why a command did not run to its end.
#[derive(Debug)]
pub enum Failure {
    /// The command line is wrong: exit 2, with clap's usage message.
    Usage(clap::Error),
    /// The operation failed: exit 1, `mcs-admin: <message>` on stderr.
    Failed(anyhow::Error),
}

/// A command-line value that clap could not check by itself (a key that
/// does not parse, a missing `--table`); becomes [`Failure::Usage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    /// Which kind of usage error, for clap's message.
    pub kind: clap::error::ErrorKind,
    /// What is wrong.
    pub message: String,
}

impl UsageError {
    /// An invalid value.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self { kind: clap::error::ErrorKind::InvalidValue, message: message.into() }
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for UsageError {}

pub use shared_cli::LogFormat;

/// Installs mcs-admin's log subscriber: its own notices and errors, on
/// stderr, as `format` asks (text: the message alone, as before).
pub fn install_logs(format: LogFormat) -> Result<(), String> {
    shared_cli::install_logs(tracing_subscriber::EnvFilter::new("mcs_admin=info"), format, true)
}

/// Runs the command `cli` names.
pub async fn run(cli: Cli) -> Result<Exit, Failure> {
    let name = cli.command.name();
    commands::dispatch(cli).await.map_err(|error| match error.downcast::<UsageError>() {
        Ok(usage) => Failure::Usage(usage_error(name, usage)),
        Err(error) => Failure::Failed(error),
    })
}

/// `usage` as clap's error of the subcommand `name`, so that it prints that
/// subcommand's usage (`Usage: mcs-admin get <KIND> <KEY>`), as clap's own
/// errors from the subcommand's arguments do.
fn usage_error(name: &str, usage: UsageError) -> clap::Error {
    let mut command = Cli::command();
    command.build();
    match command.find_subcommand_mut(name) {
        Some(sub) => sub.error(usage.kind, usage.message),
        None => command.error(usage.kind, usage.message),
    }
}

/// The wall clock in epoch milliseconds, as the registry reads it.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_shows_its_subcommand_usage() {
        let error = usage_error("get", UsageError::invalid("invalid pool key"));
        let text = error.render().to_string();
        assert!(text.contains("Usage: mcs-admin get [OPTIONS] <KIND> <KEY>"), "{text}");
        assert!(text.contains("invalid pool key"), "{text}");
        assert_eq!(error.exit_code(), 2);
    }
}
