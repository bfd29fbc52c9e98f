//! Exit codes a script can rely on: 2 for usage errors, 1 for failures,
//! with errors on stderr as `mcs-admin: <message>`. Needs no server.

use crate::support::{admin, admin_in};
use mcs_testkit::net::RefusedPort;
use std::time::{Duration, Instant};

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

/// Issue 23 item 5: `--log-format json` (or `MCS_LOG_FORMAT=json`) turns
/// the notices and errors on stderr into one JSON object per line, as the
/// registry's and the controller's logs; before, mcs-admin had no such
/// flag (a usage error) and wrote text only.
#[test]
fn json_logs_are_one_object_per_line_with_level_and_message() {
    let refused = RefusedPort::new();
    let closed = refused.url();
    let args = ["doctor", "--table", "t", "--region", "us-east-1", "--dynamodb-endpoint", &closed];
    let mut json = args.to_vec();
    json.extend(["--storage-connect-timeout-secs", "2", "--log-format", "json"]);
    let by_flag = admin(&json, None);
    let mut env = args.to_vec();
    env.extend(["--storage-connect-timeout-secs", "2"]);
    let by_env = crate::support::admin_in(
        &env,
        None,
        &[("AWS_ACCESS_KEY_ID", "t"), ("AWS_SECRET_ACCESS_KEY", "t"), ("MCS_LOG_FORMAT", "json")],
    );
    for run in [by_flag, by_env] {
        assert_eq!(run.code, 1, "{}", run.stderr);
        let lines: Vec<serde_json::Value> = run
            .stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert!(lines.len() >= 2, "{}", run.stderr);
        assert_eq!(lines[0]["level"], "WARN", "a retry: {}", lines[0]);
        assert!(lines[0]["fields"]["message"].as_str().unwrap().contains("retrying in"));
        let last = lines.last().unwrap();
        assert_eq!(last["level"], "ERROR", "{last}");
        let message = last["fields"]["message"].as_str().unwrap();
        assert!(message.contains("--storage-connect-timeout-secs 2"), "{message}");
        assert!(message.contains("Connection refused"), "the cause chain: {message}");
    }
}

#[test]
fn an_unreachable_table_fails_with_exit_1() {
    let refused = RefusedPort::new();
    let closed = refused.url();
    let args = ["doctor", "--table", "t", "--region", "us-east-1", "--dynamodb-endpoint", &closed];
    let mut once = args.to_vec();
    once.extend(["--storage-connect-timeout-secs", "1"]);
    let run = admin(&once, None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(run.stderr.lines().all(|l| l.starts_with("mcs-admin: ")), "{}", run.stderr);
    // The call, the table, its region and endpoint, the root cause; no
    // SDK debug dump.
    assert!(
        run.stderr.contains(&format!("describe_table on table t in us-east-1 at {closed}: ")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("Connection refused"), "{}", run.stderr);
    assert!(!run.stderr.contains("DispatchFailure"), "{}", run.stderr);

    // With a connect timeout it retries, one line per failed attempt, then
    // gives up naming the flag.
    let started = Instant::now();
    let mut patient = args.to_vec();
    patient.extend(["--storage-connect-timeout-secs", "2"]);
    let run = admin(&patient, None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "gave up before the timeout: {}",
        run.stderr
    );
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(lines.len() >= 2, "{}", run.stderr);
    assert!(lines[0].contains("retrying in"), "{}", run.stderr);
    assert!(
        lines.last().unwrap().starts_with(
            "mcs-admin: storage did not answer within --storage-connect-timeout-secs 2: "
        ),
        "{}",
        run.stderr
    );
}

/// Issue 23, item 2: `MCS_STORAGE_CONNECT_TIMEOUT_SECS=0` tried once here
/// and waited for ever in mcs-registry; it waits for ever in both now.
#[test]
fn a_connect_timeout_of_zero_retries_until_storage_answers() {
    let refused = RefusedPort::new();
    let closed = refused.url();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcs-admin"))
        .args(["doctor", "--table", "t", "--region", "us-east-1", "--dynamodb-endpoint", &closed])
        .env_clear()
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("MCS_STORAGE_CONNECT_TIMEOUT_SECS", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(still_running, "gave up: {stderr}");
    assert!(stderr.lines().count() >= 2, "{stderr}");
    assert!(stderr.contains("(for ever: 0 --storage-connect-timeout-secs)"), "{stderr}");
}

#[test]
fn missing_credentials_and_region_are_named() {
    let refused = RefusedPort::new();
    let closed = refused.url();
    let run = admin_in(
        &["doctor", "--table", "t", "--region", "us-east-1", "--dynamodb-endpoint", &closed],
        None,
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "mcs-admin: storage: describe_table on table t in us-east-1 at {closed}: no AWS \
             credentials found (environment, profile, web identity, instance metadata)\n"
        )
    );
    let run = admin(&["doctor", "--table", "t", "--dynamodb-endpoint", &closed], None);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "one line: {}", run.stderr);
    assert!(run.stderr.contains("pass --region (or MCS_REGION)"), "{}", run.stderr);
}
