//! `doctor`: checks the table's health and names what is wrong. Exit 0 when
//! every check is ok, 1 when one found a problem.
//!
//! | check | a problem when |
//! | --- | --- |
//! | schema | the META version is not this binary's |
//! | ttl | TTL is not enabled on `ttl` |
//! | stream | the stream is off or not `NEW_AND_OLD_IMAGES` (global tables need both images) |
//! | `NAME` index | one per index the table's schema version needs (those its migrations declared: `changes`; `lease_ends` from 2; `change_stamps` from 4): it is missing or not `ACTIVE` |
//! | unreadable items | an item cannot be decoded by this binary |
//! | orphaned exports | an export's cluster's lease ended without a withdrawal, or the export is past the retention by more than `--ttl-grace-secs` and gc has not collected it |
//! | conflicts | a served export reports `Conflict=True` |
//! | clock skew | a record was written (`changed_at_ms`) further in the future than the skew allowance, or holds a lease longer than any the registry grants |
//! | ttl backlog | an item is still present more than `--ttl-grace-secs` past its `ttl` |
//! | foreign garbage | never: it reports, per origin, the items of other regions that gc there would collect |
//!
//! `foreign garbage` is informational, as items past their `ttl` but within
//! the grace are for `ttl backlog`: gc in this region leaves other regions'
//! items alone (see `gc`), and where TTL runs DynamoDB deletes them anyway;
//! one left long past its `ttl` is a `ttl backlog` problem already.

use super::checked_retention;
use super::describe::{Inspected, inspect};
use super::gc::past_retention;
use crate::Exit;
use crate::cli::{DoctorArgs, GlobalArgs};
use crate::liveness::{Reason, reason_of};
use crate::output::{self, Format, Table, count, relative};
use crate::scan::{Scan, number_attribute, origin};
use mcs_api::ConditionStatus;
use mcs_core::lease::MAX_LEASE_SECS;
use mcs_core::{Body, Key, Record, View};
use mcs_store::dynamo::raw::TTL;
use mcs_store::dynamo::{
    INDEX_ACTIVE, INDEX_MISSING, OLDEST_TABLE_VERSION, SCHEMA_VERSION, TableFacts,
    compatibility_mode,
};
use serde::Serialize;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Nothing wrong.
    Ok,
    /// Something to act on.
    Problem,
}

/// One check, what it found, and the items it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub items: Vec<String>,
}

impl Check {
    fn ok(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { name: name.into(), status: Status::Ok, detail: detail.into(), items: vec![] }
    }

    fn problem(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { name: name.into(), status: Status::Problem, detail: detail.into(), items: vec![] }
    }

    /// Ok when `items` is empty, else a problem naming them.
    fn of_items(name: &str, items: Vec<String>, ok: &str, problem: String) -> Self {
        let status = if items.is_empty() { Status::Ok } else { Status::Problem };
        let detail = if items.is_empty() { ok.to_owned() } else { problem };
        Self { name: name.to_owned(), status, detail, items }
    }
}

/// What `doctor -o json|yaml` prints.
#[derive(Debug, Serialize)]
struct Diagnosis {
    table: String,
    /// The region of the replica checked.
    region: String,
    /// The endpoint override, if any.
    endpoint: Option<String>,
    healthy: bool,
    checks: Vec<Check>,
}

/// What the checks look at.
pub(crate) struct Findings<'a> {
    pub schema_version: Option<u32>,
    pub facts: &'a TableFacts,
    /// The indexes the table's schema version needs, in the order its
    /// migrations declared them.
    pub needed_indexes: &'a [String],
    pub scan: &'a Scan,
    pub view: &'a View,
    pub skew_ms: u64,
    pub ttl_grace_ms: u64,
    /// The retention gc collects after.
    pub retention_ms: u64,
    /// The region of the replica read: its items are its own gc's.
    pub origin: &'a str,
    pub now_ms: u64,
}

pub(super) async fn run(global: &GlobalArgs, args: &DoctorArgs) -> anyhow::Result<Exit> {
    checked_retention(args.retention.retention_secs, global.store.skew_allowance_ms)?;
    let Inspected { location, store, facts, schema_version, needed_indexes, scanned, view, now } =
        inspect(global).await?;
    let checks = checks(&Findings {
        schema_version,
        facts: &facts,
        needed_indexes: &needed_indexes,
        scan: &scanned,
        view: &view,
        skew_ms: global.store.skew_allowance_ms,
        ttl_grace_ms: args.ttl_grace_secs.saturating_mul(1000),
        retention_ms: args.retention.retention_secs.saturating_mul(1000),
        origin: store.origin(),
        now_ms: now,
    });
    let healthy = checks.iter().all(|c| c.status == Status::Ok);
    let diagnosis = Diagnosis {
        table: location.table,
        region: store.origin().to_owned(),
        endpoint: location.endpoint,
        healthy,
        checks,
    };
    output::print(&render(&diagnosis, global.output)?)?;
    Ok(if healthy { Exit::Ok } else { Exit::Problem })
}

/// Every check, in a fixed order.
pub(crate) fn checks(f: &Findings<'_>) -> Vec<Check> {
    let mut checks = vec![schema(f.schema_version), ttl(f.facts), stream(f.facts)];
    checks.extend(f.needed_indexes.iter().map(|name| index(f.facts, name)));
    checks.extend([
        unreadable(f.scan),
        orphans(f),
        conflicts(f.view),
        skew(f),
        ttl_backlog(f),
        foreign_garbage(f),
    ]);
    checks
}

fn schema(version: Option<u32>) -> Check {
    const NAME: &str = "schema";
    match version {
        Some(v) if v == SCHEMA_VERSION => Check::ok(NAME, format!("version {v}, as this binary")),
        Some(v) if v > SCHEMA_VERSION => Check::problem(
            NAME,
            format!(
                "version {v} is newer than this binary's {SCHEMA_VERSION}: use a newer mcs-admin"
            ),
        ),
        Some(v) if v >= OLDEST_TABLE_VERSION => {
            let compat = compatibility_mode(v);
            Check::problem(
                NAME,
                format!(
                    "version {v}: registries of this release serve it in compatibility mode \
                     ({compat}); once every registry runs this release, run mcs-admin migrate \
                     (to {SCHEMA_VERSION})"
                ),
            )
        }
        Some(v) => Check::problem(
            NAME,
            format!("version {v}, this binary needs {SCHEMA_VERSION}: run mcs-admin migrate"),
        ),
        None => Check::problem(NAME, "no schema version: run mcs-admin migrate"),
    }
}

fn ttl(facts: &TableFacts) -> Check {
    const NAME: &str = "ttl";
    let attribute = facts.ttl_attribute.as_deref();
    let on = matches!(facts.ttl_status.as_str(), "ENABLED" | "ENABLING");
    if on && attribute == Some(TTL) {
        Check::ok(NAME, format!("{} on {TTL}", facts.ttl_status))
    } else {
        Check::problem(
            NAME,
            format!(
                "{} on {}, want ENABLED on {TTL}: run mcs-admin migrate",
                facts.ttl_status,
                attribute.unwrap_or("no attribute")
            ),
        )
    }
}

fn stream(facts: &TableFacts) -> Check {
    const NAME: &str = "stream";
    const WANT: &str = "NEW_AND_OLD_IMAGES";
    match (facts.stream_enabled, facts.stream_view_type.as_deref()) {
        (true, Some(WANT)) => Check::ok(NAME, format!("enabled, {WANT}")),
        (true, view) => Check::problem(
            NAME,
            format!(
                "enabled with {}, global tables need {WANT}: run mcs-admin migrate",
                view.unwrap_or("no view type")
            ),
        ),
        (false, _) => Check::problem(
            NAME,
            format!("disabled, global tables need {WANT}: run mcs-admin migrate"),
        ),
    }
}

/// The check of the index `name`, which the table's schema version needs:
/// its registries query it.
fn index(facts: &TableFacts, name: &str) -> Check {
    let check = format!("{name} index");
    match facts.index_state(name) {
        INDEX_ACTIVE => Check::ok(check, INDEX_ACTIVE),
        INDEX_MISSING => Check::problem(check, format!("{INDEX_MISSING}: run mcs-admin migrate")),
        state => {
            let advice = if state.starts_with("CREATING") || state.ends_with("(backfilling)") {
                "wait for the backfill (doctor reports it ACTIVE when done)"
            } else if state.starts_with("DELETING") {
                "run mcs-admin migrate once it is deleted (it creates it again)"
            } else {
                "wait until it is ACTIVE"
            };
            Check::problem(
                check,
                format!(
                    "{state}: registries at this schema version query it, their reads fail or \
                     miss writes until it is ACTIVE: {advice}"
                ),
            )
        }
    }
}

fn unreadable(scan: &Scan) -> Check {
    let items: Vec<String> =
        scan.unreadable.iter().map(|u| format!("{} {}: {}", u.pk, u.sk, u.reason)).collect();
    let problem = format!(
        "{} this binary cannot read (a newer writer, or damage); registries skip them",
        count(items.len(), "item", "items")
    );
    Check::of_items("unreadable items", items, "every item decodes", problem)
}

/// Exports whose cluster holds no live lease. They are not served, and gc
/// collects them once their cluster has been gone for the retention
/// ([`Record::expires_at_ms_on`]); a problem when their cluster's lease
/// ended without a withdrawal (a cluster removed without withdrawing, or a
/// controller down), or when they are past the retention by more than the
/// grace and gc has not collected them. Exports of a cluster withdrawn
/// within the retention are as expected: named, no problem.
fn orphans(f: &Findings<'_>) -> Check {
    const NAME: &str = "orphaned exports";
    let mut problems = Vec::new();
    let mut expected = Vec::new();
    for record in f.view.records() {
        let Key::Export(key) = &record.key else { continue };
        if reason_of(f.view, record, f.skew_ms, f.now_ms) != Reason::ClusterNotLive {
            continue;
        }
        let cluster = f.view.record(&Key::Cluster { cluster_id: key.cluster_id.clone() });
        let withdrawn = cluster.is_some_and(Record::is_tombstone);
        let why = match cluster {
            None => "no cluster record".to_owned(),
            Some(c) if c.is_tombstone() => {
                format!("cluster withdrawn {}", relative(c.changed_at_ms, f.now_ms))
            }
            Some(c) => match c.lease_until_ms {
                Some(until) => format!("cluster lease ended {}", relative(until, f.now_ms)),
                None => "cluster holds no lease".to_owned(),
            },
        };
        let collectable =
            record.expires_at_ms_on(cluster).map(|at| at.saturating_add(f.retention_ms));
        match collectable {
            Some(at) if at <= f.now_ms => {
                let line = format!(
                    "{}: {why}; past the retention {}: mcs-admin gc collects it",
                    record.key,
                    relative(at, f.now_ms)
                );
                if at.saturating_add(f.ttl_grace_ms) <= f.now_ms {
                    problems.push(line);
                } else {
                    expected.push(line);
                }
            }
            Some(at) => {
                let line = format!(
                    "{}: {why}; mcs-admin gc collects it {}",
                    record.key,
                    relative(at, f.now_ms)
                );
                if withdrawn { expected.push(line) } else { problems.push(line) }
            }
            None => problems.push(format!("{}: {why}", record.key)),
        }
    }
    problems.sort();
    expected.sort();
    if problems.is_empty() {
        let detail = if expected.is_empty() {
            "every export's cluster holds a live lease".to_owned()
        } else {
            format!(
                "{} of withdrawn clusters (or just past the retention), not served, left for gc",
                count(expected.len(), "export", "exports")
            )
        };
        return Check { name: NAME.to_owned(), status: Status::Ok, detail, items: expected };
    }
    let detail = format!(
        "{} whose cluster holds no live lease: withdraw the cluster if it is gone for good \
         (DELETE /v1/clusters/ID), and run mcs-admin gc in every region",
        count(problems.len(), "export", "exports")
    );
    problems.extend(expected);
    Check { name: NAME.to_owned(), status: Status::Problem, detail, items: problems }
}

fn conflicts(view: &View) -> Check {
    let items: Vec<String> =
        view.exports()
            .values()
            .filter_map(|e| {
                let c = e.conditions.iter().find(|c| {
                    c.condition_type == "Conflict" && c.status == ConditionStatus::True
                })?;
                Some(format!(
                    "export/{}/{}/{}: {}: {}",
                    e.cluster_id, e.namespace, e.name, c.reason, c.message
                ))
            })
            .collect();
    let problem =
        format!("{} report Conflict=True", count(items.len(), "served export", "served exports"));
    Check::of_items("conflicts", items, "no conflicting exports", problem)
}

fn skew(f: &Findings<'_>) -> Check {
    let horizon = f.now_ms.saturating_add(f.skew_ms);
    let longest = f.now_ms.saturating_add(MAX_LEASE_SECS * 1000).saturating_add(f.skew_ms);
    let mut items = Vec::new();
    let mut latest: Option<u64> = None;
    for (record, item) in &f.scan.records {
        latest = latest.max(Some(record.changed_at_ms));
        if record.changed_at_ms > horizon {
            items.push(format!(
                "{} (item of {}): written by {} {} ahead of this clock",
                record.key,
                origin(item),
                record.version.writer,
                relative(record.changed_at_ms, f.now_ms).trim_start_matches("in ")
            ));
        } else if let Some(until) = record.lease_until_ms.filter(|u| *u > longest)
            && !matches!(record.body, Body::Tombstone)
        {
            items.push(format!(
                "{} (item of {}): lease ends {}, beyond the longest lease ({MAX_LEASE_SECS}s) from now",
                record.key,
                origin(item),
                relative(until, f.now_ms)
            ));
        }
    }
    let ok = match latest {
        Some(latest) => format!(
            "no record from the future (beyond {} ms); latest write {}",
            f.skew_ms,
            relative(latest, f.now_ms)
        ),
        None => "no records".to_owned(),
    };
    let problem = format!(
        "{} written ahead of this clock by more than the skew allowance ({} ms), or leased \
         beyond the longest lease: a writer's or this machine's clock is off",
        count(items.len(), "item", "items"),
        f.skew_ms
    );
    Check::of_items("clock skew", items, &ok, problem)
}

fn ttl_backlog(f: &Findings<'_>) -> Check {
    let mut items = Vec::new();
    let mut pending = 0usize;
    for (record, item) in &f.scan.records {
        let Some(ttl_secs) = number_attribute(item, TTL) else { continue };
        let ttl_ms = ttl_secs.saturating_mul(1000);
        if ttl_ms > f.now_ms {
            continue;
        }
        if ttl_ms.saturating_add(f.ttl_grace_ms) < f.now_ms {
            items.push(format!(
                "{} (item of {}): ttl passed {}",
                record.key,
                origin(item),
                relative(ttl_ms, f.now_ms)
            ));
        } else {
            pending += 1;
        }
    }
    let ok = if pending == 0 {
        "no item past its ttl".to_owned()
    } else {
        format!(
            "{} past their ttl, within the grace for DynamoDB to delete them",
            count(pending, "item", "items")
        )
    };
    let problem = format!(
        "{} still present more than {} past their ttl: TTL deletion is off or behind; \
         mcs-admin gc removes them",
        count(items.len(), "item", "items"),
        relative(f.now_ms.saturating_add(f.ttl_grace_ms), f.now_ms).trim_start_matches("in ")
    );
    Check::of_items("ttl backlog", items, &ok, problem)
}

fn foreign_garbage(f: &Findings<'_>) -> Check {
    const NAME: &str = "foreign garbage";
    let past = past_retention(f.scan, f.view, f.skew_ms, f.retention_ms, f.now_ms);
    let mut per_origin: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, _, from) in past.iter().flat_map(|key| &key.items) {
        if from != f.origin {
            *per_origin.entry(from.as_str()).or_default() += 1;
        }
    }
    if per_origin.is_empty() {
        return Check::ok(NAME, "no item of another region past the retention");
    }
    let items: Vec<String> = per_origin
        .iter()
        .map(|(from, n)| {
            format!(
                "{from}: {} past the retention: run mcs-admin gc --region {from}",
                count(*n, "item", "items")
            )
        })
        .collect();
    let detail = format!(
        "{} of other regions past the retention, left alone by gc here: gc in their region \
         collects them",
        count(per_origin.values().sum(), "item", "items")
    );
    Check { name: NAME.to_owned(), status: Status::Ok, detail, items }
}

fn render(d: &Diagnosis, format: Format) -> anyhow::Result<String> {
    if let Some(text) = output::structured(format, d)? {
        return Ok(text);
    }
    let mut table = Table::new(["CHECK", "STATUS", "DETAIL"]);
    for c in &d.checks {
        let status = match c.status {
            Status::Ok => "ok",
            Status::Problem => "problem",
        };
        table.row([c.name.clone(), status.to_owned(), c.detail.clone()]);
    }
    let mut text = table.render();
    for c in d.checks.iter().filter(|c| !c.items.is_empty()) {
        text.push_str(&format!("\n{}:\n", c.name));
        for item in &c.items {
            text.push_str(&format!("  {item}\n"));
        }
    }
    text.push_str(if d.healthy { "\nhealthy\n" } else { "\nproblems found\n" });
    Ok(text)
}

#[cfg(test)]
mod tests;
