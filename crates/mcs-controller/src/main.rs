//! The `mcs-controller` binary: `crds` and `rbac` (ClusterRole, Lease Role
//! and bindings) print what deploying it needs, `completions SHELL` its
//! shell completion script, `coredns configure|unconfigure` edits the
//! cluster's Corefile; otherwise it runs. Inconsistent flags exit 2 with one
//! line naming the flag (and so does a CoreDNS ConfigMap that is missing or
//! cannot be edited); a failure exits 1.

use mcs_controller::config::{Cli, Command, CorednsCommand, LogFormat};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::from_command_line();
    match mcs_controller::run::runtime(cli.run.worker_threads) {
        Ok(runtime) => runtime.block_on(run(cli)),
        // No log subscriber yet: plain text on stderr, whatever --log-format.
        Err(e) => fail(LogFormat::Text, &format!("starting the async runtime: {e}"), 1),
    }
}

async fn run(cli: Cli) -> ExitCode {
    let printed = match cli.command {
        Some(Command::Crds) => Some(mcs_controller::crd::crds_yaml()),
        Some(Command::Rbac(args)) => Some(args.install().yaml()),
        Some(Command::Completions { shell }) => Some(Ok(Cli::completion_script(shell))),
        Some(Command::Coredns(command)) => return coredns(&command).await,
        None => None,
    };
    if let Some(yaml) = printed {
        return match yaml {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(LogFormat::Text, &e.to_string(), 1),
        };
    }
    let args = cli.run;
    if let Err(e) = init_tracing(&args.log, args.log_format) {
        return fail(args.log_format, &e, 2);
    }
    for note in &cli.renamed {
        tracing::warn!("{note}");
    }
    let config = match args.resolve() {
        Ok(config) => config,
        Err(message) => return fail(args.log_format, &message, 2),
    };
    match mcs_controller::run::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(args.log_format, &mcs_api::chain(error.as_ref()), 1),
    }
}

/// `mcs-controller coredns configure|unconfigure`.
async fn coredns(command: &CorednsCommand) -> ExitCode {
    let format = command.target_args().log_format;
    if let Err(e) = init_tracing("info", format) {
        return fail(format, &e, 2);
    }
    let target = match command.resolve() {
        Ok(target) => target,
        Err(message) => return fail(format, &message, 2),
    };
    let client = match kube::Config::infer()
        .await
        .map_err(|e| format!("finding the Kubernetes API server: {}", mcs_api::chain(&e)))
        .and_then(|config| {
            let url = config.cluster_url.clone();
            kube::Client::try_from(config).map_err(|e| {
                format!("connecting to the Kubernetes API server {url}: {}", mcs_api::chain(&e))
            })
        }) {
        Ok(client) => client,
        Err(message) => return fail(format, &message, 1),
    };
    let api = kube::Api::namespaced(client, &target.namespace);
    let (action, outcome) = match command {
        CorednsCommand::Configure { zone, .. } => {
            ("configure", mcs_controller::coredns::configure(&api, &target, zone).await)
        }
        CorednsCommand::Unconfigure { .. } => {
            ("unconfigure", mcs_controller::coredns::unconfigure(&api, &target).await)
        }
    };
    match outcome {
        Ok(outcome) => {
            mcs_controller::coredns::log(action, &target, &outcome);
            ExitCode::SUCCESS
        }
        Err(e) => fail(format, &format!("coredns {action}: {e}"), if e.is_usage() { 2 } else { 1 }),
    }
}

fn init_tracing(filter: &str, format: LogFormat) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("--log / MCS_LOG {filter:?} is not a valid filter: {e}"))?;
    mcs_controller::config::install_logs(filter, format)
}

/// Reports why the controller exits, in the log format asked for.
fn fail(format: LogFormat, message: &str, code: u8) -> ExitCode {
    match format {
        LogFormat::Text => eprintln!("mcs-controller: {message}"),
        LogFormat::Json => tracing::error!(exit_code = code, "mcs-controller: {message}"),
    }
    ExitCode::from(code)
}
