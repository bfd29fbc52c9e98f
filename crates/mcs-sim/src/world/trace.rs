//! The trace of a schedule (the last lines before a violation, for the
//! report) and one-line descriptions of records, requests and replicas.

use super::*;

impl World {
    /// The trace kept so far, oldest first.
    pub(crate) fn trace(&self) -> Vec<String> {
        self.trace.iter().cloned().collect()
    }

    pub(super) fn note(&mut self, line: impl FnOnce() -> String) {
        if !self.options.trace {
            return;
        }
        if self.trace.len() == TRACE_LINES {
            self.trace.pop_front();
        }
        let elapsed = self.t - EPOCH_MS;
        self.trace.push_back(format!("{:>6}.{:03}s {}", elapsed / 1000, elapsed % 1000, line()));
    }
}

pub(super) fn body_kind(record: &Record) -> &'static str {
    match record.body {
        Body::Tombstone => "tombstone",
        Body::Pool(_) => "pool",
        _ => "other",
    }
}

/// A record in one line.
pub(crate) fn describe(record: &Record) -> String {
    format!(
        "{} {} owner {:?} lease_until {:?} changed_at {}",
        body_kind(record),
        record.version,
        record.owner,
        record.lease_until_ms.map(|l| l.saturating_sub(EPOCH_MS)),
        record.changed_at_ms.saturating_sub(EPOCH_MS),
    )
}

pub(super) fn describe_request(request: &Request, reply: &Reply) -> String {
    format!(
        "{} {:?} of relay {} inc {} {:?} gen {:?} at registrar {}: {}",
        if request.original { "request" } else { "LATE copy" },
        request.op,
        request.relay,
        request.incarnation_no,
        request.incarnation,
        request.generation,
        request.slot,
        describe_reply(reply),
    )
}

pub(super) fn describe_reply(reply: &Reply) -> String {
    match reply {
        Reply::Ok(record) => format!("ok {}", describe(record)),
        Reply::Stale(stored) => format!("stale, stored {stored}"),
        Reply::Owned { until_ms, now_ms } => {
            format!("owned for {} ms more", until_ms.saturating_sub(*now_ms))
        }
        Reply::NotFound => "not found".into(),
        Reply::Unavailable => "unavailable".into(),
    }
}

pub(super) fn describe_table_difference(a: &Table, b: &Table, region: usize) -> String {
    let mut lines = Vec::new();
    let left: BTreeMap<_, _> = a.items().collect();
    let right: BTreeMap<_, _> = b.items().collect();
    for (id, item) in &left {
        if right.get(id) != Some(item) {
            lines.push(format!(
                "  item ({}, origin {}): region 0 {} / region {region} {}",
                id.0,
                id.1,
                describe(&item.record),
                right.get(id).map_or("none".into(), |i| describe(&i.record))
            ));
        }
    }
    for (id, item) in &right {
        if !left.contains_key(id) {
            lines.push(format!(
                "  item ({}, origin {}): only region {region}: {}",
                id.0,
                id.1,
                describe(&item.record)
            ));
        }
    }
    lines.join("\n")
}
