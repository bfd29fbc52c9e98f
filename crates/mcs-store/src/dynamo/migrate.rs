//! The table's migrations: versioned files in `migrations/` at the
//! repository root (format in `migrations/README.md`), embedded in the
//! binary and applied in order by [`migrate`], and the repair of a table
//! that drifted from what they declare.
//!
//! ```text
//!  DescribeTable ─► META version (none: 0) ─► newer than SCHEMA_VERSION? refuse
//!        ├─► for each migration above it: apply its steps idempotently
//!        │   (CreateTable + wait for ACTIVE, UpdateTable creating an index,
//!        │   UpdateTimeToLive), then record
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
    GlobalSecondaryIndex, GlobalSecondaryIndexDescription, GlobalSecondaryIndexUpdate,
    KeySchemaElement, KeyType, Projection, ProjectionType, ScalarAttributeType,
    StreamSpecification, StreamViewType, TableDescription, TimeToLiveSpecification,
    TimeToLiveStatus,
};
use serde::Deserialize;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::info;

/// The schema version this binary reads and writes: the last migration's.
pub const SCHEMA_VERSION: u32 = 5;

/// The oldest table version this binary runs on. Below its own it runs in
/// compatibility mode: on a table at 2 it reads `lease_ends` but its
/// renewals still move `changed_at_ms`, as the binaries of 1 that may still
/// share the table need; below 5 its delta polls read the whole lookback,
/// not its change stamps, while binaries of 3 may still write without them
/// (rolling upgrades: `migrate --to N`, roll the binaries, `migrate`;
/// docs/operations.md). Tables at 1 must be migrated first.
pub const OLDEST_TABLE_VERSION: u32 = 2;

/// The first schema version at which renewals keep `changed_at_ms`
/// (migration 0003): a store on a table at least this recent renews in
/// place ([`Store::renew`](crate::Store::renew)).
pub const RENEWALS_KEEP_CHANGED_AT_FROM: u32 = 3;

/// The first schema version at which readers check the writes behind their
/// window through the `change_stamps` index (migrations 0004 and 0005) and
/// read whole only those they lack
/// ([`Store::reads_change_stamps`](crate::Store::reads_change_stamps)).
pub const READS_CHANGE_STAMPS_FROM: u32 = 5;

/// What a binary of this release does differently on a table at `version`,
/// behind its own ([`OLDEST_TABLE_VERSION`] or later): the words of the
/// registry's start-up warning and of `mcs-admin doctor`.
pub fn compatibility_mode(version: u32) -> &'static str {
    if version < RENEWALS_KEEP_CHANGED_AT_FROM {
        "renewals still move changed_at_ms, delta polls read their whole lookback again"
    } else {
        "delta polls read their whole lookback again, not its change stamps"
    }
}

/// The migration files, in order.
const FILES: &[(&str, &str)] = &[
    ("0001_create_table.json", include_str!("../../../../migrations/0001_create_table.json")),
    (
        "0002_lease_ends_index.json",
        include_str!("../../../../migrations/0002_lease_ends_index.json"),
    ),
    (
        "0003_renewals_keep_changed_at.json",
        include_str!("../../../../migrations/0003_renewals_keep_changed_at.json"),
    ),
    (
        "0004_change_stamps_index.json",
        include_str!("../../../../migrations/0004_change_stamps_index.json"),
    ),
    (
        "0005_readers_reach_back_by_stamps.json",
        include_str!("../../../../migrations/0005_readers_reach_back_by_stamps.json"),
    ),
];

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

/// The table versions a binary runs on: from `oldest` (compatibility
/// mode below `known`) to `known`, its own; and one additive migration
/// ahead of `known` (N-1/N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runs {
    /// The oldest table version the binary runs on.
    pub oldest: u32,
    /// The binary's own schema version.
    pub known: u32,
}

impl Runs {
    /// This binary: [`OLDEST_TABLE_VERSION`] to [`SCHEMA_VERSION`].
    pub const THIS_BINARY: Runs = Runs { oldest: OLDEST_TABLE_VERSION, known: SCHEMA_VERSION };

    /// A binary that runs on its own version only.
    pub const fn only(known: u32) -> Runs {
        Runs { oldest: known, known }
    }
}

/// Whether a binary running on `runs` may use a table stamped `stamp`: at
/// a version from `runs.oldest` to its own, or one additive migration ahead
/// of its own (N-1/N). Returns the table's version; the errors name
/// `target` and the fix.
pub fn check_schema(
    stamp: Option<SchemaStamp>,
    runs: Runs,
    target: &Target,
) -> Result<u32, StoreError> {
    let Runs { oldest, known } = runs;
    match stamp {
        None => Err(StoreError::Schema(format!(
            "{target} has no schema version: run mcs-admin migrate"
        ))),
        Some(s) if s.version < oldest => {
            let needs =
                if oldest == known { format!("{known}") } else { format!("{oldest} to {known}") };
            Err(StoreError::Schema(format!(
                "{target} is at schema version {}, this binary needs {needs}: run mcs-admin \
                 migrate",
                s.version
            )))
        }
        Some(s) if s.version <= known => Ok(s.version),
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
                let actions = if m.actions.is_empty() {
                    "no table change".to_owned()
                } else {
                    m.actions.join("; ")
                };
                writeln!(f, "  {:04} {}: {actions}", m.version, m.description)?;
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
    run(client, &target, &migrations()?, None).await
}

/// [`migrate`] with the embedded migrations, on `target`, stopping at
/// version `to` when given (a rolling upgrade: docs/operations.md).
pub(crate) async fn migrate_target(
    client: &Client,
    target: &Target,
    to: Option<u32>,
) -> Result<MigrationReport, StoreError> {
    run(client, target, &migrations()?, to).await
}

/// Applies `migrations` (versions 1, 2, … in order) up to version `to`
/// (all when `None`) to `target`, then repairs drift from what they
/// declare up to there. A table already at `to` or beyond (but within
/// `migrations`) has nothing to apply.
async fn run(
    client: &Client,
    target: &Target,
    migrations: &[Migration],
    to: Option<u32>,
) -> Result<MigrationReport, StoreError> {
    let known = migrations.last().map_or(0, |m| m.version);
    let to = to.unwrap_or(known);
    if to == 0 || to > known {
        return Err(StoreError::Schema(format!(
            "cannot migrate {target} to version {to}: this binary knows versions 1 to {known}"
        )));
    }
    let existed = describe(client, target).await?.is_some();
    let from_version =
        if existed { read_schema(client, target).await?.map(|s| s.version) } else { None };
    let current = from_version.unwrap_or(0);
    if current > known {
        return Err(StoreError::SchemaTooNew { found: current, known });
    }
    let wanted = &migrations[..to as usize];
    // What the versions already applied declare and drifted away (an index
    // dropped by hand) is put back first: the next migration may need it
    // ACTIVE (`indexes_ready`), and would otherwise refuse for good.
    let mut repaired = if existed && current > 0 && wanted.iter().any(|m| m.version > current) {
        repair(client, target, &Declared::of(&migrations[..current as usize])).await?
    } else {
        Vec::new()
    };
    let mut applied = Vec::new();
    for migration in wanted.iter().filter(|m| m.version > current) {
        let mut actions = Vec::new();
        for step in &migration.steps {
            actions.push(step.apply(client, target).await?);
        }
        let before = &migrations[..migration.version as usize - 1];
        indexes_ready(client, target, migration.version, before, !existed).await?;
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
    repaired.extend(repair(client, target, &Declared::of(wanted)).await?);
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

/// How often a fresh table's indexes are checked while they become ACTIVE.
const INDEX_POLL: Duration = Duration::from_secs(2);

/// Checks, before `version` is recorded, that the indexes the migrations
/// `before` it declare are ACTIVE: binaries of `version` may query them
/// (0003: readers at 3 learn renewals only from `lease_ends`). A table this
/// run created (`fresh`) has nothing to backfill and is waited for; on a
/// table in use an index still building is refused, naming it, with the
/// versions before recorded (run `migrate` again once it is ACTIVE).
async fn indexes_ready(
    client: &Client,
    target: &Target,
    version: u32,
    before: &[Migration],
    fresh: bool,
) -> Result<(), StoreError> {
    let declared = Declared::of(before);
    let names: Vec<&str> = declared.indexes.iter().map(GlobalSecondaryIndex::index_name).collect();
    if names.is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    loop {
        let Some(table) = describe(client, target).await? else {
            return Err(StoreError::Schema(format!("{target}: the table does not exist")));
        };
        let pending = pending_indexes(&table, &names);
        let Some((name, state)) = pending.first() else {
            return Ok(());
        };
        if !fresh || started.elapsed() >= TABLE_ACTIVE_TIMEOUT {
            return Err(index_not_ready(target, name, state, version));
        }
        tokio::time::sleep(INDEX_POLL).await;
    }
}

/// The refusal to record `version` while the index `name` it needs is in
/// `state`, not ACTIVE.
fn index_not_ready(target: &Target, name: &str, state: &str, version: u32) -> StoreError {
    StoreError::Schema(format!(
        "{target}: index {name} is {state}, and a table at schema version {version} needs it \
         ACTIVE (its readers query it); version {} is recorded: run mcs-admin migrate again once \
         DescribeTable shows {name} ACTIVE",
        version - 1
    ))
}

/// Which of the indexes `names` `table` does not have ACTIVE (and done
/// backfilling), each with its state: `missing`, `CREATING`,
/// `CREATING (backfilling)`, … ([`index_state`]).
pub(crate) fn pending_indexes(table: &TableDescription, names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|name| {
            let found =
                table.global_secondary_indexes().iter().find(|g| g.index_name() == Some(name));
            let state = found.map_or_else(|| INDEX_MISSING.to_owned(), index_state);
            (state != INDEX_ACTIVE).then(|| ((*name).to_owned(), state))
        })
        .collect()
}

/// The state of an index that is ready: ACTIVE and done backfilling.
pub const INDEX_ACTIVE: &str = "ACTIVE";

/// The state of an index the table does not have.
pub const INDEX_MISSING: &str = "missing";

/// The state of `index` as DescribeTable tells it: its status (`ACTIVE`,
/// `CREATING`, …), followed by ` (backfilling)` while DynamoDB backfills
/// it. Only [`INDEX_ACTIVE`] may be queried.
pub(crate) fn index_state(index: &GlobalSecondaryIndexDescription) -> String {
    let status = index.index_status().map_or("of unknown status", |s| s.as_str());
    if index.backfilling() == Some(true) {
        format!("{status} (backfilling)")
    } else {
        status.to_owned()
    }
}

/// The global secondary indexes that the migrations up to `version`
/// declare, in the order they declare them: those a table at `version`
/// has, and its registries may query (docs/design.md §3). A `version`
/// beyond this binary's gives every index it knows; 0 none.
pub fn indexes_declared_up_to(version: u32) -> Result<Vec<String>, StoreError> {
    let all = migrations()?;
    let up_to = all.len().min(usize::try_from(version).unwrap_or(usize::MAX));
    let declared = Declared::of(&all[..up_to]);
    Ok(declared.indexes.iter().map(|g| g.index_name().to_owned()).collect())
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
        .map_err(|e| errors::failed(OP, target, started, e))?;
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
        Err(e) => Err(errors::failed(OP, target, started, e)),
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
    /// An UpdateTable creating each of `indexes` that the table lacks.
    CreateIndexes {
        attribute_definitions: Vec<AttributeDefinition>,
        indexes: Vec<GlobalSecondaryIndex>,
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
            Step::CreateIndexes { attribute_definitions, indexes } => {
                let Some(table) = describe(client, target).await? else {
                    return Err(StoreError::Schema(format!("{target}: the table does not exist")));
                };
                let mut actions = Vec::new();
                for index in indexes {
                    let name = index.index_name();
                    if table.global_secondary_indexes().iter().any(|g| g.index_name() == Some(name))
                    {
                        actions.push(format!("index {name} already existed"));
                        continue;
                    }
                    repair::create_index(client, target, attribute_definitions, index).await?;
                    actions.push(format!("created index {name}"));
                }
                Ok(actions.join("; "))
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
mod file;
mod repair;
use repair::{Declared, repair};

#[cfg(test)]
mod tests;
