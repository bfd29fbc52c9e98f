//! Query strings of the API.

use crate::{FieldError, Incarnation, Validate};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

/// `GET` lists: `?watch=true&timeout_secs=N` long-polls until the
/// fingerprint differs from the request's `If-None-Match`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Wait for a change instead of answering at once.
    #[serde(default)]
    pub watch: bool,
    /// How long to wait at most, with `watch=true` only; the server caps it.
    #[param(minimum = 1)]
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

impl Validate for ListQuery {
    fn validate(&self) -> Result<(), FieldError> {
        if self.timeout_secs == Some(0) {
            return Err(FieldError::new("timeout_secs", "must be above zero"));
        }
        if self.timeout_secs.is_some() && !self.watch {
            return Err(FieldError::new("timeout_secs", "only with watch=true"));
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
        let watch = ListQuery { watch: true, timeout_secs: Some(5) };
        assert_eq!(watch.validate(), Ok(()));
        round_trip(&watch);
        let zero = ListQuery { watch: true, timeout_secs: Some(0) };
        assert_eq!(zero.validate().unwrap_err().field, "timeout_secs");
        let no_watch = ListQuery { watch: false, timeout_secs: Some(3) };
        assert_eq!(no_watch.validate().unwrap_err().field, "timeout_secs");
        let w = Withdrawal { incarnation: None, generation: Some(3) };
        assert_eq!(w.validate().unwrap_err().field, "incarnation");
        round_trip(&Withdrawal {
            incarnation: Some(Incarnation::new("x").unwrap()),
            generation: Some(3),
        });
    }
}
