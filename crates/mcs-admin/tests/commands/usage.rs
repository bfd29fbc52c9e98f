//! Exit codes a script can rely on: 2 for usage errors, 1 for failures,
//! with errors on stderr as `mcs-admin: <message>`. Needs no server.

use crate::support::admin;

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["ls", "things", "--table", "t"],
        &["frobnicate"],
        &["get", "pool", "XYZ", "--table", "t", "--region", "us-east-1"],
        &["ls", "imports", "--all", "--table", "t"],
        &["diff", "--table", "t"],
        &["-o", "xml", "describe", "--table", "t"],
    ] {
        let run = admin(args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
    let run = admin(&["ls", "pools", "--region", "us-east-1"], None);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--table"), "{}", run.stderr);
}

/// Issue 14, defect 9: errors found after parsing printed the top-level
/// usage; they print the subcommand's, as clap's own errors do.
#[test]
fn a_usage_error_shows_the_usage_of_its_subcommand() {
    for (args, usage) in [
        (&["get", "pool", "XYZ", "--table", "t", "--region", "us-east-1"][..], "get"),
        (&["ls", "imports", "--all", "--table", "t"], "ls"),
        (&["gc", "--retention-secs", "5", "--table", "t"], "gc"),
        (&["describe"], "describe"),
        (&["dump", "-o", "yaml", "--table", "t"], "dump"),
    ] {
        let run = admin(args, None);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("Usage: mcs-admin {usage} ")),
            "{args:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn help_lists_every_command() {
    let run = admin(&["--help"], None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for command in ["migrate", "describe", "ls", "get", "dump", "restore", "doctor", "gc", "diff"] {
        assert!(run.stdout.contains(&format!("\n  {command} ")), "{command}: {}", run.stdout);
    }
    for flag in ["--table", "--region", "--dynamodb-endpoint", "--skew-allowance-ms", "--output"] {
        assert!(run.stdout.contains(flag), "{flag}: {}", run.stdout);
    }
}

#[test]
fn an_unreachable_table_fails_with_exit_1() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let run = admin(
        &["doctor", "--table", "t", "--region", "us-east-1", "--dynamodb-endpoint", &closed],
        None,
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(run.stderr.starts_with("mcs-admin: "), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
}
