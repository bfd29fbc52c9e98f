//! How a [`Client`](crate::Client) connects, retries and fences its
//! writes: a floor below the client and its TLS transport.

use crate::backoff::Backoff;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The TLS files of a client: the CA bundle that signs the registry's
/// certificate and, for mTLS, the client's certificate chain and key (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificates (PEM) trusted for the registry's certificate.
    pub ca_bundle: PathBuf,
    /// `(certificate chain, private key)` presented to the registry.
    pub client_identity: Option<(PathBuf, PathBuf)>,
}

/// How a [`Client`](crate::Client) connects and retries.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The registry's base URL, `https://registry.example:8080`.
    pub base_url: String,
    /// TLS files; without them only system-less empty roots are trusted, so
    /// an `https://` URL needs them.
    pub tls: Option<TlsFiles>,
    /// Allow a plain `http://` base URL (tests, a sidecar on loopback);
    /// refused otherwise.
    pub allow_insecure_http: bool,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed for one attempt of a call (a watch adds its wait).
    pub request_timeout: Duration,
    /// How long a call keeps retrying `503`s and transport errors.
    pub retry_deadline: Duration,
    /// Delays between retries.
    pub backoff: Backoff,
    /// How long a watch waits on the registry for a change, per request.
    pub watch_timeout: Duration,
    /// How long a watch waits after yielding a list before it asks for
    /// the next one (zero: at once). A change after a quiet spell still
    /// comes at once (the watch is waiting on the registry); a stream of
    /// changes comes as at most one list per interval, so a consumer that
    /// reads whole lists is not handed one per change.
    pub watch_min_interval: Duration,
    /// How often at most the TLS files are checked for a change.
    pub tls_reload_check: Duration,
    /// Checked before every attempt of a write (registration, renewal,
    /// export, withdrawal); a write it refuses is not sent and fails with
    /// [`Error::Fenced`](crate::Error::Fenced). The controller fences its writes with its
    /// leadership, so a deposed leader writes nothing.
    pub write_fence: Option<Arc<dyn WriteFence>>,
}

/// A check before each write of a [`Client`](crate::Client) (see
/// [`ClientConfig::write_fence`]).
pub trait WriteFence: std::fmt::Debug + Send + Sync {
    /// `Err(why)` refuses the write.
    fn check(&self) -> Result<(), String>;
}

impl ClientConfig {
    /// Defaults for `base_url`: 5 s to connect, 10 s an attempt, retries
    /// for 30 s, watches of 30 s asking again at once, TLS files checked
    /// every 5 s.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            tls: None,
            allow_insecure_http: false,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            retry_deadline: Duration::from_secs(30),
            backoff: Backoff::default(),
            watch_timeout: Duration::from_secs(30),
            watch_min_interval: Duration::ZERO,
            tls_reload_check: Duration::from_secs(5),
            write_fence: None,
        }
    }
}
