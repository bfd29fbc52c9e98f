//! The `mcs-bench` binary: parse flags, run the chosen benchmarks, print
//! their tables.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = mcs_bench::Args::parse();
    match mcs_bench::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcs-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}
