//! The error body every non-2xx reply carries.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What went wrong, as a code a client can branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// `400`: the body or query is not well-formed.
    Malformed,
    /// `422`: well-formed but a value breaks a rule; `field` names it.
    InvalidArgument,
    /// `403`: the caller's identity may not do this (`--authz spiffe`);
    /// `identity` and `scope` say who and what.
    Forbidden,
    /// `404`: no such record or route.
    NotFound,
    /// `409`: the write's generation is not above the stored one.
    StaleGeneration,
    /// `409`: another incarnation holds the record's live lease.
    Owned,
    /// `408`: the request body did not arrive in time.
    RequestTimeout,
    /// `413`: the body is over the size limit.
    PayloadTooLarge,
    /// `410`: the `resource_version` of an event watch is older than the
    /// registry's history, or another process's; list again (one request:
    /// a watch without it). Also the `ERROR` event of a stream whose
    /// watcher fell too far behind.
    Expired,
    /// `503`: storage is unavailable; retry after `Retry-After`.
    Unavailable,
    /// `500`: a fault of the registry itself.
    Internal,
    /// `501`: this registry does not take this request (pool and router
    /// registrations while it discovers them from Kubernetes).
    NotImplemented,
    /// Any code this version does not know yet.
    #[serde(other)]
    Unknown,
}

/// `{"error", "message", "field"?}` plus, on `409`, what is stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The kind of error.
    pub error: ErrorCode,
    /// A lowercase human sentence.
    pub message: String,
    /// The JSON path of the offending field, for `400` and `422` (`body`
    /// for the document itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// On `stale_generation`: the stored generation to move past.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_generation: Option<u64>,
    /// On `stale_generation`: the writer of the stored generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_writer: Option<String>,
    /// On `owned`: the incarnation that holds the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// On `owned`: when that lease expires, in epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<u64>,
    /// On `forbidden`: the identity the client certificate gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// On `forbidden`: what that identity may not do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl ErrorBody {
    /// An error with a code and a message and nothing else.
    pub fn new(error: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error,
            message: message.into(),
            field: None,
            stored_generation: None,
            stored_writer: None,
            owner: None,
            lease_until_ms: None,
            identity: None,
            scope: None,
        }
    }
}

/// A rule broken by one field, named by its JSON path (`pool_key.namespace`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the field.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// A new field error.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// The messages of `error` and of each error under it (`source()`), for a
/// log line or a CLI's last words: each on one line (runs of whitespace
/// made one space), and a message left out when one already kept contains
/// it (a wrapper that repeats its cause, as kube's `ServiceError: {0}` and
/// the AWS SDK's errors do).
pub fn causes(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    for e in std::iter::successors(Some(error), |&e| e.source()) {
        let text = one_line(&e.to_string());
        if !text.is_empty() && !kept.iter().any(|k| k.contains(&text)) {
            kept.push(text);
        }
    }
    kept
}

/// `text` on one line: every run of whitespace (newlines included) made
/// one space, none at either end.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// [`causes`] joined with `: `, outermost first: `error` with its whole
/// cause chain, e.g. `ServiceError: client error (Connect): tcp connect
/// error: Connection refused (os error 111)`.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    causes(error).join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    #[test]
    fn one_line_makes_every_run_of_whitespace_one_space() {
        assert_eq!(one_line("  <html>\n  <head>\t x </head>\r\n"), "<html> <head> x </head>");
        assert_eq!(one_line("plain"), "plain");
        assert_eq!(one_line(" \n\t "), "");
    }

    #[test]
    fn error_body_round_trips_with_and_without_details() {
        round_trip(&ErrorBody::new(ErrorCode::Unavailable, "storage unavailable"));
        let mut owned = ErrorBody::new(ErrorCode::Owned, "pool is owned");
        owned.owner = Some("a".into());
        owned.lease_until_ms = Some(5);
        round_trip(&owned);
    }

    #[test]
    fn unknown_codes_parse_as_unknown() {
        let body: ErrorBody = parse(r#"{"error":"brand_new","message":"m"}"#).unwrap();
        assert_eq!(body.error, ErrorCode::Unknown);
    }

    /// An error whose message may repeat its cause's, as wrappers do.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn the_chain_names_every_cause_once_on_one_line() {
        let refused = Layer("Connection refused\n (os error 111)", None);
        let connect = Layer("tcp connect error", Some(Box::new(refused)));
        let client = Layer("client error (Connect)", Some(Box::new(connect)));
        let empty = Layer("", Some(Box::new(client)));
        let kube = Layer("ServiceError: client error (Connect)", Some(Box::new(empty)));
        assert_eq!(
            causes(&kube),
            [
                "ServiceError: client error (Connect)",
                "tcp connect error",
                "Connection refused (os error 111)"
            ]
        );
        assert_eq!(
            chain(&kube),
            "ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
        assert_eq!(chain(&Layer("alone", None)), "alone");
    }

    #[test]
    fn error_body_without_message_does_not_parse() {
        assert!(parse::<ErrorBody>(r#"{"error":"malformed"}"#).is_err());
    }
}
