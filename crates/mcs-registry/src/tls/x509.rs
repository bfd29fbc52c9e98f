//! What the registry reads from X.509 certificates, with x509-parser: the
//! `notAfter` of each certificate it loads, for the expiry gauge, and the
//! URI names of a client's subjectAltName, for its SPIFFE identity
//! (docs/design.md §12). Both run on certificates rustls has already
//! accepted (and, for clients, verified against the client CA).

use x509_parser::extensions::GeneralName;
use x509_parser::parse_x509_certificate;

/// `notAfter` of `cert` (DER), in Unix seconds; `None` when it does not
/// parse.
pub fn not_after(cert: &[u8]) -> Option<i64> {
    let (_, cert) = parse_x509_certificate(cert).ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// The URI names of `cert`'s subjectAltName (DER), in order (empty when it
/// has none), or why they cannot be read: a certificate or subjectAltName
/// that does not parse (two subjectAltName extensions among others), a
/// name that does not parse, or a URI that is not an IA5String (ASCII).
/// The reason reads after "a client certificate".
pub fn uri_names(cert: &[u8]) -> Result<Vec<String>, String> {
    let (_, cert) =
        parse_x509_certificate(cert).map_err(|e| format!("that does not parse ({e})"))?;
    let san = cert
        .subject_alternative_name()
        .map_err(|e| format!("whose subjectAltName does not parse ({e})"))?;
    let Some(san) = san else {
        return Ok(Vec::new());
    };
    let mut uris = Vec::new();
    for name in &san.value.general_names {
        match name {
            GeneralName::URI(uri) if uri.is_ascii() => uris.push((*uri).to_owned()),
            // x509-parser takes any UTF-8 for an IA5String, and leaves a
            // name that is not UTF-8 `Invalid` with its tag ([6]: a URI).
            GeneralName::URI(_) => return Err(NOT_ASCII.to_owned()),
            GeneralName::Invalid(tag, _) if tag.0 == 6 => return Err(NOT_ASCII.to_owned()),
            GeneralName::Invalid(tag, _) => {
                return Err(format!("with a subjectAltName name that does not parse (tag {tag})"));
            }
            _ => {}
        }
    }
    Ok(uris)
}

const NOT_ASCII: &str = "with a URI SAN that is not ASCII (an IA5String)";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mcs_testkit::pki::Ca;
    use rcgen::{CertificateParams, KeyPair, SanType};

    fn cert(uris: &[&str], not_after: (i32, u8, u8)) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
        for uri in uris {
            params.subject_alt_names.push(SanType::URI((*uri).try_into().unwrap()));
        }
        let (y, m, d) = not_after;
        params.not_after = rcgen::date_time_ymd(y, m, d);
        params.self_signed(&KeyPair::generate().unwrap()).unwrap().der().to_vec()
    }

    #[test]
    fn reads_the_uri_names_and_not_after_of_a_certificate() {
        let der = cert(&["spiffe://td/cluster/a", "https://x.example/y"], (2031, 3, 4));
        assert_eq!(uri_names(&der).unwrap(), ["spiffe://td/cluster/a", "https://x.example/y"]);
        // 2031-03-04T00:00:00Z (`date -d 2031-03-04Z +%s`).
        assert_eq!(not_after(&der), Some(1_930_348_800));
        // GeneralizedTime from 2050 on.
        assert_eq!(not_after(&cert(&[], (2051, 1, 1))), Some(2_556_144_000));
        assert!(uri_names(&cert(&[], (2031, 3, 4))).unwrap().is_empty());
    }

    /// The names the hand-written DER walk read wrongly (issue 22, item 10):
    /// it dropped a URI that was not UTF-8 and read only the first of two
    /// subjectAltName extensions, so either certificate read as the single
    /// identity `cluster/a`.
    #[test]
    fn names_that_do_not_read_are_refused_not_skipped() {
        let clients = Ca::new("clients");
        let a: &[u8] = b"spiffe://td/cluster/a";
        let der = |extensions: &[&[&[u8]]]| clients.client_with_raw_uris(extensions).der().to_vec();
        let not_utf8 = uri_names(&der(&[&[a, b"spiffe://\xff\xfe"]])).unwrap_err();
        assert!(not_utf8.contains("not ASCII"), "{not_utf8}");
        let not_ascii = uri_names(&der(&[&["spiffe://td/cluster/\u{430}".as_bytes()]]));
        assert!(not_ascii.unwrap_err().contains("not ASCII"));
        let twice = uri_names(&der(&[&[a], &[b"spiffe://td/admin/ops"]])).unwrap_err();
        assert!(twice.contains("subjectAltName does not parse"), "{twice}");
        // The same name twice is two names: the caller refuses both.
        assert_eq!(uri_names(&der(&[&[a, a]])).unwrap().len(), 2);
    }

    #[test]
    fn garbage_answers_none_or_why() {
        assert!(uri_names(b"\x30\x03\x02\x01").unwrap_err().contains("does not parse"));
        assert_eq!(not_after(b"\x30\x82\xff"), None);
        assert_eq!(not_after(&[]), None);
    }
}
