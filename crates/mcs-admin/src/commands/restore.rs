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
//! With `--dry-run` the records are read and judged the same way, and
//! nothing is written: `to_write` counts those a restore would write
//! (`applied` stays 0). A write racing the restore may still find one
//! `stale`.
//!
//! Restored items keep their `changed_at_ms`: registries pick them up at
//! their next full read (`--full-resync-interval-secs`), not by delta polls.
//!
//! A record older than the retention is `too_old` and skipped unless
//! `--force`: a tombstone written after it may have been collected (by TTL
//! or gc) since, and nothing would then stop the old record from coming
//! back. A record is older than the retention when the last time it is
//! known to have been current ([`last_current_ms`]) is before `now -
//! retention + 2 × skew allowance` (the margin covers writers' clocks):
//!
//! - a leased record (pool, router, cluster): its last write, renewals
//!   included ([`Record::last_written_ms`]: a renewal in place keeps
//!   `changed_at_ms` but moves the lease end). One not written for that
//!   long has no lease left (a lease lasts at most a day, the retention is
//!   longer), and TTL would have dropped it.
//! - a tombstone: its `changed_at_ms`, its withdrawal; TTL would have
//!   dropped it too.
//! - an export: it has no lease and may stay unchanged for months while its
//!   cluster renews its lease, so its own `changed_at_ms` says little. It is
//!   the later of its own and the last write of its cluster's record in
//!   the same dump (the cluster's last renewal before the dump): a dump holds a key's
//!   tombstone if one was written before the dump, so only a tombstone
//!   written after the dump can be missing, and one is still kept while
//!   the dump is younger than the retention.

use super::checked_retention;
use super::dump::{FORMAT, FORMAT_VERSION, Header, Trailer};
use super::open_checked;
use crate::Exit;
use crate::cli::{GlobalArgs, RestoreArgs};
use crate::output::{self, Table};
use crate::progress::Progress;
use crate::scan::view_of;
use anyhow::Context as _;
use mcs_core::rules::renewal_extends;
use mcs_core::{Key, Record, WriteDecision, decide};
use mcs_store::{DynamoStore, PutOutcome, Store};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;
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
    /// `--dry-run`: nothing was written.
    dry_run: bool,
    /// Records judged newer than the table's, to be written (with
    /// `--dry-run`, those a restore would write).
    to_write: usize,
    applied: usize,
    unchanged: usize,
    stale: usize,
    owned: usize,
    /// Records skipped as older than the retention (0 with `--force`).
    too_old: usize,
    retention_secs: u64,
    /// The time records were judged at, for the age of `too_old` ones.
    #[serde(skip)]
    now_ms: u64,
    /// The records not applied, with what the table holds instead.
    refused: Vec<Refused>,
    /// The dump's header (`null` for a dump without one).
    dump: Option<Header>,
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

/// When `record` of a dump is last known to have been current, given the
/// `changed_at_ms` of the dump's cluster records (see the module's docs).
fn last_current_ms(record: &Record, clusters: &HashMap<&Key, u64>) -> u64 {
    match &record.key {
        Key::Export(key) if !record.is_tombstone() => {
            let cluster = Key::Cluster { cluster_id: key.cluster_id.clone() };
            record.changed_at_ms.max(clusters.get(&cluster).copied().unwrap_or(0))
        }
        _ => record.last_written_ms(),
    }
}

/// When the cluster records of a dump were last written.
fn cluster_times(records: &[Record]) -> HashMap<&Key, u64> {
    records
        .iter()
        .filter(|r| matches!(r.key, Key::Cluster { .. }))
        .map(|r| (&r.key, r.last_written_ms()))
        .collect()
}

/// The earliest [`last_current_ms`] a record may have to be restored
/// without `--force`.
fn too_old_before(now_ms: u64, retention_ms: u64, skew_ms: u64) -> u64 {
    now_ms.saturating_sub(retention_ms).saturating_add(skew_ms.saturating_mul(2))
}

/// The outcome of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Judged {
    /// Older than the retention: skipped.
    TooOld { last_current_ms: u64 },
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
            Judged::TooOld { last_current_ms } => {
                self.too_old += 1;
                self.refused.push(Refused {
                    key,
                    outcome: "too_old",
                    detail: format!(
                        "last current {}, before the retention",
                        output::relative(last_current_ms, self.now_ms)
                    ),
                });
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
    let retention =
        checked_retention(args.retention.retention_secs, global.store.skew_allowance_ms)?;
    let text = read_input(&args.file)?;
    let (header, records) = parse(&text, args.allow_headerless)?;
    let store = open_checked(global, retention).await?;
    let reading = Progress::spinner("reading the table");
    let stored = store.read_all().await;
    reading.finish();
    let now = crate::now_ms();
    let view = view_of(stored?, global.store.skew_allowance_ms, now);
    let mut restored = Restored {
        table: store.table().to_owned(),
        records: records.len(),
        dry_run: args.dry_run,
        retention_secs: args.retention.retention_secs,
        now_ms: now,
        dump: header,
        ..Restored::default()
    };
    let cutoff = too_old_before(
        now,
        args.retention.retention_secs.saturating_mul(1000),
        global.store.skew_allowance_ms,
    );
    let clusters = cluster_times(&records);
    let mut to_write = Vec::new();
    for record in &records {
        let last_current_ms = last_current_ms(record, &clusters);
        if !args.force && last_current_ms < cutoff {
            restored.tally(record.key.to_string(), Judged::TooOld { last_current_ms });
            continue;
        }
        match judge(view.record(&record.key), record) {
            Some(outcome) => restored.tally(record.key.to_string(), outcome),
            None => to_write.push(record.clone()),
        }
    }
    restored.to_write = to_write.len();
    if !args.dry_run {
        let progress = Progress::bar("restoring", to_write.len() as u64);
        let result = put_all(&store, to_write, &mut restored, &progress).await;
        progress.finish();
        if let Err(e) = result {
            tracing::error!(
                "mcs-admin: restore stopped after {} applied, {} unchanged, {} stale, {} owned, \
                 {} too old",
                restored.applied,
                restored.unchanged,
                restored.stale,
                restored.owned,
                restored.too_old
            );
            return Err(e);
        }
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

/// The header and records of a dump, every line checked before anything is
/// written; blank lines are skipped. A dump must begin with its
/// [`Header`] (of [`FORMAT_VERSION`]) and end with its [`Trailer`], whose
/// count must be the number of records read: otherwise it was cut short
/// (or altered) and is refused. One without a header (written before
/// headers existed) is refused unless `allow_headerless`: its truncation
/// could not be detected.
pub(crate) fn parse(
    text: &str,
    allow_headerless: bool,
) -> anyhow::Result<(Option<Header>, Vec<Record>)> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim().is_empty())
        .collect();
    let records = |lines: &[(usize, &str)]| -> anyhow::Result<Vec<Record>> {
        lines
            .iter()
            .map(|(n, line)| {
                serde_json::from_str(line)
                    .with_context(|| format!("line {n} is not a record of mcs-admin dump"))
            })
            .collect()
    };
    let field = |line: &str, name: &str| {
        serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v.get(name).and_then(|f| f.as_str().map(str::to_owned)))
    };
    let Some((first, rest)) = lines.split_first() else {
        anyhow::bail!("the input is empty: not a dump of mcs-admin dump");
    };
    if field(first.1, "format").as_deref() != Some(FORMAT) {
        if !allow_headerless {
            anyhow::bail!(
                "line {} is not the header of a dump: a dump without one (written by an \
                 mcs-admin before dumps had a header and a record count) cannot be checked \
                 for truncation; pass --allow-headerless to restore it as it is",
                first.0
            );
        }
        return Ok((None, records(&lines)?));
    }
    let header: Header = serde_json::from_str(first.1)
        .with_context(|| format!("line {} is not a dump header", first.0))?;
    if header.version != FORMAT_VERSION {
        anyhow::bail!(
            "the dump is of format version {}, this mcs-admin reads version {FORMAT_VERSION}: \
             use the mcs-admin that wrote it",
            header.version
        );
    }
    // The first trailer ends the dump; a line after it is refused, named.
    let end = rest.iter().position(|(_, line)| field(line, "end").as_deref() == Some(FORMAT));
    let Some((body, [last, after @ ..])) = end.map(|end| rest.split_at(end)) else {
        anyhow::bail!(
            "the dump is truncated: it does not end with the trailer line mcs-admin dump writes \
             last ({} records read); nothing was written",
            rest.len()
        );
    };
    if let Some((n, line)) = after.first() {
        let shown: String = line.chars().take(80).collect();
        anyhow::bail!(
            "line {n} follows the dump's trailer (line {}), which mcs-admin dump writes last: \
             {shown:?}; something else was written into the file (its standard error, a \
             second dump?); nothing was written",
            last.0
        );
    }
    let trailer: Trailer = serde_json::from_str(last.1)
        .with_context(|| format!("line {} is not a dump trailer", last.0))?;
    let records = records(body)?;
    if trailer.records != records.len() {
        anyhow::bail!(
            "the dump is truncated or altered: its trailer counts {} records, {} were read; \
             nothing was written",
            trailer.records,
            records.len()
        );
    }
    Ok((Some(header), records))
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
    let mut text = match &restored.dump {
        Some(h) => format!("dump of {} ({}) taken {}\n", h.table, h.region, h.dumped_at),
        None => "dump without a header: not checked for truncation\n".to_owned(),
    };
    let (r, table) = (restored, &restored.table);
    text += &if r.dry_run {
        format!(
            "dry run: would restore {} records into {table}: {} to write, {} unchanged, {} \
             stale, {} owned, {} too old; wrote nothing\n",
            r.records, r.to_write, r.unchanged, r.stale, r.owned, r.too_old
        )
    } else {
        format!(
            "restored {} records into {table}: {} applied, {} unchanged, {} stale, {} owned, {} \
             too old\n",
            r.records, r.applied, r.unchanged, r.stale, r.owned, r.too_old
        )
    };
    if restored.too_old > 0 {
        text.push_str(&format!(
            "skipped {} older than the retention ({}s): a newer tombstone may have been \
             collected since; --force restores them\n",
            output::count(restored.too_old, "record", "records"),
            restored.retention_secs
        ));
    }
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
mod tests;
