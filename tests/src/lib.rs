//! Support for the cross-crate tests of mcs-registry (this crate's tests
//! are `compose.rs`, `admin_matches_api.rs`, `docs_links.rs`,
//! `controller.rs`, `charts.rs` … beside its manifest): the workspace
//! binaries, the DynamoDB endpoint of the tests, a running `mcs-registry`
//! process, the controller's clusterset (`controller`) and the Helm
//! charts' tools and rendering (`charts`), CoreDNS and a DNS client
//! (`dns`).
//!
//! ```text
//!  binaries!() ─► CARGO_BIN_EXE_mcs-{registry,admin}-for-tests: both binaries,
//!                 built by the same cargo test as the test itself
//!  RegistryProcess::start ─► the registry on free loopback ports, ready
//!                             (mcs-testkit's, re-exported)
//!  deployment::LocalPod   ─► a chart's Deployment as installed, to run as a
//!                             local process (deployment_guide.rs)
//! ```

pub mod charts;
pub mod controller;
pub mod deployment;
pub mod dns;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The workspace binaries, as this crate builds them (its `[[bin]]`
/// targets compile `mcs-registry`'s and `mcs-admin`'s own `main.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `mcs-registry`.
    pub registry: PathBuf,
    /// `mcs-admin`.
    pub admin: PathBuf,
}

/// The [`Binaries`] that cargo built for the calling test, from the
/// `CARGO_BIN_EXE_*` variables it sets when compiling this crate's tests
/// (only there, hence a macro): no second `cargo build`, and the same
/// features as the test build.
#[macro_export]
macro_rules! binaries {
    () => {
        $crate::Binaries {
            registry: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcs-registry-for-tests")),
            admin: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcs-admin-for-tests")),
        }
    };
}

/// The binaries of the controller's tests (`mcs_tests::controller`).
#[macro_export]
macro_rules! controller_binaries {
    () => {
        $crate::controller::ControllerBinaries {
            registry: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcs-registry-for-tests")),
            controller: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcs-controller-for-tests")),
        }
    };
}

/// The workspace's root: the parent of this crate.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

/// Runs `binary args…` to its end, with static test credentials for the
/// AWS SDK and no instance metadata lookups.
pub fn run(binary: &Path, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()))
}

pub use mcs_testkit::RegistryProcess;
pub use mcs_testkit::dynamo::{dynamodb_endpoint, unique_table};
