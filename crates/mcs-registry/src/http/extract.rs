//! Extractors that parse and validate in one pass and name the failing
//! field: malformed input is `400`, a broken rule `422`, a body over the
//! limit `413`; every refusal is an `ErrorBody`.

use super::AppState;
use super::error::ApiError;
use crate::authz::{Caller, Scope};
use axum::extract::State;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use mcs_api::{FieldError, Validate};
use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use std::convert::Infallible;
use std::sync::Arc;

/// A JSON body of `T`, parsed while validated.
#[derive(Debug)]
pub struct ValidJson<T>(pub T);

impl<T: DeserializeOwned + Validate> FromRequest<Arc<AppState>> for ValidJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        // A client that sends its body too slowly holds a connection and a
        // task; bound it like the rest of the request.
        let read = tokio::time::timeout(state.request_timeout, Bytes::from_request(req, state));
        let bytes = read.await.map_err(|_| ApiError::Timeout)?.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge("request body is over the size limit".into())
            } else {
                ApiError::Malformed { field: Some(BODY.into()), message: rejection.body_text() }
            }
        })?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value: T = serde_path_to_error::deserialize(&mut de).map_err(json_error)?;
        de.end().map_err(|e| ApiError::Malformed {
            field: Some(BODY.into()),
            message: format!("malformed JSON: {e}"),
        })?;
        value.validate()?;
        Ok(ValidJson(value))
    }
}

/// The `field` of an error in the document itself rather than in one of
/// its fields.
const BODY: &str = "body";

fn json_error(error: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = error.path().to_string();
    let field = known_field(error.path());
    let inner = error.into_inner();
    let message = inner.to_string();
    match inner.classify() {
        serde_json::error::Category::Data => ApiError::Invalid(FieldError::new(
            field_name(&path, &message),
            strip_position(&message),
        )),
        _ => ApiError::Malformed {
            field: Some(field),
            message: format!("malformed JSON: {message}"),
        },
    }
}

/// The deepest field of `path` the parser had read the name of: a syntax
/// error inside a key leaves a segment serde_path_to_error writes `?`;
/// [`BODY`] when no field was reached.
fn known_field(path: &serde_path_to_error::Path) -> String {
    let mut field = String::new();
    for segment in path.iter().take_while(|s| !matches!(s, Segment::Unknown)) {
        if !field.is_empty() && !matches!(segment, Segment::Seq { .. }) {
            field.push('.');
        }
        field.push_str(&segment.to_string());
    }
    if field.is_empty() { BODY.to_owned() } else { field }
}

/// The failing field's path; for a missing field, the path of the field
/// itself rather than of its parent.
fn field_name(path: &str, message: &str) -> String {
    let missing = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
    match (path, missing) {
        (".", Some(field)) => field.to_owned(),
        (parent, Some(field)) => format!("{parent}.{field}"),
        (".", None) => BODY.to_owned(),
        (path, None) => path.to_owned(),
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// A query string of `T`, parsed while validated.
#[derive(Debug)]
pub struct ValidQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Validate> FromRequestParts<S> for ValidQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        let value: T = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let message = e.into_inner().to_string();
            ApiError::Invalid(FieldError::new(field_name(&path, &message), message))
        })?;
        value.validate()?;
        Ok(ValidQuery(value))
    }
}

/// Path segments as `T` (strings, checked by the handler), refused as an
/// `ErrorBody` naming the segment: axum's own rejection is plain text.
#[derive(Debug)]
pub struct Segments<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Segments<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Segments(value)),
            Err(rejection) => Err(path_error(rejection)),
        }
    }
}

fn path_error(rejection: PathRejection) -> ApiError {
    let field = match &rejection {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::InvalidUtf8InPathParam { key }
            | ErrorKind::ParseErrorAtKey { key, .. }
            | ErrorKind::DeserializeError { key, .. } => Some(key.clone()),
            _ => None,
        },
        _ => None,
    };
    ApiError::Malformed { field, message: rejection.body_text() }
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        Ok(Caller::of(parts, state.spiffe_trust_domain.as_deref()))
    }
}

/// A layer of the API router: under `--authz spiffe`, only the identities
/// of the trust domain may send any request (reads included).
pub async fn authenticate(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    if let Err(denied) = Caller::of(&parts, state.spiffe_trust_domain.as_deref()).allow(Scope::Read)
    {
        return ApiError::from(denied).into_response();
    }
    next.run(Request::from_parts(parts, body)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names() {
        assert_eq!(field_name(".", "missing field `model`"), "model");
        assert_eq!(field_name("pool_key", "missing field `dgd_name`"), "pool_key.dgd_name");
        assert_eq!(field_name("capacity.workers", "invalid value"), "capacity.workers");
        assert_eq!(field_name(".", "invalid type: string"), "body");
        assert_eq!(strip_position("must not be blank at line 1 column 9"), "must not be blank");
    }
}
