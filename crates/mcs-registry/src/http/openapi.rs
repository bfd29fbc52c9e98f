//! The OpenAPI 3.1 document of the API, served at `GET /openapi.json`.
//!
//! The schemas come from the mcs-api types that parse the requests (their
//! `utoipa::ToSchema` impls carry the same constraints the parsers check);
//! the paths are described here, one per route of [`super::router`], with
//! every status the server can answer. `docs/openapi.json` is a copy that a
//! test keeps identical: regenerate it with
//! `UPDATE_OPENAPI=1 cargo test -p mcs-registry openapi`.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use mcs_api::status::{
    ClusterStatus, ConflictStatus, ErrorCount, Finding, HoldStatus, Incomplete, LeasedStatus,
    PollKind, PoolGroup, PoolsStatus, ProcessStatus, ReaderStatus, SectionStatus, Severity, Status,
    ViewStatus,
};
use mcs_api::{
    Cluster, ClusterList, ClusterRegistered, ClusterRegistration, ErrorBody, Export,
    ExportAccepted, ExportList, ExportRequest, ImportList, ListQuery, Pool, PoolList,
    PoolRegistered, PoolRegistration, RouterList, RouterRegistered, RouterRegistration,
    RouterReplica, ServiceImport, Withdrawal, Withdrawn,
};
use std::sync::LazyLock;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref, Required, Response as ApiResponse, ResponseBuilder};
use utoipa::{IntoParams, OpenApi, PartialSchema};

const DESCRIPTION: &str = "Multi-cluster service registry: pools, routers, clusters, \
service exports and the merged imports. Every non-2xx answer carries an `ErrorBody`; an \
unknown path answers `404` and a method a path does not have answers `405`, both with an \
`ErrorBody`. Writes are refused with `503` while storage is unavailable or before the \
registry's first full read of storage. Integers are written without a fraction or an exponent \
(`2`, not `2.0`). Rules that span several fields and that JSON Schema can state are in the \
schemas (`if`/`then`). Those it cannot state are answered `422` as well: a heartbeat \
interval below its lease, distinct port names, a body's `cluster_id` equal to the path's, \
`timeout_secs` only with `watch=true` or `watch=events`, `resource_version` only with \
`watch=events`, a withdrawal's `generation` only with `incarnation`, \
a client's `generation` at most `--max-generation-ahead-secs` ahead of the registry's clock. \
With `--authz spiffe`, lists and writes answer `403` to a client certificate whose identity \
may not read or write what it asked for.";

#[derive(OpenApi)]
#[openapi(
    info(title = "mcs-registry", description = DESCRIPTION),
    components(schemas(
        PoolRegistration, PoolRegistered, PoolList, Pool,
        RouterRegistration, RouterRegistered, RouterList, RouterReplica,
        ClusterRegistration, ClusterRegistered, ClusterList, Cluster,
        ExportRequest, ExportAccepted, ExportList, Export, ImportList, ServiceImport,
        Withdrawn, ErrorBody,
        Status, ProcessStatus, ViewStatus, Incomplete, SectionStatus, ReaderStatus, PollKind,
        ErrorCount, ClusterStatus, LeasedStatus, PoolsStatus, PoolGroup, HoldStatus, ConflictStatus,
        Finding, Severity,
    ))
)]
struct Components;

/// The document, built once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    document().to_pretty_json().unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
});

/// `GET /openapi.json`.
pub(super) async fn serve() -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], DOCUMENT.as_str())
        .into_response()
}

/// The OpenAPI document of [`super::router`].
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = Components::openapi();
    let paths = &mut doc.paths;
    let lists = [
        ("/v1/pools", "PoolList", "pools"),
        ("/pools", "PoolList", "pools_unversioned"),
        ("/v1/routers", "RouterList", "routers"),
        ("/routers", "RouterList", "routers_unversioned"),
        ("/v1/clusters", "ClusterList", "clusters"),
        ("/v1/exports", "ExportList", "exports"),
        ("/v1/imports", "ImportList", "imports"),
    ];
    for (path, schema, id) in lists {
        paths.add_path_operation(path, vec![HttpMethod::Get], list(schema, id));
    }
    let registrations = [
        (HttpMethod::Post, "/v1/pools", "PoolRegistration", "PoolRegistered", "register_pool"),
        (
            HttpMethod::Post,
            "/pools",
            "PoolRegistration",
            "PoolRegistered",
            "register_pool_unversioned",
        ),
        (
            HttpMethod::Post,
            "/v1/routers",
            "RouterRegistration",
            "RouterRegistered",
            "register_router",
        ),
        (
            HttpMethod::Put,
            "/v1/clusters/{cluster_id}",
            "ClusterRegistration",
            "ClusterRegistered",
            "register_cluster",
        ),
        (
            HttpMethod::Put,
            "/v1/clusters/{cluster_id}/exports/{namespace}/{name}",
            "ExportRequest",
            "ExportAccepted",
            "put_export",
        ),
    ];
    for (method, path, body, reply, id) in registrations {
        paths.add_path_operation(path, vec![method], write(path, Some(body), reply, id));
    }
    let withdrawals = [
        ("/v1/pools/{pool_id}", "withdraw_pool"),
        ("/v1/routers/{router_id}", "withdraw_router"),
        ("/v1/clusters/{cluster_id}", "withdraw_cluster"),
        ("/v1/clusters/{cluster_id}/exports/{namespace}/{name}", "withdraw_export"),
    ];
    for (path, id) in withdrawals {
        paths.add_path_operation(
            path,
            vec![HttpMethod::Delete],
            write(path, None, "Withdrawn", id),
        );
    }
    paths.add_path_operation("/v1/status", vec![HttpMethod::Get], status());
    paths.add_path_operation("/healthz", vec![HttpMethod::Get], healthz());
    paths.add_path_operation("/readyz", vec![HttpMethod::Get], readyz());
    paths.add_path_operation("/openapi.json", vec![HttpMethod::Get], openapi());
    cross_field_rules(&mut doc);
    watch_event(&mut doc);
    doc
}

/// The `WatchEvent` schema: one line of an event stream. `mcs_api::WatchEvent`
/// is generic over the item and tagged by `type`; the document states it
/// once, the object left to the list's item schema.
fn watch_event(doc: &mut utoipa::openapi::OpenApi) {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let kinds = ["ADDED", "MODIFIED", "DELETED", "COMPLETENESS", "BOOKMARK", "ERROR"];
    let schema = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "one line of an event stream (`watch=events`): `ADDED`, `MODIFIED` and `DELETED` \
             carry the item as the list serves it in `object` (as last served, for `DELETED`); \
             `COMPLETENESS` says the list's `complete` flipped; `BOOKMARK` closes each batch of \
             changes with the `resource_version` to resume from, the list's `fingerprint` and \
             `complete`; `ERROR` carries an `ErrorBody` in `object` and ends the stream (the \
             watcher fell too far behind). Skip unknown types.",
        ))
        .required("type")
        .property("type", string().enum_values(Some(kinds)))
        .property(
            "object",
            ObjectBuilder::new().description(Some("the item, or an `ErrorBody` for `ERROR`")),
        )
        .property(
            "key",
            string().description(Some(
                "the item's key (`pool_id`, `cluster/namespace/name`...), on `ADDED`, \
                 `MODIFIED` and `DELETED`",
            )),
        )
        .property("resource_version", string())
        .property("fingerprint", string())
        .property("complete", ObjectBuilder::new().schema_type(Type::Boolean))
        .build();
    if let Some(components) = doc.components.as_mut() {
        components.schemas.insert("WatchEvent".to_owned(), schema.into());
    }
}

/// Adds to the request schemas the rules of their `Validate` impls that span
/// several fields and that JSON Schema can state, as an `allOf` of
/// `if`/`then`. utoipa's derive has no attribute for these keywords, so they
/// travel as the schema object's one extension entry (serialized inline like
/// any keyword). The rules JSON Schema cannot state (a heartbeat interval
/// below its lease, distinct port names, a generation not too far ahead of
/// the registry's clock) are in the descriptions and answered `422`.
fn cross_field_rules(doc: &mut utoipa::openapi::OpenApi) {
    use serde_json::json;
    use utoipa::openapi::RefOr;
    use utoipa::openapi::extensions::Extensions;
    use utoipa::openapi::schema::Schema;

    let generation_needs_incarnation = json!({
        "if": {"required": ["generation"], "properties": {"generation": {"type": "integer"}}},
        "then": {"required": ["incarnation"], "properties": {"incarnation": {"type": "string"}}},
    });
    let timeout_needs_client_ip = json!({
        "if": {
            "required": ["session_affinity_timeout_secs"],
            "properties": {"session_affinity_timeout_secs": {"type": "integer"}},
        },
        "then": {
            "required": ["session_affinity"],
            "properties": {"session_affinity": {"const": "ClientIP"}},
        },
    });
    let several_ports_are_named = json!({
        "if": {"required": ["ports"], "properties": {"ports": {"minItems": 2}}},
        "then": {"properties": {"ports": {"items": {
            "required": ["name"],
            "properties": {"name": {"minLength": 1}},
        }}}},
    });
    let rules = [
        ("PoolRegistration", vec![generation_needs_incarnation.clone()]),
        ("RouterRegistration", vec![generation_needs_incarnation.clone()]),
        (
            "ExportRequest",
            vec![generation_needs_incarnation, timeout_needs_client_ip, several_ports_are_named],
        ),
    ];
    let Some(components) = doc.components.as_mut() else { return };
    for (name, all_of) in rules {
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) {
            let rules: Extensions =
                [("allOf", serde_json::Value::Array(all_of))].into_iter().collect();
            object.extensions = Some(rules);
        }
    }
}

fn json(schema: &str) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(Ref::from_schema_name(schema))).build()
}

fn error(description: &str) -> ApiResponse {
    ResponseBuilder::new()
        .description(description)
        .content("application/json", json("ErrorBody"))
        .build()
}

fn unavailable(description: &str) -> ApiResponse {
    let retry = HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)))
        .description(Some("seconds to wait before retrying"))
        .build();
    ResponseBuilder::new()
        .description(description)
        .header("Retry-After", retry)
        .content("application/json", json("ErrorBody"))
        .build()
}

fn etag() -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(
            "the list's fingerprint, quoted (a strong entity tag), suffixed `-incomplete` while \
             the list is incomplete, so that a flip of `complete` changes it, and `-gzip` for \
             the gzip-compressed body (`Accept-Encoding: gzip`)",
        ))
        .build()
}

fn list(schema: &str, id: &str) -> OperationBuilder {
    let if_none_match = ParameterBuilder::new()
        .name("If-None-Match")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some("entity tags already seen; `*` matches any"))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)));
    OperationBuilder::new()
        .operation_id(Some(format!("list_{id}")))
        .tag("lists")
        .parameters(Some(ListQuery::into_params(|| Some(ParameterIn::Query))))
        .parameter(if_none_match)
        .response(
            "200",
            ResponseBuilder::new()
                .description(
                    "the live items; with `watch=events`, a stream of newline-delimited events \
                     (`application/x-ndjson`): the items as `ADDED` and a `BOOKMARK` (or, \
                     resumed, what was missed since `resource_version`), then each change",
                )
                .header("ETag", etag())
                .content("application/json", json(schema))
                .content(super::events::NDJSON, json("WatchEvent")),
        )
        .response(
            "304",
            ResponseBuilder::new()
                .description("the fingerprint matches `If-None-Match` (after the watch, if any)")
                .header("ETag", etag()),
        )
        .response("403", forbidden("read"))
        .response(
            "410",
            error(
                "`expired`: `resource_version` is older than this registry's history, or \
                 another process's, and `If-None-Match` does not name the list's fingerprint: \
                 watch without it to list again",
            ),
        )
        .response("422", error("a query parameter is invalid"))
        .response(
            "503",
            unavailable(
                "too many watches are waiting, or too many connections are open; retry later",
            ),
        )
}

/// Path parameters of `path`, each with the schema of its mcs-api type.
fn path_parameters(path: &str) -> Vec<utoipa::openapi::path::Parameter> {
    let mut parameters = Vec::new();
    for segment in path.split('/') {
        let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            continue;
        };
        let schema = match name {
            "pool_id" => mcs_api::PoolId::schema(),
            "router_id" => mcs_api::RouterId::schema(),
            _ => mcs_api::Label::schema(),
        };
        parameters.push(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(schema))
                .build(),
        );
    }
    parameters
}

fn write(path: &str, body: Option<&str>, reply: &str, id: &str) -> OperationBuilder {
    let mut op = OperationBuilder::new()
        .operation_id(Some(id))
        .tag("writes")
        .parameters(Some(path_parameters(path)))
        .response("200", ResponseBuilder::new().description("stored").content("application/json", json(reply)))
        .response("400", error("the request is not well-formed (malformed JSON, bad path)"))
        .response(
            "409",
            error("`stale_generation`: a newer generation is stored; `owned`: another incarnation holds the live lease"),
        )
        .response("403", forbidden("write this record"))
        .response("422", error("a value breaks a rule; `field` names it"))
        .response(
            "503",
            unavailable(
                "storage is unavailable, the registry has not finished its first full read, \
                 or too many connections are open",
            ),
        )
        .response(
            "500",
            error(
                "`internal`: the registry could not assign a generation, or storage failed in a \
                 way that retrying will not mend (the cause is logged, never sent)",
            ),
        );
    if ["/v1/pools", "/v1/routers", "/pools"].iter().any(|p| path.starts_with(p)) {
        op = op.response(
            "501",
            error(
                "`not_implemented`: this registry discovers pools and routers from Kubernetes \
                 (`--pool-discovery mcs|karmada`) and takes no registrations",
            ),
        );
    }
    match body {
        Some(body) => {
            op = op
                .request_body(Some(
                    RequestBodyBuilder::new()
                        .required(Some(Required::True))
                        .content("application/json", json(body))
                        .build(),
                ))
                .response("408", error("the request body did not arrive in time"))
                .response(
                    "413",
                    error(
                        "the request body is over the size limit, or the record's stored item \
                         would be over the storage item limit (`field` names its largest part)",
                    ),
                );
        }
        None => {
            op = op
                .parameters(Some(Withdrawal::into_params(|| Some(ParameterIn::Query))))
                .response("404", error("no such record"));
        }
    }
    op
}

fn status_object(properties: &[(&str, Type)]) -> ObjectBuilder {
    let mut object = ObjectBuilder::new().schema_type(Type::Object);
    for (name, ty) in properties {
        object =
            object.property(*name, ObjectBuilder::new().schema_type(ty.clone())).required(*name);
    }
    object
}

/// `503` past `--max-connections`, which any route may answer.
/// `403` of `--authz spiffe` (docs/api.md, Authorization).
fn forbidden(what: &str) -> ApiResponse {
    error(&format!(
        "`forbidden` (with `--authz spiffe` only): the identity of the client certificate may \
         not {what}; `identity` and `scope` say who and what. Nothing is stored"
    ))
}

fn too_many_connections() -> ApiResponse {
    unavailable("too many connections are open; retry later")
}

fn healthz() -> OperationBuilder {
    OperationBuilder::new()
        .operation_id(Some("healthz"))
        .tag("health")
        .response(
            "200",
            ResponseBuilder::new().description("the process runs").content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(status_object(&[("status", Type::String)])))
                    .build(),
            ),
        )
        .response("503", too_many_connections())
}

/// `GET /v1/status` (issue 26).
fn status() -> OperationBuilder {
    OperationBuilder::new()
        .operation_id(Some("status"))
        .tag("status")
        .description(Some(
            "This registry's view of the clusterset: the process, the view (complete and why \
             not, a fingerprint per section), the reader, the clusters, pools and routers, the \
             mass-expiry hold, the conflicts, and the findings derived from them, each with a \
             severity, a one-line explanation and its runbook in docs/operations.md. Also on the \
             admin port, beside the same document as an HTML page at `/status`.",
        ))
        .response(
            "200",
            ResponseBuilder::new()
                .description("the status document, now")
                .content("application/json", json("Status")),
        )
        .response("403", forbidden("read"))
        .response("503", too_many_connections())
}

fn readyz() -> OperationBuilder {
    let ready = status_object(&[
        ("status", Type::String),
        ("complete", Type::Boolean),
        ("holding_expiries", Type::Boolean),
        ("pool_discovery_complete", Type::Boolean),
        ("last_poll_age_ms", Type::Integer),
    ]);
    OperationBuilder::new()
        .operation_id(Some("readyz"))
        .tag("health")
        .response(
            "200",
            ResponseBuilder::new()
                .description(
                    "the first full read of storage succeeded; the view may be stale (see \
                     `complete` and `last_poll_age_ms`)",
                )
                .content("application/json", ContentBuilder::new().schema(Some(ready)).build()),
        )
        .response(
            "503",
            error(
                "the first full read of storage has not succeeded yet, or the last successful \
                 poll is older than --ready-max-staleness-secs, or too many connections are open",
            ),
        )
}

fn openapi() -> OperationBuilder {
    OperationBuilder::new()
        .operation_id(Some("openapi"))
        .tag("health")
        .response(
            "200",
            ResponseBuilder::new().description("this document").content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::Object)))
                    .build(),
            ),
        )
        .response("503", too_many_connections())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/openapi.json` is the served document, byte for byte.
    #[test]
    fn the_docs_copy_is_the_served_document() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
        if std::env::var_os("UPDATE_OPENAPI").is_some_and(|v| v == "1") {
            std::fs::write(&path, DOCUMENT.as_str()).expect("writes docs/openapi.json");
        }
        let copy = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            copy == *DOCUMENT,
            "docs/openapi.json differs from the served document; regenerate it with \
             UPDATE_OPENAPI=1 cargo test -p mcs-registry openapi"
        );
    }

    #[test]
    fn the_document_is_openapi_3_1_with_every_schema_resolvable() {
        let doc: serde_json::Value = serde_json::from_str(&DOCUMENT).expect("the document is JSON");
        assert!(
            doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")),
            "{}",
            doc["openapi"]
        );
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let text = DOCUMENT.as_str();
        for reference in text.split("\"$ref\": \"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap_or_default();
            assert!(schemas.contains_key(name), "unresolved $ref to {name}");
        }
        let label = &schemas["Label"];
        assert_eq!(label["maxLength"], 63);
        assert_eq!(schemas["PoolId"]["pattern"], "^[0-9a-f]{32}$");
    }

    /// Every section is a documented list whose body holds it under its
    /// name (the schemathesis step checks the router answers every
    /// documented path as documented).
    #[test]
    fn every_section_is_a_documented_list() {
        let doc: serde_json::Value = serde_json::from_str(&DOCUMENT).expect("the document is JSON");
        for section in mcs_core::SectionKind::ALL {
            let name = section.name();
            let get = &doc["paths"][format!("/v1/{name}")]["get"];
            let reference =
                get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
                    .as_str()
                    .unwrap_or_else(|| panic!("GET /v1/{name} is not documented: {get}"));
            let schema = reference.rsplit('/').next().unwrap_or_default();
            let list = &doc["components"]["schemas"][schema];
            assert!(
                list["required"].as_array().is_some_and(|r| r.contains(&name.into())),
                "{list}"
            );
            assert_eq!(list["properties"][name]["type"], "array", "{list}");
        }
    }
}
