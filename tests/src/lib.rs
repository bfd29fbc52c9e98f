//! Support for the cross-crate tests of mcs-registry (this crate's tests
//! are `compose.rs` and `admin_matches_api.rs` beside its manifest): the
//! workspace binaries, built once per test process and located, the
//! DynamoDB endpoint of the tests, and a running `mcs-registry` process.
//!
//! ```text
//!  binaries() ─► $CARGO build --bins -p mcs-registry -p mcs-admin (once)
//!            └─► paths of target/debug/{mcs-registry,mcs-admin}
//!  RegistryProcess::start ─► the registry on free loopback ports, ready
//!                             (mcs-testkit's, re-exported)
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The workspace binaries, built by this test process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `mcs-registry`.
    pub registry: PathBuf,
    /// `mcs-admin`.
    pub admin: PathBuf,
}

/// The workspace's root: the parent of this crate.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

/// The target directory the tests were built in: `CARGO_TARGET_DIR` (a
/// relative one taken from the workspace root) or `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() { dir } else { workspace_root().join(dir) }
        }
        _ => workspace_root().join("target"),
    }
}

/// Builds `mcs-registry` and `mcs-admin` (debug profile, in
/// [`target_dir`]) the first time it is called in this process, with the
/// cargo that runs the tests (`CARGO`), and returns their paths. Panics
/// with cargo's output when the build fails.
pub fn binaries() -> &'static Binaries {
    static BUILT: OnceLock<Binaries> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let target = target_dir();
        let output = Command::new(cargo)
            .current_dir(workspace_root())
            .args(["build", "--bins", "-p", "mcs-registry", "-p", "mcs-admin", "--target-dir"])
            .arg(&target)
            .stdin(Stdio::null())
            .output()
            .expect("cargo starts");
        assert!(
            output.status.success(),
            "cargo build of the binaries failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let debug = target.join("debug");
        let binaries = Binaries {
            registry: debug.join(format!("mcs-registry{}", std::env::consts::EXE_SUFFIX)),
            admin: debug.join(format!("mcs-admin{}", std::env::consts::EXE_SUFFIX)),
        };
        for path in [&binaries.registry, &binaries.admin] {
            assert!(path.is_file(), "{} was not built", path.display());
        }
        binaries
    })
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
