//! Writer authorization under `--authz spiffe` (docs/design.md §12): the
//! caller's identity is the URI SAN of its client certificate, a SPIFFE ID
//! of the configured trust domain, and it decides what the caller may
//! write:
//!
//! | identity                      | may                                                        |
//! |-------------------------------|------------------------------------------------------------|
//! | `spiffe://<td>/cluster/<id>`  | read; write `/v1/clusters/<id>`, its exports, pools of `<id>` |
//! | `spiffe://<td>/router/<name>` | read; register and withdraw router replicas                |
//! | `spiffe://<td>/admin/<name>`  | anything                                                   |
//! | anything else, no URI SAN     | nothing: `403`                                             |
//!
//! An identity is exactly one URI SAN, a well-formed SPIFFE ID: a
//! certificate with several, or with one that does not read (not ASCII,
//! not UTF-8, in a subjectAltName that does not parse) or is a malformed
//! `spiffe://` URI, names none, and the `403` says why.
//!
//! Every check runs before the registrar is called, so nothing is stored
//! on a `403`. Reads are checked by `authenticate` (in `http`), a layer of the API
//! router; writes by the handlers, through [`Caller::allow`], since a pool's
//! cluster is in its body (or, for a withdrawal, in the stored record).

use crate::metrics as m;
use axum::extract::MatchedPath;
use axum::http::request::Parts;
use std::fmt;
use std::sync::Arc;

/// The URI SANs of a TLS client's certificate, attached to each request of
/// its connection.
#[derive(Debug, Clone, Default)]
pub enum PeerNames {
    /// No certificate presented (or no TLS).
    #[default]
    NoCertificate,
    /// The URI SANs of its certificate, in order.
    Uris(Arc<[String]>),
    /// Its URI SANs do not read: why, after "a client certificate".
    Unreadable(Arc<str>),
}

impl PeerNames {
    /// The names of `certificate` (DER), the client's leaf.
    pub fn of(certificate: Option<&[u8]>) -> Self {
        match certificate.map(crate::tls::x509::uri_names) {
            None => PeerNames::NoCertificate,
            Some(Ok(uris)) => PeerNames::Uris(uris.into()),
            Some(Err(why)) => PeerNames::Unreadable(why.into()),
        }
    }
}

/// Who a caller is, under `--authz spiffe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// `spiffe://<td>/cluster/<id>`.
    Cluster(String),
    /// `spiffe://<td>/router/<name>`.
    Router(String),
    /// `spiffe://<td>/admin/<name>`.
    Admin(String),
    /// A well-formed SPIFFE ID or other URI, but not an identity of the
    /// trust domain (another trust domain, another path).
    Other(String),
    /// A certificate that names no single identity: several URI SANs, one
    /// that does not read, a malformed `spiffe://` URI. Why, beginning "a
    /// client certificate".
    Invalid(String),
    /// No client certificate, or one without a URI SAN.
    Anonymous(&'static str),
}

impl Identity {
    /// The identity the names of a peer's certificate give in `trust_domain`.
    pub fn of(peer: &PeerNames, trust_domain: &str) -> Self {
        let names = match peer {
            PeerNames::NoCertificate => return Identity::Anonymous("no client certificate"),
            PeerNames::Unreadable(why) => {
                return Identity::Invalid(format!("a client certificate {why}"));
            }
            PeerNames::Uris(names) => names,
        };
        let uri = match &names[..] {
            [] => return Identity::Anonymous("a client certificate without a URI SAN"),
            [uri] => uri,
            several => {
                return Identity::Invalid(format!(
                    "a client certificate with {} URI SANs ({}); an identity is exactly one",
                    several.len(),
                    several.join(", ")
                ));
            }
        };
        let Some((domain, path)) = spiffe_id(uri) else {
            return if uri.starts_with("spiffe://") {
                Identity::Invalid(format!(
                    "a client certificate whose URI SAN {uri} is not a well-formed SPIFFE ID"
                ))
            } else {
                Identity::Other(uri.clone())
            };
        };
        match (domain == trust_domain, path.as_slice()) {
            (true, ["cluster", name]) => Identity::Cluster((*name).to_owned()),
            (true, ["router", name]) => Identity::Router((*name).to_owned()),
            (true, ["admin", name]) => Identity::Admin((*name).to_owned()),
            _ => Identity::Other(uri.clone()),
        }
    }

    /// The `identity` label of denials.
    pub fn kind(&self) -> &'static str {
        match self {
            Identity::Cluster(_) => "cluster",
            Identity::Router(_) => "router",
            Identity::Admin(_) => "admin",
            Identity::Other(_) => "other",
            Identity::Invalid(_) => "invalid",
            Identity::Anonymous(_) => "none",
        }
    }

    /// Whether this identity may do what `scope` names.
    pub fn may(&self, scope: &Scope<'_>) -> bool {
        match (self, scope) {
            (Identity::Admin(_), _) => true,
            (Identity::Cluster(_) | Identity::Router(_), Scope::Read) => true,
            (Identity::Cluster(own), Scope::Cluster(id)) => own == id,
            (Identity::Router(_), Scope::Routers) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Cluster(id) => write!(f, "cluster {id}"),
            Identity::Router(name) => write!(f, "router {name}"),
            Identity::Admin(name) => write!(f, "admin {name}"),
            Identity::Other(uri) => write!(f, "{uri} (not an identity of this trust domain)"),
            Identity::Invalid(why) => f.write_str(why),
            Identity::Anonymous(what) => f.write_str(what),
        }
    }
}

/// The trust domain and path segments of `uri` when it is a well-formed
/// SPIFFE ID (spiffe.io, the SPIFFE ID standard, 2.1 and 2.2): a trust
/// domain of lowercase letters, digits, `.`, `-` and `_`; a path of
/// non-empty segments of letters, digits, `.`, `-` and `_`, none `.` or
/// `..`; no query, fragment, port, user or percent-encoding.
fn spiffe_id(uri: &str) -> Option<(&str, Vec<&str>)> {
    let (domain, path) = uri.strip_prefix("spiffe://")?.split_once('/')?;
    let domain_ok = !domain.is_empty()
        && domain.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_'));
    let segments: Vec<&str> = path.split('/').collect();
    let segment_ok = |s: &&str| {
        !s.is_empty()
            && *s != "."
            && *s != ".."
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    };
    (domain_ok && segments.iter().all(segment_ok)).then_some((domain, segments))
}

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Any read.
    Read,
    /// Writing a cluster's lease, its exports or its pools.
    Cluster(&'a str),
    /// Registering or withdrawing router replicas.
    Routers,
}

impl fmt::Display for Scope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Read => f.write_str("read"),
            Scope::Cluster(id) => write!(f, "write cluster {id} (its lease, exports and pools)"),
            Scope::Routers => f.write_str("write router replicas"),
        }
    }
}

/// The caller of a request, for the handlers' checks: `None` without
/// `--authz spiffe`.
#[derive(Debug, Clone)]
pub struct Caller {
    identity: Option<Identity>,
    route: String,
}

impl Caller {
    /// Whether writes are checked at all (`--authz spiffe`) and this caller
    /// is not an admin: a check needing a lookup can be skipped otherwise.
    pub fn is_restricted(&self) -> bool {
        self.identity.as_ref().is_some_and(|i| !matches!(i, Identity::Admin(_)))
    }

    /// `Ok` when the caller may do what `scope` names; otherwise logs and
    /// counts the denial, which the API answers with `403`.
    pub fn allow(&self, scope: Scope<'_>) -> Result<(), Denied> {
        match &self.identity {
            Some(identity) if !identity.may(&scope) => Err(deny(identity, &scope, &self.route)),
            _ => Ok(()),
        }
    }
}

/// A request refused by [`Caller::allow`]: who asked, and for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The caller's identity, as logged.
    pub identity: String,
    /// What it asked for.
    pub scope: String,
}

fn deny(identity: &Identity, scope: &Scope<'_>, route: &str) -> Denied {
    metrics::counter!(m::AUTHZ_DENIALS, "identity" => identity.kind(), "route" => route.to_owned())
        .increment(1);
    tracing::warn!(identity = %identity, scope = %scope, route, "request refused: not authorized");
    Denied { identity: identity.to_string(), scope: scope.to_string() }
}

fn route(parts: &Parts) -> String {
    parts.extensions.get::<MatchedPath>().map_or("unmatched", MatchedPath::as_str).to_owned()
}

impl Caller {
    /// The caller of the request of `parts`; its identity checked against
    /// `trust_domain` (`--authz spiffe`), unchecked without one.
    pub fn of(parts: &Parts, trust_domain: Option<&str>) -> Caller {
        let identity = trust_domain.map(|domain| {
            Identity::of(
                parts.extensions.get::<PeerNames>().unwrap_or(&PeerNames::NoCertificate),
                domain,
            )
        });
        Caller { identity, route: route(parts) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(names: &[&str]) -> Identity {
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        Identity::of(&PeerNames::Uris(names.into()), "example.org")
    }

    #[test]
    fn identities_of_the_trust_domain_and_everything_else() {
        assert_eq!(id(&["spiffe://example.org/cluster/a"]), Identity::Cluster("a".into()));
        assert_eq!(id(&["spiffe://example.org/router/r1"]), Identity::Router("r1".into()));
        assert_eq!(id(&["spiffe://example.org/admin/ops"]), Identity::Admin("ops".into()));
        assert_eq!(
            id(&["spiffe://example.org/cluster/a-1.b_2"]),
            Identity::Cluster("a-1.b_2".into())
        );
        for other in [
            "spiffe://example.com/cluster/a",
            "spiffe://example.org.evil/cluster/a",
            "spiffe://example.org/cluster/a/b",
            "spiffe://example.org/pool/a",
            "https://example.org/cluster/a",
        ] {
            assert_eq!(id(&[other]).kind(), "other", "{other}");
        }
        for malformed in [
            "spiffe://example.org/cluster/",
            "spiffe://example.org/cluster/a%2Fb",
            "spiffe://example.org/cluster/a?b",
            "spiffe://example.org/cluster/a#b",
            "spiffe://example.org/cluster/..",
            "spiffe://example.org//cluster/a",
            "spiffe://Example.org/cluster/a",
            "spiffe://example.org:443/cluster/a",
            "spiffe://user@example.org/cluster/a",
            "spiffe://example.org",
        ] {
            let identity = id(&[malformed]);
            assert_eq!(identity.kind(), "invalid", "{malformed}");
            assert!(identity.to_string().contains("not a well-formed SPIFFE ID"), "{identity}");
        }
        let two = id(&["spiffe://example.org/admin/a", "spiffe://example.org/cluster/b"]);
        assert_eq!(two.kind(), "invalid");
        assert!(two.to_string().contains("with 2 URI SANs"), "{two}");
        let same_twice = id(&["spiffe://example.org/admin/a", "spiffe://example.org/admin/a"]);
        assert_eq!(same_twice.kind(), "invalid");
        let unreadable = Identity::of(
            &PeerNames::Unreadable("with a URI SAN that is not ASCII".into()),
            "example.org",
        );
        assert_eq!(
            unreadable,
            Identity::Invalid("a client certificate with a URI SAN that is not ASCII".into())
        );
        assert_eq!(id(&[]).kind(), "none");
        assert_eq!(Identity::of(&PeerNames::NoCertificate, "example.org").kind(), "none");
    }

    #[test]
    fn the_rules_of_each_identity() {
        let cluster = Identity::Cluster("a".into());
        let router = Identity::Router("r".into());
        let admin = Identity::Admin("ops".into());
        let other = Identity::Other("x".into());
        let table = [
            (&cluster, Scope::Read, true),
            (&cluster, Scope::Cluster("a"), true),
            (&cluster, Scope::Cluster("b"), false),
            (&cluster, Scope::Routers, false),
            (&router, Scope::Read, true),
            (&router, Scope::Routers, true),
            (&router, Scope::Cluster("a"), false),
            (&admin, Scope::Cluster("b"), true),
            (&admin, Scope::Routers, true),
            (&other, Scope::Read, false),
            (&Identity::Anonymous("none"), Scope::Read, false),
        ];
        for (identity, scope, want) in table {
            assert_eq!(identity.may(&scope), want, "{identity} {scope}");
        }
    }
}
