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
//!
//! The same flags, and mcs-admin's and mcs-controller's commands, are what
//! each binary's bash completion script offers, when bash runs it as a
//! user's <TAB> would.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// mcs-admin's commands.
const ADMIN_COMMANDS: [&str; 10] =
    ["migrate", "describe", "ls", "get", "dump", "restore", "doctor", "gc", "diff", "completions"];

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
    for command in ADMIN_COMMANDS {
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

/// What bash offers for `words` (the last one being completed) with the
/// completion script `binary completion_args…` prints for the command
/// `name`, as a user's <TAB> would.
fn complete(binary: &Path, completion_args: &[&str], name: &str, words: &[&str]) -> Vec<String> {
    let out = mcs_tests::run(binary, completion_args);
    assert!(out.status.success(), "{} {completion_args:?}: {out:?}", binary.display());
    let script = std::env::temp_dir().join(format!("{name}-{}.bash", std::process::id()));
    std::fs::write(&script, &out.stdout).expect("the script is written");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}' || exit 3\n\
         function=$(complete -p {name} | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
         [ -n \"$function\" ] || exit 4\n\
         COMP_WORDS=({})\n\
         COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
         COMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n\
         \"$function\" {name} \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
    );
    let out = Command::new("bash").arg("-c").arg(&program).output().expect("bash runs");
    std::fs::remove_file(&script).expect("the script is removed");
    assert!(out.status.success(), "{name} {words:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8").lines().map(str::to_owned).collect()
}

/// Each binary prints a bash completion script (`completions bash` where
/// the binary has commands, `--completions bash` for mcs-registry, which
/// has none) that completes every long flag its `--help` lists, and
/// mcs-admin's and mcs-controller's commands.
#[test]
fn bash_completion_offers_every_flag_and_command() {
    let bins = mcs_tests::binaries!();
    let controller = mcs_tests::controller_binaries!().controller;
    let only_flags = |names: BTreeSet<String>| -> BTreeSet<String> {
        names.into_iter().filter(|n| n.starts_with("--")).collect()
    };
    let offered = |binary: &Path, args: &[&str], name: &str, words: &[&str]| -> BTreeSet<String> {
        complete(binary, args, name, words).into_iter().collect()
    };

    let registry_args = ["--completions", "bash"];
    let flags = offered(&bins.registry, &registry_args, "mcs-registry", &["mcs-registry", "--"]);
    let want = only_flags(flags_of(&bins.registry, &[]));
    assert!(want.contains("--storage"), "{want:?}");
    assert_eq!(want.difference(&flags).collect::<Vec<_>>(), Vec::<&String>::new(), "mcs-registry");
    assert_eq!(
        complete(
            &bins.registry,
            &registry_args,
            "mcs-registry",
            &["mcs-registry", "--storage", ""]
        ),
        ["memory", "dynamodb"],
        "a flag's values"
    );

    let admin_args = ["completions", "bash"];
    let commands = offered(&bins.admin, &admin_args, "mcs-admin", &["mcs-admin", ""]);
    for command in ADMIN_COMMANDS {
        assert!(commands.contains(command), "mcs-admin {command}: {commands:?}");
        let flags = offered(&bins.admin, &admin_args, "mcs-admin", &["mcs-admin", command, "--"]);
        let want = only_flags(flags_of(&bins.admin, &[command]));
        assert!(want.contains("--table"), "{command}: {want:?}");
        assert_eq!(
            want.difference(&flags).collect::<Vec<_>>(),
            Vec::<&String>::new(),
            "mcs-admin {command}"
        );
    }
    assert_eq!(
        complete(&bins.admin, &admin_args, "mcs-admin", &["mcs-admin", "restore", "--dry"]),
        ["--dry-run"]
    );
    assert_eq!(complete(&bins.admin, &admin_args, "mcs-admin", &["mcs-admin", "mig"]), ["migrate"]);

    let controller_args = ["completions", "bash"];
    let offered_here =
        offered(&controller, &controller_args, "mcs-controller", &["mcs-controller", ""]);
    for command in ["crds", "rbac", "completions"] {
        assert!(offered_here.contains(command), "mcs-controller {command}: {offered_here:?}");
    }
    let flags = offered(&controller, &controller_args, "mcs-controller", &["mcs-controller", "--"]);
    let want = only_flags(flags_of(&controller, &[]));
    assert!(want.contains("--registry-url"), "{want:?}");
    assert_eq!(
        want.difference(&flags).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "mcs-controller"
    );
}

/// Flags renamed for one vocabulary (docs/configuration.md, Flag names):
/// their old names and old variables, as a user typed them before, still
/// reach the same setting, with a warning. Each command line here is
/// refused for a reason only the renamed flag can give (a usage error of
/// the setting, exit 2), not as an unknown argument.
#[test]
fn the_old_names_of_renamed_flags_still_work() {
    let bins = mcs_tests::binaries!();
    let controller = mcs_tests::controller_binaries!().controller;
    let stderr = |binary: &Path, args: &[&str], env: &[(&str, &str)]| {
        let out = Command::new(binary).args(args).envs(env.iter().copied()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    for (args, env) in [
        (&["--tls-cert-path", "/nonexistent"][..], &[][..]),
        (&[], &[("MCS_TLS_CERT_PATH", "/nonexistent")]),
    ] {
        let error = stderr(&bins.registry, args, env);
        assert!(
            error.contains("--tls-cert-file needs --tls-key-file"),
            "{args:?} {env:?}: {error}"
        );
    }
    // Only the key: the controller's check names the new flag.
    for (args, env) in [
        (&["--registry-client-key", "/k"][..], &[][..]),
        (&[], &[("MCS_REGISTRY_CLIENT_KEY", "/k")]),
    ] {
        let error = stderr(&controller, args, env);
        assert!(error.contains("--registry-client-cert-file"), "{args:?} {env:?}: {error}");
        assert!(!error.contains("unexpected argument"), "{error}");
    }
    // A value refused names what the user set: the flag typed (old or
    // new, as one), or the old variable, with the flag it stands for.
    for (args, env, named) in [
        (&["--metrics-listen", "not-an-address"][..], &[][..], "'--admin-listen"),
        (
            &[],
            &[("MCS_METRICS_LISTEN", "not-an-address")],
            "MCS_METRICS_LISTEN (set in the environment; the flag --admin-listen)",
        ),
    ] {
        let error = stderr(&controller, args, env);
        assert!(error.contains(&format!("invalid value 'not-an-address' for {named}")), "{error}");
    }
    // The new variable wins over the old one.
    let error = stderr(
        &controller,
        &[],
        &[("MCS_METRICS_LISTEN", "not-an-address"), ("MCS_ADMIN_LISTEN", "also-not")],
    );
    assert!(error.contains("invalid value 'also-not'"), "{error}");
}
