//! `restore FILE|-`: writes the records of a dump with the store's own
//! conditional write ([`Store::put`]), so a newer item is never
//! overwritten; reports how many were applied and how many refused.
//!
//! A key has one item per region that wrote it, and the conditional write
//! sees only this region's. So, as the registrar does, each record is first
//! judged against the record merged from all the key's items (one full read
//! before writing): one older than it is `stale` and not written, one equal
//! to it is `unchanged`, and only the others are written, as this region's
//! items.
//!
//! The write is judged at `now_ms = u64::MAX` ([`RESTORE_NOW_MS`]): every
//! stored lease counts as over, so ownership never refuses a restored record
//! and the version alone decides, as it does between the replicas of a
//! global table and in every registry's view. A restore replays records that
//! were admitted once already; judged at the real time, a newer record from
//! the dump would be refused as `owned` by an older item whose holder's lease
//! is still running, and the replicas would disagree on the winner. Nothing
//! older ever replaces anything newer: the version check is kept whole. The
//! `owned` count is reported all the same, and stays 0.
//!
//! Restored items keep their `changed_at_ms`: registries pick them up at
//! their next full read (`--full-resync-interval-secs`), not by delta polls.

use super::open_checked;
use crate::Exit;
use crate::cli::{GlobalArgs, RestoreArgs};
use crate::output::{self, Table};
use crate::progress::Progress;
use crate::scan::view_of;
use anyhow::Context as _;
use mcs_core::rules::renewal_extends;
use mcs_core::{Record, WriteDecision, decide};
use mcs_store::{DynamoStore, PutOutcome, Store};
use serde::Serialize;
use std::io::Read as _;
use std::path::Path;
use std::time::Duration;
use tokio::task::JoinSet;

/// The `now_ms` restored records are judged at: after every lease.
pub const RESTORE_NOW_MS: u64 = u64::MAX;

/// Writes in flight at once.
const CONCURRENCY: usize = 8;

/// What `restore` did.
#[derive(Debug, Default, Serialize)]
struct Restored {
    table: String,
    records: usize,
    applied: usize,
    unchanged: usize,
    stale: usize,
    owned: usize,
    /// The records not applied, with what the table holds instead.
    refused: Vec<Refused>,
}

#[derive(Debug, Serialize)]
struct Refused {
    key: String,
    outcome: &'static str,
    detail: String,
}

/// What a restore does with `record` given the record merged from its
/// key's items: `None` to write it, else the outcome without a write.
fn judge(merged: Option<&Record>, record: &Record) -> Option<Judged> {
    match decide(merged, record, RESTORE_NOW_MS) {
        WriteDecision::Apply => None,
        WriteDecision::Renew => match merged {
            Some(merged) if renewal_extends(merged, record) => None,
            _ => Some(Judged::Unchanged),
        },
        WriteDecision::Stale { stored } => Some(Judged::Put(PutOutcome::Stale { stored })),
        WriteDecision::Owned { owner, until_ms } => {
            Some(Judged::Put(PutOutcome::Owned { owner, until_ms }))
        }
    }
}

/// The outcome of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Judged {
    /// The table already holds it, its lease as long.
    Unchanged,
    /// What a write (or the judgement before one) said.
    Put(PutOutcome),
}

impl From<PutOutcome> for Judged {
    fn from(outcome: PutOutcome) -> Self {
        Judged::Put(outcome)
    }
}

impl Restored {
    fn tally(&mut self, key: String, outcome: impl Into<Judged>) {
        let outcome = match outcome.into() {
            Judged::Unchanged => {
                self.unchanged += 1;
                return;
            }
            Judged::Put(outcome) => outcome,
        };
        match outcome {
            PutOutcome::Applied => self.applied += 1,
            PutOutcome::Stale { stored } => {
                self.stale += 1;
                self.refused.push(Refused {
                    key,
                    outcome: "stale",
                    detail: format!("table holds {stored}"),
                });
            }
            PutOutcome::Owned { owner, until_ms } => {
                self.owned += 1;
                self.refused.push(Refused {
                    key,
                    outcome: "owned",
                    detail: format!("held by {owner} until {until_ms}"),
                });
            }
        }
    }
}

pub(super) async fn run(global: &GlobalArgs, args: &RestoreArgs) -> anyhow::Result<Exit> {
    let text = read_input(&args.file)?;
    let records = parse(&text)?;
    let store = open_checked(global, Duration::from_secs(args.retention_secs)).await?;
    let reading = Progress::spinner("reading the table");
    let stored = store.read_all().await;
    reading.finish();
    let view = view_of(stored?, global.skew_allowance_ms, crate::now_ms());
    let mut restored =
        Restored { table: store.table().to_owned(), records: records.len(), ..Restored::default() };
    let mut to_write = Vec::new();
    for record in records {
        match judge(view.record(&record.key), &record) {
            Some(outcome) => restored.tally(record.key.to_string(), outcome),
            None => to_write.push(record),
        }
    }
    let progress = Progress::bar("restoring", to_write.len() as u64);
    let result = put_all(&store, to_write, &mut restored, &progress).await;
    progress.finish();
    if let Err(e) = result {
        eprintln!(
            "mcs-admin: restore stopped after {} applied, {} unchanged, {} stale, {} owned",
            restored.applied, restored.unchanged, restored.stale, restored.owned
        );
        return Err(e);
    }
    restored.refused.sort_by(|a, b| a.key.cmp(&b.key));
    output::print(&render(&restored, global.output)?)?;
    Ok(Exit::Ok)
}

fn read_input(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("reading standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The records of a dump, every line checked before anything is written;
/// blank lines are skipped.
pub(crate) fn parse(text: &str) -> anyhow::Result<Vec<Record>> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("line {} is not a record of mcs-admin dump", i + 1))
        })
        .collect()
}

async fn put_all(
    store: &DynamoStore,
    records: Vec<Record>,
    restored: &mut Restored,
    progress: &Progress,
) -> anyhow::Result<()> {
    let mut in_flight = JoinSet::new();
    let mut records = records.into_iter();
    loop {
        while in_flight.len() < CONCURRENCY {
            let Some(record) = records.next() else { break };
            let store = store.clone();
            in_flight.spawn(async move {
                let outcome = store.put(&record, RESTORE_NOW_MS).await;
                (record.key, outcome)
            });
        }
        let Some(joined) = in_flight.join_next().await else { return Ok(()) };
        let (key, outcome) = joined?;
        let outcome = outcome.with_context(|| format!("restoring {key}"))?;
        restored.tally(key.to_string(), outcome);
        progress.inc(1);
    }
}

fn render(restored: &Restored, format: output::Format) -> anyhow::Result<String> {
    if let Some(text) = output::structured(format, restored)? {
        return Ok(text);
    }
    let mut text = format!(
        "restored {} records into {}: {} applied, {} unchanged, {} stale, {} owned\n",
        restored.records,
        restored.table,
        restored.applied,
        restored.unchanged,
        restored.stale,
        restored.owned
    );
    if !restored.refused.is_empty() {
        let mut table = Table::new(["KEY", "OUTCOME", "DETAIL"]);
        for r in &restored.refused {
            table.row([r.key.clone(), r.outcome.to_owned(), r.detail.clone()]);
        }
        text.push('\n');
        text.push_str(&table.render());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::dump::lines;
    use mcs_core::Version;
    use mcs_core::fixtures::{mk_pool, mk_tombstone};

    #[test]
    fn dumps_parse_back_and_bad_lines_are_named() {
        let records = vec![mk_pool("a", 1, "w", Some("x"), Some(5)), mk_tombstone("b", 2, "w")];
        let text = lines(&records).unwrap();
        assert_eq!(parse(&format!("\n{text}\n")).unwrap(), records);
        let err = parse(&format!("{text}{{\"key\":1}}\n")).unwrap_err();
        assert_eq!(err.to_string(), "line 3 is not a record of mcs-admin dump");
    }

    #[test]
    fn restore_time_lets_versions_alone_decide() {
        // A newer record from another incarnation over an older item whose
        // lease still runs: refused as owned at the real time, applied here.
        let stored = mk_pool("a", 5, "w", Some("old"), Some(u64::MAX - 1));
        let newer = mk_pool("a", 6, "w", Some("new"), Some(10));
        assert!(matches!(
            decide(Some(&stored), &newer, 1_000),
            mcs_core::WriteDecision::Owned { .. }
        ));
        assert_eq!(decide(Some(&stored), &newer, RESTORE_NOW_MS), mcs_core::WriteDecision::Apply);
        // Older never replaces newer.
        let older = mk_pool("a", 4, "w", Some("new"), Some(10));
        assert_eq!(
            decide(Some(&stored), &older, RESTORE_NOW_MS),
            mcs_core::WriteDecision::Stale { stored: Version::new(5, "w") }
        );
    }

    #[test]
    fn records_are_judged_against_the_merged_record_first() {
        let held = mk_pool("a", 5, "w", Some("x"), Some(1_000));
        assert_eq!(judge(None, &held), None, "nothing stored: write");
        assert_eq!(judge(Some(&held), &held), Some(Judged::Unchanged));
        let longer = mk_pool("a", 5, "w", Some("x"), Some(2_000));
        assert_eq!(judge(Some(&held), &longer), None, "a longer lease is written");
        assert_eq!(judge(Some(&longer), &held), Some(Judged::Unchanged));
        assert_eq!(
            judge(Some(&held), &mk_pool("a", 4, "w", Some("x"), Some(9_000))),
            Some(Judged::Put(PutOutcome::Stale { stored: Version::new(5, "w") }))
        );
        assert_eq!(judge(Some(&held), &mk_pool("a", 6, "w", Some("y"), Some(9_000))), None);
    }

    #[test]
    fn the_summary_names_what_was_refused() {
        let mut restored = Restored { table: "t".into(), records: 2, ..Restored::default() };
        restored.tally("pool/a".into(), PutOutcome::Applied);
        restored.tally("pool/b".into(), PutOutcome::Stale { stored: Version::new(9, "w") });
        let text = render(&restored, output::Format::Table).unwrap();
        assert!(
            text.starts_with(
                "restored 2 records into t: 1 applied, 0 unchanged, 1 stale, 0 owned\n"
            ),
            "{text}"
        );
        assert!(text.contains("pool/b  stale    table holds 9@w"), "{text}");
    }
}
