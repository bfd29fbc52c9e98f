//! The DynamoDB backend: [`DynamoStore`] on one table of a global table,
//! laid out as docs/design.md §3 says, created and evolved by [`migrate()`].
//!
//! ```text
//!  Registrar ─ put ──► one conditional PutItem (condition = mcs_core::decide)
//!                        └ refused: ALL_OLD image ─► decide ─► Applied/Stale/Owned
//!  Reader ─ read_changed_since(w) ─► one Query per shard on GSI `changes`
//!         ─ read_all ─────────────► parallel Scan, consistent, paginated
//!  mcs-admin ─ migrate ─► migrations/*.json, version in the META item
//! ```
//!
//! Files: `item` owns the item layout, `condition` the write rule as a
//! condition expression, `store` the [`Store`](crate::Store) impl, `migrate`
//! the table's migrations, `size` the item size limit every store
//! enforces, `errors` the mapping of SDK errors to
//! [`StoreError`] kinds, `facts` what DynamoDB says of the table, [`raw`]
//! item-level access for tools (mcs-admin).

mod condition;
mod errors;
mod facts;
pub(crate) mod item;
mod migrate;
pub mod raw;
mod size;
mod store;

pub use errors::{NO_CREDENTIALS, Target, cause};
pub use facts::{Replica, TableFacts};
pub(crate) use item::check_record_size;
pub use item::{PACKED_PAYLOAD_VERSION, PAYLOAD_VERSION, SHARDS, record_item_size};
pub use migrate::{
    AppliedMigration, INDEX_ACTIVE, INDEX_MISSING, MigrationReport, OLDEST_TABLE_VERSION,
    READS_CHANGE_STAMPS_FROM, RENEWALS_KEEP_CHANGED_AT_FROM, Runs, SCHEMA_VERSION, SchemaStamp,
    check_schema, compatibility_mode, indexes_declared_up_to, migrate,
};
pub use size::{DYNAMODB_ITEM_LIMIT, MAX_ITEM_BYTES};
pub use store::PageObserver;

use crate::StoreError;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How to reach the table and how hard to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamoConfig {
    /// The table's name.
    pub table: String,
    /// The AWS region of the replica to use; `None` takes it from the
    /// environment (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// Another endpoint than AWS's (DynamoDB Local, moto_server).
    pub endpoint: Option<String>,
    /// Segments of the parallel scan of [`Store::read_all`](crate::Store::read_all).
    pub scan_segments: u32,
    /// How long DynamoDB keeps an item past its lease or tombstone before
    /// TTL may delete it.
    pub retention: Duration,
    /// Attempts per request, the first included, with exponential backoff
    /// and jitter between them (the SDK's standard retry mode). Throttling,
    /// 5xx and network errors are retried; refused conditions are not.
    pub max_attempts: u32,
    /// The base of the exponential backoff between attempts.
    pub initial_backoff: Duration,
    /// Time limit of one attempt.
    pub attempt_timeout: Duration,
    /// Time limit of a whole call, its retries included: past it the call
    /// fails as unavailable, outcome `timeout`, logged.
    pub operation_timeout: Duration,
    /// Time limit of establishing a connection.
    pub connect_timeout: Duration,
}

/// The retention of [`DynamoConfig::new`]: one day.
pub(crate) const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

impl DynamoConfig {
    /// Defaults for `table`: 4 scan segments, one day of retention, 5
    /// attempts from 50 ms of backoff (DynamoDB's usual base, below the
    /// SDK's generic 1 s), 10 s per attempt, 20 s per call, 3 s to connect.
    pub fn new(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            region: None,
            endpoint: None,
            scan_segments: 4,
            retention: DEFAULT_RETENTION,
            max_attempts: 5,
            initial_backoff: Duration::from_millis(50),
            attempt_timeout: Duration::from_secs(10),
            operation_timeout: Duration::from_secs(20),
            connect_timeout: Duration::from_secs(3),
        }
    }
}

/// The [`Store`](crate::Store) on a DynamoDB table. Cheap to clone.
///
/// Build it with [`DynamoStore::connect`] (the default credential chain:
/// environment, profile, web identity/IRSA, IMDS) or, with credentials of
/// one's own, [`DynamoStore::from_sdk_config`]. It does not check the table;
/// call [`DynamoStore::ensure_schema`] at startup.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    /// The table, its region and endpoint, named by every error.
    target: std::sync::Arc<Target>,
    origin: String,
    scan_segments: u32,
    retention_ms: u64,
    /// The table's schema version as last read ([`DynamoStore::ensure_schema`],
    /// [`Store::refresh_schema`](crate::Store::refresh_schema)); 0 until
    /// then. Shared by clones: what one reads, every clone writes by.
    table_version: std::sync::Arc<AtomicU32>,
}

impl DynamoStore {
    /// Loads the AWS configuration from the environment and builds a store.
    pub async fn connect(config: DynamoConfig) -> Result<Self, StoreError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(region) = &config.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let sdk = loader.load().await;
        Self::from_sdk_config(&sdk, config)
    }

    /// Builds a store from an AWS configuration loaded by the caller; the
    /// retry, timeout, region and endpoint settings of `config` win.
    pub fn from_sdk_config(sdk: &SdkConfig, config: DynamoConfig) -> Result<Self, StoreError> {
        if config.scan_segments == 0 || config.scan_segments > 1_000_000 {
            return Err(StoreError::Other(format!(
                "scan segments must be 1 to 1000000, got {}",
                config.scan_segments
            )));
        }
        if config.max_attempts == 0 {
            return Err(StoreError::Other("max attempts must be at least 1".into()));
        }
        let retry = RetryConfig::standard()
            .with_max_attempts(config.max_attempts)
            .with_initial_backoff(config.initial_backoff);
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(config.connect_timeout)
            .operation_attempt_timeout(config.attempt_timeout)
            .operation_timeout(config.operation_timeout)
            .build();
        let mut builder = aws_sdk_dynamodb::config::Builder::from(sdk)
            .retry_config(retry)
            .timeout_config(timeouts);
        if let Some(region) = &config.region {
            builder = builder.region(Region::new(region.clone()));
        }
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        let service_config = builder.build();
        let Some(region) = service_config.region() else {
            return Err(StoreError::Other(
                "no AWS region: pass --region (or MCS_REGION), or set AWS_REGION or a profile's region"
                    .into(),
            ));
        };
        // The region names the items this store writes (see `item`).
        let origin = region.as_ref().to_owned();
        item::check_origin(&origin).map_err(StoreError::Other)?;
        let endpoint = config.endpoint.as_deref().or(sdk.endpoint_url());
        let target = Target::new(&config.table, &origin, endpoint);
        Ok(Self {
            client: Client::from_conf(service_config),
            target: std::sync::Arc::new(target),
            origin,
            scan_segments: config.scan_segments,
            retention_ms: u64::try_from(config.retention.as_millis()).unwrap_or(u64::MAX),
            table_version: std::sync::Arc::new(AtomicU32::new(0)),
        })
    }

    /// The SDK client, for tools that need more than the store offers.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.target.table
    }

    /// The table, its region and endpoint, as errors name them.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The region whose items this store writes: the origin in their sort
    /// keys.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether the table exists (DescribeTable): the first call a tool
    /// makes, and the one that tells an unreachable endpoint
    /// (`Unavailable`) from a missing table (`false`).
    pub async fn table_exists(&self) -> Result<bool, StoreError> {
        Ok(migrate::describe(&self.client, &self.target).await?.is_some())
    }

    /// [`migrate`] on this store's table, its errors naming the region and
    /// endpoint.
    pub async fn migrate(&self) -> Result<MigrationReport, StoreError> {
        migrate::migrate_target(&self.client, &self.target, None).await
    }

    /// [`DynamoStore::migrate`], stopping at version `to` (`None`: this
    /// binary's [`SCHEMA_VERSION`]); a table already there or beyond has
    /// nothing to apply. For rolling upgrades (docs/operations.md).
    pub async fn migrate_to(&self, to: Option<u32>) -> Result<MigrationReport, StoreError> {
        migrate::migrate_target(&self.client, &self.target, to).await
    }

    /// The schema version recorded in the table's META item; `None` when the
    /// table has none (never migrated). A missing table is `Schema`.
    pub async fn schema_version(&self) -> Result<Option<u32>, StoreError> {
        Ok(self.schema_stamp().await?.map(|s| s.version))
    }

    /// What the table's META item records; `None` when it has none.
    pub async fn schema_stamp(&self) -> Result<Option<SchemaStamp>, StoreError> {
        migrate::read_schema(&self.client, &self.target).await
    }

    /// Checks that this binary may use the table ([`check_schema`] with
    /// [`Runs::THIS_BINARY`]): from [`OLDEST_TABLE_VERSION`] (compatibility
    /// mode) to its schema version, or one additive migration ahead
    /// (N-1/N); returns the table's version, which the store then writes by
    /// ([`Store::renewals_keep_changed_at`](crate::Store::renewals_keep_changed_at)).
    /// `Missing` when the table does not exist, `Schema` when it is
    /// unmigrated or older, `SchemaTooNew`
    /// when a newer binary migrated it beyond that; the version last read
    /// is kept then.
    pub async fn ensure_schema(&self) -> Result<u32, StoreError> {
        let version = check_schema(self.schema_stamp().await?, Runs::THIS_BINARY, &self.target)?;
        self.table_version.store(version, Ordering::SeqCst);
        Ok(version)
    }

    /// The table's schema version as last read by
    /// [`DynamoStore::ensure_schema`] or `refresh_schema`; 0 before.
    pub fn table_version(&self) -> u32 {
        self.table_version.load(Ordering::SeqCst)
    }
}

/// Every call asks for its consumed capacity, to record it.
const CAPACITY: ReturnConsumedCapacity = ReturnConsumedCapacity::Total;

/// Records the duration and outcome of one call of `op` begun at `started`.
fn record_request_metrics(op: &'static str, started: Instant, outcome: &'static str) {
    crate::metrics::request(op, outcome, started.elapsed());
}
