//! Errors as the API answers them: a status, a JSON [`ErrorBody`] and, for
//! `503`, `Retry-After`. Internals are logged, never sent.

use crate::registrar::WriteError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcs_api::{ErrorBody, ErrorCode, FieldError};
use mcs_store::StoreError;

/// Seconds a client should wait before retrying after a `503`.
pub const RETRY_AFTER_SECS: u64 = 1;

/// An error answer.
#[derive(Debug)]
pub enum ApiError {
    /// `400`: not well-formed.
    Malformed {
        /// The offending field, when known.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// `422`: a value breaks a rule.
    Invalid(FieldError),
    /// `403`: the caller's identity may not do this (`--authz spiffe`).
    Forbidden {
        /// The identity seen.
        identity: String,
        /// What it may not do.
        scope: String,
    },
    /// `404`.
    NotFound(String),
    /// `405`.
    MethodNotAllowed,
    /// `409` / `422` / `404` / `503` from the registrar.
    Write(WriteError),
    /// `413`: the body is over `--max-body-bytes` (a record whose stored
    /// item would be over the storage limit is `Write(Store(TooLarge))`).
    TooLarge(String),
    /// `408`: the body did not arrive in time.
    Timeout,
    /// `410`: an event watch's revision is not in the history.
    Expired {
        /// The offending query parameter.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// `501`: this registry does not take the request (pool and router
    /// writes under `--pool-discovery mcs|karmada`).
    NotImplemented,
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        ApiError::Write(e)
    }
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::Invalid(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            ApiError::Malformed { field, message } => {
                let mut body = ErrorBody::new(ErrorCode::Malformed, message);
                body.field = field;
                (StatusCode::BAD_REQUEST, body)
            }
            ApiError::Invalid(FieldError { field, message }) => {
                let mut body =
                    ErrorBody::new(ErrorCode::InvalidArgument, format!("{field}: {message}"));
                body.field = Some(field);
                (StatusCode::UNPROCESSABLE_ENTITY, body)
            }
            ApiError::Forbidden { identity, scope } => {
                let mut body = ErrorBody::new(
                    ErrorCode::Forbidden,
                    format!("identity {identity} may not {scope}"),
                );
                body.identity = Some(identity);
                body.scope = Some(scope);
                (StatusCode::FORBIDDEN, body)
            }
            ApiError::Expired { field, message } => {
                let mut body = ErrorBody::new(ErrorCode::Expired, message);
                body.field = Some(field);
                (StatusCode::GONE, body)
            }
            ApiError::NotFound(what) => {
                (StatusCode::NOT_FOUND, ErrorBody::new(ErrorCode::NotFound, what))
            }
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorBody::new(ErrorCode::Malformed, "method not allowed on this path"),
            ),
            ApiError::Timeout => (
                StatusCode::REQUEST_TIMEOUT,
                ErrorBody::new(
                    ErrorCode::RequestTimeout,
                    "the request body did not arrive in time",
                ),
            ),
            ApiError::NotImplemented => (
                StatusCode::NOT_IMPLEMENTED,
                ErrorBody::new(
                    ErrorCode::NotImplemented,
                    "this registry does not take this request",
                ),
            ),
            ApiError::TooLarge(message) => {
                (StatusCode::PAYLOAD_TOO_LARGE, ErrorBody::new(ErrorCode::PayloadTooLarge, message))
            }
            ApiError::Write(WriteError::Stale { stored }) => {
                let mut body = ErrorBody::new(
                    ErrorCode::StaleGeneration,
                    format!(
                        "generation {} by {} is stored; write a newer generation",
                        stored.generation, stored.writer
                    ),
                );
                body.stored_generation = Some(stored.generation);
                body.stored_writer = Some(stored.writer);
                (StatusCode::CONFLICT, body)
            }
            ApiError::Write(WriteError::Owned { owner, until_ms }) => {
                let mut body = ErrorBody::new(
                    ErrorCode::Owned,
                    format!("held by incarnation {owner} until {until_ms} (epoch ms)"),
                );
                body.owner = Some(owner);
                body.lease_until_ms = Some(until_ms);
                (StatusCode::CONFLICT, body)
            }
            ApiError::Write(WriteError::NotFound(key)) => (
                StatusCode::NOT_FOUND,
                ErrorBody::new(ErrorCode::NotFound, format!("{key} not found")),
            ),
            ApiError::Write(WriteError::Invalid(error)) => {
                return ApiError::Invalid(error).into_response();
            }
            ApiError::Write(WriteError::NotReady) => {
                return unavailable(
                    "the registry has not finished its first full read of storage; retry later",
                );
            }
            ApiError::Write(WriteError::Clock(error)) => {
                tracing::error!(%error, "cannot assign a generation");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorBody::new(ErrorCode::Internal, "internal error"),
                )
            }
            ApiError::Write(WriteError::Store(StoreError::TooLarge { size, limit, field })) => {
                let mut body = ErrorBody::new(
                    ErrorCode::PayloadTooLarge,
                    format!(
                        "the stored item would be {size} bytes, over the storage limit of {limit}{}",
                        field
                            .as_deref()
                            .map(|f| format!("; {f} is its largest part"))
                            .unwrap_or_default()
                    ),
                );
                body.field = field;
                (StatusCode::PAYLOAD_TOO_LARGE, body)
            }
            ApiError::Write(WriteError::Store(error)) => return store_error(error),
        };
        (status, axum::Json(body)).into_response()
    }
}

/// `503` with `Retry-After`: nothing was acknowledged, try again soon.
pub(crate) fn unavailable(message: &str) -> Response {
    let body = ErrorBody::new(ErrorCode::Unavailable, message);
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

fn store_error(error: StoreError) -> Response {
    if error.is_unavailable() {
        tracing::warn!(%error, "storage unavailable");
        return unavailable("storage unavailable; retry later");
    }
    if let StoreError::SchemaTooNew { found, .. } = error {
        // Another replica, of the release the table needs, may take it.
        return unavailable(&format!(
            "the storage table is at schema version {found}, past this registry's; it writes \
             nothing until it runs a release of that schema"
        ));
    }
    if let StoreError::Missing(_) = error {
        // The message names the table, its region and endpoint. Clients
        // retry a 503, not a 500: once the table is created again, they
        // get through.
        tracing::error!(%error, "storage table missing");
        return unavailable("the storage table is missing; retry later");
    }
    tracing::error!(%error, "storage error");
    let body = ErrorBody::new(ErrorCode::Internal, "internal error");
    (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
}

impl From<crate::authz::Denied> for ApiError {
    fn from(denied: crate::authz::Denied) -> Self {
        ApiError::Forbidden { identity: denied.identity, scope: denied.scope }
    }
}
