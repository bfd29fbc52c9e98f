//! Opening the table named by the global flags, with the AWS default
//! credential chain (environment, profile, web identity/IRSA, instance
//! metadata), waiting for storage to answer (`--storage-connect-timeout-secs`),
//! and checking its schema before reading it.

use crate::UsageError;
use crate::cli::GlobalArgs;
use anyhow::Context as _;
use mcs_store::{Backoff, DynamoConfig, DynamoStore, StoreError};
use std::time::{Duration, Instant};

/// The first delay between attempts to reach storage, and the longest.
const CONNECT_BACKOFF: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(5));

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
    /// How long to retry reaching storage before giving up; zero: for ever.
    pub connect_timeout: Duration,
}

impl Location {
    /// The table of the global flags; `--table` is required.
    pub fn of(global: &GlobalArgs) -> anyhow::Result<Self> {
        let table = match global.store.table.as_deref().map(str::trim) {
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
            region: global.store.region.clone(),
            endpoint: global.store.dynamodb_endpoint.clone(),
            connect_timeout: Duration::from_secs(global.storage_connect_timeout_secs),
        })
    }

    /// `table` in `region`, for messages.
    pub fn describe(&self) -> String {
        match &self.region {
            Some(region) => format!("{} ({region})", self.table),
            None => self.table.clone(),
        }
    }

    /// A store on this table, once storage answers; `retention` sets the
    /// `ttl` of items it writes. While storage is unreachable (refused
    /// connections, timeouts: a DynamoDB Local still starting), it retries
    /// for up to the connect timeout, one line on stderr per failed attempt.
    pub async fn open(&self, retention: Duration) -> anyhow::Result<DynamoStore> {
        let mut config = DynamoConfig::new(&self.table);
        config.region = self.region.clone();
        config.endpoint = self.endpoint.clone();
        config.retention = retention;
        let store = DynamoStore::connect(config)
            .await
            .with_context(|| format!("connecting to table {}", self.describe()))?;
        let started = Instant::now();
        let mut backoff = Backoff::new(CONNECT_BACKOFF.0, CONNECT_BACKOFF.1);
        loop {
            match store.table_exists().await {
                Ok(_) => return Ok(store),
                Err(e) if e.is_unavailable() => {
                    let bound = mcs_store::args::connect_timeout(self.connect_timeout.as_secs());
                    let left = bound.map(|b| b.saturating_sub(started.elapsed()));
                    if left == Some(Duration::ZERO) {
                        return Err(e).with_context(|| {
                            format!(
                                "storage did not answer within --storage-connect-timeout-secs {}",
                                self.connect_timeout.as_secs()
                            )
                        });
                    }
                    let delay = backoff.next_delay().min(left.unwrap_or(Duration::MAX));
                    let left = match left {
                        Some(left) => format!("{}s left of", left.as_secs()),
                        None => "for ever: 0".to_owned(),
                    };
                    tracing::warn!(
                        "mcs-admin: {e}; retrying in {:.1}s ({left} --storage-connect-timeout-secs)",
                        delay.as_secs_f64(),
                    );
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
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
