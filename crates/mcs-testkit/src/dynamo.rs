//! DynamoDB for tests: where the endpoint comes from (one rule), tables of
//! a test's own, and SDK clients with static test credentials.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The endpoint of the DynamoDB tests (`MCS_TEST_DYNAMODB_ENDPOINT`, which
/// `scripts/with-moto.sh` sets): the one rule every test tree uses.
pub use mcs_store::testsuite::dynamodb_endpoint;

/// The region of the tests' tables unless a test names another.
pub const REGION: &str = "us-east-1";

/// A name no other test, and no earlier run on the same server, uses:
/// `{prefix}-{pid}-{nanos}-{n}`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

/// A table name of its own, for a table not created yet.
pub fn unique_table(name: &str) -> String {
    unique_name(&format!("mcs-test-{name}"))
}

/// The SDK configuration of the tests: `region`, static test credentials
/// and, when given, `endpoint`.
pub async fn sdk_config(endpoint: Option<&str>, region: &str) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .credentials_provider(test_credentials());
    if let Some(endpoint) = endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

fn test_credentials() -> Credentials {
    Credentials::new("test", "test", None, None, "static")
}

/// A DynamoDB client for `region` of the server at `endpoint`, built
/// without loading anything from the environment.
pub fn client(endpoint: &str, region: &str) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .credentials_provider(test_credentials())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// A DynamoDB Streams client for `region` of the server at `endpoint`.
pub fn streams_client(endpoint: &str, region: &str) -> aws_sdk_dynamodbstreams::Client {
    use aws_sdk_dynamodbstreams::config as c;
    let config = aws_sdk_dynamodbstreams::Config::builder()
        .behavior_version(c::BehaviorVersion::latest())
        .region(c::Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .credentials_provider(c::Credentials::new("test", "test", None, None, "static"))
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

/// Creates `table` in `region` of `endpoint` with the migrations.
pub async fn migrate_table_in(endpoint: &str, region: &str, table: &str) {
    mcs_store::dynamo::migrate(&client(endpoint, region), table)
        .await
        .unwrap_or_else(|e| panic!("migrating {table} in {region}: {e}"));
}

/// Creates `table` in [`REGION`] of `endpoint` with the migrations.
pub async fn migrate_table(endpoint: &str, table: &str) {
    migrate_table_in(endpoint, REGION, table).await;
}

/// Creates and migrates a table of its own, named after `name`, in
/// [`REGION`] of `endpoint`; its name.
pub async fn fresh_table(endpoint: &str, name: &str) -> String {
    let table = unique_table(name);
    migrate_table(endpoint, &table).await;
    table
}

/// A [`DynamoStore`](mcs_store::DynamoStore) on `table` in `region` of
/// `endpoint`, at the table's schema, to look at what a registry stored.
pub async fn store_in(endpoint: &str, region: &str, table: &str) -> mcs_store::DynamoStore {
    let sdk = sdk_config(Some(endpoint), region).await;
    let store = mcs_store::DynamoStore::from_sdk_config(&sdk, mcs_store::DynamoConfig::new(table))
        .unwrap_or_else(|e| panic!("a store on {table} in {region}: {e}"));
    store.ensure_schema().await.unwrap_or_else(|e| panic!("{table} in {region}: {e}"));
    store
}

/// Ten days: past the retention (two days by default) after the longest
/// lease (a day), so TTL may have deleted every leased item and tombstone
/// by then.
pub const TEN_DAYS: Duration = Duration::from_secs(10 * 86_400);

/// Deletes from `table` in `region` of `endpoint` every item DynamoDB's
/// TTL would have deleted once `later` has passed from now (each item
/// whose stored `ttl` that time has reached:
/// [`EmulatesTtl`](mcs_store::testsuite::EmulatesTtl)); how many.
pub async fn emulate_ttl(endpoint: &str, region: &str, table: &str, later: Duration) -> usize {
    use mcs_store::testsuite::EmulatesTtl;
    let then = SystemTime::now() + later;
    let then_ms = then.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let store = store_in(endpoint, region, table).await;
    let deleted = store.emulate_ttl(u64::try_from(then_ms).unwrap_or(u64::MAX)).await;
    deleted.unwrap_or_else(|e| panic!("TTL on {table} in {region}: {e}"))
}

/// Registry flags for `--storage dynamodb` on `table` in `region` at
/// `endpoint`.
pub fn registry_args_in(endpoint: &str, region: &str, table: &str) -> Vec<String> {
    ["--storage", "dynamodb", "--region", region, "--table", table, "--dynamodb-endpoint", endpoint]
        .map(str::to_owned)
        .to_vec()
}

/// Registry flags for `--storage dynamodb` on `table` in [`REGION`] at
/// `endpoint`.
pub fn registry_args(endpoint: &str, table: &str) -> Vec<String> {
    registry_args_in(endpoint, REGION, table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_store::testsuite::{ENDPOINT_ENV, REQUIRE_ENV};
    use std::process::{Command, Output};

    const CHILD: &str = "MCS_TESTKIT_ENDPOINT_RULE_CHILD";
    const EXPECT: &str = "MCS_TESTKIT_ENDPOINT_RULE_EXPECT";

    /// Runs only as the child of the test below, in an environment of its
    /// choosing: applies the endpoint rule and checks its answer.
    #[test]
    fn endpoint_rule_child() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let expected = std::env::var(EXPECT).ok().filter(|e| !e.is_empty());
        assert_eq!(dynamodb_endpoint(), expected);
    }

    /// This test binary running only [`endpoint_rule_child`], output
    /// captured as usual, with `env` and none of the rule's variables.
    fn child(env: &[(&str, &str)]) -> Output {
        let mut command = Command::new(std::env::current_exe().expect("this test binary"));
        command
            .args(["--exact", "dynamo::tests::endpoint_rule_child", "--test-threads=1"])
            .env(CHILD, "1")
            .env_remove(ENDPOINT_ENV)
            .env_remove(REQUIRE_ENV)
            .env_remove("CI");
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().expect("the test binary runs")
    }

    #[test]
    fn a_missing_endpoint_skips_with_a_visible_notice_unless_the_tests_are_required() {
        let skipped = child(&[(EXPECT, "")]);
        let stderr = String::from_utf8_lossy(&skipped.stderr);
        assert!(skipped.status.success(), "{skipped:?}");
        assert!(
            stderr.contains(&format!("notice: {ENDPOINT_ENV} is not set")),
            "the notice passes the test harness's capture: {stderr}"
        );
        for required in [(REQUIRE_ENV, "true"), ("CI", "true")] {
            let failed = child(&[required, (EXPECT, "")]);
            let stdout = String::from_utf8_lossy(&failed.stdout);
            assert!(!failed.status.success(), "{required:?} fails the test: {stdout}");
            assert!(stdout.contains("the DynamoDB tests are required"), "{required:?}: {stdout}");
        }
        let set = child(&[
            (ENDPOINT_ENV, "http://127.0.0.1:1"),
            (REQUIRE_ENV, "true"),
            (EXPECT, "http://127.0.0.1:1"),
        ]);
        assert!(set.status.success(), "{set:?}");
    }
}
