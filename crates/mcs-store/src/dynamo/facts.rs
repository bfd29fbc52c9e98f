//! What DynamoDB says of the table (DescribeTable, DescribeTimeToLive): its
//! status, its indexes, TTL, the stream and the replicas of a global table,
//! as plain values for tools (mcs-admin `describe` and `doctor`).

use super::DynamoStore;
use super::errors;
use super::migrate::{INDEX_MISSING, index_state};
use crate::StoreError;
use std::collections::BTreeMap;

/// What DynamoDB says of the table.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableFacts {
    /// Table status, e.g. `ACTIVE`.
    pub status: String,
    /// Every global secondary index of the table, by name, with its state:
    /// `ACTIVE`, `CREATING (backfilling)`, … (only `ACTIVE` may be queried).
    pub indexes: BTreeMap<String, String>,
    /// TTL status, e.g. `ENABLED`.
    pub ttl_status: String,
    /// The TTL attribute, if any.
    pub ttl_attribute: Option<String>,
    /// Whether the stream is on.
    pub stream_enabled: bool,
    /// Its view type, e.g. `NEW_AND_OLD_IMAGES`.
    pub stream_view_type: Option<String>,
    /// The latest stream's ARN.
    pub stream_arn: Option<String>,
    /// The replicas of a global table, with their status.
    pub replicas: Vec<Replica>,
}

/// One replica of a global table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Replica {
    /// Its region.
    pub region: String,
    /// Its status, e.g. `ACTIVE`.
    pub status: String,
}

impl TableFacts {
    /// The state of the index `name`: as [`TableFacts::indexes`] tells it,
    /// or `missing`.
    pub fn index_state(&self, name: &str) -> &str {
        self.indexes.get(name).map_or(INDEX_MISSING, String::as_str)
    }
}

impl DynamoStore {
    /// Asks DynamoDB about this store's table; a missing table is an error
    /// (`Schema`), as every call on it.
    pub async fn table_facts(&self) -> Result<TableFacts, StoreError> {
        let table = &self.target.table;
        let described = self
            .client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| errors::from_sdk("describe_table", &self.target, e))?;
        let ttl = self
            .client
            .describe_time_to_live()
            .table_name(table)
            .send()
            .await
            .map_err(|e| errors::from_sdk("describe_time_to_live", &self.target, e))?;
        let mut facts = TableFacts::default();
        if let Some(t) = described.table() {
            facts.status = t.table_status().map(|s| s.as_str().to_owned()).unwrap_or_default();
            facts.indexes = t
                .global_secondary_indexes()
                .iter()
                .map(|g| (g.index_name().unwrap_or_default().to_owned(), index_state(g)))
                .collect();
            if let Some(stream) = t.stream_specification() {
                facts.stream_enabled = stream.stream_enabled();
                facts.stream_view_type = stream.stream_view_type().map(|v| v.as_str().to_owned());
            }
            facts.stream_arn = t.latest_stream_arn().map(str::to_owned);
            facts.replicas = t
                .replicas()
                .iter()
                .map(|r| Replica {
                    region: r.region_name().unwrap_or_default().to_owned(),
                    status: r.replica_status().map(|s| s.as_str().to_owned()).unwrap_or_default(),
                })
                .collect();
        }
        let ttl = ttl.time_to_live_description();
        facts.ttl_status = ttl
            .and_then(|d| d.time_to_live_status())
            .map_or_else(|| "DISABLED".to_owned(), |s| s.as_str().to_owned());
        facts.ttl_attribute = ttl.and_then(|d| d.attribute_name()).map(str::to_owned);
        Ok(facts)
    }
}
