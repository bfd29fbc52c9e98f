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

use crate::Exit;
use crate::cli::{Cli, Command, GlobalArgs};
use crate::connect::{Location, ensure_schema};
use mcs_store::DynamoStore;
use std::time::Duration;

/// The registry's default retention (`--retention-secs`), for stores that
/// write nothing whose `ttl` it would set.
const DEFAULT_RETENTION: Duration = Duration::from_secs(86_400);

/// Runs the subcommand of `cli`.
pub async fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    let global = &cli.global;
    match &cli.command {
        Command::Migrate => migrate::run(global).await,
        Command::Describe => describe::run(global).await,
        Command::Ls(args) => ls::run(global, args).await,
        Command::Get(args) => get::run(global, args).await,
        Command::Dump => dump::run(global).await,
        Command::Restore(args) => restore::run(global, args).await,
        Command::Doctor(args) => doctor::run(global, args).await,
        Command::Gc(args) => gc::run(global, args).await,
        Command::Diff(args) => diff::run(global, args).await,
    }
}

/// The table of the global flags, opened and checked to be at this binary's
/// schema version.
async fn open_checked(global: &GlobalArgs, retention: Duration) -> anyhow::Result<DynamoStore> {
    let store = Location::of(global)?.open(retention).await?;
    ensure_schema(&store).await?;
    Ok(store)
}
