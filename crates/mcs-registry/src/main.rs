//! The `mcs-registry` binary: parse flags, refuse inconsistent ones (exit 2),
//! run.

use clap::Parser;
use mcs_registry::config::{Args, Settings};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let settings = match Settings::from_args(&args) {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("mcs-registry: {message}");
            return ExitCode::from(2);
        }
    };
    match mcs_registry::run(args, settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcs-registry: {error:#}");
            ExitCode::FAILURE
        }
    }
}
