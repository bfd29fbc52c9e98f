//! What the fuzz targets share: the server's parsing of request bodies and
//! query strings, mirrored from `crates/mcs-registry/src/http/extract.rs`
//! (the registry is a binary crate; its extractors need an axum request).
//! Keep the two in step.

use mcs_api::{FieldError, Validate};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Why a body or a query was refused; the fuzz targets only need to know
/// that it was, without a panic.
#[derive(Debug)]
pub enum Refused {
    /// Not JSON, or not of the type's shape (`400` or `422` on the wire).
    Parse(String),
    /// Parsed, but a cross-field rule is broken (`422`).
    Invalid(FieldError),
}

/// Parses a JSON body as `ValidJson<T>` does: serde_path_to_error over
/// serde_json, nothing after the value, then [`Validate`].
pub fn parse_body<T: DeserializeOwned + Validate>(bytes: &[u8]) -> Result<T, Refused> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| Refused::Parse(format!("{}: {}", e.path(), e.inner())))?;
    de.end().map_err(|e| Refused::Parse(e.to_string()))?;
    value.validate().map_err(Refused::Invalid)?;
    Ok(value)
}

/// Parses a query string as `ValidQuery<T>` does: serde_urlencoded over
/// form_urlencoded pairs, then [`Validate`].
pub fn parse_query<T: DeserializeOwned + Validate>(query: &[u8]) -> Result<T, Refused> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query));
    let value: T = serde_path_to_error::deserialize(de)
        .map_err(|e| Refused::Parse(format!("{}: {}", e.path(), e.inner())))?;
    value.validate().map_err(Refused::Invalid)?;
    Ok(value)
}

/// Parses `bytes` as a body of `T`; a value that the server would accept
/// must serialize, parse and validate again to an equal value.
pub fn body_round_trips<T>(bytes: &[u8])
where
    T: DeserializeOwned + Validate + Serialize + PartialEq + Debug,
{
    let Ok(value) = parse_body::<T>(bytes) else { return };
    let json = serde_json::to_vec(&value).expect("an accepted body serializes");
    match parse_body::<T>(&json) {
        Ok(back) => {
            assert_eq!(back, value, "round trip through {}", String::from_utf8_lossy(&json))
        }
        Err(e) => {
            panic!("{value:?} serialized as {} is refused: {e:?}", String::from_utf8_lossy(&json))
        }
    }
}

/// Parses `query` as a query string of `T`; an accepted value must encode,
/// parse and validate again to an equal value.
pub fn query_round_trips<T>(query: &[u8])
where
    T: DeserializeOwned + Validate + Serialize + PartialEq + Debug,
{
    let Ok(value) = parse_query::<T>(query) else { return };
    let encoded = serde_urlencoded::to_string(&value).expect("an accepted query encodes");
    match parse_query::<T>(encoded.as_bytes()) {
        Ok(back) => assert_eq!(back, value, "round trip through {encoded:?}"),
        Err(e) => panic!("{value:?} encoded as {encoded:?} is refused: {e:?}"),
    }
}
