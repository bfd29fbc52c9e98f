//! `dump`: every record as JSON lines on stdout, one serialized
//! [`mcs_core::Record`] per line in key order, the schema item excluded,
//! between a [`Header`] line (format and version, table, region, time) and
//! a [`Trailer`] line (the record count). `restore` reads it back and
//! refuses a dump whose trailer is missing or counts other than it read:
//! a truncated dump is never restored as if whole. Only JSON lines: `-o
//! yaml` and `-o wide` are refused (exit 2), `-o json` and the default
//! `table` both give JSON lines.
//!
//! A key has one item per region that wrote it; the dump holds, per key,
//! the record every registry merges from them (the highest version,
//! tombstones and expired leases included). Older items hidden by it can
//! never be served again, so nothing a registry can see is left out.
//!
//! Items this binary cannot read are named on stderr and make the exit code
//! 1: the dump is then incomplete, and a backup should not pass for whole.
//!
//! When done, one line on stderr says how many records and items were
//! dumped, in how long, and at what rate ([`summary`]), whether or not
//! stderr is a terminal (the progress counter is drawn only on one).

use super::{DEFAULT_RETENTION, open_checked};
use crate::cli::GlobalArgs;
use crate::output::{self, Format};
use crate::progress::Progress;
use crate::scan::scan;
use crate::{Exit, UsageError};
use mcs_core::Record;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The `format` of a dump's header and the `end` of its trailer.
pub(crate) const FORMAT: &str = "mcs-admin-dump";

/// The version of the dump format this binary writes and reads. Version 1:
/// header, one record per line, trailer.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// A dump's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written by this binary.
    pub version: u32,
    /// The table dumped.
    pub table: String,
    /// The region of the replica read.
    pub region: String,
    /// When the dump started, RFC 3339.
    pub dumped_at: String,
    /// The same, in epoch milliseconds.
    pub dumped_at_ms: u64,
}

impl Header {
    /// The header of a dump of `table` in `region` taken at `now_ms`.
    pub(crate) fn new(table: &str, region: &str, now_ms: u64) -> Self {
        let dumped_at = i64::try_from(now_ms)
            .ok()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map_or_else(|| now_ms.to_string(), |t| t.to_string());
        Self {
            format: FORMAT.to_owned(),
            version: FORMAT_VERSION,
            table: table.to_owned(),
            region: region.to_owned(),
            dumped_at,
            dumped_at_ms: now_ms,
        }
    }
}

/// A dump's last line: how many record lines come between it and the
/// header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Trailer {
    /// Always [`FORMAT`].
    pub end: String,
    /// The number of records.
    pub records: usize,
}

pub(super) async fn run(global: &GlobalArgs) -> anyhow::Result<Exit> {
    if matches!(global.output, Format::Yaml | Format::Wide) {
        return Err(UsageError::invalid(
            "dump writes JSON lines, the format restore reads: use -o json (or no -o)",
        )
        .into());
    }
    let store = open_checked(global, DEFAULT_RETENTION).await?;
    let now = crate::now_ms();
    let started = Instant::now();
    let scanned = scan(&store, &Progress::counter("dumping")).await?;
    let view = scanned.view(global.store.skew_allowance_ms, now);
    let mut records: Vec<&Record> = view.records().collect();
    records.sort_by(|a, b| a.key.cmp(&b.key));
    let header = Header::new(store.table(), store.origin(), now);
    let dumped = records.len();
    output::print(&document(&header, records)?)?;
    let items =
        scanned.records.len() + scanned.unreadable.len() + usize::from(scanned.meta.is_some());
    tracing::info!("{}", summary(dumped, items, store.table(), started.elapsed()));
    if scanned.unreadable.is_empty() {
        return Ok(Exit::Ok);
    }
    for u in &scanned.unreadable {
        tracing::warn!("mcs-admin: not dumped: item {} {}: {}", u.pk, u.sk, u.reason);
    }
    tracing::warn!(
        "mcs-admin: dump incomplete: {} this binary cannot read",
        output::count(scanned.unreadable.len(), "item", "items")
    );
    Ok(Exit::Problem)
}

/// The line `dump` ends with on stderr: `records` dumped from `items` read
/// of `table` in `elapsed`, and the rate in items a second (whole, and
/// over the whole run, never a momentary estimate).
pub(crate) fn summary(records: usize, items: usize, table: &str, elapsed: Duration) -> String {
    // A run shorter than a millisecond is counted as one, for a finite rate.
    let secs = elapsed.as_secs_f64().max(0.001);
    let rate = (items as f64 / secs).round();
    format!(
        "mcs-admin: dumped {} ({} read) from {table} in {secs:.1} s: {rate:.0} items/s",
        output::count(records, "record", "records"),
        output::count(items, "item", "items"),
    )
}

/// A whole dump: the header, one record per line, the trailer.
pub(crate) fn document<'a>(
    header: &Header,
    records: impl IntoIterator<Item = &'a Record>,
) -> anyhow::Result<String> {
    let mut count = 0;
    let body = lines(records.into_iter().inspect(|_| count += 1))?;
    let trailer = Trailer { end: FORMAT.to_owned(), records: count };
    Ok(format!("{}\n{body}{}\n", serde_json::to_string(header)?, serde_json::to_string(&trailer)?))
}

/// One compact JSON record per line.
pub(crate) fn lines<'a>(records: impl IntoIterator<Item = &'a Record>) -> anyhow::Result<String> {
    let mut text = String::new();
    for record in records {
        text.push_str(&serde_json::to_string(record)?);
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_and_gives_a_whole_rate() {
        assert_eq!(
            summary(6, 7, "t", Duration::from_millis(2_000)),
            "mcs-admin: dumped 6 records (7 items read) from t in 2.0 s: 4 items/s"
        );
        assert_eq!(
            summary(1, 1, "t", Duration::ZERO),
            "mcs-admin: dumped 1 record (1 item read) from t in 0.0 s: 1000 items/s",
            "an instant run has a finite rate"
        );
        assert_eq!(
            summary(0, 0, "t", Duration::from_secs(3)),
            "mcs-admin: dumped 0 records (0 items read) from t in 3.0 s: 0 items/s"
        );
    }
}
