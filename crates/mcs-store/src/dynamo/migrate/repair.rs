//! Repairing a table that drifted from what its migrations declare: the
//! stream, missing indexes, TTL (docs/operations.md, Migrations).

use super::*;

/// What the migrations declare the table to have once all are applied:
/// what `migrate` puts back when the table drifted from it.
#[derive(Debug, Default)]
pub(super) struct Declared {
    pub(super) attribute_definitions: Vec<AttributeDefinition>,
    pub(super) indexes: Vec<GlobalSecondaryIndex>,
    pub(super) stream: Option<StreamSpecification>,
    pub(super) ttl: Option<TimeToLiveSpecification>,
}

impl Declared {
    pub(super) fn of(migrations: &[Migration]) -> Self {
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
                Step::CreateIndexes { attribute_definitions, indexes } => {
                    for a in attribute_definitions {
                        if !declared
                            .attribute_definitions
                            .iter()
                            .any(|d| d.attribute_name() == a.attribute_name())
                        {
                            declared.attribute_definitions.push(a.clone());
                        }
                    }
                    declared.indexes.extend(indexes.iter().cloned());
                }
                Step::UpdateTimeToLive(spec) => declared.ttl = Some(spec.clone()),
            }
        }
        declared
    }
}

/// Puts back what drifted from `declared`: the stream, missing indexes,
/// TTL. Says what it did; nothing when nothing drifted.
pub(super) async fn repair(
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
pub(super) async fn create_index(
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
