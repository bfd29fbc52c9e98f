//! The TLS and authorization flags (one group, flattened into
//! [`crate::config::Args`]) and their consistency checks.

use clap::{Args as ClapArgs, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

pub(crate) const CERT_FLAG: &str = "--tls-cert-file";
pub(crate) const KEY_FLAG: &str = "--tls-key-file";
pub(crate) const CLIENT_CA_FLAG: &str = "--tls-client-ca-file";

/// Longest `--tls-handshake-timeout-secs`.
pub const MAX_HANDSHAKE_TIMEOUT_SECS: u64 = 300;

/// Who may write what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthzMode {
    /// Any caller may write anything (trust the network).
    None,
    /// The SPIFFE identity of the client certificate decides (docs/api.md).
    Spiffe,
}

/// TLS and authorization flags.
#[derive(Debug, Clone, ClapArgs)]
#[command(next_help_heading = "TLS and authorization")]
pub struct TlsArgs {
    /// PEM certificate chain of the API port (leaf first); enables TLS.
    #[arg(long, env = "MCS_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key of --tls-cert-file (PKCS#8, RSA or EC).
    #[arg(long, env = "MCS_TLS_KEY_FILE")]
    pub tls_key_file: Option<PathBuf>,

    /// PEM CA certificates client certificates must chain to; when set,
    /// every API client must present one.
    #[arg(long, env = "MCS_TLS_CLIENT_CA_FILE")]
    pub tls_client_ca_file: Option<PathBuf>,

    /// Serve the admin port over TLS too, with the same certificate; client
    /// certificates are asked for but not required (the status page's
    /// readers under --authz spiffe present one, probes none).
    #[arg(long, env = "MCS_ADMIN_TLS")]
    pub admin_tls: bool,

    /// A client that has not finished its TLS handshake after this long is
    /// disconnected; one that chose HTTP/2 then gets as long again for its
    /// connection preface.
    #[arg(long, env = "MCS_TLS_HANDSHAKE_TIMEOUT_SECS", default_value_t = 10)]
    pub tls_handshake_timeout_secs: u64,

    /// Who may write what: `none` (anyone) or `spiffe` (the URI SAN of the
    /// client certificate; needs --tls-client-ca-file).
    #[arg(long, env = "MCS_AUTHZ", value_enum, default_value = "none")]
    pub authz: AuthzMode,

    /// The SPIFFE trust domain of callers' identities (with --authz spiffe).
    #[arg(long, env = "MCS_SPIFFE_TRUST_DOMAIN")]
    pub spiffe_trust_domain: Option<String>,
}

/// The files of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// Certificate chain.
    pub cert_path: PathBuf,
    /// Its key.
    pub key_path: PathBuf,
    /// CA of client certificates, which are then required.
    pub client_ca_path: Option<PathBuf>,
    /// TLS on the admin port too.
    pub admin_tls: bool,
    /// Handshake bound.
    pub handshake_timeout: Duration,
}

impl TlsArgs {
    /// Checks the group: TLS settings (`None`: plaintext) and the trust
    /// domain of `--authz spiffe` (`None`: no authorization).
    #[allow(clippy::type_complexity)]
    pub fn check(&self) -> Result<(Option<TlsSettings>, Option<String>), String> {
        if !(1..=MAX_HANDSHAKE_TIMEOUT_SECS).contains(&self.tls_handshake_timeout_secs) {
            return Err(format!(
                "--tls-handshake-timeout-secs must be 1 to {MAX_HANDSHAKE_TIMEOUT_SECS}"
            ));
        }
        let tls = match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Some(TlsSettings {
                cert_path: cert.clone(),
                key_path: key.clone(),
                client_ca_path: self.tls_client_ca_file.clone(),
                admin_tls: self.admin_tls,
                handshake_timeout: Duration::from_secs(self.tls_handshake_timeout_secs),
            }),
            (Some(_), None) => return Err(format!("{CERT_FLAG} needs {KEY_FLAG}")),
            (None, Some(_)) => return Err(format!("{KEY_FLAG} needs {CERT_FLAG}")),
            (None, None) => {
                if self.tls_client_ca_file.is_some() {
                    return Err(format!("{CLIENT_CA_FLAG} needs {CERT_FLAG} and {KEY_FLAG}"));
                }
                if self.admin_tls {
                    return Err(format!("--admin-tls needs {CERT_FLAG} and {KEY_FLAG}"));
                }
                None
            }
        };
        let trust_domain = match (self.authz, &self.spiffe_trust_domain) {
            (AuthzMode::None, None) => None,
            (AuthzMode::None, Some(_)) => {
                return Err("--spiffe-trust-domain needs --authz spiffe".into());
            }
            (AuthzMode::Spiffe, _) if self.tls_client_ca_file.is_none() => {
                return Err(format!("--authz spiffe needs {CLIENT_CA_FLAG}"));
            }
            (AuthzMode::Spiffe, None) => {
                return Err("--authz spiffe needs --spiffe-trust-domain".into());
            }
            (AuthzMode::Spiffe, Some(domain)) => {
                // The SPIFFE ID spec's trust domain characters.
                let valid = !domain.is_empty()
                    && domain
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c));
                if !valid {
                    return Err(format!(
                        "--spiffe-trust-domain {domain:?}: lowercase letters, digits, '.', '-' \
                         and '_' only, not empty"
                    ));
                }
                Some(domain.clone())
            }
        };
        Ok((tls, trust_domain))
    }
}
