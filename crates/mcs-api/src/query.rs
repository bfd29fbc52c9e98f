//! Query strings of the API.

use crate::{FieldError, Incarnation, Validate};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

/// `GET` lists: `?watch=true&timeout_secs=N` long-polls until the
/// fingerprint differs from the request's `If-None-Match`;
/// `?watch=events[&resource_version=R]` streams the list's changes as
/// newline-delimited [`crate::WatchEvent`]s (docs/api.md, Event watches).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `true`: wait for a change instead of answering at once (a
    /// long-poll); `events`: stream the changes.
    #[param(inline)]
    #[serde(default)]
    pub watch: Watch,
    /// How long to wait at most (or to stream, with `watch=events`); the
    /// server caps it.
    #[param(minimum = 1)]
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// With `watch=events`: the revision (of a `BOOKMARK`) to stream the
    /// changes after, instead of the whole list first. Opaque, and
    /// meaningful only to the process that sent it.
    #[param(max_length = 64)]
    #[serde(default)]
    pub resource_version: Option<String>,
}

/// How a list request waits: not at all, for a change, or streaming events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum Watch {
    /// Answer at once.
    #[default]
    #[serde(rename = "false")]
    No,
    /// Long-poll: answer once the list's `ETag` is not the request's.
    #[serde(rename = "true")]
    Poll,
    /// Stream the list's changes as newline-delimited events.
    #[serde(rename = "events")]
    Events,
}

/// Longest `resource_version` accepted (the registry's are far shorter).
pub const MAX_RESOURCE_VERSION_LEN: usize = 64;

impl Validate for ListQuery {
    fn validate(&self) -> Result<(), FieldError> {
        if self.timeout_secs == Some(0) {
            return Err(FieldError::new("timeout_secs", "must be above zero"));
        }
        if self.timeout_secs.is_some() && self.watch == Watch::No {
            return Err(FieldError::new("timeout_secs", "only with watch=true or watch=events"));
        }
        if let Some(version) = &self.resource_version {
            if self.watch != Watch::Events {
                return Err(FieldError::new("resource_version", "only with watch=events"));
            }
            if version.is_empty() || version.len() > MAX_RESOURCE_VERSION_LEN {
                return Err(FieldError::new(
                    "resource_version",
                    format!("must be 1 to {MAX_RESOURCE_VERSION_LEN} characters"),
                ));
            }
        }
        Ok(())
    }
}

/// `DELETE` of a record: `?incarnation=..&generation=..`, both optional. A
/// holder of a lease names itself to pass the ownership check (for an
/// export, the holder of its cluster's lease, while that lease is live); a
/// writer that orders its own intents names the generation of the
/// withdrawal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Withdrawal {
    /// The withdrawing incarnation; for an export, that of its cluster's
    /// lease holder while the lease is live.
    #[serde(default)]
    pub incarnation: Option<Incarnation>,
    /// The withdrawal's generation; needs `incarnation`.
    #[param(minimum = 1)]
    #[serde(default)]
    pub generation: Option<u64>,
}

impl Validate for Withdrawal {
    fn validate(&self) -> Result<(), FieldError> {
        crate::generation_needs_incarnation(self.generation, self.incarnation.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::round_trip;

    #[test]
    fn query_rules() {
        let watch = ListQuery { watch: Watch::Poll, timeout_secs: Some(5), ..Default::default() };
        assert_eq!(watch.validate(), Ok(()));
        round_trip(&watch);
        let zero = ListQuery { timeout_secs: Some(0), ..watch.clone() };
        assert_eq!(zero.validate().unwrap_err().field, "timeout_secs");
        let no_watch = ListQuery { watch: Watch::No, ..watch.clone() };
        assert_eq!(no_watch.validate().unwrap_err().field, "timeout_secs");
        let events = ListQuery {
            watch: Watch::Events,
            timeout_secs: Some(5),
            resource_version: Some("x".repeat(MAX_RESOURCE_VERSION_LEN)),
        };
        assert_eq!(events.validate(), Ok(()));
        round_trip(&events);
        let polled = ListQuery { watch: Watch::Poll, ..events.clone() };
        assert_eq!(polled.validate().unwrap_err().field, "resource_version");
        for bad in [String::new(), "x".repeat(MAX_RESOURCE_VERSION_LEN + 1)] {
            let bad = ListQuery { resource_version: Some(bad), ..events.clone() };
            assert_eq!(bad.validate().unwrap_err().field, "resource_version");
        }
        let w = Withdrawal { incarnation: None, generation: Some(3) };
        assert_eq!(w.validate().unwrap_err().field, "incarnation");
        round_trip(&Withdrawal {
            incarnation: Some(Incarnation::new("x").unwrap()),
            generation: Some(3),
        });
    }
}
