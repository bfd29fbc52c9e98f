//! Certificates for TLS tests, made by the `openssl` command line in a
//! directory of the test's own: CAs, a server certificate for
//! `127.0.0.1`/`localhost` and client certificates, all ECDSA P-256 PEM
//! valid for a day.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A directory of certificates; removed when dropped.
#[derive(Debug)]
pub struct TestPki {
    dir: PathBuf,
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
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("mcs-pki-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the pki directory");
        Self { dir }
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A self-signed CA named `name`.
    pub fn ca(&self, name: &str) -> Issued {
        let issued = self.paths(name);
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            path(&issued.key),
            "-out",
            path(&issued.cert),
        ]);
        issued
    }

    /// A server certificate for `127.0.0.1` and `localhost`, signed by `ca`.
    pub fn server(&self, name: &str, ca: &Issued) -> Issued {
        self.leaf(
            name,
            ca,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )
    }

    /// A client certificate with the URI SAN `uri` (a SPIFFE id), signed by
    /// `ca`.
    pub fn client(&self, name: &str, ca: &Issued, uri: &str) -> Issued {
        self.leaf(name, ca, &format!("subjectAltName=URI:{uri}\nextendedKeyUsage=clientAuth\n"))
    }

    fn leaf(&self, name: &str, ca: &Issued, extensions: &str) -> Issued {
        let issued = self.paths(name);
        let csr = self.dir.join(format!("{name}.csr"));
        let ext = self.dir.join(format!("{name}.ext"));
        std::fs::write(&ext, extensions).expect("write the extensions");
        openssl(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            path(&issued.key),
            "-out",
            path(&csr),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            path(&csr),
            "-CA",
            path(&ca.cert),
            "-CAkey",
            path(&ca.key),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            path(&ext),
            "-out",
            path(&issued.cert),
        ]);
        issued
    }

    fn paths(&self, name: &str) -> Issued {
        Issued {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        }
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temporary path")
}

fn openssl(args: &[&str]) {
    let out =
        Command::new("openssl").args(args).output().expect("run openssl (needed by TLS tests)");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
