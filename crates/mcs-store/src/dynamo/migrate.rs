//! The table's migrations: versioned files in `migrations/` at the
//! repository root (format in `migrations/README.md`), embedded in the
//! binary and applied in order by [`migrate`].
//!
//! ```text
//!  DescribeTable ─► META version (none: 0) ─► newer than SCHEMA_VERSION? refuse
//!        └─► for each migration above it: apply its steps idempotently
//!            (CreateTable + wait for ACTIVE, UpdateTimeToLive), then record
//!            its version in META (conditional: never lowered)
//! ```

use super::errors;
use super::item::{self, META_VERSION};
use crate::StoreError;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification, TimeToLiveStatus,
};
use serde::Deserialize;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::info;

/// The schema version this binary reads and writes: the last migration's.
pub const SCHEMA_VERSION: u32 = 1;

/// The migration files, in order.
const FILES: &[(&str, &str)] =
    &[("0001_create_table.json", include_str!("../../../../migrations/0001_create_table.json"))];

/// How long a new table may take to become ACTIVE.
const TABLE_ACTIVE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// What [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The table.
    pub table: String,
    /// The schema version found; `None` when the table or its META item
    /// did not exist.
    pub from_version: Option<u32>,
    /// The schema version now recorded.
    pub to_version: u32,
    /// The migrations applied, in order; empty when nothing was to do.
    pub applied: Vec<AppliedMigration>,
}

impl MigrationReport {
    /// Whether the table already was at this binary's version.
    pub fn is_up_to_date(&self) -> bool {
        self.applied.is_empty()
    }
}

impl fmt::Display for MigrationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_up_to_date() {
            return write!(
                f,
                "table {} is at schema version {}: nothing to do",
                self.table, self.to_version
            );
        }
        let from = self.from_version.map_or_else(|| "none".to_owned(), |v| v.to_string());
        writeln!(f, "table {}: schema version {from} -> {}", self.table, self.to_version)?;
        for m in &self.applied {
            writeln!(f, "  {:04} {}: {}", m.version, m.description, m.actions.join("; "))?;
        }
        Ok(())
    }
}

/// One migration [`migrate`] applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    /// Its version.
    pub version: u32,
    /// What it is for.
    pub description: String,
    /// What each step did, e.g. `created table` or `ttl already enabled on ttl`.
    pub actions: Vec<String>,
}

/// Brings `table` to [`SCHEMA_VERSION`]: creates it if absent and applies
/// every migration above the version its META item records. Idempotent: a
/// second run applies nothing. A table at a newer version than this binary
/// knows is left alone and reported as [`StoreError::SchemaTooNew`].
pub async fn migrate(client: &Client, table: &str) -> Result<MigrationReport, StoreError> {
    let migrations = migrations()?;
    let from_version = if table_exists(client, table).await? {
        read_schema_version(client, table).await?
    } else {
        None
    };
    let current = from_version.unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew { found: current, known: SCHEMA_VERSION });
    }
    let mut applied = Vec::new();
    for migration in migrations.into_iter().filter(|m| m.version > current) {
        let mut actions = Vec::new();
        for step in &migration.steps {
            actions.push(step.apply(client, table).await?);
        }
        record_version(client, table, migration.version).await?;
        info!(table, version = migration.version, actions = ?actions, "applied migration");
        applied.push(AppliedMigration {
            version: migration.version,
            description: migration.description,
            actions,
        });
    }
    Ok(MigrationReport {
        table: table.to_owned(),
        from_version,
        to_version: applied.last().map_or(current, |m| m.version),
        applied,
    })
}

/// The version recorded in the META item of `table`, if any.
pub(crate) async fn read_schema_version(
    client: &Client,
    table: &str,
) -> Result<Option<u32>, StoreError> {
    const OP: &str = "get_schema";
    let started = std::time::Instant::now();
    let out = client
        .get_item()
        .table_name(table)
        .set_key(Some(item::meta_key()))
        .consistent_read(true)
        .return_consumed_capacity(super::CAPACITY)
        .send()
        .await
        .map_err(|e| {
            super::observe(OP, started, "error");
            errors::from_sdk(OP, table, e)
        })?;
    super::observe(OP, started, "ok");
    if let Some(units) = out.consumed_capacity().and_then(|c| c.capacity_units()) {
        crate::metrics::read_units(OP, units);
    }
    out.item
        .map(|found| {
            item::meta_version(&found)
                .map_err(|e| StoreError::Corrupt(format!("schema item of {table}: {e}")))
        })
        .transpose()
}

async fn table_exists(client: &Client, table: &str) -> Result<bool, StoreError> {
    match client.describe_table().table_name(table).send().await {
        Ok(_) => Ok(true),
        Err(e) if errors::code(&e) == Some("ResourceNotFoundException") => Ok(false),
        Err(e) => Err(errors::from_sdk("describe_table", table, e)),
    }
}

/// Records `version` in the META item unless a version at least as high is
/// already there (a concurrent or newer migrate).
async fn record_version(client: &Client, table: &str, version: u32) -> Result<(), StoreError> {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let mut schema_item = item::meta_key();
    schema_item.insert(META_VERSION.to_owned(), AttributeValue::N(version.to_string()));
    schema_item.insert("migrated_at_ms".to_owned(), AttributeValue::N(now_ms.to_string()));
    const OP: &str = "put_schema";
    let started = std::time::Instant::now();
    let result = client
        .put_item()
        .table_name(table)
        .set_item(Some(schema_item))
        .condition_expression("attribute_not_exists(#version) OR #version < :version")
        .expression_attribute_names("#version", META_VERSION)
        .expression_attribute_values(":version", AttributeValue::N(version.to_string()))
        .return_consumed_capacity(super::CAPACITY)
        .send()
        .await;
    match result {
        Ok(out) => {
            super::observe(OP, started, "ok");
            if let Some(units) = out.consumed_capacity().and_then(|c| c.capacity_units()) {
                crate::metrics::write_units(OP, units);
            }
            Ok(())
        }
        // A concurrent or newer migrate recorded at least this version.
        Err(e) if errors::code(&e) == Some("ConditionalCheckFailedException") => {
            super::observe(OP, started, "refused");
            Ok(())
        }
        Err(e) => {
            super::observe(OP, started, "error");
            Err(errors::from_sdk(OP, table, e))
        }
    }
}

/// A parsed migration, its steps as SDK inputs.
#[derive(Debug)]
struct Migration {
    version: u32,
    description: String,
    steps: Vec<Step>,
}

#[derive(Debug)]
enum Step {
    CreateTable {
        attribute_definitions: Vec<AttributeDefinition>,
        key_schema: Vec<KeySchemaElement>,
        global_secondary_indexes: Vec<GlobalSecondaryIndex>,
        billing_mode: BillingMode,
        stream_specification: Option<StreamSpecification>,
    },
    UpdateTimeToLive(TimeToLiveSpecification),
}

impl Step {
    /// Applies the step to `table` unless it is already in effect; says
    /// what it did.
    async fn apply(&self, client: &Client, table: &str) -> Result<String, StoreError> {
        match self {
            Step::CreateTable {
                attribute_definitions,
                key_schema,
                global_secondary_indexes,
                billing_mode,
                stream_specification,
            } => {
                let action = if table_exists(client, table).await? {
                    "table already existed"
                } else {
                    let created = client
                        .create_table()
                        .table_name(table)
                        .set_attribute_definitions(Some(attribute_definitions.clone()))
                        .set_key_schema(Some(key_schema.clone()))
                        .set_global_secondary_indexes(
                            Some(global_secondary_indexes.clone()).filter(|g| !g.is_empty()),
                        )
                        .billing_mode(billing_mode.clone())
                        .set_stream_specification(stream_specification.clone())
                        .send()
                        .await;
                    match created {
                        Ok(_) => "created table",
                        // Another migrate is creating it right now.
                        Err(e) if errors::code(&e) == Some("ResourceInUseException") => {
                            "table being created by another migrate"
                        }
                        Err(e) => return Err(errors::from_sdk("create_table", table, e)),
                    }
                };
                client
                    .wait_until_table_exists()
                    .table_name(table)
                    .wait(TABLE_ACTIVE_TIMEOUT)
                    .await
                    .map_err(|e| {
                        StoreError::Unavailable(format!(
                            "waiting for table {table} to be ACTIVE: {}",
                            DisplayErrorContext(&e)
                        ))
                    })?;
                Ok(action.to_owned())
            }
            Step::UpdateTimeToLive(spec) => {
                let attribute = spec.attribute_name();
                let described = client
                    .describe_time_to_live()
                    .table_name(table)
                    .send()
                    .await
                    .map_err(|e| errors::from_sdk("describe_time_to_live", table, e))?;
                let current = described.time_to_live_description();
                let status = current.and_then(|d| d.time_to_live_status());
                let on =
                    matches!(status, Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling));
                let same_attribute = current.and_then(|d| d.attribute_name()) == Some(attribute);
                if spec.enabled() && on && same_attribute {
                    return Ok(format!("ttl already enabled on {attribute}"));
                }
                if !spec.enabled() && !on {
                    return Ok("ttl already disabled".to_owned());
                }
                client
                    .update_time_to_live()
                    .table_name(table)
                    .time_to_live_specification(spec.clone())
                    .send()
                    .await
                    .map_err(|e| errors::from_sdk("update_time_to_live", table, e))?;
                Ok(if spec.enabled() {
                    format!("enabled ttl on {attribute}")
                } else {
                    format!("disabled ttl on {attribute}")
                })
            }
        }
    }
}

/// The embedded migrations, parsed and checked: versions 1, 2, … in order.
fn migrations() -> Result<Vec<Migration>, StoreError> {
    let mut parsed = Vec::with_capacity(FILES.len());
    for (i, (name, text)) in FILES.iter().enumerate() {
        let invalid = |e: String| StoreError::Schema(format!("migration {name}: {e}"));
        let file: file::Migration =
            serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let want = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if file.version != want || !name.starts_with(&format!("{want:04}_")) {
            return Err(invalid(format!(
                "has version {}, expected {want} (and a file name starting {want:04}_)",
                file.version
            )));
        }
        let steps = file
            .steps
            .into_iter()
            .map(file::Step::into_sdk)
            .collect::<Result<_, String>>()
            .map_err(invalid)?;
        parsed.push(Migration { version: file.version, description: file.description, steps });
    }
    Ok(parsed)
}

/// The file format: each step's body is the request of the DynamoDB API
/// operation it names, without `TableName`.
mod file {
    use super::*;

    fn parse<T, E: fmt::Display>(
        what: &str,
        value: &str,
        f: fn(&str) -> Result<T, E>,
    ) -> Result<T, String> {
        f(value).map_err(|e| format!("{what}: {e}"))
    }

    fn build<T, E: fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
        r.map_err(|e| format!("{what}: {e}"))
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Migration {
        pub(super) version: u32,
        pub(super) description: String,
        pub(super) steps: Vec<Step>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) enum Step {
        CreateTable(CreateTable),
        UpdateTimeToLive(UpdateTimeToLive),
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    pub(super) struct CreateTable {
        attribute_definitions: Vec<Attribute>,
        key_schema: Vec<KeyElement>,
        #[serde(default)]
        global_secondary_indexes: Vec<Index>,
        billing_mode: String,
        stream_specification: Option<Stream>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    struct Attribute {
        attribute_name: String,
        attribute_type: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    struct KeyElement {
        attribute_name: String,
        key_type: String,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    struct Index {
        index_name: String,
        key_schema: Vec<KeyElement>,
        projection: IndexProjection,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    struct IndexProjection {
        projection_type: String,
        #[serde(default)]
        non_key_attributes: Vec<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    struct Stream {
        stream_enabled: bool,
        stream_view_type: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    pub(super) struct UpdateTimeToLive {
        time_to_live_specification: TimeToLive,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "PascalCase", deny_unknown_fields)]
    struct TimeToLive {
        attribute_name: String,
        enabled: bool,
    }

    fn key_schema(elements: Vec<KeyElement>) -> Result<Vec<KeySchemaElement>, String> {
        elements
            .into_iter()
            .map(|k| {
                build(
                    "KeySchema",
                    KeySchemaElement::builder()
                        .attribute_name(k.attribute_name)
                        .key_type(parse("KeyType", &k.key_type, KeyType::try_parse)?)
                        .build(),
                )
            })
            .collect()
    }

    impl Step {
        pub(super) fn into_sdk(self) -> Result<super::Step, String> {
            match self {
                Step::CreateTable(t) => Ok(super::Step::CreateTable {
                    attribute_definitions: t
                        .attribute_definitions
                        .into_iter()
                        .map(|a| {
                            build(
                                "AttributeDefinitions",
                                AttributeDefinition::builder()
                                    .attribute_name(a.attribute_name)
                                    .attribute_type(parse(
                                        "AttributeType",
                                        &a.attribute_type,
                                        ScalarAttributeType::try_parse,
                                    )?)
                                    .build(),
                            )
                        })
                        .collect::<Result<_, _>>()?,
                    key_schema: key_schema(t.key_schema)?,
                    global_secondary_indexes: t
                        .global_secondary_indexes
                        .into_iter()
                        .map(|g| {
                            let projection = Projection::builder()
                                .projection_type(parse(
                                    "ProjectionType",
                                    &g.projection.projection_type,
                                    ProjectionType::try_parse,
                                )?)
                                .set_non_key_attributes(
                                    Some(g.projection.non_key_attributes).filter(|a| !a.is_empty()),
                                )
                                .build();
                            build(
                                "GlobalSecondaryIndexes",
                                GlobalSecondaryIndex::builder()
                                    .index_name(g.index_name)
                                    .set_key_schema(Some(key_schema(g.key_schema)?))
                                    .projection(projection)
                                    .build(),
                            )
                        })
                        .collect::<Result<_, _>>()?,
                    billing_mode: parse("BillingMode", &t.billing_mode, BillingMode::try_parse)?,
                    stream_specification: t
                        .stream_specification
                        .map(|s| {
                            let view = s
                                .stream_view_type
                                .map(|v| parse("StreamViewType", &v, StreamViewType::try_parse))
                                .transpose()?;
                            build(
                                "StreamSpecification",
                                StreamSpecification::builder()
                                    .stream_enabled(s.stream_enabled)
                                    .set_stream_view_type(view)
                                    .build(),
                            )
                        })
                        .transpose()?,
                }),
                Step::UpdateTimeToLive(u) => Ok(super::Step::UpdateTimeToLive(build(
                    "TimeToLiveSpecification",
                    TimeToLiveSpecification::builder()
                        .attribute_name(u.time_to_live_specification.attribute_name)
                        .enabled(u.time_to_live_specification.enabled)
                        .build(),
                )?)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_migrations_parse_and_end_at_schema_version() {
        let all = migrations().unwrap();
        assert_eq!(all.last().unwrap().version, SCHEMA_VERSION);
        let Step::CreateTable {
            global_secondary_indexes, stream_specification, billing_mode, ..
        } = &all[0].steps[0]
        else {
            panic!("the first step creates the table");
        };
        assert_eq!(global_secondary_indexes[0].index_name(), item::CHANGES_INDEX);
        assert_eq!(*billing_mode, BillingMode::PayPerRequest);
        assert_eq!(
            stream_specification.as_ref().unwrap().stream_view_type(),
            Some(&StreamViewType::NewAndOldImages)
        );
        assert!(
            matches!(&all[0].steps[1], Step::UpdateTimeToLive(t) if t.attribute_name() == item::TTL)
        );
    }

    #[test]
    fn every_migration_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn unknown_fields_and_values_are_refused() {
        let typo = r#"{"version":1,"description":"x","steps":[{"UpdateTimeToLive":
            {"TimeToLiveSpecification":{"AttributeName":"ttl","Enabled":true,"Extra":1}}}]}"#;
        assert!(serde_json::from_str::<file::Migration>(typo).is_err());
        let bad_type = r#"{"version":1,"description":"x","steps":[{"CreateTable":
            {"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"Q"}],
             "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}}]}"#;
        let parsed: file::Migration = serde_json::from_str(bad_type).unwrap();
        let err = parsed
            .steps
            .into_iter()
            .map(file::Step::into_sdk)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert!(err.contains("AttributeType"), "{err}");
    }
}
