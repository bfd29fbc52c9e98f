//! TLS on the API port (and the admin port with `--admin-tls`), with
//! rustls and its aws-lc-rs provider (the one the AWS SDK already builds):
//! TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`, client certificates required
//! and verified against `--tls-client-ca-file` when it is set.
//!
//! The files are read again every [`RELOAD_POLL`] and, when their contents
//! changed, loaded into a new rustls configuration that new handshakes use;
//! established connections keep the one they began with. This works with
//! however the files are replaced (cert-manager rewriting a Secret, the
//! kubelet swapping its `..data` symlink, `mv`), since contents are
//! compared, not modification times. New contents that do not load keep
//! the old configuration; they are logged and counted once they failed
//! twice in a row, so that a certificate and key caught mid-swap (one new,
//! one old) are not reported. See docs/design.md §12.

pub mod config;
pub mod x509;

use crate::metrics as m;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;

pub use config::{TlsArgs, TlsSettings};

/// How often the certificate, key and client CA files are read again.
pub const RELOAD_POLL: Duration = Duration::from_secs(1);

/// ALPN protocols offered, in order of preference.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why the files did not load.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {flag} {path}: {source}")]
    Read {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file's contents are not what its flag asks for.
    #[error("{flag} {path}: {message}")]
    Invalid {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The server configurations of one load of the files.
#[derive(Debug, Clone)]
pub struct Configs {
    /// The API port's: client certificates verified when a client CA is set.
    pub api: Arc<ServerConfig>,
    /// The admin port's (`--admin-tls`): the same certificate; a client
    /// certificate of the client CA is asked for, not required (probes and
    /// scrapers present none; the status page's readers may).
    pub admin: Arc<ServerConfig>,
}

/// The files' contents, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

fn read(flag: &'static str, path: &PathBuf) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { flag, path: path.clone(), source })
}

impl Contents {
    fn read(settings: &TlsSettings) -> Result<Self, TlsError> {
        Ok(Self {
            cert: read(config::CERT_FLAG, &settings.cert_path)?,
            key: read(config::KEY_FLAG, &settings.key_path)?,
            client_ca: match &settings.client_ca_path {
                Some(path) => Some(read(config::CLIENT_CA_FLAG, path)?),
                None => None,
            },
        })
    }
}

fn certificates(
    flag: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |message: String| TlsError::Invalid { flag, path: path.to_owned(), message };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// `(certificate, index, notAfter in Unix seconds)` of each loaded certificate.
type Expiries = Vec<(&'static str, usize, i64)>;

/// The configurations of `contents`, and the not-after of each
/// certificate loaded (`(certificate, index, unix seconds)`).
fn load(settings: &TlsSettings, contents: &Contents) -> Result<(Configs, Expiries), TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain = certificates(config::CERT_FLAG, &settings.cert_path, &contents.cert)?;
    // PKCS#8, PKCS#1 (RSA) and SEC1 (EC) keys alike.
    let key = PrivateKeyDer::from_pem_slice(&contents.key).map_err(|e| TlsError::Invalid {
        flag: config::KEY_FLAG,
        path: settings.key_path.clone(),
        message: format!("not a PEM private key: {e}"),
    })?;
    let mut expiries: Vec<_> = chain
        .iter()
        .enumerate()
        .map(|(i, c)| ("server", i, x509::not_after(c).unwrap_or(0)))
        .collect();
    let builder = || {
        ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Invalid {
                flag: config::CERT_FLAG,
                path: settings.cert_path.clone(),
                message: e.to_string(),
            })
    };
    let invalid_pair = |e: rustls::Error| TlsError::Invalid {
        flag: config::KEY_FLAG,
        path: settings.key_path.clone(),
        message: format!("does not go with {}: {e}", config::CERT_FLAG),
    };
    // The admin port asks for a client certificate without requiring one:
    // probes and scrapers present none, and an operator's identity reads
    // the status page under --authz spiffe (issue 26).
    let mut admin_verifier = None;
    let api = match (&settings.client_ca_path, &contents.client_ca) {
        (Some(path), Some(pem)) => {
            let cas = certificates(config::CLIENT_CA_FLAG, path, pem)?;
            let invalid = |message: String| TlsError::Invalid {
                flag: config::CLIENT_CA_FLAG,
                path: path.clone(),
                message,
            };
            let mut roots = rustls::RootCertStore::empty();
            for (i, ca) in cas.iter().enumerate() {
                roots.add(ca.clone()).map_err(|e| invalid(format!("certificate {i}: {e}")))?;
                expiries.push(("client_ca", i, x509::not_after(ca).unwrap_or(0)));
            }
            let roots = Arc::new(roots);
            let verifier =
                WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                    .build()
                    .map_err(|e| invalid(e.to_string()))?;
            admin_verifier = Some(
                WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| invalid(e.to_string()))?,
            );
            builder()?
                .with_client_cert_verifier(verifier)
                .with_single_cert(chain.clone(), key.clone_key())
                .map_err(invalid_pair)?
        }
        _ => builder()?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(invalid_pair)?,
    };
    let admin = match admin_verifier {
        Some(verifier) => builder()?.with_client_cert_verifier(verifier),
        None => builder()?.with_no_client_auth(),
    }
    .with_single_cert(chain, key)
    .map_err(invalid_pair)?;
    Ok((Configs { api: Arc::new(with_alpn(api)), admin: Arc::new(with_alpn(admin)) }, expiries))
}

fn with_alpn(mut config: ServerConfig) -> ServerConfig {
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    config
}

/// The loaded configurations, reloaded when the files change.
#[derive(Debug)]
pub struct Reloader {
    settings: TlsSettings,
    loaded: Contents,
    /// New contents that failed once (`None`: unreadable); reported if
    /// they fail again.
    failing: Option<Option<Contents>>,
    /// New contents that failed and were reported.
    reported: Option<Option<Contents>>,
    /// Most `(certificate, index)` gauges ever set, per certificate.
    gauges: Vec<(&'static str, usize)>,
    configs: watch::Sender<Configs>,
}

impl Reloader {
    /// Loads the files of `settings`; an error names the flag and file.
    pub fn new(settings: TlsSettings) -> Result<Self, TlsError> {
        let contents = Contents::read(&settings)?;
        let (configs, expiries) = load(&settings, &contents)?;
        let mut reloader = Self {
            settings,
            loaded: contents,
            failing: None,
            reported: None,
            gauges: Vec::new(),
            configs: watch::Sender::new(configs),
        };
        reloader.set_expiries(&expiries);
        Ok(reloader)
    }

    /// The current configurations, as new handshakes see them.
    pub fn subscribe(&self) -> watch::Receiver<Configs> {
        self.configs.subscribe()
    }

    fn set_expiries(&mut self, expiries: &[(&'static str, usize, i64)]) {
        for &(certificate, index, not_after) in expiries {
            metrics::gauge!(m::TLS_CERT_EXPIRY, "certificate" => certificate, "index" => index.to_string())
                .set(not_after as f64);
        }
        // A chain shorter than before leaves gauges of certificates no
        // longer loaded: NaN, which no comparison in an alert matches.
        for &(certificate, index) in &self.gauges {
            if !expiries.iter().any(|&(c, i, _)| c == certificate && i == index) {
                metrics::gauge!(m::TLS_CERT_EXPIRY, "certificate" => certificate, "index" => index.to_string())
                    .set(f64::NAN);
            }
        }
        for &(certificate, index, _) in expiries {
            if !self.gauges.contains(&(certificate, index)) {
                self.gauges.push((certificate, index));
            }
        }
    }

    /// Reads the files once; loads them if they changed. Answers whether
    /// new configurations are in use.
    pub fn poll(&mut self) -> bool {
        // `None`: a file could not be read.
        let (failed, error) = match Contents::read(&self.settings) {
            Ok(contents) if contents == self.loaded => {
                self.failing = None;
                self.reported = None;
                return false;
            }
            Ok(contents) => match load(&self.settings, &contents) {
                Ok((configs, expiries)) => {
                    self.loaded = contents;
                    self.failing = None;
                    self.reported = None;
                    self.set_expiries(&expiries);
                    self.configs.send_replace(configs);
                    tracing::info!("tls certificate files changed: reloaded");
                    return true;
                }
                Err(error) => (Some(contents), error),
            },
            Err(error) => (None, error),
        };
        if self.reported.as_ref() == Some(&failed) {
            return false;
        }
        if self.failing.as_ref() == Some(&failed) {
            metrics::counter!(m::TLS_RELOAD_FAILURES).increment(1);
            tracing::error!(
                %error,
                "tls certificate files changed but do not load: keeping the previous ones"
            );
            self.reported = Some(failed);
            self.failing = None;
        } else {
            self.failing = Some(failed);
        }
        false
    }

    /// Polls every [`RELOAD_POLL`] until `stop` turns true.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD_POLL) => {}
                _ = crate::shutdown::stopped(&mut stop) => return,
            }
            let mut reloader = self;
            // Reading files blocks: off the runtime's workers.
            self = match tokio::task::spawn_blocking(move || {
                reloader.poll();
                reloader
            })
            .await
            {
                Ok(reloader) => reloader,
                Err(error) => {
                    tracing::error!(%error, "tls reload task failed; no more reloads");
                    return;
                }
            };
        }
    }
}

/// Handshakes of one listener, with the configuration current at each.
#[derive(Debug, Clone)]
pub struct Acceptor {
    configs: watch::Receiver<Configs>,
    listener: &'static str,
    timeout: Duration,
}

impl Acceptor {
    /// Handshakes for `listener` (`api` or `admin`), bounded by `timeout`.
    pub fn new(
        configs: watch::Receiver<Configs>,
        listener: &'static str,
        timeout: Duration,
    ) -> Self {
        Self { configs, listener, timeout }
    }

    /// Runs the TLS handshake of `stream`; `None` (counted and logged at
    /// debug level) when it failed or took too long.
    pub async fn accept(&self, stream: TcpStream) -> Option<TlsStream<TcpStream>> {
        let config = {
            let configs = self.configs.borrow();
            if self.listener == "admin" { configs.admin.clone() } else { configs.api.clone() }
        };
        let handshake = tokio_rustls::TlsAcceptor::from(config).accept(stream);
        let (outcome, error) = match tokio::time::timeout(self.timeout, handshake).await {
            Ok(Ok(stream)) => {
                metrics::counter!(m::TLS_HANDSHAKES, "listener" => self.listener, "outcome" => "ok")
                    .increment(1);
                return Some(stream);
            }
            Ok(Err(error)) => (outcome(&error), error.to_string()),
            Err(_) => ("timeout", "no handshake within --tls-handshake-timeout-secs".to_owned()),
        };
        metrics::counter!(m::TLS_HANDSHAKES, "listener" => self.listener, "outcome" => outcome)
            .increment(1);
        tracing::debug!(listener = self.listener, outcome, error, "tls handshake failed");
        None
    }
}

/// The `outcome` of a failed handshake.
fn outcome(error: &std::io::Error) -> &'static str {
    match error.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented) => {
            "client_certificate"
        }
        _ => "error",
    }
}

/// Whether the client chose HTTP/2 by ALPN.
pub fn is_h2(stream: &TlsStream<TcpStream>) -> bool {
    stream.get_ref().1.alpn_protocol() == Some(b"h2")
}

#[cfg(test)]
mod tests;
