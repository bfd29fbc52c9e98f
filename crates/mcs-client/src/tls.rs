//! The HTTP client behind [`crate::Client`]: hyper-util's client over
//! hyper-rustls, with a rustls configuration built here on the aws-lc-rs
//! provider (the one the AWS SDK already brings; no ring, no OpenSSL). With TLS files configured, it is rebuilt when they change (checked
//! at most every [`crate::ClientConfig::tls_reload_check`] by their
//! modification time and length), so a rotated certificate is used by new
//! connections without a restart; a broken new file keeps the old client
//! and is tried again at the next check.

use crate::{ClientConfig, Error, TlsFiles};
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

/// What the TLS files looked like when the client was built.
type Stamp = Vec<(PathBuf, Option<SystemTime>, u64)>;

/// The HTTP/1.1 client of both schemes (`Client::new` checked the scheme).
pub(crate) type Http =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

#[derive(Debug)]
struct Built {
    http: Http,
    stamp: Stamp,
    checked: Instant,
}

/// The current HTTP client and the files it was built from.
#[derive(Debug)]
pub(crate) struct Transport {
    config: ClientConfig,
    built: Mutex<Built>,
}

impl Transport {
    pub(crate) fn new(config: ClientConfig) -> Result<Self, Error> {
        let stamp = stamp(config.tls.as_ref());
        let http = build(&config)?;
        Ok(Self { built: Mutex::new(Built { http, stamp, checked: Instant::now() }), config })
    }

    /// The client to use now, rebuilt first if the TLS files changed.
    pub(crate) fn http(&self) -> Http {
        let mut built = match self.built.lock() {
            Ok(built) => built,
            Err(poisoned) => poisoned.into_inner(),
        };
        if self.config.tls.is_some() && built.checked.elapsed() >= self.config.tls_reload_check {
            built.checked = Instant::now();
            let now = stamp(self.config.tls.as_ref());
            if now != built.stamp {
                match build(&self.config) {
                    Ok(http) => {
                        tracing::info!("tls files changed: client rebuilt");
                        built.http = http;
                        built.stamp = now;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "tls files changed but do not load: keeping the old ones");
                    }
                }
            }
        }
        built.http.clone()
    }
}

fn stamp(tls: Option<&TlsFiles>) -> Stamp {
    let Some(tls) = tls else { return Vec::new() };
    let mut paths = vec![tls.ca_bundle.clone()];
    if let Some((cert, key)) = &tls.client_identity {
        paths.push(cert.clone());
        paths.push(key.clone());
    }
    paths
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).ok();
            let modified = meta.as_ref().and_then(|m| m.modified().ok());
            let len = meta.map_or(0, |m| m.len());
            (path, modified, len)
        })
        .collect()
}

fn build(config: &ClientConfig) -> Result<Http, Error> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(config.connect_timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(rustls_config(config.tls.as_ref())?)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    Ok(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector))
}

/// A rustls client configuration trusting only the CA bundle (no system
/// roots: the registry's CA is private), with the client identity if any.
fn rustls_config(tls: Option<&TlsFiles>) -> Result<rustls::ClientConfig, Error> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = RootCertStore::empty();
    if let Some(tls) = tls {
        for cert in certificates(&tls.ca_bundle)? {
            roots.add(cert).map_err(|e| config_error(&tls.ca_bundle, e))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("tls versions: {e}")))?
        .with_root_certificates(roots);
    match tls.and_then(|tls| tls.client_identity.as_ref()) {
        Some((cert, key)) => {
            let chain = certificates(cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| config_error(key, e))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| config_error(cert, e))
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| config_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_error(path, e))?;
    if certs.is_empty() {
        return Err(Error::Config(format!("{}: no certificate in the file", path.display())));
    }
    Ok(certs)
}

fn config_error(path: &Path, error: impl std::fmt::Display) -> Error {
    Error::Config(format!("{}: {error}", path.display()))
}
