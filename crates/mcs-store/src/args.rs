//! (feature `clap`) The command-line flags both binaries take to reach the
//! table and judge its records, defined once: [`StoreArgs`] (table, region,
//! endpoint, skew allowance) and [`RetentionArgs`], each `long` with its
//! `MCS_*` environment twin. mcs-registry flattens both into its flags;
//! mcs-admin flattens [`StoreArgs`] into its global flags and
//! [`RetentionArgs`] into the subcommands that take a retention. Each
//! binary checks them its own way (the registry refuses the table flags
//! with `--storage memory`; mcs-admin requires `--table`).
//!
//! `--storage-connect-timeout-secs` is not here, as its default differs
//! between the binaries (the registry waits for ever, mcs-admin 10 s); its
//! value means the same in both: [`connect_timeout`].

use clap::Args;
use mcs_core::lease::DEFAULT_RETENTION_SECS;
use std::time::Duration;

/// `--storage-connect-timeout-secs` as every binary reads it: how long to
/// retry storage that does not answer before giving up; 0 (`None`) waits
/// for ever.
pub fn connect_timeout(secs: u64) -> Option<Duration> {
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// An endpoint URL as the AWS SDK takes it: `http://` or `https://`, a
/// host, nothing after the path. Checked where it is parsed, so a missing
/// scheme exits 2 naming the flag instead of failing after retries.
pub fn endpoint_url(text: &str) -> Result<String, String> {
    let expected = "expected an http:// or https:// URL with a host, e.g. http://localhost:8000";
    let uri: http::Uri = text.parse().map_err(|e| format!("{e}: {expected}"))?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let host_ok = uri.host().is_some_and(|h| !h.is_empty());
    if !scheme_ok || !host_ok || uri.query().is_some() {
        return Err(expected.to_owned());
    }
    Ok(text.to_owned())
}

/// The table and how its records are judged. Global: with mcs-admin they
/// go before or after the subcommand.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StoreArgs {
    /// DynamoDB table: required by mcs-admin, and by mcs-registry with
    /// --storage dynamodb.
    #[arg(long, env = "MCS_TABLE", global = true)]
    pub table: Option<String>,

    /// AWS region of the table replica to use (else the AWS default chain's).
    #[arg(long, env = "MCS_REGION", global = true)]
    pub region: Option<String>,

    /// DynamoDB endpoint override, an http:// or https:// URL, e.g.
    /// DynamoDB Local or moto_server.
    #[arg(long, env = "MCS_DYNAMODB_ENDPOINT", global = true, value_parser = endpoint_url)]
    pub dynamodb_endpoint: Option<String>,

    /// How long past its expiry a lease is still served, for clock skew
    /// (mcs-admin: use the registry's value).
    #[arg(long, env = "MCS_SKEW_ALLOWANCE_MS", default_value_t = 1_000, global = true)]
    pub skew_allowance_ms: u64,
}

/// How long the dead are kept.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct RetentionArgs {
    /// How long tombstones and expired records are kept before storage may
    /// drop them (mcs-admin: use the registry's value); at least one day
    /// (the longest lease) plus twice the skew allowance, so a tombstone
    /// outlives every older record of its key.
    #[arg(long, env = "MCS_RETENTION_SECS", default_value_t = DEFAULT_RETENTION_SECS)]
    pub retention_secs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// Both groups, as mcs-registry flattens them.
    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        retention: RetentionArgs,
    }

    #[test]
    fn flags_env_twins_and_defaults_are_the_documented_ones() {
        // docs/configuration.md and docs/operations.md (mcs-admin).
        let command = Flags::command();
        for (long, env, default) in [
            ("table", "MCS_TABLE", None),
            ("region", "MCS_REGION", None),
            ("dynamodb-endpoint", "MCS_DYNAMODB_ENDPOINT", None),
            ("skew-allowance-ms", "MCS_SKEW_ALLOWANCE_MS", Some("1000")),
            ("retention-secs", "MCS_RETENTION_SECS", Some("172800")),
        ] {
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(long))
                .unwrap_or_else(|| panic!("--{long}"));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(env), "--{long}");
            let defaults: Vec<&str> =
                arg.get_default_values().iter().filter_map(|v| v.to_str()).collect();
            assert_eq!(defaults, default.into_iter().collect::<Vec<_>>(), "--{long}");
        }
        assert_eq!(DEFAULT_RETENTION_SECS, 172_800, "two days");
    }

    #[test]
    fn an_endpoint_is_a_url_with_a_scheme_and_a_host() {
        for good in [
            "http://localhost:8000",
            "https://dynamodb.us-east-1.amazonaws.com",
            "http://[::1]:8000/",
        ] {
            assert_eq!(endpoint_url(good).as_deref(), Ok(good));
        }
        for bad in ["localhost:8000", "ftp://host", "http://", "http://h:1/?x=1", "", "http//h"] {
            let err = endpoint_url(bad).unwrap_err();
            assert!(err.contains("expected an http:// or https:// URL"), "{bad}: {err}");
        }
        let err =
            Flags::try_parse_from(["x", "--dynamodb-endpoint", "localhost:8000"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--dynamodb-endpoint"), "{err}");
    }

    #[test]
    fn a_connect_timeout_of_zero_waits_for_ever() {
        assert_eq!(connect_timeout(0), None);
        assert_eq!(connect_timeout(3), Some(Duration::from_secs(3)));
    }

    #[test]
    fn the_flags_parse_into_the_groups() {
        let parsed = Flags::try_parse_from([
            "x",
            "--table=t",
            "--region=r",
            "--dynamodb-endpoint=http://e",
            "--skew-allowance-ms=5",
            "--retention-secs=90000",
        ])
        .unwrap();
        assert_eq!(
            parsed.store,
            StoreArgs {
                table: Some("t".into()),
                region: Some("r".into()),
                dynamodb_endpoint: Some("http://e".into()),
                skew_allowance_ms: 5,
            }
        );
        assert_eq!(parsed.retention, RetentionArgs { retention_secs: 90_000 });
        Flags::command().debug_assert();
    }
}
