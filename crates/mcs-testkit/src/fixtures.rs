//! JSON bodies of the API's writes, as tests send them: a pool
//! registration, a router, a cluster and an export. Each has the fields a
//! valid request needs; [`with`] adds or replaces fields.

use serde_json::{Value, json};

/// `POST /v1/pools` of `llm/{dgd}` in `cluster` with `workers` workers, in
/// region us-east-1, relayed at 10.0.1.7:9000.
pub fn pool(cluster: &str, dgd: &str, workers: u32) -> Value {
    json!({
        "pool_key": {"cluster_id": cluster, "namespace": "llm", "dgd_name": dgd},
        "model": "meta-llama/Llama-3.1-8B",
        "location": {"region": "us-east-1"},
        "capacity": {"workers": workers},
        "relay_address": "10.0.1.7:9000",
    })
}

/// `POST /v1/routers` of `router_id` at 10.0.0.1:8080.
pub fn router(router_id: &str) -> Value {
    json!({"router_id": router_id, "address": "10.0.0.1:8080"})
}

/// `PUT /v1/clusters/{id}` by the controller incarnation `incarnation`.
pub fn cluster(incarnation: &str) -> Value {
    json!({"incarnation": incarnation})
}

/// `PUT /v1/clusters/{id}/exports/{ns}/{name}` of a service of
/// `service_type` with one ready endpoint at `address` and one HTTP port.
pub fn export(service_type: &str, exported_at: &str, address: &str) -> Value {
    json!({
        "type": service_type,
        "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
        "exported_at": exported_at,
        "endpoints": [{"addresses": [address], "ready": true}],
    })
}

/// `body` with the top-level fields of `extra` (an object) added or
/// replaced.
pub fn with(mut body: Value, extra: Value) -> Value {
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    body
}

/// The router flags a registry discovering pools from Kubernetes needs
/// (`--pool-discovery mcs|karmada`): the Global Router's Service
/// `gr/global-router`, port `http`.
pub const ROUTER_FLAGS: [&str; 6] =
    ["--router-namespace", "gr", "--router-service", "global-router", "--router-port-name", "http"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_replaces_and_adds_top_level_fields() {
        let body =
            with(pool("c1", "a", 1), json!({"capacity": {"workers": 3}, "incarnation": "i"}));
        assert_eq!(body["capacity"], json!({"workers": 3}));
        assert_eq!(body["incarnation"], json!("i"));
        assert_eq!(body["model"], json!("meta-llama/Llama-3.1-8B"));
    }
}
