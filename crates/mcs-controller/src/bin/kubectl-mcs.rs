//! `kubectl-mcs`: the kubectl plugin of mcs-controller (`kubectl mcs
//! status`; `mcs_controller::plugin`). Exit 0, 1 when it failed (the
//! message on stderr), 2 on a usage error.

use clap::Parser;
use mcs_controller::plugin::{PluginCli, run};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    match run(PluginCli::parse()).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("kubectl-mcs: {}", mcs_api::chain(e.as_ref()));
            ExitCode::from(1)
        }
    }
}
