//! Global Router replicas: they register themselves and read the pools.

use crate::{FieldError, HostPort, Incarnation, Lease, Location, Validate};
use serde::{Deserialize, Serialize};
use std::fmt;
use utoipa::ToSchema;

/// A router replica's id: a DNS-1123 subdomain (1–253 characters of
/// lowercase alphanumerics, '-' and '.', each dot-separated part a label).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RouterId(String);

impl RouterId {
    /// Checks and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, String> {
        let value = value.into();
        if value.is_empty() || value.len() > 253 {
            return Err(format!(
                "must be a DNS-1123 subdomain of 1 to 253 characters, got {value:?}"
            ));
        }
        for part in value.split('.') {
            crate::Label::new(part)
                .map_err(|_| format!("must be a DNS-1123 subdomain, got {value:?}"))?;
        }
        Ok(Self(value))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

crate::scalar::string_schema!(
    RouterId,
    "A DNS-1123 subdomain: 1 to 253 characters, dot-separated DNS-1123 labels.",
    "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$",
    (1, 253),
    "gr-0.us-east-1"
);

impl TryFrom<String> for RouterId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::new(value)
    }
}

impl From<RouterId> for String {
    fn from(v: RouterId) -> String {
        v.0
    }
}

impl fmt::Display for RouterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `POST /v1/routers`: register or renew a Global Router replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouterRegistration {
    /// The replica's id.
    pub router_id: RouterId,
    /// Where it listens, `host:port`.
    pub address: HostPort,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// The lease asked for; the registry's default lease when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The router process; enables ownership checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Incarnation>,
    /// The router's own ordering of its intents; else the registrar assigns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub generation: Option<u64>,
}

impl Validate for RouterRegistration {
    fn validate(&self) -> Result<(), FieldError> {
        crate::requested_lease_fits(self.lease.as_ref())?;
        crate::generation_needs_incarnation(self.generation, self.incarnation.as_ref())
    }
}

impl RouterRegistration {
    /// The replica as it is served once registered.
    pub fn to_replica(&self) -> RouterReplica {
        RouterReplica {
            router_id: self.router_id.clone(),
            address: self.address.clone(),
            location: self.location.clone(),
        }
    }
}

/// A live router replica as `GET /v1/routers` serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouterReplica {
    /// The replica's id.
    pub router_id: RouterId,
    /// Where it listens.
    pub address: HostPort,
    /// Where it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
}

/// The reply to a router registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouterRegistered {
    /// The replica's id.
    pub router_id: RouterId,
    /// The generation now stored.
    pub generation: u64,
    /// The lease granted.
    pub lease: Lease,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    #[test]
    fn router_registration_parses_validates_and_round_trips() {
        let reg: RouterRegistration =
            parse(r#"{"router_id":"gr-0.us-east-1","address":"10.0.0.9:8080","extra":1}"#).unwrap();
        assert_eq!(reg.validate(), Ok(()));
        round_trip(&reg);
        round_trip(&reg.to_replica());
        round_trip(&RouterRegistered {
            router_id: reg.router_id.clone(),
            generation: 3,
            lease: Lease::new(30, 10).unwrap(),
        });
    }

    #[test]
    fn router_fields_are_named_when_invalid() {
        let (field, _) =
            parse::<RouterRegistration>(r#"{"router_id":"GR..0","address":"10.0.0.9:8080"}"#)
                .unwrap_err();
        assert_eq!(field, "router_id");
        let (field, _) =
            parse::<RouterRegistration>(r#"{"router_id":"gr-0","address":"nowhere"}"#).unwrap_err();
        assert_eq!(field, "address");
        let reg: RouterRegistration =
            parse(r#"{"router_id":"gr-0","address":"a:1","generation":4}"#).unwrap();
        assert_eq!(reg.validate().unwrap_err().field, "incarnation");
    }
}
