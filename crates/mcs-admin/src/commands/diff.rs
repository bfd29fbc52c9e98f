//! `diff [--other-region R] [--other-table T] [--other-endpoint E]`: reads two replicas of the table (two regions of
//! a global table, or any two tables), builds both views at one instant, and
//! compares them section by section: fingerprints first, then the keys
//! served only here, only there, or with different content. Exit 0 when
//! every section is identical, 1 when one differs.

use super::DEFAULT_RETENTION;
use crate::Exit;
use crate::cli::{DiffArgs, GlobalArgs};
use crate::connect::{Location, ensure_schema};
use crate::output::{self, Format, Table};
use crate::progress::Progress;
use crate::scan::view_of;
use anyhow::Context as _;
use mcs_core::fingerprint::ItemDigest;
use mcs_core::{Record, SectionKind, View};
use mcs_store::Store;
use serde::Serialize;
use std::collections::BTreeMap;

/// One section compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SectionDiff {
    pub section: &'static str,
    pub here_fingerprint: String,
    pub there_fingerprint: String,
    pub identical: bool,
    pub only_here: Vec<String>,
    pub only_there: Vec<String>,
    pub different: Vec<String>,
}

/// What `diff` prints.
#[derive(Debug, Serialize)]
struct Comparison {
    /// This replica: `{table, region, endpoint}`.
    here: Location,
    /// The other replica.
    there: Location,
    identical: bool,
    sections: Vec<SectionDiff>,
}

pub(super) async fn run(global: &GlobalArgs, args: &DiffArgs) -> anyhow::Result<Exit> {
    let here = Location::of(global)?;
    if args.other_region.is_none() && args.other_table.is_none() && args.other_endpoint.is_none() {
        return Err(crate::UsageError {
            kind: clap::error::ErrorKind::MissingRequiredArgument,
            message: "diff needs the other replica: --other-region (MCS_OTHER_REGION), \
                      --other-table (MCS_OTHER_TABLE) or --other-endpoint (MCS_OTHER_ENDPOINT)"
                .to_owned(),
        }
        .into());
    }
    let there = Location {
        table: args.other_table.clone().unwrap_or_else(|| here.table.clone()),
        region: args.other_region.clone().or_else(|| here.region.clone()),
        endpoint: args.other_endpoint.clone().or_else(|| here.endpoint.clone()),
        connect_timeout: here.connect_timeout,
    };
    let progress = Progress::spinner("reading both replicas");
    let read = tokio::try_join!(read(&here), read(&there));
    progress.finish();
    let (here_records, there_records) = read?;
    // One instant for both, so that a lease ending between two reads does
    // not read as a difference.
    let now = crate::now_ms();
    let a = view_of(here_records, global.store.skew_allowance_ms, now);
    let b = view_of(there_records, global.store.skew_allowance_ms, now);
    let sections = compare(&a, &b);
    let identical = sections.iter().all(|s| s.identical);
    let comparison = Comparison { here, there, identical, sections };
    output::print(&render(&comparison, global.output)?)?;
    Ok(if identical { Exit::Ok } else { Exit::Problem })
}

async fn read(location: &Location) -> anyhow::Result<Vec<Record>> {
    let read = async {
        let store = location.open(DEFAULT_RETENTION).await?;
        ensure_schema(&store).await?;
        Ok::<_, anyhow::Error>(store.read_all().await?)
    };
    read.await.with_context(|| format!("reading {}", location.describe()))
}

/// Every section of `here` against `there`.
pub(crate) fn compare(here: &View, there: &View) -> Vec<SectionDiff> {
    SectionKind::ALL.iter().map(|&section| compare_section(section, here, there)).collect()
}

/// One section: its fingerprints, and its keys compared by their items'
/// digests (equal digests, equal served JSON).
fn compare_section(section: SectionKind, here: &View, there: &View) -> SectionDiff {
    let (here, there) = (section.of(here), section.of(there));
    let a: BTreeMap<String, ItemDigest> = here.digests().into_iter().collect();
    let b: BTreeMap<String, ItemDigest> = there.digests().into_iter().collect();
    let only_here: Vec<String> = a.keys().filter(|k| !b.contains_key(*k)).cloned().collect();
    let only_there: Vec<String> = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    let different: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k).is_some_and(|w| w != *v))
        .map(|(k, _)| k.clone())
        .collect();
    let (here_fingerprint, there_fingerprint) = (here.fingerprint(), there.fingerprint());
    SectionDiff {
        section: section.name(),
        identical: here_fingerprint == there_fingerprint
            && only_here.is_empty()
            && only_there.is_empty()
            && different.is_empty(),
        here_fingerprint,
        there_fingerprint,
        only_here,
        only_there,
        different,
    }
}

fn render(c: &Comparison, format: Format) -> anyhow::Result<String> {
    if let Some(text) = output::structured(format, c)? {
        return Ok(text);
    }
    let mut sections = Table::new(["SECTION", "HERE", "THERE", "SAME"]);
    let mut keys = Table::new(["SECTION", "KEY", "DIFFERENCE"]);
    for s in &c.sections {
        let same = if s.identical { "yes" } else { "no" };
        sections.row([s.section, s.here_fingerprint.as_str(), s.there_fingerprint.as_str(), same]);
        for (list, what) in [
            (&s.only_here, format!("only in {}", c.here.describe())),
            (&s.only_there, format!("only in {}", c.there.describe())),
            (&s.different, "different content".to_owned()),
        ] {
            for key in list {
                keys.row([s.section.to_owned(), key.clone(), what.clone()]);
            }
        }
    }
    let mut text = format!("here:  {}\nthere: {}\n\n", c.here.describe(), c.there.describe());
    text.push_str(&sections.render());
    if !keys.is_empty() {
        text.push('\n');
        text.push_str(&keys.render());
    }
    text.push_str(if c.identical { "\nidentical\n" } else { "\ndifferent\n" });
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_core::fixtures::{mk_cluster, mk_pool, pool_key};

    const NOW: u64 = 1_764_662_400_000;

    #[test]
    fn equal_content_is_identical_whatever_the_leases() {
        let a = view_of(
            vec![mk_pool("a", 1, "w", None, Some(NOW + 10_000)), mk_cluster("c1", 1, "i", NOW + 5)],
            0,
            NOW,
        );
        // Same records with other leases and write times: heartbeats.
        let mut renewed = mk_pool("a", 1, "w", None, Some(NOW + 99_000));
        renewed.changed_at_ms += 7;
        let b = view_of(vec![renewed, mk_cluster("c1", 1, "i", NOW + 50_000)], 0, NOW);
        let diffs = compare(&a, &b);
        assert_eq!(diffs.len(), 5);
        assert!(diffs.iter().all(|d| d.identical), "{diffs:#?}");
    }

    #[test]
    fn differences_are_named_by_key() {
        let a = view_of(
            vec![
                mk_pool("both", 1, "w", None, Some(NOW + 10_000)),
                mk_pool("here", 1, "w", None, Some(NOW + 10_000)),
                mk_cluster("c1", 1, "inc-a", NOW + 10_000),
            ],
            0,
            NOW,
        );
        let mut changed = mk_pool("both", 2, "w", None, Some(NOW + 10_000));
        if let mcs_core::Body::Pool(p) = &mut changed.body {
            p.capacity.workers = 9;
        }
        let b = view_of(
            vec![
                changed,
                mk_pool("there", 1, "w", None, Some(NOW + 10_000)),
                mk_cluster("c1", 1, "inc-a", NOW + 10_000),
            ],
            0,
            NOW,
        );
        let diffs = compare(&a, &b);
        let pools = &diffs[0];
        assert!(!pools.identical);
        assert_ne!(pools.here_fingerprint, pools.there_fingerprint);
        assert_eq!(pools.only_here, vec![pool_key("here").id().to_string()]);
        assert_eq!(pools.only_there, vec![pool_key("there").id().to_string()]);
        assert_eq!(pools.different, vec![pool_key("both").id().to_string()]);
        assert!(diffs[2].identical, "clusters are the same");
        let comparison = Comparison {
            here: Location {
                table: "t".into(),
                region: Some("us-east-1".into()),
                endpoint: None,
                connect_timeout: std::time::Duration::ZERO,
            },
            there: Location {
                table: "t".into(),
                region: Some("eu-west-1".into()),
                endpoint: None,
                connect_timeout: std::time::Duration::ZERO,
            },
            identical: false,
            sections: diffs,
        };
        let text = render(&comparison, Format::Table).unwrap();
        assert!(
            text.contains(&format!("pools    {}  only in t (us-east-1)", pool_key("here").id())),
            "{text}"
        );
        assert!(text.ends_with("different\n"));
    }
}
