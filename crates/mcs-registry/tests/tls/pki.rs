//! Certificates made in the test with rcgen: a CA, servers and clients
//! (SPIFFE URI SANs), written to files the registry reads.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self, name: &str) -> Leaf {
        self.sign(Self::server_params(name))
    }

    /// A server certificate that expired at the start of `not_after`.
    pub fn server_until(&self, name: &str, (y, m, d): (i32, u8, u8)) -> Leaf {
        let mut params = Self::server_params(name);
        params.not_before = rcgen::date_time_ymd(y - 1, m, d);
        params.not_after = rcgen::date_time_ymd(y, m, d);
        self.sign(params)
    }

    fn server_params(name: &str) -> CertificateParams {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params
    }

    /// A client certificate with `uris` as URI SANs, valid until
    /// `not_after` (y, m, d) when given.
    pub fn client(&self, uris: &[&str], not_after: Option<(i32, u8, u8)>) -> Leaf {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, "client");
        for uri in uris {
            params.subject_alt_names.push(SanType::URI((*uri).try_into().unwrap()));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if let Some((y, m, d)) = not_after {
            params.not_before = rcgen::date_time_ymd(y - 1, m, d);
            params.not_after = rcgen::date_time_ymd(y, m, d);
        }
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }
}

impl Leaf {
    pub fn der(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap()
    }

    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap()
    }
}

/// A directory of its own under the target's tmp dir, removed on drop.
pub struct Dir(PathBuf);

impl Dir {
    pub fn new(name: &str) -> Self {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let dir =
            std::env::temp_dir().join(format!("mcs-tls-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    /// Writes `contents` to `file` atomically (a rename, as Kubernetes
    /// swaps a Secret's files).
    pub fn write(&self, file: &str, contents: &str) -> String {
        let tmp = self.0.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, contents).unwrap();
        std::fs::rename(&tmp, self.path(file)).unwrap();
        path_str(&self.path(file))
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn path_str(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}
