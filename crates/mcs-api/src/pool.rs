//! Inference pools: registered by their PoolRelay, read by Global Routers.

use crate::{FieldError, HostPort, Incarnation, Label, Lease, NonBlank, Validate};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use utoipa::ToSchema;

/// Where a pool comes from: one DynamoGraphDeployment in one namespace of one
/// cluster. Each part is a DNS-1123 label.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct PoolKey {
    /// The cluster the pool runs in.
    pub cluster_id: Label,
    /// The namespace of its deployment.
    pub namespace: Label,
    /// The name of its deployment.
    pub dgd_name: Label,
}

impl PoolKey {
    /// The pool's stable id (see [`PoolId`]).
    pub fn id(&self) -> PoolId {
        PoolId::of(self)
    }
}

/// A pool's id: the first 16 bytes of
/// `SHA-256("{cluster_id}/{namespace}/{dgd_name}")` as 32 lowercase hex
/// digits. '/' cannot occur in a label, so the input is unambiguous; the
/// derivation is part of the contract and never changes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PoolId(String);

impl PoolId {
    /// Derives the id of `key`.
    pub fn of(key: &PoolKey) -> Self {
        let digest = Sha256::digest(
            format!("{}/{}/{}", key.cluster_id, key.namespace, key.dgd_name).as_bytes(),
        );
        let mut hex = String::with_capacity(32);
        for byte in &digest[..16] {
            hex.push_str(&format!("{byte:02x}"));
        }
        Self(hex)
    }

    /// Parses an id given as text (a path segment).
    pub fn parse(value: &str) -> Result<Self, String> {
        let ok = value.len() == 32
            && value.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !ok {
            return Err(format!("must be 32 lowercase hex digits, got {value:?}"));
        }
        Ok(Self(value.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

crate::scalar::string_schema!(
    PoolId,
    "The first 16 bytes of SHA-256(\"{cluster_id}/{namespace}/{dgd_name}\") as 32 lowercase hex digits.",
    "^[0-9a-f]{32}$",
    (32, 32),
    "3677f1ffda5a8ecb71747eca0d38615c"
);

impl TryFrom<String> for PoolId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::parse(&value)
    }
}

impl From<PoolId> for String {
    fn from(v: PoolId) -> String {
        v.0
    }
}

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a pool or router runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Location {
    /// Cloud region, e.g. `us-east-1`.
    pub region: NonBlank,
    /// Zone inside the region, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<NonBlank>,
}

/// What a pool can serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Capacity {
    /// Number of workers behind the relay (never negative).
    #[schema(minimum = 0, maximum = 4_294_967_295_u64, format = Int64)]
    pub workers: u32,
}

/// `POST /v1/pools` (and the seed-compatible `POST /pools`): register or renew
/// a pool. Each call is also the relay's heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolRegistration {
    /// Which deployment this pool is.
    pub pool_key: PoolKey,
    /// The model it serves; not blank.
    pub model: NonBlank,
    /// Where it runs.
    pub location: Location,
    /// What it can serve.
    pub capacity: Capacity,
    /// Where routers reach the relay, `host:port`.
    pub relay_address: HostPort,
    /// The addresses the relay may present itself from.
    #[serde(default)]
    #[schema(max_items = 64)]
    pub relay_identities: Vec<NonBlank>,
    /// The lease asked for; the registry's default lease when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The relay process; enables ownership checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Incarnation>,
    /// The relay's own ordering of its intents; else the registrar assigns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub generation: Option<u64>,
}

impl Validate for PoolRegistration {
    fn validate(&self) -> Result<(), FieldError> {
        if self.relay_identities.len() > 64 {
            return Err(FieldError::new("relay_identities", "at most 64 identities"));
        }
        crate::requested_lease_fits(self.lease.as_ref())?;
        crate::generation_needs_incarnation(self.generation, self.incarnation.as_ref())
    }
}

impl PoolRegistration {
    /// The pool as it is served once registered.
    pub fn to_pool(&self) -> Pool {
        Pool {
            pool_id: self.pool_key.id(),
            pool_key: self.pool_key.clone(),
            model: self.model.clone(),
            location: self.location.clone(),
            capacity: self.capacity.clone(),
            relay_address: self.relay_address.clone(),
            relay_identities: self.relay_identities.clone(),
        }
    }
}

/// A live pool as `GET /v1/pools` serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Pool {
    /// Derived from `pool_key`.
    pub pool_id: PoolId,
    /// Which deployment this pool is.
    pub pool_key: PoolKey,
    /// The model it serves.
    pub model: NonBlank,
    /// Where it runs.
    pub location: Location,
    /// What it can serve.
    pub capacity: Capacity,
    /// Where routers reach the relay.
    pub relay_address: HostPort,
    /// The addresses the relay may present itself from.
    #[serde(default)]
    pub relay_identities: Vec<NonBlank>,
}

/// The reply to a pool registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolRegistered {
    /// The pool's id.
    pub pool_id: PoolId,
    /// The generation now stored.
    pub generation: u64,
    /// The lease granted: renew every `heartbeat_interval_secs`.
    pub lease: Lease,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    pub(crate) const REGISTRATION: &str = r#"{
        "pool_key": {"cluster_id": "us-east-1a", "namespace": "llm", "dgd_name": "llama"},
        "model": "meta-llama/Llama-3.1-8B",
        "location": {"region": "us-east-1", "zone": "us-east-1a"},
        "capacity": {"workers": 4},
        "relay_address": "10.0.1.7:9000",
        "relay_identities": ["10.0.1.7", "fd00::7"],
        "incarnation": "5f1c",
        "generation": 1733130000000,
        "some_future_field": {"ignored": true}
    }"#;

    fn with(field: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(REGISTRATION).unwrap();
        let mut target = &mut v;
        let parts: Vec<&str> = field.split('.').collect();
        for part in &parts[..parts.len() - 1] {
            target = target.get_mut(*part).unwrap();
        }
        target[parts[parts.len() - 1]] = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    #[test]
    fn pool_id_is_stable_and_documented() {
        let key: PoolKey =
            parse(r#"{"cluster_id":"us-east-1a","namespace":"llm","dgd_name":"llama"}"#).unwrap();
        // Computed independently: printf 'us-east-1a/llm/llama' | sha256sum | cut -c1-32
        assert_eq!(key.id().as_str(), "3677f1ffda5a8ecb71747eca0d38615c");
        assert!(PoolId::parse(key.id().as_str()).is_ok());
        assert!(PoolId::parse("XYZ").is_err());
    }

    #[test]
    fn registration_parses_and_round_trips() {
        let reg: PoolRegistration = parse(REGISTRATION).unwrap();
        assert_eq!(reg.capacity.workers, 4);
        assert_eq!(reg.validate(), Ok(()));
        round_trip(&reg);
        round_trip(&reg.to_pool());
        round_trip(&PoolRegistered {
            pool_id: reg.pool_key.id(),
            generation: 7,
            lease: Lease::new(30, 10).unwrap(),
        });
    }

    #[test]
    fn every_invalid_field_is_named() {
        let cases = [
            ("model", r#""  ""#, "model"),
            ("pool_key.cluster_id", r#""Bad_Label""#, "pool_key.cluster_id"),
            ("pool_key.namespace", r#""-x""#, "pool_key.namespace"),
            ("pool_key.dgd_name", r#""""#, "pool_key.dgd_name"),
            ("capacity.workers", "-1", "capacity.workers"),
            ("relay_address", r#""10.0.1.7""#, "relay_address"),
            ("location.region", r#""""#, "location.region"),
            ("incarnation", r#""a b""#, "incarnation"),
            ("generation", "-5", "generation"),
        ];
        for (field, value, path) in cases {
            let (got, message) = parse::<PoolRegistration>(&with(field, value)).unwrap_err();
            assert_eq!(got, path, "{field} = {value}: {message}");
        }
    }

    #[test]
    fn missing_fields_are_refused() {
        let mut v: serde_json::Value = serde_json::from_str(REGISTRATION).unwrap();
        v.as_object_mut().unwrap().remove("model");
        let (_, message) = parse::<PoolRegistration>(&v.to_string()).unwrap_err();
        assert!(message.contains("missing field `model`"), "{message}");
    }

    #[test]
    fn a_requested_lease_is_checked() {
        let (field, _) = parse::<PoolRegistration>(&with(
            "lease",
            r#"{"duration_secs": 10, "heartbeat_interval_secs": 10}"#,
        ))
        .unwrap_err();
        assert_eq!(field, "lease");
        let reg: PoolRegistration =
            parse(&with("lease", r#"{"duration_secs": 86401, "heartbeat_interval_secs": 10}"#))
                .unwrap();
        assert_eq!(reg.validate().unwrap_err().field, "lease.duration_secs");
        let reg: PoolRegistration =
            parse(&with("lease", r#"{"duration_secs": 60, "heartbeat_interval_secs": 20}"#))
                .unwrap();
        assert_eq!(reg.validate(), Ok(()));
        round_trip(&reg);
    }

    #[test]
    fn generation_needs_an_incarnation() {
        let mut reg: PoolRegistration = parse(REGISTRATION).unwrap();
        reg.incarnation = None;
        assert_eq!(reg.validate().unwrap_err().field, "incarnation");
        reg.generation = None;
        assert_eq!(reg.validate(), Ok(()));
        reg.incarnation = Some(Incarnation::new("x").unwrap());
        reg.generation = Some(0);
        assert_eq!(reg.validate().unwrap_err().field, "generation");
    }
}
