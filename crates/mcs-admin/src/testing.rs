//! Unit tests that need a DynamoDB API: the endpoint from
//! `MCS_TEST_DYNAMODB_ENDPOINT` (scripts/with-moto.sh sets it) and a store
//! on a fresh, migrated table. Without an endpoint such a test prints a
//! notice and passes, except under `CI=true`, where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fail loudly

use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::Credentials;
use mcs_store::{DynamoConfig, DynamoStore};

const ENDPOINT_ENV: &str = "MCS_TEST_DYNAMODB_ENDPOINT";

/// The test endpoint, or `None` (after a notice) when the test should skip.
pub(crate) fn endpoint() -> Option<String> {
    match std::env::var(ENDPOINT_ENV) {
        Ok(e) if !e.trim().is_empty() => Some(e),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "{ENDPOINT_ENV} is not set but CI=true: run the tests through scripts/with-moto.sh"
            )
        }
        _ => {
            eprintln!("notice: {ENDPOINT_ENV} is not set, skipping this DynamoDB test");
            None
        }
    }
}

/// A store (region us-east-1) on a freshly migrated table of its own.
pub(crate) async fn fresh_store(name: &str) -> Option<DynamoStore> {
    let endpoint = endpoint()?;
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(endpoint)
        .load()
        .await;
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let table = format!("mcs-admin-unit-{name}-{}-{nanos}", std::process::id());
    mcs_store::dynamo::migrate(&Client::new(&sdk), &table).await.unwrap();
    Some(DynamoStore::from_sdk_config(&sdk, DynamoConfig::new(table)).unwrap())
}
