//! The one place where AWS SDK errors become [`StoreError`] kinds, and
//! their messages: one line naming the call, the table, its region and
//! endpoint ([`Target`]), and the cause, from the error's source chain
//! (never the SDK's debug dump).
//!
//! | SDK error | kind |
//! | --- | --- |
//! | credentials missing or failing to load | `Other` |
//! | dispatch failure (connect, IO), timeout, unparsable response | `Unavailable` |
//! | throttling and write conflicts the service asks to retry | `Unavailable` |
//! | HTTP 5xx, `InternalServerError`, `ServiceUnavailable` | `Unavailable` |
//! | `ResourceNotFoundException` (table or index missing) | `Missing` |
//! | anything else (validation, access denied, request construction) | `Other` |
//!
//! Undecodable items become `Corrupt` where they are decoded (see `item`).

use crate::StoreError;
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use std::error::Error;
use std::fmt;

/// Error codes that mean "too much right now": by the time the SDK's retries
/// gave up, the caller should back off and retry later.
const RETRY_LATER_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "TransactionConflictException",
    "ReplicatedWriteConflictException",
    "InternalServerError",
    "ServiceUnavailable",
];

/// What a credentials failure of the default chain is reported as, whichever
/// provider of the chain failed last (often instance metadata, which is
/// merely the last one tried).
pub const NO_CREDENTIALS: &str =
    "no AWS credentials found (environment, profile, web identity, instance metadata)";

/// Where a store's calls go: a table, in a region, at an endpoint. Every
/// storage error names all three, so that a wrong `--region` or
/// `--dynamodb-endpoint` shows in the message itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The table's name.
    pub table: String,
    /// The region of the replica.
    pub region: String,
    /// The endpoint: the override, or AWS's regional endpoint.
    pub endpoint: String,
}

impl Target {
    /// `table` in `region`, at `endpoint` or else AWS's regional endpoint.
    pub fn new(table: &str, region: &str, endpoint: Option<&str>) -> Self {
        let endpoint = match endpoint {
            Some(endpoint) => endpoint.to_owned(),
            None if region.starts_with("cn-") => {
                format!("https://dynamodb.{region}.amazonaws.com.cn")
            }
            None => format!("https://dynamodb.{region}.amazonaws.com"),
        };
        Self { table: table.to_owned(), region: region.to_owned(), endpoint }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "table {} in {} at {}", self.table, self.region, self.endpoint)
    }
}

/// A failed SDK call `op` on `target`, begun at `started`: recorded in
/// `mcs_store_requests_total` (outcome `timeout` when the call ran out of
/// time, else `error`), a timeout also logged at WARN with the call, the
/// table, region and endpoint and the time it took; then
/// [`from_sdk`]'s error.
pub(crate) fn failed<E>(
    op: &'static str,
    target: &Target,
    started: std::time::Instant,
    err: SdkError<E, HttpResponse>,
) -> StoreError
where
    E: ProvideErrorMetadata + Error + Send + Sync + 'static,
{
    let timed_out = matches!(err, SdkError::TimeoutError(_));
    super::record_request_metrics(op, started, if timed_out { "timeout" } else { "error" });
    let error = from_sdk(op, target, err);
    if timed_out {
        let elapsed_ms = started.elapsed().as_millis() as u64;
        tracing::warn!(op, table = %target.table, region = %target.region, endpoint = %target.endpoint, elapsed_ms, %error, "storage call timed out");
    }
    error
}

/// The kind of a failed SDK call `op` on `target`, with a one-line message.
pub(crate) fn from_sdk<E>(op: &str, target: &Target, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + Error + Send + Sync + 'static,
{
    match &err {
        _ if is_credentials(&err) => {
            StoreError::Other(format!("{op} on {target}: {}", cause(&err)))
        }
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_) => {
            StoreError::Unavailable(format!("{op} on {target}: {}", cause(&err)))
        }
        SdkError::ServiceError(ctx) => {
            let code = ctx.err().code().unwrap_or_default();
            // The service's own code and message say it all; the context
            // would add the whole raw response.
            let detail =
                format!("{op} on {target}: {code}: {}", ctx.err().message().unwrap_or_default());
            if code == "ResourceNotFoundException" {
                StoreError::Missing(format!(
                    "{op}: {target}: the table or its index does not exist (check --table, \
                     --region and --dynamodb-endpoint; mcs-admin migrate --create creates it)"
                ))
            } else if RETRY_LATER_CODES.contains(&code) || ctx.raw().status().is_server_error() {
                StoreError::Unavailable(detail)
            } else {
                StoreError::Other(detail)
            }
        }
        _ => StoreError::Other(format!("{op} on {target}: {}", cause(&err))),
    }
}

/// The error code of a service error, if the call got that far.
pub(crate) fn code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<&str> {
    err.as_service_error().and_then(|e| e.code())
}

/// `err` and its sources on one line, outermost first, each message once
/// (a layer that repeats what its source says adds nothing). A credentials
/// failure of the default chain is told as what it is: [`NO_CREDENTIALS`]
/// when no provider had any (the chain's last, instance metadata, failing
/// off EC2 included), else the provider's own error.
pub fn cause(err: &(dyn Error + 'static)) -> String {
    let parts = mcs_api::causes(err);
    let credentials = std::iter::successors(Some(err), |&e| e.source())
        .find_map(|e| e.downcast_ref::<CredentialsError>());
    match credentials {
        Some(CredentialsError::CredentialsNotLoaded(_)) => NO_CREDENTIALS.to_owned(),
        Some(_) if parts.iter().any(|p| p.contains("IMDS")) => {
            format!(
                "{NO_CREDENTIALS}; instance metadata: {}",
                parts.last().map_or("", String::as_str)
            )
        }
        Some(_) => format!("loading AWS credentials: {}", parts.last().map_or("", String::as_str)),
        None => parts.join(": "),
    }
}

/// Whether `err` failed for want of credentials: nothing a retry mends.
fn is_credentials(err: &(dyn Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(e) = next {
        if e.is::<CredentialsError>() {
            return true;
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<dyn Error + Send + Sync>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn the_cause_is_the_chain_on_one_line() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let chain = Layer(
            "dispatch failure",
            Some(Box::new(Layer(
                "io error",
                Some(Box::new(Layer("tcp\nconnect", Some(Box::new(refused))))),
            ))),
        );
        assert_eq!(cause(&chain), "dispatch failure: io error: tcp connect: refused");
    }

    #[test]
    fn a_credentials_failure_says_no_credentials() {
        let imds =
            CredentialsError::provider_error(Layer("failed to load IMDS session token", None));
        let chain = Layer("dispatch failure", Some(Box::new(imds)));
        let text = cause(&chain);
        assert!(text.starts_with(NO_CREDENTIALS), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn the_target_names_table_region_and_endpoint() {
        assert_eq!(
            Target::new("t", "eu-west-1", None).to_string(),
            "table t in eu-west-1 at https://dynamodb.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            Target::new("t", "cn-north-1", None).endpoint,
            "https://dynamodb.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(
            Target::new("t", "us-east-1", Some("http://localhost:8000")).to_string(),
            "table t in us-east-1 at http://localhost:8000"
        );
    }
}
