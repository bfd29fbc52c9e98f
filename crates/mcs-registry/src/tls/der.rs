//! The two facts the registry reads from an X.509 certificate, walked out
//! of its DER by hand (a few dozen lines instead of an ASN.1 crate): the
//! `notAfter` of its validity, for the expiry gauge, and the URI names of
//! its subjectAltName extension, for the SPIFFE identity of a client
//! (docs/design.md §12). Both run on certificates rustls has already parsed
//! (and, for clients, verified); anything unexpected answers `None`.

/// One DER element: its tag, its contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The elements of a constructed value's contents, in order.
fn elements(mut input: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (tag, body, rest) = element(input)?;
        input = rest;
        Some((tag, body))
    })
}

const SEQUENCE: u8 = 0x30;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const EXTENSIONS: u8 = 0xa3;
const OCTET_STRING: u8 = 0x04;
const OID: u8 = 0x06;
/// `GeneralName`'s `uniformResourceIdentifier [6] IA5String`.
const URI_NAME: u8 = 0x86;
/// 2.5.29.17, subjectAltName.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// The fields of `TBSCertificate`, in order.
fn tbs_fields(cert: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let (tag, cert, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(cert)?;
    (tag == SEQUENCE).then(|| elements(tbs).collect())
}

/// `notAfter` of `cert` (DER), in Unix seconds.
pub fn not_after(cert: &[u8]) -> Option<i64> {
    let fields = tbs_fields(cert)?;
    // version [0] is optional; validity follows serial, signature, issuer.
    let skip = usize::from(fields.first()?.0 == 0xa0);
    let (tag, validity) = *fields.get(skip + 3)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, time) = elements(validity).nth(1)?;
    let text = std::str::from_utf8(time).ok()?;
    let (year, rest) = match tag {
        UTC_TIME => {
            let yy: i64 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, text.get(2..)?)
        }
        GENERALIZED_TIME => (text.get(..4)?.parse().ok()?, text.get(4..)?),
        _ => return None,
    };
    let digits = |at: usize| -> Option<i64> { rest.get(at..at + 2)?.parse().ok() };
    if !rest.ends_with('Z') {
        return None;
    }
    let days = days_from_civil(year, digits(0)?, digits(2)?);
    Some(days * 86_400 + digits(4)? * 3_600 + digits(6)? * 60 + digits(8)?)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The URI names of `cert`'s subjectAltName (DER), in order; empty when it
/// has none.
pub fn uri_names(cert: &[u8]) -> Vec<String> {
    let Some(fields) = tbs_fields(cert) else {
        return Vec::new();
    };
    let Some((_, extensions)) = fields.iter().find(|(tag, _)| *tag == EXTENSIONS) else {
        return Vec::new();
    };
    let Some((SEQUENCE, extensions, _)) = element(extensions) else {
        return Vec::new();
    };
    for (_, extension) in elements(extensions) {
        let mut parts = elements(extension);
        if parts.next() != Some((OID, SUBJECT_ALT_NAME)) {
            continue;
        }
        // `critical` (a BOOLEAN) is optional; the value is the OCTET STRING.
        let Some((_, value)) = parts.find(|(tag, _)| *tag == OCTET_STRING) else {
            return Vec::new();
        };
        let Some((SEQUENCE, names, _)) = element(value) else {
            return Vec::new();
        };
        return elements(names)
            .filter(|(tag, _)| *tag == URI_NAME)
            .filter_map(|(_, name)| std::str::from_utf8(name).ok().map(str::to_owned))
            .collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
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
        assert_eq!(uri_names(&der), ["spiffe://td/cluster/a", "https://x.example/y"]);
        // 2031-03-04T00:00:00Z (`date -d 2031-03-04Z +%s`).
        assert_eq!(not_after(&der), Some(1_930_348_800));
        // GeneralizedTime from 2050 on.
        assert_eq!(not_after(&cert(&[], (2051, 1, 1))), Some(2_556_144_000));
    }

    #[test]
    fn no_uri_names_and_garbage_answer_empty() {
        assert!(uri_names(&cert(&[], (2031, 3, 4))).is_empty());
        assert!(uri_names(b"\x30\x03\x02\x01").is_empty());
        assert_eq!(not_after(b"\x30\x82\xff"), None);
        assert_eq!(not_after(&[]), None);
    }
}
