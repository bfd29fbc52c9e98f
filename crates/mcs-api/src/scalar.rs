//! Scalar types that validate themselves while parsing.

use serde::{Deserialize, Serialize};
use std::fmt;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// The OpenAPI schema of a validated string: the pattern and the length
/// bounds it is checked against (the pattern is necessary, the description
/// says what else is checked).
pub(crate) fn string_schema_of(
    description: &str,
    pattern: &str,
    (min_length, max_length): (usize, usize),
    example: &str,
) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .pattern(Some(pattern))
        .min_length(Some(min_length))
        .max_length(Some(max_length))
        .examples([example])
        .into()
}

/// Implements `utoipa::ToSchema` for a validated string newtype.
macro_rules! string_schema {
    ($ty:ty, $description:expr, $pattern:expr, $len:expr, $example:expr) => {
        impl utoipa::PartialSchema for $ty {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::scalar::string_schema_of($description, $pattern, $len, $example)
            }
        }
        impl utoipa::ToSchema for $ty {}
    };
}
pub(crate) use string_schema;

/// A DNS-1123 label, as a regular expression.
pub(crate) const LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// A DNS-1123 label: 1–63 lowercase alphanumerics or '-', alphanumeric at
/// both ends. Cluster ids, namespaces, service and pool names are labels.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Label(String);

impl Label {
    /// Checks `value` against DNS-1123 and wraps it.
    pub fn new(value: impl Into<String>) -> Result<Self, String> {
        let value = value.into();
        check_label(&value)?;
        Ok(Self(value))
    }

    /// The label as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn check_label(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 63 {
        return Err(format!(
            "must be a DNS-1123 label of 1 to 63 characters, got {} characters",
            value.len()
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if !value.chars().all(allowed) {
        return Err(format!(
            "must be a DNS-1123 label (lowercase alphanumerics and '-'), got {value:?}"
        ));
    }
    if value.starts_with('-') || value.ends_with('-') {
        return Err(format!("must be a DNS-1123 label (alphanumeric at both ends), got {value:?}"));
    }
    Ok(())
}

string_schema!(
    Label,
    "A DNS-1123 label: 1 to 63 lowercase alphanumerics or '-', alphanumeric at both ends.",
    LABEL_PATTERN,
    (1, 63),
    "us-east-1a"
);

impl TryFrom<String> for Label {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::new(value)
    }
}

impl From<Label> for String {
    fn from(label: Label) -> String {
        label.0
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Label {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::new(s)
    }
}

/// Text that is not blank (after trimming) and at most 512 bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NonBlank(String);

impl NonBlank {
    /// Longest accepted value, in bytes.
    pub const MAX_LEN: usize = 512;

    /// Checks and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, String> {
        let value = value.into();
        if value.trim().is_empty() {
            return Err("must not be blank".into());
        }
        if value.len() > Self::MAX_LEN {
            return Err(format!("must be at most {} bytes", Self::MAX_LEN));
        }
        Ok(Self(value))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

string_schema!(
    NonBlank,
    "Text that is not blank after trimming whitespace, at most 512 bytes of UTF-8.",
    "\\S",
    (1, NonBlank::MAX_LEN),
    "meta-llama/Llama-3.1-8B"
);

impl TryFrom<String> for NonBlank {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::new(value)
    }
}

impl From<NonBlank> for String {
    fn from(v: NonBlank) -> String {
        v.0
    }
}

impl fmt::Display for NonBlank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The identity of one process lifetime of a writer (a relay, a router, a
/// controller): 1–128 ASCII letters, digits, '.', '_', ':' or '-'.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Incarnation(String);

impl Incarnation {
    /// Checks and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, String> {
        let value = value.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
        if value.is_empty() || value.len() > 128 || !value.chars().all(allowed) {
            return Err(format!(
                "must be 1 to 128 characters of letters, digits, '.', '_', ':' or '-', got {value:?}"
            ));
        }
        Ok(Self(value))
    }

    /// The incarnation as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

string_schema!(
    Incarnation,
    "One process lifetime of a writer: 1 to 128 ASCII letters, digits, '.', '_', ':' or '-'.",
    "^[A-Za-z0-9._:-]{1,128}$",
    (1, 128),
    "5f1c-9a0e:2"
);

impl TryFrom<String> for Incarnation {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::new(value)
    }
}

impl From<Incarnation> for String {
    fn from(v: Incarnation) -> String {
        v.0
    }
}

impl fmt::Display for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `host:port` where host is an IPv4 address, a bracketed IPv6 address or a
/// DNS name, and port is 1–65535.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostPort(String);

impl HostPort {
    /// Checks and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, String> {
        let value = value.into();
        let bad = || format!("must be host:port with a port from 1 to 65535, got {value:?}");
        if let Ok(addr) = value.parse::<std::net::SocketAddr>() {
            return if addr.port() > 0 { Ok(Self(value)) } else { Err(bad()) };
        }
        let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(bad()),
        }
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !host_ok {
            return Err(bad());
        }
        Ok(Self(value))
    }

    /// The address as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `host:port` as a regular expression: a DNS name (each part a label of at
/// most 63 characters; the 253-character bound on the whole name is only in
/// the description) or a bracketed IPv6 address in one of its standard forms,
/// then a port from 1 to 65535 without leading zeros. The parser accepts more
/// (IPv4-embedded IPv6 forms, leading zeros in some ports); never less.
pub(crate) const HOST_PORT_PATTERN: &str = concat!(
    "^(",
    "[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*",
    "|\\[(",
    "([0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}",
    "|([0-9A-Fa-f]{1,4}:){1,7}:",
    "|([0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}",
    "|([0-9A-Fa-f]{1,4}:){1,5}(:[0-9A-Fa-f]{1,4}){1,2}",
    "|([0-9A-Fa-f]{1,4}:){1,4}(:[0-9A-Fa-f]{1,4}){1,3}",
    "|([0-9A-Fa-f]{1,4}:){1,3}(:[0-9A-Fa-f]{1,4}){1,4}",
    "|([0-9A-Fa-f]{1,4}:){1,2}(:[0-9A-Fa-f]{1,4}){1,5}",
    "|[0-9A-Fa-f]{1,4}:(:[0-9A-Fa-f]{1,4}){1,6}",
    "|:((:[0-9A-Fa-f]{1,4}){1,7}|:)",
    ")\\]",
    "):([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$",
);

string_schema!(
    HostPort,
    "`host:port`: an IPv4 address, a bracketed IPv6 address or a DNS name (each \
     dot-separated part at most 63 characters, the name at most 253), then a port \
     from 1 to 65535.",
    HOST_PORT_PATTERN,
    (3, 259),
    "10.0.1.7:9000"
);

impl TryFrom<String> for HostPort {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::new(value)
    }
}

impl From<HostPort> for String {
    fn from(v: HostPort) -> String {
        v.0
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_dns_1123() {
        let long = "a".repeat(63);
        let too_long = "a".repeat(64);
        let cases: &[(&str, bool)] = &[
            ("a", true),
            ("us-east-1a", true),
            ("0abc9", true),
            (&long, true),
            ("", false),
            (&too_long, false),
            ("-a", false),
            ("a-", false),
            ("Upper", false),
            ("a_b", false),
            ("a.b", false),
            ("a b", false),
            ("é", false),
        ];
        for (value, ok) in cases {
            assert_eq!(Label::new(*value).is_ok(), *ok, "label {value:?}");
        }
    }

    #[test]
    fn non_blank_refuses_blank_and_oversize() {
        assert!(NonBlank::new("meta-llama/Llama-3.1-8B").is_ok());
        assert!(NonBlank::new("").is_err());
        assert!(NonBlank::new(" \t\n").is_err());
        assert!(NonBlank::new("x".repeat(NonBlank::MAX_LEN + 1)).is_err());
    }

    #[test]
    fn incarnations_are_short_safe_tokens() {
        assert!(Incarnation::new("5f1c-9a0e:2").is_ok());
        assert!(Incarnation::new("").is_err());
        assert!(Incarnation::new("a b").is_err());
        assert!(Incarnation::new("x".repeat(129)).is_err());
    }

    #[test]
    fn host_port_accepts_ips_and_names() {
        let cases: &[(&str, bool)] = &[
            ("10.0.1.7:9000", true),
            ("[fd00::7]:9000", true),
            ("relay.llm.svc:443", true),
            ("localhost:1", true),
            ("10.0.1.7", false),
            ("10.0.1.7:0", false),
            ("10.0.1.7:65536", false),
            (":80", false),
            ("fd00::7:80", false),
            ("bad host:80", false),
            ("-a.b:80", false),
        ];
        for (value, ok) in cases {
            assert_eq!(HostPort::new(*value).is_ok(), *ok, "host:port {value:?}");
        }
    }

    /// Every form of `HOST_PORT_PATTERN` (the OpenAPI document's) parses:
    /// the document may be narrower than the parser, never wider.
    #[test]
    fn host_port_pattern_forms_parse() {
        let long_label = "a".repeat(63);
        let accepted = [
            "a:1".to_owned(),
            "0:65535".to_owned(),
            "Relay-1.LLM.svc:443".to_owned(),
            format!("{long_label}.{long_label}:9"),
            "[::]:1".to_owned(),
            "[::1]:80".to_owned(),
            "[1::]:80".to_owned(),
            "[1:2:3:4:5:6:7:8]:80".to_owned(),
            "[1:2:3:4:5:6:7::]:80".to_owned(),
            "[1::8]:80".to_owned(),
            "[1:2::7:8]:80".to_owned(),
            "[FD00:0:0:0:0:0:0:7]:9000".to_owned(),
        ];
        for value in &accepted {
            assert!(HostPort::new(value.as_str()).is_ok(), "host:port {value:?}");
        }
        // What the pattern refuses, the parser refuses too.
        for value in ["a:0", "a:65536", "[::g]:80", "[1:2:3:4:5:6:7:8:9]:80", "a_b:80"] {
            assert!(HostPort::new(value).is_err(), "host:port {value:?}");
        }
        let too_long = format!("{}:1", "a".repeat(64));
        assert!(HostPort::new(too_long).is_err());
    }
}
