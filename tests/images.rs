//! The container images without Docker (no Docker engine runs on the CI
//! machines): what the charts pull by default is what the Dockerfile's own
//! comments and docs/deployment.md build, from stages that exist, running
//! the chart's binary, exposing the ports that binary listens on; and the
//! build context leaves out everything git ignores.
//!
//! ```text
//!  charts/<chart>/values.yaml image.repository ─┐
//!  charts/<chart>/Chart.yaml appVersion ────────┴─▶ <chart>:<appVersion>
//!      == a `docker build -t` of the Dockerfile's comments
//!      == `$IMAGE_REPOSITORY/<chart>:<appVersion>` built and pushed in docs/deployment.md
//!  its `--target` (or the last stage) ─▶ FROM … AS stage ─▶ ENTRYPOINT <chart>, EXPOSE
//!  .gitignore, fuzz/.gitignore ─▶ .dockerignore
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // a malformed file should fail loudly

use mcs_tests::{run, workspace_root};
use std::collections::BTreeSet;
use std::path::Path;

/// The charts, each named after the binary its image runs.
const CHARTS: [&str; 2] = ["mcs-registry", "mcs-controller"];

/// What the guide prefixes its tags with (its `image.repository` values
/// are `$IMAGE_REPOSITORY/<chart>`).
const GUIDE_PREFIX: &str = "$IMAGE_REPOSITORY/";

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A stage of the Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stage {
    /// Its `AS` name, if any.
    name: Option<String>,
    /// Its `ENTRYPOINT`'s program, if any.
    entrypoint: Option<String>,
    /// Its `EXPOSE`d ports.
    exposed: BTreeSet<u16>,
}

fn stages(dockerfile: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().map(|w| w.to_ascii_uppercase()).as_deref() {
            Some("FROM") => stages.push(Stage {
                name: (words.len() == 4 && words[2].eq_ignore_ascii_case("as"))
                    .then(|| words[3].to_owned()),
                entrypoint: None,
                exposed: BTreeSet::new(),
            }),
            Some("ENTRYPOINT") => {
                let exec: Vec<String> = serde_json::from_str(line["ENTRYPOINT".len()..].trim())
                    .unwrap_or_else(|e| panic!("{line}: not the exec form: {e}"));
                stages.last_mut().expect("a stage").entrypoint = exec.first().cloned();
            }
            Some("EXPOSE") => {
                let stage = stages.last_mut().expect("a stage");
                stage.exposed.extend(words[1..].iter().map(|p| p.parse::<u16>().unwrap()));
            }
            _ => {}
        }
    }
    stages
}

/// A `docker build` command line: its tag and its target.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Build {
    tag: String,
    target: Option<String>,
}

/// The `docker build` commands of `text` (continued lines joined; `prefix`
/// stripped from each line first, such as the Dockerfile's `#`).
fn builds(text: &str, prefix: &str) -> Vec<Build> {
    let joined = text
        .lines()
        .map(|l| l.trim().strip_prefix(prefix).unwrap_or(l).trim())
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    joined
        .lines()
        .filter(|l| l.starts_with("docker build "))
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |flag: &str| {
                words
                    .iter()
                    .position(|w| *w == flag)
                    .map(|i| words[i + 1].trim_matches('"').to_owned())
            };
            Build {
                tag: after("-t").unwrap_or_else(|| panic!("{line}: no -t")),
                target: after("--target"),
            }
        })
        .collect()
}

/// The image a chart pulls by default: `image.repository`, tagged
/// `image.tag` or else the chart's `appVersion`.
fn default_image(chart: &str) -> String {
    let values: serde_norway::Value =
        serde_norway::from_str(&read(&format!("charts/{chart}/values.yaml"))).unwrap();
    let meta: serde_norway::Value =
        serde_norway::from_str(&read(&format!("charts/{chart}/Chart.yaml"))).unwrap();
    let repository = values["image"]["repository"].as_str().expect("image.repository");
    let tag = match values["image"]["tag"].as_str() {
        Some(tag) if !tag.is_empty() => tag.to_owned(),
        _ => meta["appVersion"].as_str().expect("appVersion").to_owned(),
    };
    format!("{repository}:{tag}")
}

/// The stage `build` builds: its `--target`, or the last.
fn built_stage<'a>(stages: &'a [Stage], build: &Build) -> Result<&'a Stage, String> {
    match &build.target {
        None => stages.last().ok_or_else(|| "no stage".to_owned()),
        Some(target) => stages
            .iter()
            .find(|s| s.name.as_deref() == Some(target))
            .ok_or_else(|| format!("--target {target}: no stage of that name")),
    }
}

/// What is wrong with how `builds` (of a file called `source`) make the
/// charts' default images: each chart's image is built once, from a stage
/// that exists and runs the chart's binary.
fn problems(stages: &[Stage], builds: &[Build], source: &str, prefix: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for build in builds {
        if let Err(e) = built_stage(stages, build) {
            problems.push(format!("{source}: {e}"));
        }
    }
    for chart in CHARTS {
        let want = format!("{prefix}{}", default_image(chart));
        let found: Vec<&Build> = builds.iter().filter(|b| b.tag == want).collect();
        let [build] = found[..] else {
            problems.push(format!("{source}: builds {want} {} times, not once", found.len()));
            continue;
        };
        let program = built_stage(stages, build).ok().and_then(|s| s.entrypoint.clone());
        if program.as_deref() != Some(&format!("/usr/local/bin/{chart}")) {
            problems.push(format!("{source}: {want} runs {program:?}, not {chart}"));
        }
    }
    problems
}

#[test]
fn the_charts_default_images_are_the_ones_the_dockerfile_and_the_guide_build() {
    let dockerfile = read("Dockerfile");
    let stages = stages(&dockerfile);
    assert!(stages.iter().any(|s| s.name.as_deref() == Some("mcs-controller")), "{stages:?}");

    let commented = builds(&dockerfile, "#");
    assert_eq!(commented.len(), 2, "{commented:?}");
    assert_eq!(problems(&stages, &commented, "Dockerfile", ""), Vec::<String>::new());

    let guide = read("docs/deployment.md");
    let built = builds(&guide, "");
    assert_eq!(problems(&stages, &built, "docs/deployment.md", GUIDE_PREFIX), Vec::<String>::new());
    for chart in CHARTS {
        let image = format!("{GUIDE_PREFIX}{}", default_image(chart));
        assert!(guide.contains(&format!("docker push \"{image}\"\n")), "the guide pushes {image}");
        let (repository, _) = image.rsplit_once(':').unwrap();
        assert!(
            guide.contains(&format!("  repository: {repository}\n")),
            "the guide's values pull {repository}"
        );
    }
}

#[test]
fn the_checks_catch_a_wrong_tag_target_or_entrypoint() {
    let stages = stages(
        "FROM rust AS build\nFROM base AS mcs-controller\nENTRYPOINT [\"/usr/local/bin/mcs-controller\"]\n\
         FROM base\nENTRYPOINT [\"/usr/local/bin/mcs-registry\"]\n",
    );
    let right = builds(
        &format!(
            "docker build -t {} .\ndocker build --target mcs-controller \\\n  -t {} .\n",
            default_image("mcs-registry"),
            default_image("mcs-controller")
        ),
        "",
    );
    assert_eq!(problems(&stages, &right, "x", ""), Vec::<String>::new(), "{right:?}");

    let untagged = builds(
        "docker build -t mcs-registry .\ndocker build -t mcs-controller --target mcs-controller .",
        "",
    );
    assert_eq!(problems(&stages, &untagged, "x", "").len(), 2, "tags without the appVersion");

    let mut wrong_target = right.clone();
    wrong_target[1].target = Some("controller".into());
    let found = problems(&stages, &wrong_target, "x", "");
    assert!(found[0].contains("--target controller: no stage of that name"), "{found:?}");

    let mut wrong_image = right.clone();
    wrong_image[1].target = None;
    let found = problems(&stages, &wrong_image, "x", "");
    assert!(
        found[0].ends_with("runs Some(\"/usr/local/bin/mcs-registry\"), not mcs-controller"),
        "{found:?}"
    );
}

/// The ports in the `[default: …]` of each `--…listen` flag of `binary`.
fn listen_ports(binary: &Path) -> BTreeSet<u16> {
    let out = run(binary, &["--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    let mut ports = BTreeSet::new();
    let mut in_listen = false;
    for line in help.lines().map(str::trim) {
        if line.starts_with("--") {
            in_listen = line.split([' ', '=']).next().is_some_and(|f| f.ends_with("listen"));
        }
        if let Some(default) = line.strip_prefix("[default: ").filter(|_| in_listen) {
            let address = default.trim_end_matches(']');
            ports.insert(address.rsplit_once(':').unwrap().1.parse().unwrap());
        }
    }
    ports
}

#[test]
fn each_image_exposes_the_ports_its_binary_listens_on_by_default() {
    let stages = stages(&read("Dockerfile"));
    let bins = mcs_tests::binaries!();
    let controller = mcs_tests::controller_binaries!().controller;
    for (program, binary) in [("mcs-registry", &bins.registry), ("mcs-controller", &controller)] {
        let entrypoint = format!("/usr/local/bin/{program}");
        let stage = stages.iter().find(|s| s.entrypoint.as_deref() == Some(&entrypoint)).unwrap();
        let ports = listen_ports(binary);
        assert!(!ports.is_empty(), "{program}: no --…listen default");
        assert_eq!(stage.exposed, ports, "{program}'s image");
    }
}

/// A `.gitignore` pattern of the directory `dir` (`""`: the root) as the
/// `.dockerignore` pattern that leaves out the same paths: anchored
/// (`/target`) relative to `dir`, unanchored at any depth below it.
fn docker_pattern(dir: &str, pattern: &str) -> String {
    let anchored = pattern.starts_with('/') || pattern.trim_end_matches('/').contains('/');
    let pattern = pattern.trim_start_matches('/').trim_end_matches('/');
    match (dir, anchored) {
        ("", true) => pattern.to_owned(),
        ("", false) => format!("**/{pattern}"),
        (dir, true) => format!("{dir}/{pattern}"),
        (dir, false) => format!("{dir}/**/{pattern}"),
    }
}

#[test]
fn the_build_context_leaves_out_what_git_ignores() {
    assert_eq!(docker_pattern("", "/target"), "target");
    assert_eq!(docker_pattern("", "*.log"), "**/*.log");
    assert_eq!(docker_pattern("fuzz", "corpus"), "fuzz/**/corpus");

    let ignored: BTreeSet<String> = read(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    // Git itself is not in .gitignore; the build does not need its history.
    assert!(ignored.contains(".git"), "{ignored:?}");
    let mut missing = Vec::new();
    for dir in ["", "fuzz"] {
        let path =
            if dir.is_empty() { ".gitignore".to_owned() } else { format!("{dir}/.gitignore") };
        for pattern in read(&path).lines().map(str::trim) {
            if pattern.is_empty() || pattern.starts_with('#') {
                continue;
            }
            let want = docker_pattern(dir, pattern);
            if !ignored.contains(&want) {
                missing.push(format!("{path}: {pattern} (as {want})"));
            }
        }
    }
    assert_eq!(missing, Vec::<String>::new(), "in .gitignore, not in .dockerignore");
}
