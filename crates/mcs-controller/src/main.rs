//! The `mcs-controller` binary.

fn main() -> std::process::ExitCode {
    match mcs_controller::crd::crds_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcs-controller: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
