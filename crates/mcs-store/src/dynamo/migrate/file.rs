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
    UpdateTable(UpdateTable),
    UpdateTimeToLive(UpdateTimeToLive),
}

/// An UpdateTable that creates global secondary indexes (the only update
/// a migration has needed so far).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub(super) struct UpdateTable {
    attribute_definitions: Vec<Attribute>,
    global_secondary_index_updates: Vec<IndexUpdate>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct IndexUpdate {
    create: Index,
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

fn attribute_definitions(attributes: Vec<Attribute>) -> Result<Vec<AttributeDefinition>, String> {
    attributes
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
        .collect()
}

fn indexes(indexes: Vec<Index>) -> Result<Vec<GlobalSecondaryIndex>, String> {
    indexes
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
        .collect()
}

impl Step {
    pub(super) fn into_sdk(self) -> Result<super::Step, String> {
        match self {
            Step::CreateTable(t) => Ok(super::Step::CreateTable {
                attribute_definitions: attribute_definitions(t.attribute_definitions)?,
                key_schema: key_schema(t.key_schema)?,
                global_secondary_indexes: indexes(t.global_secondary_indexes)?,
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
            Step::UpdateTable(u) => Ok(super::Step::CreateIndexes {
                attribute_definitions: attribute_definitions(u.attribute_definitions)?,
                indexes: indexes(
                    u.global_secondary_index_updates.into_iter().map(|g| g.create).collect(),
                )?,
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
