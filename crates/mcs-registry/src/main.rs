//! The `mcs-registry` binary: parse flags (`--completions` prints the
//! shell completion script and exits), set up logging, refuse
//! inconsistent flags or an invalid `--log` filter (exit 2), run (exit 1 on
//! failure). Errors are one line on stderr: `mcs-registry: <message>`, or
//! under `--log-format json` one JSON log line at level ERROR.

use mcs_registry::config::{Args, LogFormat, Settings};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::from_command_line();
    if let Some(shell) = args.completions {
        print!("{}", Args::completion_script(shell));
        return ExitCode::SUCCESS;
    }
    if let Err(error) = mcs_registry::server::init_tracing(&args) {
        return fail(args.log_format, &mcs_api::chain(error.as_ref()), 2);
    }
    let settings = match Settings::from_args(&args) {
        Ok(settings) => settings,
        Err(message) => return fail(args.log_format, &message, 2),
    };
    let format = args.log_format;
    match mcs_registry::run(args, settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(format, &mcs_api::chain(error.as_ref()), 1),
    }
}

/// Reports why the registry exits, in the log format asked for.
fn fail(format: LogFormat, message: &str, code: u8) -> ExitCode {
    match format {
        LogFormat::Text => eprintln!("mcs-registry: {message}"),
        LogFormat::Json => tracing::error!(exit_code = code, "mcs-registry: {message}"),
    }
    ExitCode::from(code)
}
