//! The client's errors: kinds a caller branches on, decoded from the
//! registry's JSON error body (`{error, message, field?, ...}`).

use http::StatusCode;
use mcs_api::{ErrorBody, ErrorCode};
use std::time::Duration;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `400`, `405`, `413`, `422` (and `408`): the request itself is wrong;
    /// `field` names the offending JSON path when the registry knows it.
    #[error("invalid request ({status}): {message}{}", field.as_deref().map(|f| format!(" (field {f})")).unwrap_or_default())]
    Invalid {
        /// The HTTP status.
        status: StatusCode,
        /// The registry's code (`malformed`, `invalid_argument`, ...).
        code: ErrorCode,
        /// The JSON path of the offending field.
        field: Option<String>,
        /// The registry's message.
        message: String,
    },
    /// `409`: someone else holds the lease, or the generation is stale.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// `404`: no such record (or route).
    #[error("not found: {message}")]
    NotFound {
        /// The registry's message.
        message: String,
    },
    /// `403`: the caller's identity may not do this.
    #[error("forbidden: {message}")]
    Forbidden {
        /// The registry's message (names the identity and the scope).
        message: String,
    },
    /// `503`: nothing was acknowledged; retry after `retry_after`.
    #[error("registry unavailable: {message}")]
    Unavailable {
        /// The registry's message.
        message: String,
        /// The `Retry-After` the registry sent.
        retry_after: Option<Duration>,
    },
    /// Any other status (`500` and codes this client does not know).
    #[error("registry answered {status}: {message}")]
    Server {
        /// The HTTP status.
        status: StatusCode,
        /// The registry's message, or the raw body.
        message: String,
    },
    /// No reply: connection refused or cut, TLS failure, timeout, or a
    /// reply body that did not parse. The message is the whole chain of
    /// causes (so it is not also the error's `source`), with a hint when
    /// it is a TLS failure with a usual cause: an unknown CA, a name or
    /// validity mismatch, a refused client certificate, https against a
    /// plain-http registry.
    #[error("transport: {}", transport_message(.0.as_ref()))]
    Transport(Box<dyn std::error::Error + Send + Sync>),
    /// A `2xx` reply whose body is not what the API promises.
    #[error("reply does not parse: {0}")]
    Decode(#[source] serde_json::Error),
    /// The client's own configuration: a refused `http://` URL, unreadable
    /// or invalid TLS files.
    #[error("client configuration: {0}")]
    Config(String),
    /// The configured [`crate::WriteFence`] refused the write; nothing was
    /// sent. Not retried: the fence says why.
    #[error("write not sent: {0}")]
    Fenced(String),
}

/// `error` and its causes, `: `-separated (a cause whose message its
/// parent already shows once is not repeated), then the TLS hint if any.
/// A transport failure of one request: its method and URL, then its cause.
#[derive(Debug, thiserror::Error)]
#[error("{target}")]
pub(crate) struct AtUrl {
    /// `METHOD URL`.
    pub(crate) target: String,
    /// What failed.
    #[source]
    pub(crate) source: Box<dyn std::error::Error + Send + Sync>,
}

fn transport_message(error: &(dyn std::error::Error + 'static)) -> String {
    let message = mcs_api::chain(error);
    let tls = std::iter::successors(Some(error), |&e| e.source()).find_map(rustls_error);
    match tls.and_then(tls_hint) {
        Some(hint) => format!("{message} (hint: {hint})"),
        None => message,
    }
}

/// The rustls error `e` is, or wraps in `io::Error`s (the TLS stream wraps
/// it once, the connector again; `io::Error::source` skips what it wraps).
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut e = e;
    loop {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        e = e.downcast_ref::<std::io::Error>()?.get_ref()?;
    }
}

/// What usually causes the TLS failure `e`, and what to check.
fn tls_hint(e: &rustls::Error) -> Option<&'static str> {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error as Tls};
    Some(match e {
        Tls::InvalidCertificate(Cert::UnknownIssuer) => {
            "the registry's certificate is not signed by a CA of the CA bundle: check that \
             the bundle (--registry-ca-file) holds the CA that issued it"
        }
        Tls::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            "the registry's certificate does not name the host of the URL"
        }
        Tls::InvalidCertificate(
            Cert::Expired
            | Cert::ExpiredContext { .. }
            | Cert::NotValidYet
            | Cert::NotValidYetContext { .. },
        ) => "the registry's certificate is outside its validity (or this host's clock is wrong)",
        Tls::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            "the registry did not answer TLS: does it serve plain http? Use its https port, \
             or an http:// URL where plain http is allowed"
        }
        Tls::AlertReceived(
            Alert::CertificateRequired
            | Alert::BadCertificate
            | Alert::UnknownCA
            | Alert::CertificateUnknown,
        ) => {
            "the registry refused this client's certificate (mTLS): check the client \
             certificate and that the registry's client CA issued it"
        }
        _ => return None,
    })
}

/// What a `409` says is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// Another incarnation holds the record's live lease.
    Owned {
        /// The holder's incarnation.
        owner: Option<String>,
        /// When its lease ends, in epoch milliseconds.
        lease_until_ms: Option<u64>,
    },
    /// The write's generation is not above the stored one.
    StaleGeneration {
        /// The stored generation to move past.
        stored_generation: Option<u64>,
        /// Who wrote it.
        stored_writer: Option<String>,
    },
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Owned { owner, lease_until_ms } => {
                write!(f, "owned by {owner:?} until {lease_until_ms:?} ms")
            }
            Self::StaleGeneration { stored_generation, stored_writer } => {
                write!(f, "stale generation: stored {stored_generation:?} by {stored_writer:?}")
            }
        }
    }
}

impl Error {
    /// Whether the call may be retried: `503` and transport failures, never
    /// a `4xx`.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Transport(_))
    }

    /// The `Retry-After` of a `503`, if the registry sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Builds the error of a non-2xx reply to `target` (`METHOD URL`) from
    /// its status, `Retry-After` and body. A body that is not the registry's
    /// JSON error (a proxy's page, another server at that URL) is told as
    /// such, naming `target`, with its start on one line.
    pub fn from_reply(
        target: &str,
        status: StatusCode,
        retry_after: Option<Duration>,
        body: &[u8],
    ) -> Self {
        let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
        let message = match &parsed {
            Some(body) => body.message.clone(),
            None => {
                let text = String::from_utf8_lossy(body);
                let mut start: String = mcs_api::one_line(&text).chars().take(120).collect();
                if start.is_empty() {
                    start = "(empty body)".into();
                }
                format!(
                    "{target}: a reply that is not the registry's (no JSON error body; is this \
                     the registry's URL?): {start}"
                )
            }
        };
        match status {
            StatusCode::NOT_FOUND => Self::NotFound { message },
            StatusCode::FORBIDDEN => Self::Forbidden { message },
            StatusCode::SERVICE_UNAVAILABLE => Self::Unavailable { message, retry_after },
            StatusCode::CONFLICT => {
                let body = parsed.unwrap_or_else(|| ErrorBody::new(ErrorCode::Unknown, ""));
                Self::Conflict(match body.error {
                    ErrorCode::StaleGeneration => Conflict::StaleGeneration {
                        stored_generation: body.stored_generation,
                        stored_writer: body.stored_writer,
                    },
                    _ => Conflict::Owned { owner: body.owner, lease_until_ms: body.lease_until_ms },
                })
            }
            s if s.is_client_error() => Self::Invalid {
                status,
                code: parsed.as_ref().map_or(ErrorCode::Unknown, |b| b.error),
                field: parsed.and_then(|b| b.field),
                message,
            },
            _ => Self::Server { status, message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transport_message_names_every_cause_once_and_hints_at_tls_causes() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let io = std::io::Error::other(io);
        let error = Error::Transport(Box::new(Wrapped("client error (Connect)", io)));
        let text = error.to_string();
        assert!(
            text.starts_with(
                "transport: client error (Connect): invalid peer certificate: UnknownIssuer (hint: "
            ),
            "{text}"
        );
        assert!(text.contains("--registry-ca-file"), "{text}");
        assert_eq!(text.matches("UnknownIssuer").count(), 1, "{text}");
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = Error::Transport(Box::new(Wrapped("client error (Connect)", refused)));
        assert_eq!(error.to_string(), "transport: client error (Connect): refused");
        assert!(std::error::Error::source(&error).is_none(), "the message holds the chain");
    }

    /// An error with a message and a cause, like hyper-util's.
    #[derive(Debug)]
    struct Wrapped(&'static str, std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }

    /// Before: another server's 404 page, whole and on many lines, naming
    /// no URL (`not found: <!DOCTYPE HTML>\n<html lang="en">…`).
    #[test]
    fn a_reply_not_from_a_registry_names_the_url_on_one_line() {
        let page = format!("<!DOCTYPE HTML>\n<html lang=\"en\">\n  <head>{}", "x".repeat(500));
        let error = Error::from_reply(
            "GET http://10.0.0.9/v1/status",
            StatusCode::NOT_FOUND,
            None,
            page.as_bytes(),
        );
        let Error::NotFound { message } = &error else { panic!("{error:?}") };
        assert!(
            message.starts_with("GET http://10.0.0.9/v1/status: a reply that is not"),
            "{message}"
        );
        assert!(message.contains("<!DOCTYPE HTML> <html lang=\"en\"> <head>x"), "{message}");
        assert!(!message.contains('\n') && message.len() < 250, "{message}");
        let empty = Error::from_reply("GET http://r/", StatusCode::BAD_GATEWAY, None, b"");
        assert!(empty.to_string().ends_with("(empty body)"), "{empty}");
        // The registry's own error body: its message alone, as before.
        let own = Error::from_reply(
            "GET http://r/v1/pools/x",
            StatusCode::NOT_FOUND,
            None,
            br#"{"error":"not_found","message":"no such pool"}"#,
        );
        assert_eq!(own.to_string(), "not found: no such pool");
    }

    #[test]
    fn statuses_and_bodies_map_to_kinds() {
        let reply =
            |status, body: &[u8]| Error::from_reply("GET http://r/v1/pools", status, None, body);
        let invalid = reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            br#"{"error":"invalid_argument","message":"bad","field":"pool_key.namespace"}"#,
        );
        assert!(
            matches!(&invalid, Error::Invalid { field: Some(f), code: ErrorCode::InvalidArgument, .. } if f == "pool_key.namespace"),
            "{invalid:?}"
        );
        assert!(!invalid.is_retryable());
        let owned = reply(
            StatusCode::CONFLICT,
            br#"{"error":"owned","message":"m","owner":"a","lease_until_ms":5}"#,
        );
        assert!(matches!(
            owned,
            Error::Conflict(Conflict::Owned { owner: Some(ref o), lease_until_ms: Some(5) }) if o == "a"
        ));
        let stale = reply(
            StatusCode::CONFLICT,
            br#"{"error":"stale_generation","message":"m","stored_generation":7,"stored_writer":"w"}"#,
        );
        assert!(matches!(
            stale,
            Error::Conflict(Conflict::StaleGeneration { stored_generation: Some(7), .. })
        ));
        let unavailable = Error::from_reply(
            "GET http://r/v1/pools",
            StatusCode::SERVICE_UNAVAILABLE,
            Some(Duration::from_secs(2)),
            b"not json from a proxy",
        );
        assert!(unavailable.is_retryable());
        assert!(
            matches!(unavailable, Error::Unavailable { retry_after: Some(d), .. } if d.as_secs() == 2)
        );
        let forbidden = reply(StatusCode::FORBIDDEN, br#"{"error":"forbidden","message":"no"}"#);
        assert!(matches!(forbidden, Error::Forbidden { .. }), "{forbidden:?}");
        let server = reply(StatusCode::INTERNAL_SERVER_ERROR, b"");
        assert!(matches!(server, Error::Server { .. }), "{server:?}");
    }
}
