//! `ls SECTION [--all]`: what the registry serves, built as the registry
//! builds it (a [`View`] of a full read at now), in key order.
//!
//! `-o json` prints the served items exactly as the list's array in
//! `GET /v1/<section>`: the same types, the same order, the same bytes.
//! `--all` adds every record the view holds but does not serve (expired
//! leases, tombstones, exports of clusters without a live lease), each with
//! its reason.

use super::{DEFAULT_RETENTION, open_checked};
use crate::cli::{GlobalArgs, LsArgs};
use crate::liveness::{Reason, reason_of};
use crate::output::{self, Format, Table, relative};
use crate::progress::Progress;
use crate::scan::view_of;
use crate::{Exit, UsageError};
use mcs_api::{
    Cluster, ConditionStatus, Endpoint, Export, Incarnation, Pool, RouterReplica, ServicePort,
};
use mcs_core::fingerprint::Section;
use mcs_core::section::SectionVisitor;
use mcs_core::{Body, Key, Kind, Record, SectionKind, View};
use mcs_store::Store;
use serde::Serialize;

pub(super) async fn run(global: &GlobalArgs, args: &LsArgs) -> anyhow::Result<Exit> {
    if args.all && args.section.record_kind().is_none() {
        return Err(UsageError::invalid(
            "imports are merged from live exports and have no records of their own: \
             use `ls exports --all`",
        )
        .into());
    }
    let store = open_checked(global, DEFAULT_RETENTION).await?;
    let progress = Progress::spinner("reading the table");
    let now = crate::now_ms();
    let records = store.read_all().await;
    progress.finish();
    let view = view_of(records?, global.store.skew_allowance_ms, now);
    let text = if args.all {
        render_all(&view, args.section, global.output, global.store.skew_allowance_ms, now)?
    } else {
        render_served(&view, args.section, global.output, now)?
    };
    output::print(&text)?;
    Ok(Exit::Ok)
}

/// The served items of `section`, as the registry serves them.
pub(crate) fn render_served(
    view: &View,
    section: SectionKind,
    format: Format,
    now_ms: u64,
) -> anyhow::Result<String> {
    if let Some(text) = section.visit(view, Structured(format))? {
        return Ok(text);
    }
    let lease = |key: Key| {
        view.record(&key)
            .and_then(|r| r.lease_until_ms)
            .map_or_else(|| "-".to_owned(), |until| relative(until, now_ms))
    };
    let table = match section {
        SectionKind::Pools => {
            let mut t = Table::new([
                "POOL_ID",
                "CLUSTER",
                "NAMESPACE",
                "DGD_NAME",
                "MODEL",
                "REGION",
                "WORKERS",
                "RELAY",
                "LEASE",
            ]);
            for p in view.pools().values() {
                t.row([
                    p.pool_id.to_string(),
                    p.pool_key.cluster_id.to_string(),
                    p.pool_key.namespace.to_string(),
                    p.pool_key.dgd_name.to_string(),
                    p.model.to_string(),
                    p.location.region.to_string(),
                    p.capacity.workers.to_string(),
                    p.relay_address.to_string(),
                    lease(Key::Pool { pool_id: p.pool_id.clone() }),
                ]);
            }
            t
        }
        SectionKind::Routers => {
            let mut t = Table::new(["ROUTER_ID", "ADDRESS", "REGION", "ZONE", "LEASE"]);
            for r in view.routers().values() {
                let location = r.location.as_ref();
                t.row([
                    r.router_id.to_string(),
                    r.address.to_string(),
                    location.map_or_else(|| "-".to_owned(), |l| l.region.to_string()),
                    location
                        .and_then(|l| l.zone.as_ref())
                        .map_or_else(|| "-".to_owned(), ToString::to_string),
                    lease(Key::Router { router_id: r.router_id.clone() }),
                ]);
            }
            t
        }
        SectionKind::Clusters => {
            let mut t = Table::new(["CLUSTER_ID", "INCARNATION", "LEASE"]);
            for c in view.clusters().values() {
                t.row([
                    c.cluster_id.to_string(),
                    c.incarnation.to_string(),
                    lease(Key::Cluster { cluster_id: c.cluster_id.clone() }),
                ]);
            }
            t
        }
        SectionKind::Exports => {
            let mut t = Table::new([
                "CLUSTER",
                "NAMESPACE",
                "NAME",
                "TYPE",
                "PORTS",
                "ENDPOINTS",
                "CONFLICT",
            ]);
            for e in view.exports().values() {
                let conflict = e
                    .conditions
                    .iter()
                    .find(|c| c.condition_type == "Conflict" && c.status == ConditionStatus::True)
                    .map_or_else(|| "-".to_owned(), |c| c.reason.clone());
                t.row([
                    e.cluster_id.to_string(),
                    e.namespace.to_string(),
                    e.name.to_string(),
                    format!("{:?}", e.spec.service_type),
                    ports(&e.spec.ports),
                    endpoints(&e.spec.endpoints),
                    conflict,
                ]);
            }
            t
        }
        SectionKind::Imports => {
            let mut t = Table::new(["NAMESPACE", "NAME", "TYPE", "PORTS", "CLUSTERS", "ENDPOINTS"]);
            for i in view.imports().values() {
                let all: Vec<Endpoint> =
                    i.clusters.iter().flat_map(|c| c.endpoints.iter().cloned()).collect();
                t.row([
                    i.namespace.to_string(),
                    i.name.to_string(),
                    format!("{:?}", i.service_type),
                    ports(&i.ports),
                    i.clusters.iter().map(|c| c.cluster_id.as_str()).collect::<Vec<_>>().join(","),
                    endpoints(&all),
                ]);
            }
            t
        }
    };
    Ok(table.render())
}

/// A section's served items in a structured format, `None` for tables.
struct Structured(Format);

impl<'v> SectionVisitor<'v> for Structured {
    type Output = anyhow::Result<Option<String>>;

    fn visit<K, V>(self, section: &'v Section<K, V>) -> Self::Output
    where
        K: Ord + std::fmt::Display,
        V: Serialize + PartialEq,
    {
        // A Vec of references serializes exactly as the registry's list.
        output::structured(self.0, &section.values().collect::<Vec<_>>())
    }
}

/// `http:80/TCP,grpc:9090/TCP`.
fn ports(ports: &[ServicePort]) -> String {
    if ports.is_empty() {
        return "-".to_owned();
    }
    ports
        .iter()
        .map(|p| {
            let name = if p.name.is_empty() { String::new() } else { format!("{}:", p.name) };
            format!("{name}{}/{:?}", p.port, p.protocol)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `ready/total` endpoints.
fn endpoints(endpoints: &[Endpoint]) -> String {
    let ready = endpoints.iter().filter(|e| e.ready).count();
    format!("{ready}/{}", endpoints.len())
}

/// One record of `ls --all`: its state and the item it is (or would be)
/// served as; `None` for a tombstone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Entry<T> {
    /// Why it is or is not served.
    pub reason: Reason,
    /// The record's key, e.g. `pool/3677…` or `export/east/llm/web`.
    pub key: String,
    /// Its generation.
    pub generation: u64,
    /// Who wrote that generation.
    pub writer: String,
    /// The incarnation holding its lease.
    pub owner: Option<String>,
    /// When its lease ends.
    pub lease_until_ms: Option<u64>,
    /// When it was written.
    pub changed_at_ms: u64,
    /// The served item (live), or the stored one in the same shape.
    pub item: Option<T>,
}

/// Every record of `kind` the view holds, in key order, with its reason.
/// `served` finds the item the view serves for a key; `stored` turns a
/// stored payload into the same shape.
pub(crate) fn entries<T>(
    view: &View,
    kind: Kind,
    skew_ms: u64,
    now_ms: u64,
    served: impl Fn(&Key) -> Option<T>,
    stored: impl Fn(&Record) -> Option<T>,
) -> Vec<Entry<T>> {
    let mut records: Vec<&Record> = view.records().filter(|r| r.key.kind() == kind).collect();
    records.sort_by(|a, b| a.key.cmp(&b.key));
    records
        .into_iter()
        .map(|r| {
            let reason = reason_of(view, r, skew_ms, now_ms);
            let item = if reason == Reason::Live { served(&r.key) } else { stored(r) };
            Entry {
                reason,
                key: r.key.to_string(),
                generation: r.version.generation,
                writer: r.version.writer.clone(),
                owner: r.owner.clone(),
                lease_until_ms: r.lease_until_ms,
                changed_at_ms: r.changed_at_ms,
                item,
            }
        })
        .collect()
}

fn pool_entries(view: &View, skew_ms: u64, now_ms: u64) -> Vec<Entry<Pool>> {
    entries(
        view,
        Kind::Pool,
        skew_ms,
        now_ms,
        |key| match key {
            Key::Pool { pool_id } => view.pools().get(pool_id).cloned(),
            _ => None,
        },
        |r| match &r.body {
            Body::Pool(p) => Some(p.clone()),
            _ => None,
        },
    )
}

fn router_entries(view: &View, skew_ms: u64, now_ms: u64) -> Vec<Entry<RouterReplica>> {
    entries(
        view,
        Kind::Router,
        skew_ms,
        now_ms,
        |key| match key {
            Key::Router { router_id } => view.routers().get(router_id).cloned(),
            _ => None,
        },
        |r| match &r.body {
            Body::Router(router) => Some(router.clone()),
            _ => None,
        },
    )
}

fn cluster_entries(view: &View, skew_ms: u64, now_ms: u64) -> Vec<Entry<Cluster>> {
    entries(
        view,
        Kind::Cluster,
        skew_ms,
        now_ms,
        |key| match key {
            Key::Cluster { cluster_id } => view.clusters().get(cluster_id).cloned(),
            _ => None,
        },
        |r| match (&r.key, &r.body, &r.owner) {
            (Key::Cluster { cluster_id }, Body::Cluster, Some(owner)) => {
                Incarnation::new(owner.clone())
                    .ok()
                    .map(|incarnation| Cluster { cluster_id: cluster_id.clone(), incarnation })
            }
            _ => None,
        },
    )
}

fn export_entries(view: &View, skew_ms: u64, now_ms: u64) -> Vec<Entry<Export>> {
    entries(
        view,
        Kind::Export,
        skew_ms,
        now_ms,
        |key| match key {
            Key::Export(k) => view.exports().get(k).cloned(),
            _ => None,
        },
        // Not served, so without the conditions only a merge gives.
        |r| match (&r.key, &r.body) {
            (Key::Export(k), Body::Export(spec)) => Some(Export {
                cluster_id: k.cluster_id.clone(),
                namespace: k.namespace.clone(),
                name: k.name.clone(),
                spec: spec.clone(),
                conditions: vec![],
            }),
            _ => None,
        },
    )
}

/// Every record of `section` with its reason.
pub(crate) fn render_all(
    view: &View,
    section: SectionKind,
    format: Format,
    skew_ms: u64,
    now_ms: u64,
) -> anyhow::Result<String> {
    let Some(kind) = section.record_kind() else {
        return Ok(String::new());
    };
    let structured = match kind {
        Kind::Pool => output::structured(format, &pool_entries(view, skew_ms, now_ms))?,
        Kind::Router => output::structured(format, &router_entries(view, skew_ms, now_ms))?,
        Kind::Cluster => output::structured(format, &cluster_entries(view, skew_ms, now_ms))?,
        Kind::Export => output::structured(format, &export_entries(view, skew_ms, now_ms))?,
    };
    if let Some(text) = structured {
        return Ok(text);
    }
    let mut rows: Vec<&Record> = view.records().filter(|r| r.key.kind() == kind).collect();
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    // A version (`generation@writer`) alone takes some 56 columns: only
    // with `-o wide`.
    let wide = format == Format::Wide;
    let mut headers = vec!["REASON", "KEY"];
    if wide {
        headers.push("VERSION");
    }
    headers.extend(["OWNER", "LEASE", "CHANGED", "SUMMARY"]);
    let mut t = Table::new(headers);
    for r in rows {
        let key = r.key.to_string();
        let mut cells = vec![
            reason_of(view, r, skew_ms, now_ms).to_string(),
            key.split_once('/').map_or(key.as_str(), |(_, rest)| rest).to_owned(),
        ];
        if wide {
            cells.push(r.version.to_string());
        }
        cells.extend([
            r.owner.clone().unwrap_or_else(|| "-".to_owned()),
            r.lease_until_ms.map_or_else(|| "-".to_owned(), |until| relative(until, now_ms)),
            relative(r.changed_at_ms, now_ms),
            summary(&r.body),
        ]);
        t.row(cells);
    }
    Ok(t.render())
}

/// A few words on a payload, for tables.
fn summary(body: &Body) -> String {
    match body {
        Body::Tombstone => "-".to_owned(),
        Body::Cluster => "cluster lease".to_owned(),
        Body::Pool(p) => format!("{} at {}", p.model, p.relay_address),
        Body::Router(r) => r.address.to_string(),
        Body::Export(e) => format!("{:?} {}", e.service_type, ports(&e.ports)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_core::fixtures::{
        mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone, pool_key, port,
    };

    const NOW: u64 = 1_764_662_400_000;

    fn view() -> View {
        view_of(
            vec![
                mk_pool("b", 2, "w", Some("r1"), Some(NOW + 30_000)),
                mk_pool("a", 1, "w", None, Some(NOW + 30_000)),
                mk_pool("old", 1, "w", None, Some(NOW - 30_000)),
                mk_tombstone("gone", 3, "w"),
                mk_cluster("c1", 1, "inc-1", NOW + 30_000),
                mk_export("c1", "web", 1, mk_export_spec(1_700_000_000, vec![port("http", 80)])),
                mk_export("c9", "web", 1, mk_export_spec(1_700_000_001, vec![port("http", 81)])),
            ],
            1_000,
            NOW,
        )
    }

    #[test]
    fn json_is_the_registry_array() {
        let view = view();
        let text = render_served(&view, SectionKind::Pools, Format::Json, NOW).unwrap();
        let served: Vec<&Pool> = view.pools().values().collect();
        assert_eq!(text, format!("{}\n", serde_json::to_string(&served).unwrap()));
        let back: Vec<Pool> = serde_json::from_str(&text).unwrap();
        let ids: Vec<String> = back.iter().map(|p| p.pool_id.to_string()).collect();
        let mut want: Vec<String> =
            ["a", "b"].iter().map(|n| pool_key(n).id().to_string()).collect();
        want.sort();
        assert_eq!(ids, want, "live only, in key order");
    }

    #[test]
    fn json_of_every_section_is_the_served_array() {
        let view = view();
        for section in SectionKind::ALL {
            let text = render_served(&view, section, Format::Json, NOW).unwrap();
            let mut served = Vec::new();
            section.of(&view).write_items(&mut served);
            served.push(b'\n');
            assert_eq!(text.as_bytes(), served, "{section}");
        }
    }

    #[test]
    fn tables_show_the_served_items() {
        let view = view();
        let pools = render_served(&view, SectionKind::Pools, Format::Table, NOW).unwrap();
        assert!(pools.starts_with("POOL_ID"), "{pools}");
        assert_eq!(pools.lines().count(), 3, "{pools}");
        assert!(pools.contains("in 30s"), "{pools}");
        let exports = render_served(&view, SectionKind::Exports, Format::Table, NOW).unwrap();
        assert!(exports.contains("http:80/TCP"), "{exports}");
        assert_eq!(exports.lines().count(), 2, "the export of c9 is not served: {exports}");
        let imports = render_served(&view, SectionKind::Imports, Format::Yaml, NOW).unwrap();
        assert!(imports.contains("name: web"), "{imports}");
    }

    #[test]
    fn all_adds_what_is_not_served_with_reasons() {
        let view = view();
        let pools = pool_entries(&view, 1_000, NOW);
        let reasons: Vec<(Reason, bool)> =
            pools.iter().map(|e| (e.reason, e.item.is_some())).collect();
        assert_eq!(reasons.len(), 4);
        assert!(reasons.contains(&(Reason::Withdrawn, false)));
        assert!(reasons.contains(&(Reason::Expired, true)));
        assert_eq!(reasons.iter().filter(|r| r.0 == Reason::Live).count(), 2);
        let exports = export_entries(&view, 1_000, NOW);
        let reasons: Vec<(&str, Reason)> =
            exports.iter().map(|e| (e.key.as_str(), e.reason)).collect();
        assert_eq!(
            reasons,
            vec![
                ("export/c1/llm/web", Reason::Live),
                ("export/c9/llm/web", Reason::ClusterNotLive)
            ]
        );
        assert!(!exports[0].item.as_ref().unwrap().conditions.is_empty());
        let text = render_all(&view, SectionKind::Exports, Format::Table, 1_000, NOW).unwrap();
        assert!(text.contains("cluster_not_live  c9/llm/web"), "{text}");
        assert!(text.starts_with("REASON            KEY         OWNER"), "no VERSION: {text}");
        let wide = render_all(&view, SectionKind::Exports, Format::Wide, 1_000, NOW).unwrap();
        assert!(wide.starts_with("REASON            KEY         VERSION  OWNER"), "{wide}");
        assert!(wide.contains("  1@w  "), "{wide}");
        let json = render_all(&view, SectionKind::Clusters, Format::Json, 1_000, NOW).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed[0]["reason"], "live");
        assert_eq!(parsed[0]["item"]["incarnation"], "inc-1");
    }
}
