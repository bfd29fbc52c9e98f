//! The `mcs-admin` binary: parse flags, run, map the outcome to an exit code
//! (0 ok, 1 problem or failure, 2 usage).

use mcs_admin::{Cli, Exit, Failure};
use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::from_command_line();
    if let Err(error) = mcs_admin::install_logs(cli.global.log_format) {
        eprintln!("mcs-admin: {error}");
        return ExitCode::FAILURE;
    }
    match mcs_admin::run(cli).await {
        Ok(Exit::Ok) => ExitCode::SUCCESS,
        Ok(Exit::Problem) => ExitCode::FAILURE,
        Err(Failure::Usage(error)) => error.exit(),
        Err(Failure::Failed(error)) => {
            tracing::error!("mcs-admin: {}", mcs_api::chain(error.as_ref()));
            ExitCode::FAILURE
        }
    }
}
