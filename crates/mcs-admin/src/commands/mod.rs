//! One module per subcommand. Each gathers what it needs from the table,
//! builds a report with a pure function (unit-tested beside it), prints it
//! in the chosen format and says how it ended.

mod describe;
mod diff;
mod doctor;
mod dump;
mod gc;
mod get;
mod ls;
mod migrate;
mod restore;
mod status;
mod watch;

use crate::cli::{Cli, Command, GlobalArgs};
use crate::connect::{Location, ensure_schema};
use crate::{Exit, UsageError};
use mcs_core::lease::{DEFAULT_RETENTION_SECS, MAX_LEASE_SECS};
use mcs_store::DynamoStore;
use std::time::Duration;

/// The registry's default retention (`--retention-secs`), for stores that
/// write nothing whose `ttl` it would set.
const DEFAULT_RETENTION: Duration = Duration::from_secs(DEFAULT_RETENTION_SECS);

/// The shortest `--retention-secs` accepted with `skew_ms` of skew
/// allowance, in whole seconds: one day (the longest lease) plus twice the
/// allowance. A tombstone's `ttl` is its write plus the retention, and it
/// must outlive every older item of its key, which another region may have
/// leased for up to a day, live for the skew allowance past its end, and
/// stamped with a clock up to the allowance ahead.
pub(crate) fn min_retention_secs(skew_ms: u64) -> u64 {
    MAX_LEASE_SECS.saturating_add(skew_ms.saturating_mul(2).div_ceil(1000))
}

/// `retention_secs` as a retention, or a usage error when it is below
/// [`min_retention_secs`].
pub(crate) fn checked_retention(retention_secs: u64, skew_ms: u64) -> anyhow::Result<Duration> {
    let min = min_retention_secs(skew_ms);
    if retention_secs < min {
        return Err(UsageError::invalid(format!(
            "--retention-secs {retention_secs} is below the minimum of {min}: one day (the \
             longest lease) plus twice --skew-allowance-ms ({skew_ms}), so that a tombstone \
             outlives every older record of its key"
        ))
        .into());
    }
    Ok(Duration::from_secs(retention_secs))
}

/// Runs the subcommand of `cli`.
pub async fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    let global = &cli.global;
    match &cli.command {
        Command::Migrate(args) => migrate::run(global, args).await,
        Command::Describe => describe::run(global).await,
        Command::Ls(args) => ls::run(global, args).await,
        Command::Get(args) => get::run(global, args).await,
        Command::Dump => dump::run(global).await,
        Command::Restore(args) => restore::run(global, args).await,
        Command::Doctor(args) => doctor::run(global, args).await,
        Command::Gc(args) => gc::run(global, args).await,
        Command::Diff(args) => diff::run(global, args).await,
        Command::Status(args) => status::run(global, args).await,
        Command::Watch(args) => watch::run(global, args).await,
        Command::Completions(args) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let script =
                crate::shared_cli::completion_script(args.shell, &mut command, "mcs-admin");
            crate::output::print(&script)?;
            Ok(Exit::Ok)
        }
    }
}

/// The table of the global flags, opened and checked to be at this binary's
/// schema version.
async fn open_checked(global: &GlobalArgs, retention: Duration) -> anyhow::Result<DynamoStore> {
    let store = Location::of(global)?.open(retention).await?;
    ensure_schema(&store).await?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_below_a_day_plus_twice_the_skew_is_refused() {
        assert_eq!(min_retention_secs(1_000), 86_402);
        assert_eq!(min_retention_secs(0), 86_400);
        assert_eq!(min_retention_secs(1_250), 86_403, "rounded up to whole seconds");
        assert_eq!(checked_retention(86_402, 1_000).unwrap(), Duration::from_secs(86_402));
        let refused = checked_retention(86_401, 1_000).unwrap_err();
        let usage = refused.downcast_ref::<UsageError>().expect("a usage error");
        assert_eq!(
            usage.message,
            "--retention-secs 86401 is below the minimum of 86402: one day (the longest lease) \
             plus twice --skew-allowance-ms (1000), so that a tombstone outlives every older \
             record of its key"
        );
        assert!(checked_retention(DEFAULT_RETENTION_SECS, 1_000).is_ok());
    }
}
