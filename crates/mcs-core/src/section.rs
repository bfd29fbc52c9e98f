//! The served lists ("sections") of a [`View`](crate::View) (docs/design.md §6), named
//! once: every user (the registry's handlers, cache and metrics,
//! `mcs-admin ls` and `diff`, the simulator) goes through [`SectionKind`],
//! so a new section is a variant here, a field of the view, its route and
//! its list envelope.
//!
//! [`SectionKind::visit`] (in the view's module, a floor above this one)
//! is the one place that knows which typed [`Section`] of the view each
//! kind is; everything else uses it, either untyped through [`Served`]
//! (fingerprint, length, version, body) or typed through a
//! [`SectionVisitor`] (what needs the items themselves).

use crate::fingerprint::{Fingerprint, ItemDigest, Section};
use crate::record::Kind;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A served list: `GET /v1/<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SectionKind {
    /// `GET /v1/pools`.
    Pools,
    /// `GET /v1/routers`.
    Routers,
    /// `GET /v1/clusters`.
    Clusters,
    /// `GET /v1/exports`.
    Exports,
    /// `GET /v1/imports` (derived from live exports; no records of its own).
    Imports,
}

impl SectionKind {
    /// Every section, in the order the registry and `mcs-admin diff` list
    /// them.
    pub const ALL: [SectionKind; 5] = [
        SectionKind::Pools,
        SectionKind::Routers,
        SectionKind::Clusters,
        SectionKind::Exports,
        SectionKind::Imports,
    ];

    /// Its name: the path `/v1/<name>`, the list's key in the body, the
    /// `section` label of metrics, and part of its fingerprint.
    pub const fn name(self) -> &'static str {
        match self {
            SectionKind::Pools => "pools",
            SectionKind::Routers => "routers",
            SectionKind::Clusters => "clusters",
            SectionKind::Exports => "exports",
            SectionKind::Imports => "imports",
        }
    }

    /// Its place in [`SectionKind::ALL`], for arrays of one thing per
    /// section.
    pub const fn index(self) -> usize {
        match self {
            SectionKind::Pools => 0,
            SectionKind::Routers => 1,
            SectionKind::Clusters => 2,
            SectionKind::Exports => 3,
            SectionKind::Imports => 4,
        }
    }

    /// One item of it (`pool` for `pools`), accepted wherever a section is
    /// named on a command line.
    pub const fn singular(self) -> &'static str {
        match self {
            SectionKind::Pools => "pool",
            SectionKind::Routers => "router",
            SectionKind::Clusters => "cluster",
            SectionKind::Exports => "export",
            SectionKind::Imports => "import",
        }
    }

    /// The kind of record whose live ones it serves; `None` for a section
    /// merged from other records (imports, from exports).
    pub const fn record_kind(self) -> Option<Kind> {
        match self {
            SectionKind::Pools => Some(Kind::Pool),
            SectionKind::Routers => Some(Kind::Router),
            SectionKind::Clusters => Some(Kind::Cluster),
            SectionKind::Exports => Some(Kind::Export),
            SectionKind::Imports => None,
        }
    }
}

impl fmt::Display for SectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A section named neither by its name nor by its singular.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSection(pub String);

impl fmt::Display for UnknownSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = SectionKind::ALL.iter().map(|s| s.name()).collect();
        write!(f, "unknown section {:?}: expected one of {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownSection {}

impl FromStr for SectionKind {
    type Err = UnknownSection;

    /// A section by its name or its singular (`pools` or `pool`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SectionKind::ALL
            .into_iter()
            .find(|k| k.name() == s || k.singular() == s)
            .ok_or_else(|| UnknownSection(s.to_owned()))
    }
}

/// A rendered list body and the fingerprint it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListBody {
    /// The section's fingerprint.
    pub fingerprint: Fingerprint,
    /// The JSON body, as served.
    pub body: Vec<u8>,
}

/// Something done to one section with its items' types known: the typed
/// counterpart of [`Served`], for what needs the items themselves.
pub trait SectionVisitor<'v> {
    /// What it yields.
    type Output;

    /// Does it to `section`.
    fn visit<K, V>(self, section: &'v Section<K, V>) -> Self::Output
    where
        K: Ord + fmt::Display,
        V: Serialize + PartialEq;
}

/// A section of the view, whatever its items' types.
pub trait Served {
    /// Bumped on every change of served content.
    fn version(&self) -> u64;

    /// How many items are served.
    fn len(&self) -> usize;

    /// Whether nothing is served.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fingerprint of the served content.
    fn fingerprint(&self) -> Fingerprint;

    /// The fingerprint recomputed from every item.
    fn fingerprint_from_scratch(&self) -> Fingerprint;

    /// Appends the served items, in key order, as the JSON array the list
    /// serves.
    fn write_items(&self, out: &mut Vec<u8>);

    /// Each served item's key, as people read it (`pool_id`,
    /// `cluster/namespace/name`...), with the digest of its content: equal
    /// digests, equal served JSON.
    fn digests(&self) -> Vec<(String, ItemDigest)>;

    /// Each served item in key order, keyed and digested as
    /// [`Served::digests`] does, with its JSON (the bytes
    /// [`Served::write_items`] writes for it) when `wanted` asks for it:
    /// an event stream serializes only what changed.
    fn items(&self, wanted: &mut dyn FnMut(&str, &ItemDigest) -> bool) -> Vec<ServedItem>;
}

/// One served item, as [`Served::items`] yields it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedItem {
    /// Its key, as people read it.
    pub key: String,
    /// The digest of its content.
    pub digest: ItemDigest,
    /// Its JSON, if asked for.
    pub json: Option<Vec<u8>>,
}

impl<K, V> Served for Section<K, V>
where
    K: Ord + fmt::Display,
    V: Serialize + PartialEq,
{
    fn version(&self) -> u64 {
        Section::version(self)
    }

    fn len(&self) -> usize {
        Section::len(self)
    }

    fn fingerprint(&self) -> Fingerprint {
        Section::fingerprint(self)
    }

    fn fingerprint_from_scratch(&self) -> Fingerprint {
        Section::fingerprint_from_scratch(self)
    }

    fn write_items(&self, out: &mut Vec<u8>) {
        let items: Vec<&V> = self.values().collect();
        // Serializing plain data types into a Vec cannot fail.
        let _ = serde_json::to_writer(out, &items);
    }

    fn digests(&self) -> Vec<(String, ItemDigest)> {
        Section::digests(self).map(|(k, d)| (k.to_string(), d)).collect()
    }

    fn items(&self, wanted: &mut dyn FnMut(&str, &ItemDigest) -> bool) -> Vec<ServedItem> {
        Section::digests(self)
            .zip(self.values())
            .map(|((key, digest), value)| {
                let key = key.to_string();
                // Serializing plain data types into a Vec cannot fail.
                let json =
                    wanted(&key, &digest).then(|| serde_json::to_vec(value).unwrap_or_default());
                ServedItem { key, digest, json }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, port};
    use crate::view::View;

    const NOW: u64 = 1_764_662_400_000;

    fn view() -> View {
        let mut view = View::new(1_000);
        for r in [
            mk_pool("a", 1, "w", None, Some(NOW + 30_000)),
            mk_cluster("c1", 1, "inc-1", NOW + 30_000),
            mk_export("c1", "web", 1, mk_export_spec(1_700_000_000, vec![port("http", 80)])),
        ] {
            view.apply(r, NOW);
        }
        view
    }

    #[test]
    fn each_section_knows_its_place_in_all() {
        for (i, section) in SectionKind::ALL.into_iter().enumerate() {
            assert_eq!(section.index(), i, "{}", section.name());
        }
    }

    #[test]
    fn names_are_the_served_paths_and_parse_back() {
        let names: Vec<&str> = SectionKind::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["pools", "routers", "clusters", "exports", "imports"]);
        for s in SectionKind::ALL {
            assert_eq!(s.name().parse::<SectionKind>(), Ok(s));
            assert_eq!(s.singular().parse::<SectionKind>(), Ok(s));
            assert_eq!(s.to_string(), s.name());
        }
        let err = "pol".parse::<SectionKind>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown section \"pol\": expected one of pools, routers, clusters, exports, imports"
        );
    }

    #[test]
    fn each_kind_is_its_section_of_the_view() {
        let view = view();
        let typed = [
            (view.pools().fingerprint(), view.pools().len(), view.pools().version()),
            (view.routers().fingerprint(), view.routers().len(), view.routers().version()),
            (view.clusters().fingerprint(), view.clusters().len(), view.clusters().version()),
            (view.exports().fingerprint(), view.exports().len(), view.exports().version()),
            (view.imports().fingerprint(), view.imports().len(), view.imports().version()),
        ];
        let untyped =
            SectionKind::ALL.map(|s| (s.fingerprint(&view), s.len(&view), s.version(&view)));
        assert_eq!(untyped, typed);
        assert_eq!(SectionKind::ALL.map(|s| s.len(&view)), [1, 0, 1, 1, 1]);
    }

    #[test]
    fn the_list_body_is_the_envelope_of_the_served_items() {
        let view = view();
        let pools = SectionKind::Pools.list_body(&view, true);
        let items: Vec<_> = view.pools().values().collect();
        let want = format!(
            "{{\"pools\":{},\"complete\":true,\"fingerprint\":\"{}\"}}",
            serde_json::to_string(&items).unwrap(),
            view.pools().fingerprint()
        );
        assert_eq!(String::from_utf8(pools.body).unwrap(), want);
        assert_eq!(pools.fingerprint, view.pools().fingerprint());
        let routers = SectionKind::Routers.list_body(&view, false);
        assert_eq!(
            String::from_utf8(routers.body).unwrap(),
            format!(
                "{{\"routers\":[],\"complete\":false,\"fingerprint\":\"{}\"}}",
                view.routers().fingerprint()
            )
        );
    }

    #[test]
    fn digests_are_keyed_as_people_read_keys() {
        let view = view();
        let keys = |s: SectionKind| -> Vec<String> {
            s.of(&view).digests().into_iter().map(|(k, _)| k).collect()
        };
        assert_eq!(keys(SectionKind::Clusters), ["c1"]);
        assert_eq!(keys(SectionKind::Exports), ["c1/llm/web"]);
        assert_eq!(keys(SectionKind::Imports), ["llm/web"]);
        let mut other = View::new(1_000);
        other.apply(mk_pool("a", 2, "w", None, Some(NOW + 30_000)), NOW);
        let (a, b) = (SectionKind::Pools.of(&view), SectionKind::Pools.of(&other));
        assert_eq!(a.digests()[0].0, b.digests()[0].0, "same key");
        assert_eq!(a.digests(), b.digests(), "a new version with the same content");
    }

    /// Regions running different versions compare fingerprints, and
    /// clients keep `ETag`s across upgrades: a section's name, which its
    /// fingerprint hashes, never changes.
    #[test]
    fn empty_fingerprints_are_those_of_every_earlier_version() {
        let empty = View::new(0);
        assert_eq!(
            SectionKind::ALL.map(|s| s.fingerprint(&empty)),
            [
                "87fa93170c29f8b05106dd184d081289",
                "081d8a480eaa8b53a990d6a57f1ce5cc",
                "ade02e08b229e0d5eb6cadf80701b920",
                "68deaf4b3a7a0e7df32574d4fc6d0511",
                "46ecf3a2462d30c478e63fafb005fbf7",
            ]
        );
    }

    /// What a section serves, seen through its untyped face, is what the
    /// typed section holds: emptiness, and a fingerprint recomputed from
    /// every item equal to the one kept as items change.
    #[test]
    fn a_served_section_is_empty_exactly_when_it_serves_nothing() {
        let view = view();
        let empty = View::new(0);
        // The view serves a pool, a cluster, an export and its import, but
        // no router.
        let empty_in_view = [false, true, false, false, false];
        for (s, want) in SectionKind::ALL.into_iter().zip(empty_in_view) {
            let (full, none) = (s.of(&view), s.of(&empty));
            assert_eq!(full.is_empty(), want, "{s}");
            assert!(none.is_empty(), "{s}");
            assert_eq!(full.fingerprint_from_scratch(), full.fingerprint(), "{s}");
            assert_eq!(none.fingerprint_from_scratch(), none.fingerprint(), "{s}");
        }
        assert!(!SectionKind::Pools.of(&view).is_empty());
        assert_ne!(
            SectionKind::Pools.of(&view).fingerprint_from_scratch(),
            SectionKind::Pools.of(&empty).fingerprint_from_scratch(),
            "recomputed from the items, not a constant"
        );
    }

    /// An item's JSON is the element the list serves for it, and only the
    /// items asked for are serialized.
    #[test]
    fn items_carry_the_served_json_of_those_asked_for() {
        let view = view();
        let exports = SectionKind::Exports.of(&view);
        let mut asked = Vec::new();
        let items = exports.items(&mut |key, _| {
            asked.push(key.to_owned());
            true
        });
        assert_eq!(asked, ["c1/llm/web"]);
        let mut list = Vec::new();
        exports.write_items(&mut list);
        let element = format!("[{}]", String::from_utf8(items[0].json.clone().unwrap()).unwrap());
        assert_eq!(element.as_bytes(), list.as_slice());
        let keyed: Vec<_> = items.iter().map(|i| (i.key.clone(), i.digest)).collect();
        assert_eq!(keyed, exports.digests());
        let none = SectionKind::Pools.of(&view).items(&mut |_, _| false);
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].json, None);
    }

    #[test]
    fn record_kinds() {
        assert_eq!(SectionKind::Pools.record_kind(), Some(Kind::Pool));
        assert_eq!(SectionKind::Imports.record_kind(), None);
    }
}
