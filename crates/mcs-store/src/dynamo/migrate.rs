//! The table's migrations: versioned files in `migrations/` at the
//! repository root (format in `migrations/README.md`), embedded in the
//! binary and applied in order by [`migrate`], and the repair of a table
//! that drifted from what they declare.
//!
//! ```text
//!  DescribeTable ─► META version (none: 0) ─► newer than SCHEMA_VERSION? refuse
//!        ├─► for each migration above it: apply its steps idempotently
//!        │   (CreateTable + wait for ACTIVE, UpdateTimeToLive), then record
//!        │   its version and compatible_from in META (conditional: never lowered)
//!        └─► repair drift from what the migrations declare: the stream
//!            (UpdateTable), each index (UpdateTable, create), TTL
//! ```
//!
//! N-1/N: each migration declares whether it is `additive` (binaries of the
//! version before may go on reading and writing the table). The META item
//! records `compatible_from`, the lowest version that may use the table,
//! and [`check_schema`] accepts a table one additive migration ahead.

use super::errors::{self, Target};
use super::item::{self, META_COMPATIBLE_FROM, META_VERSION};
use crate::StoreError;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, CreateGlobalSecondaryIndexAction,
    GlobalSecondaryIndex, GlobalSecondaryIndexUpdate, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType, TableDescription,
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

/// What the META item of a table records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaStamp {
    /// The schema version of the last migration applied.
    pub version: u32,
    /// The lowest schema version whose binaries may use the table:
    /// `version - 1` when the last migration was additive, else `version`.
    pub compatible_from: u32,
}

/// Whether a binary of schema version `known` may use a table stamped
/// `stamp`: at its own version, or one additive migration ahead (N-1/N).
/// Returns the table's version; the errors name `target` and the fix.
pub fn check_schema(
    stamp: Option<SchemaStamp>,
    known: u32,
    target: &Target,
) -> Result<u32, StoreError> {
    match stamp {
        None => Err(StoreError::Schema(format!(
            "{target} has no schema version: run mcs-admin migrate"
        ))),
        Some(s) if s.version == known => Ok(s.version),
        Some(s) if s.version < known => Err(StoreError::Schema(format!(
            "{target} is at schema version {}, this binary needs {known}: run mcs-admin migrate",
            s.version
        ))),
        Some(s) if s.compatible_from <= known => Ok(s.version),
        Some(s) => Err(StoreError::SchemaTooNew { found: s.version, known }),
    }
}

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
    /// What was repaired because the table had drifted from what its
    /// migrations declare (TTL, stream, index), e.g. `enabled ttl on ttl`.
    pub repaired: Vec<String>,
}

impl MigrationReport {
    /// Whether the table already was at this binary's version, as declared.
    pub fn is_up_to_date(&self) -> bool {
        self.applied.is_empty() && self.repaired.is_empty()
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
        if self.applied.is_empty() {
            writeln!(
                f,
                "table {} is at schema version {}: repaired what had drifted from it",
                self.table, self.to_version
            )?;
        } else {
            let from = self.from_version.map_or_else(|| "none".to_owned(), |v| v.to_string());
            writeln!(f, "table {}: schema version {from} -> {}", self.table, self.to_version)?;
            for m in &self.applied {
                writeln!(f, "  {:04} {}: {}", m.version, m.description, m.actions.join("; "))?;
            }
        }
        for action in &self.repaired {
            writeln!(f, "  repaired: {action}")?;
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

/// Brings `table` to [`SCHEMA_VERSION`]: creates it if absent, applies
/// every migration above the version its META item records, and repairs
/// what drifted from what the migrations declare. Idempotent: a second run
/// does nothing. A table at a newer version than this binary knows is left
/// alone and reported as [`StoreError::SchemaTooNew`].
///
/// Errors name the client's region but not its endpoint, which the client
/// does not tell: [`DynamoStore::migrate`](super::DynamoStore::migrate)
/// names both.
pub async fn migrate(client: &Client, table: &str) -> Result<MigrationReport, StoreError> {
    let region = client.config().region().map_or("no region", |r| r.as_ref());
    let target = Target::new(table, region, Some("the client's endpoint"));
    run(client, &target, &migrations()?).await
}

/// [`migrate`] with the embedded migrations, on `target`.
pub(crate) async fn migrate_target(
    client: &Client,
    target: &Target,
) -> Result<MigrationReport, StoreError> {
    run(client, target, &migrations()?).await
}

/// Applies `migrations` (versions 1, 2, … in order) to `target`, then
/// repairs drift from what they declare.
async fn run(
    client: &Client,
    target: &Target,
    migrations: &[Migration],
) -> Result<MigrationReport, StoreError> {
    let known = migrations.last().map_or(0, |m| m.version);
    let from_version = if describe(client, target).await?.is_some() {
        read_schema(client, target).await?.map(|s| s.version)
    } else {
        None
    };
    let current = from_version.unwrap_or(0);
    if current > known {
        return Err(StoreError::SchemaTooNew { found: current, known });
    }
    let mut applied = Vec::new();
    for migration in migrations.iter().filter(|m| m.version > current) {
        let mut actions = Vec::new();
        for step in &migration.steps {
            actions.push(step.apply(client, target).await?);
        }
        let stamp = SchemaStamp {
            version: migration.version,
            compatible_from: compatible_from(migrations, migration.version),
        };
        record_version(client, target, stamp).await?;
        info!(table = target.table, version = migration.version, actions = ?actions, "applied migration");
        applied.push(AppliedMigration {
            version: migration.version,
            description: migration.description.clone(),
            actions,
        });
    }
    let repaired = repair(client, target, &Declared::of(migrations)).await?;
    if !repaired.is_empty() {
        info!(table = target.table, repaired = ?repaired, "repaired drift from the schema");
    }
    Ok(MigrationReport {
        table: target.table.clone(),
        from_version,
        to_version: applied.last().map_or(current, |m| m.version),
        applied,
        repaired,
    })
}

/// The lowest version whose binaries may use a table at `version` of
/// `migrations`: the one before when the migration to `version` is
/// additive, else `version` itself (N-1/N, never further back).
fn compatible_from(migrations: &[Migration], version: u32) -> u32 {
    let additive = migrations.iter().find(|m| m.version == version).is_some_and(|m| m.additive);
    if additive { version.saturating_sub(1) } else { version }
}

/// What the META item of `target` records, if anything.
pub(crate) async fn read_schema(
    client: &Client,
    target: &Target,
) -> Result<Option<SchemaStamp>, StoreError> {
    const OP: &str = "get_schema";
    let started = std::time::Instant::now();
    let out = client
        .get_item()
        .table_name(&target.table)
        .set_key(Some(item::meta_key()))
        .consistent_read(true)
        .return_consumed_capacity(super::CAPACITY)
        .send()
        .await
        .map_err(|e| {
            super::record_request_metrics(OP, started, "error");
            errors::from_sdk(OP, target, e)
        })?;
    super::record_request_metrics(OP, started, "ok");
    if let Some(units) = out.consumed_capacity().and_then(|c| c.capacity_units()) {
        crate::metrics::read_units(OP, units);
    }
    out.item
        .map(|found| {
            let version = item::meta_version(&found)?;
            let compatible_from = item::meta_compatible_from(&found)?.unwrap_or(version);
            Ok(SchemaStamp { version, compatible_from })
        })
        .transpose()
        .map_err(|e: String| StoreError::Corrupt(format!("schema item of {target}: {e}")))
}

/// The table's description; `None` when it does not exist.
pub(crate) async fn describe(
    client: &Client,
    target: &Target,
) -> Result<Option<TableDescription>, StoreError> {
    match client.describe_table().table_name(&target.table).send().await {
        Ok(out) => Ok(out.table),
        Err(e) if errors::code(&e) == Some("ResourceNotFoundException") => Ok(None),
        Err(e) => Err(errors::from_sdk("describe_table", target, e)),
    }
}

/// Waits until the table is ACTIVE (after a create or an update).
async fn wait_active(client: &Client, target: &Target) -> Result<(), StoreError> {
    client
        .wait_until_table_exists()
        .table_name(&target.table)
        .wait(TABLE_ACTIVE_TIMEOUT)
        .await
        .map(|_| ())
        .map_err(|e| {
            StoreError::Unavailable(format!(
                "waiting for {target} to be ACTIVE: {}",
                errors::cause(&e)
            ))
        })
}

/// Records `stamp` in the META item unless a version at least as high is
/// already there (a concurrent or newer migrate).
async fn record_version(
    client: &Client,
    target: &Target,
    stamp: SchemaStamp,
) -> Result<(), StoreError> {
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let version = AttributeValue::N(stamp.version.to_string());
    let mut schema_item = item::meta_key();
    schema_item.insert(META_VERSION.to_owned(), version.clone());
    schema_item.insert(
        META_COMPATIBLE_FROM.to_owned(),
        AttributeValue::N(stamp.compatible_from.to_string()),
    );
    schema_item.insert("migrated_at_ms".to_owned(), AttributeValue::N(now_ms.to_string()));
    const OP: &str = "put_schema";
    let started = std::time::Instant::now();
    let result = client
        .put_item()
        .table_name(&target.table)
        .set_item(Some(schema_item))
        .condition_expression("attribute_not_exists(#version) OR #version < :version")
        .expression_attribute_names("#version", META_VERSION)
        .expression_attribute_values(":version", version)
        .return_consumed_capacity(super::CAPACITY)
        .send()
        .await;
    match result {
        Ok(out) => {
            super::record_request_metrics(OP, started, "ok");
            if let Some(units) = out.consumed_capacity().and_then(|c| c.capacity_units()) {
                crate::metrics::write_units(OP, units);
            }
            Ok(())
        }
        // A concurrent or newer migrate recorded at least this version.
        Err(e) if errors::code(&e) == Some("ConditionalCheckFailedException") => {
            super::record_request_metrics(OP, started, "refused");
            Ok(())
        }
        Err(e) => {
            super::record_request_metrics(OP, started, "error");
            Err(errors::from_sdk(OP, target, e))
        }
    }
}

/// A parsed migration, its steps as SDK inputs.
#[derive(Debug)]
struct Migration {
    version: u32,
    description: String,
    /// Binaries of the version before may go on using the table.
    additive: bool,
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
    /// Applies the step to the table unless it is already in effect; says
    /// what it did.
    async fn apply(&self, client: &Client, target: &Target) -> Result<String, StoreError> {
        match self {
            Step::CreateTable {
                attribute_definitions,
                key_schema,
                global_secondary_indexes,
                billing_mode,
                stream_specification,
            } => {
                let action = if describe(client, target).await?.is_some() {
                    "table already existed"
                } else {
                    let created = client
                        .create_table()
                        .table_name(&target.table)
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
                        Err(e) => return Err(errors::from_sdk("create_table", target, e)),
                    }
                };
                wait_active(client, target).await?;
                Ok(action.to_owned())
            }
            Step::UpdateTimeToLive(spec) => Ok(set_ttl(client, target, spec).await?.0),
        }
    }
}

/// Puts TTL in the state `spec` says unless it already is; says what it
/// did and whether it changed anything.
async fn set_ttl(
    client: &Client,
    target: &Target,
    spec: &TimeToLiveSpecification,
) -> Result<(String, bool), StoreError> {
    let attribute = spec.attribute_name();
    let described = client
        .describe_time_to_live()
        .table_name(&target.table)
        .send()
        .await
        .map_err(|e| errors::from_sdk("describe_time_to_live", target, e))?;
    let current = described.time_to_live_description();
    let status = current.and_then(|d| d.time_to_live_status());
    let on = matches!(status, Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling));
    let same_attribute = current.and_then(|d| d.attribute_name()) == Some(attribute);
    if spec.enabled() && on && same_attribute {
        return Ok((format!("ttl already enabled on {attribute}"), false));
    }
    if !spec.enabled() && !on {
        return Ok(("ttl already disabled".to_owned(), false));
    }
    client
        .update_time_to_live()
        .table_name(&target.table)
        .time_to_live_specification(spec.clone())
        .send()
        .await
        .map_err(|e| errors::from_sdk("update_time_to_live", target, e))?;
    let action = if spec.enabled() {
        format!("enabled ttl on {attribute}")
    } else {
        format!("disabled ttl on {attribute}")
    };
    Ok((action, true))
}

/// What the migrations declare the table to have once all are applied:
/// what `migrate` puts back when the table drifted from it.
#[derive(Debug, Default)]
struct Declared {
    attribute_definitions: Vec<AttributeDefinition>,
    indexes: Vec<GlobalSecondaryIndex>,
    stream: Option<StreamSpecification>,
    ttl: Option<TimeToLiveSpecification>,
}

impl Declared {
    fn of(migrations: &[Migration]) -> Self {
        let mut declared = Self::default();
        for step in migrations.iter().flat_map(|m| &m.steps) {
            match step {
                Step::CreateTable {
                    attribute_definitions,
                    global_secondary_indexes,
                    stream_specification,
                    ..
                } => {
                    declared.attribute_definitions = attribute_definitions.clone();
                    declared.indexes = global_secondary_indexes.clone();
                    declared.stream = stream_specification.clone();
                }
                Step::UpdateTimeToLive(spec) => declared.ttl = Some(spec.clone()),
            }
        }
        declared
    }
}

/// Puts back what drifted from `declared`: the stream, missing indexes,
/// TTL. Says what it did; nothing when nothing drifted.
async fn repair(
    client: &Client,
    target: &Target,
    declared: &Declared,
) -> Result<Vec<String>, StoreError> {
    let Some(table) = describe(client, target).await? else {
        return Err(StoreError::Schema(format!("{target}: the table does not exist")));
    };
    let mut actions = Vec::new();
    if let Some(want) = &declared.stream
        && let Some(action) =
            repair_stream(client, target, table.stream_specification(), want).await?
    {
        actions.push(action);
    }
    for index in &declared.indexes {
        let name = index.index_name();
        if table.global_secondary_indexes().iter().any(|g| g.index_name() == Some(name)) {
            continue;
        }
        create_index(client, target, &declared.attribute_definitions, index).await?;
        actions.push(format!(
            "creating index {name} (DynamoDB backfills it; doctor reports it ACTIVE when done)"
        ));
    }
    if let Some(spec) = &declared.ttl {
        let (action, changed) = set_ttl(client, target, spec).await?;
        if changed {
            actions.push(action);
        }
    }
    Ok(actions)
}

/// Puts the stream in the state `want` says, if it is not; a stream of
/// another view type is turned off, then on with the right one (DynamoDB
/// cannot change a stream's view type).
async fn repair_stream(
    client: &Client,
    target: &Target,
    current: Option<&StreamSpecification>,
    want: &StreamSpecification,
) -> Result<Option<String>, StoreError> {
    let on = current.is_some_and(StreamSpecification::stream_enabled);
    let view = current.and_then(StreamSpecification::stream_view_type);
    if want.stream_enabled() == on && (!on || view == want.stream_view_type()) {
        return Ok(None);
    }
    let update = async |spec: StreamSpecification| {
        client
            .update_table()
            .table_name(&target.table)
            .stream_specification(spec)
            .send()
            .await
            .map_err(|e| errors::from_sdk("update_table", target, e))?;
        wait_active(client, target).await
    };
    let off = || StreamSpecification::builder().stream_enabled(false).build();
    if !want.stream_enabled() {
        update(off().map_err(|e| StoreError::Other(e.to_string()))?).await?;
        return Ok(Some("disabled stream".to_owned()));
    }
    let want_view = want.stream_view_type().map_or("no view type", StreamViewType::as_str);
    let action = if on {
        update(off().map_err(|e| StoreError::Other(e.to_string()))?).await?;
        let was = view.map_or("no view type", StreamViewType::as_str);
        format!("re-enabled stream with {want_view} (was {was})")
    } else {
        format!("enabled stream with {want_view}")
    };
    update(want.clone()).await?;
    Ok(Some(action))
}

/// Creates the missing global secondary index `index` (on-demand table).
async fn create_index(
    client: &Client,
    target: &Target,
    attributes: &[AttributeDefinition],
    index: &GlobalSecondaryIndex,
) -> Result<(), StoreError> {
    let keys: Vec<&str> = index.key_schema().iter().map(KeySchemaElement::attribute_name).collect();
    let used: Vec<AttributeDefinition> =
        attributes.iter().filter(|a| keys.contains(&a.attribute_name())).cloned().collect();
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(index.index_name())
        .set_key_schema(Some(index.key_schema().to_vec()))
        .set_projection(index.projection().cloned())
        .build()
        .map_err(|e| StoreError::Other(format!("index {}: {e}", index.index_name())))?;
    client
        .update_table()
        .table_name(&target.table)
        .set_attribute_definitions(Some(used))
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder().create(create).build(),
        )
        .send()
        .await
        .map_err(|e| errors::from_sdk("update_table", target, e))?;
    wait_active(client, target).await
}

/// The embedded migrations, parsed and checked: versions 1, 2, … in order.
fn migrations() -> Result<Vec<Migration>, StoreError> {
    parse(FILES)
}

/// `files` (name, text) parsed and checked: versions 1, 2, … in order.
fn parse(files: &[(&str, &str)]) -> Result<Vec<Migration>, StoreError> {
    let mut parsed = Vec::with_capacity(files.len());
    for (i, (name, text)) in files.iter().enumerate() {
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
        parsed.push(Migration {
            version: file.version,
            description: file.description,
            additive: file.additive,
            steps,
        });
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
        /// Required: every migration says whether binaries of the version
        /// before it may go on using the table.
        pub(super) additive: bool,
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

    /// The embedded migrations, then synthetic ones: `(additive, ttl on?)`
    /// each, an UpdateTimeToLive step on `ttl`.
    fn with_synthetic(extra: &[bool]) -> Vec<Migration> {
        let texts: Vec<(String, String)> = extra
            .iter()
            .enumerate()
            .map(|(i, additive)| {
                let version = FILES.len() + 1 + i;
                let text = format!(
                    r#"{{"version":{version},"description":"synthetic","additive":{additive},
                    "steps":[{{"UpdateTimeToLive":{{"TimeToLiveSpecification":
                    {{"AttributeName":"ttl","Enabled":true}}}}}}]}}"#
                );
                (format!("{version:04}_synthetic.json"), text)
            })
            .collect();
        let mut files: Vec<(&str, &str)> = FILES.to_vec();
        files.extend(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())));
        parse(&files).unwrap()
    }

    fn target() -> Target {
        Target::new("t", "us-east-1", Some("http://localhost:8000"))
    }

    #[test]
    fn every_migration_declares_whether_it_is_additive() {
        let missing = r#"{"version":1,"description":"x","steps":[]}"#;
        let err = serde_json::from_str::<file::Migration>(missing).unwrap_err();
        assert!(err.to_string().contains("additive"), "{err}");
        assert!(!migrations().unwrap()[0].additive, "creating the table is not additive");
    }

    #[test]
    fn a_binary_accepts_a_table_one_additive_migration_ahead() {
        // N = SCHEMA_VERSION; N+1 additive, N+2 not, N+3 additive.
        let all = with_synthetic(&[true, false, true]);
        let n = SCHEMA_VERSION;
        assert_eq!(compatible_from(&all, n + 1), n, "additive: N binaries may use it");
        assert_eq!(compatible_from(&all, n + 2), n + 2, "not additive");
        assert_eq!(compatible_from(&all, n + 3), n + 2, "one step back, never further");
        assert_eq!(compatible_from(&all, 1), 1, "creating the table");
        let stamp = |version| {
            Some(SchemaStamp { version, compatible_from: compatible_from(&all, version) })
        };
        // What a binary of version N says of each table.
        assert_eq!(check_schema(stamp(n), n, &target()).unwrap(), n);
        assert_eq!(check_schema(stamp(n + 1), n, &target()).unwrap(), n + 1);
        for ahead in [n + 2, n + 3] {
            let refused = check_schema(stamp(ahead), n, &target()).unwrap_err();
            assert!(
                matches!(refused, StoreError::SchemaTooNew { found, known } if found == ahead && known == n),
                "{refused:?}"
            );
            assert!(refused.to_string().contains("upgrade this binary"), "{refused}");
        }
        // A binary of N+2 on a table at N+3 (additive over N+2): accepted.
        assert_eq!(check_schema(stamp(n + 3), n + 2, &target()).unwrap(), n + 3);
        // Behind, or never migrated: run migrate, naming where.
        let behind = check_schema(stamp(n), n + 1, &target()).unwrap_err().to_string();
        assert!(behind.contains("table t in us-east-1 at http://localhost:8000"), "{behind}");
        assert!(behind.contains("run mcs-admin migrate"), "{behind}");
        let none = check_schema(None, n, &target()).unwrap_err().to_string();
        assert!(none.contains("no schema version"), "{none}");
        // A stamp from before compatible_from existed: its own version only.
        let old = Some(SchemaStamp { version: n + 1, compatible_from: n + 1 });
        assert!(matches!(check_schema(old, n, &target()), Err(StoreError::SchemaTooNew { .. })));
    }

    #[test]
    fn the_declared_state_is_what_the_migrations_leave() {
        let declared = Declared::of(&migrations().unwrap());
        assert_eq!(declared.indexes[0].index_name(), item::CHANGES_INDEX);
        assert_eq!(
            declared.stream.as_ref().unwrap().stream_view_type(),
            Some(&StreamViewType::NewAndOldImages)
        );
        assert_eq!(declared.ttl.as_ref().unwrap().attribute_name(), item::TTL);
        assert!(declared.attribute_definitions.iter().any(|a| a.attribute_name() == "shard"));
    }

    /// Against moto (skipped without one, failing where required): a
    /// synthetic additive migration N+1 applied by a binary that knows it
    /// leaves a table that a binary of N still accepts.
    #[tokio::test]
    async fn an_additive_migration_leaves_the_table_usable_by_the_version_before() {
        use mcs_testkit::dynamo;
        let Some(endpoint) = crate::testsuite::dynamodb_endpoint() else { return };
        let client = dynamo::client(&endpoint, dynamo::REGION);
        let table = dynamo::unique_table("unit-additive");
        let target = Target::new(&table, dynamo::REGION, Some(&endpoint));
        let n = SCHEMA_VERSION;
        run(&client, &target, &migrations().unwrap()).await.unwrap();
        let next = run(&client, &target, &with_synthetic(&[true])).await.unwrap();
        assert_eq!(next.to_version, n + 1);
        assert_eq!(next.applied[0].actions, vec!["ttl already enabled on ttl".to_owned()]);
        let stamp = read_schema(&client, &target).await.unwrap();
        assert_eq!(stamp, Some(SchemaStamp { version: n + 1, compatible_from: n }));
        assert_eq!(check_schema(stamp, n, &target).unwrap(), n + 1, "N accepts N+1");
        // The binary of N leaves it alone (it cannot migrate what it does
        // not know), and a non-additive N+2 shuts N out.
        let old = run(&client, &target, &migrations().unwrap()).await.unwrap_err();
        assert!(matches!(old, StoreError::SchemaTooNew { .. }), "{old:?}");
        run(&client, &target, &with_synthetic(&[true, false])).await.unwrap();
        let stamp = read_schema(&client, &target).await.unwrap();
        for old in [n, n + 1] {
            let refused = check_schema(stamp, old, &target);
            assert!(matches!(refused, Err(StoreError::SchemaTooNew { .. })), "{old}: {refused:?}");
        }
        assert_eq!(check_schema(stamp, n + 2, &target).unwrap(), n + 2);
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
        let typo = r#"{"version":1,"description":"x","additive":true,"steps":[{"UpdateTimeToLive":
            {"TimeToLiveSpecification":{"AttributeName":"ttl","Enabled":true,"Extra":1}}}]}"#;
        assert!(serde_json::from_str::<file::Migration>(typo).is_err());
        let bad_type = r#"{"version":1,"description":"x","additive":false,"steps":[{"CreateTable":
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
