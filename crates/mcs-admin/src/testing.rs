//! Unit tests that need a DynamoDB API: a store on a fresh, migrated table
//! at the tests' endpoint (mcs-testkit's `dynamo`, with its one rule for a
//! missing endpoint).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: fail loudly

use mcs_store::{DynamoConfig, DynamoStore};
use mcs_testkit::dynamo;

/// A store (region us-east-1) on a freshly migrated table of its own, or
/// `None` (after the endpoint rule's notice) when the test should skip.
pub(crate) async fn fresh_store(name: &str) -> Option<DynamoStore> {
    let endpoint = dynamo::dynamodb_endpoint()?;
    let sdk = dynamo::sdk_config(Some(&endpoint), dynamo::REGION).await;
    let table = dynamo::fresh_table(&endpoint, &format!("admin-unit-{name}")).await;
    Some(DynamoStore::from_sdk_config(&sdk, DynamoConfig::new(table)).unwrap())
}
