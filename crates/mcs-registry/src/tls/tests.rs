#![allow(clippy::unwrap_used)]

use super::*;
use rcgen::{CertificateParams, KeyPair};

struct Files {
    dir: PathBuf,
    settings: TlsSettings,
}

impl Files {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mcs-tls-unit-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let settings = TlsSettings {
            cert_path: dir.join("cert.pem"),
            key_path: dir.join("key.pem"),
            client_ca_path: None,
            admin_tls: false,
            handshake_timeout: Duration::from_secs(10),
        };
        Self { dir, settings }
    }

    /// Writes a new self-signed certificate and its key; answers the cert.
    fn rotate(&self) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&self.settings.cert_path, cert.pem()).unwrap();
        std::fs::write(&self.settings.key_path, key.serialize_pem()).unwrap();
        cert.der().to_vec()
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_missing_or_broken_file_is_an_error_naming_its_flag() {
    let files = Files::new("errors");
    let missing = Reloader::new(files.settings.clone()).unwrap_err().to_string();
    assert!(missing.starts_with("reading --tls-cert-file"), "{missing}");
    files.rotate();
    std::fs::write(&files.settings.key_path, "not a key").unwrap();
    let broken = Reloader::new(files.settings.clone()).unwrap_err().to_string();
    assert!(broken.starts_with("--tls-key-file"), "{broken}");
    // A key of another certificate.
    files.rotate();
    let key = std::fs::read(&files.settings.key_path).unwrap();
    files.rotate();
    std::fs::write(&files.settings.key_path, key).unwrap();
    let mismatched = Reloader::new(files.settings.clone()).unwrap_err().to_string();
    assert!(mismatched.contains("does not go with --tls-cert-file"), "{mismatched}");
}

#[test]
fn changed_files_are_loaded_and_broken_ones_reported_once_after_two_polls() {
    let files = Files::new("reload");
    files.rotate();
    let mut reloader = Reloader::new(files.settings.clone()).unwrap();
    let mut configs = reloader.subscribe();
    assert!(!reloader.poll(), "unchanged");
    assert!(!configs.has_changed().unwrap());

    files.rotate();
    assert!(reloader.poll(), "changed: loaded");
    assert!(configs.has_changed().unwrap());
    configs.mark_unchanged();

    std::fs::write(&files.settings.cert_path, "garbage").unwrap();
    assert!(!reloader.poll());
    assert!(reloader.reported.is_none(), "one failure may be a swap in progress");
    assert!(!reloader.poll());
    assert!(reloader.reported.is_some(), "a second one is reported");
    assert!(!reloader.poll());
    assert!(reloader.failing.is_none(), "reported once, not again");
    assert!(!configs.has_changed().unwrap(), "the previous configuration stays");

    // Mended: loaded, and a later break is reported again.
    files.rotate();
    assert!(reloader.poll());
    assert!(reloader.reported.is_none());
}
