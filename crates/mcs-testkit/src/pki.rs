//! Certificates for TLS tests, made in the test with rcgen (the crypto
//! provider of the workspace's rustls, aws-lc-rs): [`Ca`] signs servers for
//! `localhost`/`127.0.0.1` and clients with SPIFFE URI SANs, as PEM
//! strings ([`Leaf`]) that tests write where a binary reads them ([`Dir`]);
//! [`TestPki`] is the same as files, for callers that want paths.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fixture fails loudly

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// The PEM of this CA and of the intermediates above it, up to (not
    /// including) the root: what a leaf presents after itself.
    intermediates: String,
}

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The certificate, then the intermediate CAs that issued it (PEM).
    pub cert_pem: String,
    /// Its PKCS#8 private key (PEM).
    pub key_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer, intermediates: String::new() }
    }

    /// An intermediate CA named `name`, signed by this one, valid until
    /// `not_after` (y, m, d) when given; its leaves present it after
    /// themselves.
    pub fn intermediate(&self, name: &str, not_after: Option<(i32, u8, u8)>) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        if let Some((y, m, d)) = not_after {
            params.not_before = rcgen::date_time_ymd(y - 1, m, d);
            params.not_after = rcgen::date_time_ymd(y, m, d);
        }
        let issuer =
            CertifiedIssuer::signed_by(params, KeyPair::generate().unwrap(), &self.issuer).unwrap();
        let intermediates = format!("{}{}", issuer.pem(), self.intermediates);
        Self { issuer, intermediates }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// The CA certificate, DER.
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
        let mut params = Self::client_params();
        for uri in uris {
            params.subject_alt_names.push(SanType::URI((*uri).try_into().unwrap()));
        }
        if let Some((y, m, d)) = not_after {
            params.not_before = rcgen::date_time_ymd(y - 1, m, d);
            params.not_after = rcgen::date_time_ymd(y, m, d);
        }
        self.sign(params)
    }

    /// A client certificate with one subjectAltName extension of its own
    /// per item of `extensions`, each holding the URI names given as raw
    /// bytes: what rcgen will not make (names that are not ASCII or not
    /// UTF-8, two subjectAltName extensions).
    pub fn client_with_raw_uris(&self, extensions: &[&[&[u8]]]) -> Leaf {
        let mut params = Self::client_params();
        for uris in extensions {
            let names: Vec<u8> = uris.iter().flat_map(|uri| der(URI_NAME, uri)).collect();
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(SUBJECT_ALT_NAME, der(SEQUENCE, &names)));
        }
        self.sign(params)
    }

    fn client_params() -> CertificateParams {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, "client");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: format!("{}{}", cert.pem(), self.intermediates),
            key_pem: key.serialize_pem(),
        }
    }
}

/// 2.5.29.17, subjectAltName.
const SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];
const SEQUENCE: u8 = 0x30;
/// `GeneralName`'s `uniformResourceIdentifier [6] IA5String`.
const URI_NAME: u8 = 0x86;

/// One DER element of `tag` holding `contents` (short form: under 128 bytes).
fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
    let len = u8::try_from(contents.len()).ok().filter(|l| *l < 0x80).expect("a short element");
    [&[tag, len][..], contents].concat()
}

impl Leaf {
    /// The certificate, DER.
    pub fn der(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap()
    }

    /// The certificate and the intermediates that issued it, DER.
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(self.cert_pem.as_bytes()).map(Result::unwrap).collect()
    }

    /// The private key, DER.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap()
    }
}

/// A directory of its own under the system's temporary directory,
/// removed on drop.
#[derive(Debug)]
pub struct Dir(PathBuf);

impl Dir {
    /// A new directory whose name starts with `name`, its own even when
    /// tests of one process make theirs in the same instant (a counter, not
    /// the clock alone: two of `mcs-client/tests/tls.rs` once failed in CI
    /// with their directory removed under them, most likely by another
    /// test given the same name), and created exclusively, so that a name
    /// shared all the same fails loudly.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(crate::dynamo::unique_name(&format!("mcs-tls-{name}")));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Self(dir)
    }

    /// The path of `file` in it.
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

/// `path` as a string (test paths are UTF-8).
pub fn path_str(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// A directory of certificate files; removed when dropped.
#[derive(Debug)]
pub struct TestPki {
    dir: Dir,
    cas: Mutex<HashMap<PathBuf, Arc<Ca>>>,
}

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its PKCS#8 private key (PEM).
    pub key: PathBuf,
}

impl TestPki {
    /// A fresh, empty directory under the system's temporary directory.
    pub fn new() -> Self {
        Self { dir: Dir::new("pki"), cas: Mutex::new(HashMap::new()) }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// A self-signed CA named `name`.
    pub fn ca(&self, name: &str) -> Issued {
        let ca = Ca::new(name);
        let issued = self.write(name, &ca.pem(), &ca.issuer.key().serialize_pem());
        self.cas.lock().unwrap().insert(issued.cert.clone(), Arc::new(ca));
        issued
    }

    /// A server certificate for `127.0.0.1` and `localhost`, signed by `ca`
    /// (made by [`TestPki::ca`]).
    pub fn server(&self, name: &str, ca: &Issued) -> Issued {
        let leaf = self.issuer(ca).server(name);
        self.write(name, &leaf.cert_pem, &leaf.key_pem)
    }

    /// A client certificate with the URI SAN `uri` (a SPIFFE id), signed by
    /// `ca` (made by [`TestPki::ca`]).
    pub fn client(&self, name: &str, ca: &Issued, uri: &str) -> Issued {
        let leaf = self.issuer(ca).client(&[uri], None);
        self.write(name, &leaf.cert_pem, &leaf.key_pem)
    }

    fn issuer(&self, ca: &Issued) -> Arc<Ca> {
        self.cas.lock().unwrap().get(&ca.cert).cloned().expect("a CA made by this TestPki")
    }

    fn write(&self, name: &str, cert: &str, key: &str) -> Issued {
        Issued {
            cert: self.dir.write(&format!("{name}.crt"), cert).into(),
            key: self.dir.write(&format!("{name}.key"), key).into(),
        }
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
