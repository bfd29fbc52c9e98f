//! The build script of the three binaries' crates (mcs-registry,
//! mcs-controller, mcs-admin): sets `MCS_GIT_COMMIT` for `--version` and
//! `mcs_build_info`, from the environment (the Dockerfile's build argument)
//! or else `git rev-parse`, else `unknown` (a source tree without git).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=MCS_GIT_COMMIT");
    let commit = match std::env::var("MCS_GIT_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit,
        _ => {
            // Rebuilt when HEAD moves: a checkout, or a commit on its branch.
            // (Only files that exist: a missing one would rerun it always.)
            let branch = git(&["symbolic-ref", "-q", "HEAD"]);
            for path in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
                if let Some(file) = git(&["rev-parse", "--git-path", path])
                    && std::path::Path::new(&file).exists()
                {
                    println!("cargo:rerun-if-changed={file}");
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo:rustc-env=MCS_GIT_COMMIT={commit}");
}
