//! The one place where AWS SDK errors become [`StoreError`] kinds.
//!
//! | SDK error | kind |
//! | --- | --- |
//! | dispatch failure (connect, IO, credentials), timeout, unparsable response | `Unavailable` |
//! | throttling and write conflicts the service asks to retry | `Unavailable` |
//! | HTTP 5xx, `InternalServerError`, `ServiceUnavailable` | `Unavailable` |
//! | `ResourceNotFoundException` (table or index missing) | `Schema` |
//! | anything else (validation, access denied, request construction) | `Other` |
//!
//! Undecodable items become `Corrupt` where they are decoded (see `item`).

use crate::StoreError;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

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

/// The kind of a failed SDK call `op` on `table`.
pub(crate) fn from_sdk<E>(op: &str, table: &str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let detail = format!("{op} on {table}: {}", DisplayErrorContext(&err));
    match &err {
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) | SdkError::ResponseError(_) => {
            StoreError::Unavailable(detail)
        }
        SdkError::ServiceError(ctx) => {
            let code = ctx.err().code().unwrap_or_default();
            // The service's own code and message say it all; the context
            // would add the whole raw response.
            let detail =
                format!("{op} on {table}: {code}: {}", ctx.err().message().unwrap_or_default());
            if code == "ResourceNotFoundException" {
                StoreError::Schema(format!(
                    "{op}: table {table} or its index does not exist (run mcs-admin migrate)"
                ))
            } else if RETRY_LATER_CODES.contains(&code) || ctx.raw().status().is_server_error() {
                StoreError::Unavailable(detail)
            } else {
                StoreError::Other(detail)
            }
        }
        _ => StoreError::Other(detail),
    }
}

/// The error code of a service error, if the call got that far.
pub(crate) fn code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> Option<&str> {
    err.as_service_error().and_then(|e| e.code())
}
