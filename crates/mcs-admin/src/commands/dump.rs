//! `dump`: every record as JSON lines on stdout, one serialized
//! [`mcs_core::Record`] per line in key order, the schema item excluded.
//! `restore` reads it back. Always JSON lines, whatever `-o` says.
//!
//! A key has one item per region that wrote it; the dump holds, per key,
//! the record every registry merges from them (the highest version,
//! tombstones and expired leases included). Older items hidden by it can
//! never be served again, so nothing a registry can see is left out.
//!
//! Items this binary cannot read are named on stderr and make the exit code
//! 1: the dump is then incomplete, and a backup should not pass for whole.

use super::{DEFAULT_RETENTION, open_checked};
use crate::Exit;
use crate::cli::GlobalArgs;
use crate::output;
use crate::progress::Progress;
use crate::scan::scan;
use mcs_core::Record;

pub(super) async fn run(global: &GlobalArgs) -> anyhow::Result<Exit> {
    let store = open_checked(global, DEFAULT_RETENTION).await?;
    let scanned = scan(&store, &Progress::counter("dumping")).await?;
    let view = scanned.view(global.skew_allowance_ms, crate::now_ms());
    let mut records: Vec<&Record> = view.records().collect();
    records.sort_by(|a, b| a.key.cmp(&b.key));
    output::print(&lines(records)?)?;
    if scanned.unreadable.is_empty() {
        return Ok(Exit::Ok);
    }
    for u in &scanned.unreadable {
        eprintln!("mcs-admin: not dumped: item {} {}: {}", u.pk, u.sk, u.reason);
    }
    eprintln!(
        "mcs-admin: dump incomplete: {} this binary cannot read",
        output::count(scanned.unreadable.len(), "item", "items")
    );
    Ok(Exit::Problem)
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
