//! The lease a registration is granted.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How long a registration lives without a heartbeat, and how often the
/// registry asks for one. Parses only when `0 < heartbeat_interval_secs <
/// duration_secs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(try_from = "LeaseWire")]
#[schema(description = "A lease: how long a registration lives without a heartbeat (at most one \
day) and how often to renew it; `0 < heartbeat_interval_secs < duration_secs`.")]
pub struct Lease {
    /// Lifetime of the lease from the write that granted it.
    #[schema(minimum = 2, maximum = 86_400)]
    pub duration_secs: u64,
    /// How often the holder should renew.
    #[schema(minimum = 1, maximum = 86_399)]
    pub heartbeat_interval_secs: u64,
}

#[derive(Deserialize)]
struct LeaseWire {
    duration_secs: u64,
    heartbeat_interval_secs: Interval,
}

/// A heartbeat interval, refused at its own field when zero (so that the
/// error's path names `heartbeat_interval_secs`, not only the lease).
#[derive(Deserialize)]
#[serde(try_from = "u64")]
struct Interval(u64);

impl TryFrom<u64> for Interval {
    type Error = &'static str;
    fn try_from(secs: u64) -> Result<Self, Self::Error> {
        if secs == 0 { Err("heartbeat_interval_secs must be above zero") } else { Ok(Self(secs)) }
    }
}

impl Lease {
    /// The longest lease the registry grants: one day.
    pub const MAX_DURATION_SECS: u64 = 24 * 60 * 60;

    /// A lease, if `0 < heartbeat_interval_secs < duration_secs`.
    pub fn new(duration_secs: u64, heartbeat_interval_secs: u64) -> Result<Self, String> {
        if heartbeat_interval_secs == 0 {
            return Err("heartbeat_interval_secs must be above zero".into());
        }
        if heartbeat_interval_secs >= duration_secs {
            return Err(format!(
                "heartbeat_interval_secs ({heartbeat_interval_secs}) must be below duration_secs ({duration_secs})"
            ));
        }
        Ok(Self { duration_secs, heartbeat_interval_secs })
    }
}

impl TryFrom<LeaseWire> for Lease {
    type Error = String;
    fn try_from(w: LeaseWire) -> Result<Self, String> {
        Self::new(w.duration_secs, w.heartbeat_interval_secs.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    #[test]
    fn lease_parses_only_when_interval_is_inside_the_lease() {
        let cases = [
            (30, 10, true),
            (2, 1, true),
            (30, 30, false),
            (30, 31, false),
            (30, 0, false),
            (0, 0, false),
        ];
        for (duration, interval, ok) in cases {
            let json =
                format!(r#"{{"duration_secs":{duration},"heartbeat_interval_secs":{interval}}}"#);
            assert_eq!(parse::<Lease>(&json).is_ok(), ok, "{json}");
        }
    }

    /// A zero interval is the interval's own fault, named by its path (before:
    /// the error named only `lease`).
    #[test]
    fn a_zero_interval_is_refused_at_its_own_field() {
        let json = r#"{"lease":{"duration_secs":30,"heartbeat_interval_secs":0}}"#;
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Holder {
            lease: Lease,
        }
        let error = serde_path_to_error::deserialize::<_, Holder>(
            &mut serde_json::Deserializer::from_str(json),
        )
        .unwrap_err();
        assert_eq!(error.path().to_string(), "lease.heartbeat_interval_secs");
        assert!(error.inner().to_string().contains("must be above zero"), "{error}");
    }

    #[test]
    fn lease_round_trips() {
        round_trip(&Lease::new(30, 10).unwrap());
    }
}
