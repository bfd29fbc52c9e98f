//! docs/configuration.md is the one reference of the three binaries' flags:
//! every long flag and `MCS_*` variable that `--help` of mcs-registry,
//! mcs-admin (and each of its commands) and mcs-controller prints is named
//! in that binary's part of the page.
//!
//! ```text
//!  mcs-registry --help            ─▶ before "## Metrics"
//!  mcs-admin [COMMAND] --help     ─▶ "## mcs-admin" .. "## mcs-controller"
//!  mcs-controller --help          ─▶ "## mcs-controller" .. "## mcs-controller metrics"
//! ```

use std::collections::BTreeSet;
use std::path::Path;

/// The long flags and `MCS_*` variables of `binary args… --help`.
fn flags_of(binary: &Path, args: &[&str]) -> BTreeSet<String> {
    let mut argv: Vec<&str> = args.to_vec();
    argv.push("--help");
    let out = mcs_tests::run(binary, &argv);
    assert!(out.status.success(), "{} {argv:?}: {out:?}", binary.display());
    let help = String::from_utf8(out.stdout).expect("utf-8");
    let mut names = BTreeSet::new();
    for line in help.lines().map(str::trim) {
        // An option's own line (`-o, --output <OUTPUT>`, `--table <TABLE>`),
        // not a mention of a flag in a description; and its `[env: MCS_X=]`.
        let is_option = line.starts_with("--")
            || (line.starts_with('-') && line[1..].starts_with(|c: char| c.is_ascii_alphabetic()));
        let option = is_option
            .then(|| line.split([' ', ',', '=']).find(|w| w.starts_with("--")).map(str::to_owned));
        let env = line.strip_prefix("[env: ").and_then(|e| e.split('=').next()).map(str::to_owned);
        for name in [option.flatten(), env].into_iter().flatten() {
            if !["--help", "--version"].contains(&name.as_str()) {
                names.insert(name);
            }
        }
    }
    names
}

/// The text of docs/configuration.md from `start` up to `end` (exclusive;
/// `None`: to the end).
fn part(doc: &str, start: Option<&str>, end: &str) -> String {
    let from = start.map_or(0, |s| doc.find(&format!("\n{s}\n")).unwrap_or_else(|| panic!("{s}")));
    let rest = &doc[from..];
    let to = rest.find(&format!("\n{end}")).unwrap_or_else(|| panic!("{end}"));
    rest[..to].to_owned()
}

fn missing(names: &BTreeSet<String>, text: &str) -> Vec<String> {
    names.iter().filter(|n| !text.contains(&format!("`{n}`"))).cloned().collect()
}

#[test]
fn every_flag_of_the_three_binaries_is_in_configuration_md() {
    let doc = std::fs::read_to_string(mcs_tests::workspace_root().join("docs/configuration.md"))
        .expect("docs/configuration.md");
    let bins = mcs_tests::binaries!();
    let controller = mcs_tests::controller_binaries!().controller;

    let registry = flags_of(&bins.registry, &[]);
    assert!(registry.contains("--storage") && registry.contains("MCS_STORAGE"), "{registry:?}");
    let text = part(&doc, None, "## Metrics");
    assert_eq!(missing(&registry, &text), Vec::<String>::new(), "mcs-registry");

    let mut admin = flags_of(&bins.admin, &[]);
    for command in ["migrate", "describe", "ls", "get", "dump", "restore", "doctor", "gc", "diff"] {
        admin.extend(flags_of(&bins.admin, &[command]));
    }
    assert!(admin.contains("--create") && admin.contains("--other-region"), "{admin:?}");
    let text = part(&doc, Some("## mcs-admin"), "## mcs-controller");
    assert_eq!(missing(&admin, &text), Vec::<String>::new(), "mcs-admin");

    let flags = flags_of(&controller, &[]);
    assert!(flags.contains("--registry-url"), "{flags:?}");
    let text = part(&doc, Some("## mcs-controller"), "## mcs-controller metrics");
    assert_eq!(missing(&flags, &text), Vec::<String>::new(), "mcs-controller");
}
