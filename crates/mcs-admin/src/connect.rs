//! Opening the table named by the global flags, with the AWS default
//! credential chain (environment, profile, web identity/IRSA, instance
//! metadata), and checking its schema before reading it.

use crate::UsageError;
use crate::cli::GlobalArgs;
use anyhow::Context as _;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use mcs_store::{DynamoConfig, DynamoStore, StoreError};
use std::time::Duration;

/// Where a table is: name, region and endpoint (each its own field in
/// JSON and YAML).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// The table's name.
    pub table: String,
    /// Its region; `None` takes the AWS default chain's.
    pub region: Option<String>,
    /// An endpoint override.
    pub endpoint: Option<String>,
}

impl Location {
    /// The table of the global flags; `--table` is required.
    pub fn of(global: &GlobalArgs) -> anyhow::Result<Self> {
        let table = match global.table.as_deref().map(str::trim) {
            Some(table) if !table.is_empty() => table.to_owned(),
            _ => {
                return Err(UsageError {
                    kind: clap::error::ErrorKind::MissingRequiredArgument,
                    message: "the following required argument was not provided: --table <TABLE> \
                              (or MCS_TABLE)"
                        .to_owned(),
                }
                .into());
            }
        };
        Ok(Self {
            table,
            region: global.region.clone(),
            endpoint: global.dynamodb_endpoint.clone(),
        })
    }

    /// `table` in `region`, for messages.
    pub fn describe(&self) -> String {
        match &self.region {
            Some(region) => format!("{} ({region})", self.table),
            None => self.table.clone(),
        }
    }

    /// A store on this table; `retention` sets the `ttl` of items it writes.
    pub async fn open(&self, retention: Duration) -> anyhow::Result<DynamoStore> {
        let mut config = DynamoConfig::new(&self.table);
        config.region = self.region.clone();
        config.endpoint = self.endpoint.clone();
        config.retention = retention;
        DynamoStore::connect(config)
            .await
            .with_context(|| format!("connecting to table {}", self.describe()))
    }
}

/// Refuses to read a table that is missing, unmigrated, behind, or ahead of
/// this binary (whose reading of it could be wrong): the registry refuses
/// the same tables at startup.
pub async fn ensure_schema(store: &DynamoStore) -> anyhow::Result<()> {
    match store.ensure_schema().await {
        Ok(_) => Ok(()),
        Err(StoreError::SchemaTooNew { found, known }) => Err(anyhow::anyhow!(
            "table {} is at schema version {found}, newer than this mcs-admin knows ({known}): \
             upgrade mcs-admin",
            store.table()
        )),
        Err(e) => Err(e.into()),
    }
}

/// A failed SDK call `op` on `table`, as a readable error.
pub fn sdk_error<E, R>(op: &str, table: &str, err: SdkError<E, R>) -> anyhow::Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    if err.as_service_error().and_then(|e| e.code()) == Some("ResourceNotFoundException") {
        return anyhow::anyhow!("{op} on {table}: no such table (run mcs-admin migrate)");
    }
    anyhow::anyhow!("{op} on {table}: {}", DisplayErrorContext(&err))
}
