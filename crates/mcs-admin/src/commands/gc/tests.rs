use super::*;
use crate::scan::view_of;
use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone};
use mcs_store::dynamo::raw;

const NOW: u64 = 1_764_662_400_000;
const DAY: u64 = 86_400_000;

fn at(mut record: Record, changed_at_ms: u64) -> Record {
    record.changed_at_ms = changed_at_ms;
    record
}

#[test]
fn only_what_is_past_the_retention_goes() {
    let records = vec![
        mk_pool("live", 1, "w", None, Some(NOW + 30_000)),
        mk_pool("recent", 1, "w", None, Some(NOW - 60_000)),
        mk_pool("old", 1, "w", None, Some(NOW - 2 * DAY)),
        at(mk_tombstone("buried", 1, "w"), NOW - 2 * DAY),
        at(mk_tombstone("fresh", 1, "w"), NOW - 60_000),
        mk_cluster("c1", 1, "inc", NOW - 3 * DAY),
        at(mk_export("c1", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY),
        // Its cluster's lease runs: kept, however old.
        mk_cluster("up", 1, "inc", NOW + 30_000),
        at(mk_export("up", "web", 1, mk_export_spec(0, vec![])), NOW - 30 * DAY),
        // Its cluster withdrawn within the retention: kept for now.
        at(mk_tombstone("x", 1, "w").with_key(cluster_key("recent")), NOW - 60_000),
        at(mk_export("recent", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY),
        // Its cluster withdrawn past the retention: collected.
        at(mk_tombstone("x", 1, "w").with_key(cluster_key("gone")), NOW - 2 * DAY),
        at(mk_export("gone", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY),
        // No cluster record: by its own write.
        at(mk_export("none", "old", 1, mk_export_spec(0, vec![])), NOW - 2 * DAY),
        at(mk_export("none", "new", 1, mk_export_spec(0, vec![])), NOW - 60_000),
    ];
    let scan = Scan {
        records: records.iter().map(|r| (r.clone(), Default::default())).collect(),
        ..Scan::default()
    };
    let view = view_of(records, 1_000, NOW);
    let mut found: Vec<(String, Reason)> = past_retention(&scan, &view, 1_000, DAY, NOW)
        .into_iter()
        .map(|c| (c.key.to_string(), c.reason))
        .collect();
    found.sort();
    let mut want = vec![
        (format!("pool/{}", mcs_core::fixtures::pool_key("old").id()), Reason::Expired),
        (format!("pool/{}", mcs_core::fixtures::pool_key("buried").id()), Reason::Withdrawn),
        ("cluster/c1".to_owned(), Reason::Expired),
        ("cluster/gone".to_owned(), Reason::Withdrawn),
        ("export/c1/llm/web".to_owned(), Reason::ClusterNotLive),
        ("export/gone/llm/web".to_owned(), Reason::ClusterNotLive),
        ("export/none/llm/old".to_owned(), Reason::ClusterNotLive),
    ];
    want.sort();
    assert_eq!(found, want, "an orphaned export expires with its cluster");
    assert!(past_retention(&scan, &view, 1_000, 4 * DAY, NOW).is_empty());
    // Without retention, a record within the skew allowance is still live.
    let skewed = vec![mk_pool("skewed", 1, "w", None, Some(NOW - 500))];
    let scan = Scan {
        records: skewed.iter().map(|r| (r.clone(), Default::default())).collect(),
        ..Scan::default()
    };
    assert!(past_retention(&scan, &view_of(skewed, 1_000, NOW), 1_000, 0, NOW).is_empty());
}

#[tokio::test]
async fn an_item_rewritten_since_it_was_read_is_kept() {
    use mcs_store::Store;
    let Some(store) = crate::testing::fresh_store("gc-kept").await else { return };
    let now = crate::now_ms();
    let read = mk_pool("p", 5, "w", Some("relay"), Some(now - 2 * DAY));
    store.put(&read, now).await.unwrap();
    let item = crate::scan::scan(&store, &Progress::hidden()).await.unwrap().records[0].1.clone();
    // A heartbeat at the same version moves the lease and the write time.
    let mut renewed = mk_pool("p", 5, "w", Some("relay"), Some(now + DAY));
    renewed.changed_at_ms = now;
    store.put(&renewed, now).await.unwrap();
    assert!(!store.delete_if_unchanged(&read, &item).await.unwrap(), "rewritten: kept");
    assert_eq!(store.get(&read.key).await.unwrap(), Some(renewed.clone()));
    let item = crate::scan::scan(&store, &Progress::hidden()).await.unwrap().records[0].1.clone();
    assert!(store.delete_if_unchanged(&renewed, &item).await.unwrap());
    assert_eq!(store.get(&read.key).await.unwrap(), None);
}

/// `records`, each stored as an item of the origin beside it.
fn scan_of(records: &[(&Record, &str)]) -> (Scan, View) {
    let scan = Scan {
        records: records
            .iter()
            .map(|(r, from)| ((*r).clone(), raw::primary_key(&r.key, from)))
            .collect(),
        ..Scan::default()
    };
    let view = view_of(records.iter().map(|(r, _)| (*r).clone()), 1_000, NOW);
    (scan, view)
}

fn plan_in(scan: &Scan, view: &View, origin: &str) -> Plan {
    plan(past_retention(scan, view, 1_000, DAY, NOW), origin, 1_000, DAY, NOW)
}

#[test]
fn gc_deletes_only_the_items_of_its_own_region() {
    // Withdrawn in eu-west-1 two days ago over an expired item of
    // us-east-1; another key withdrawn in eu-west-1 only.
    let tomb = at(mk_tombstone("p", 5, "w"), NOW - 2 * DAY);
    let older = mk_pool("p", 3, "w", Some("relay"), Some(NOW - 3 * DAY));
    let theirs = at(mk_tombstone("q", 2, "w"), NOW - 2 * DAY);
    let (scan, view) =
        scan_of(&[(&tomb, "eu-west-1"), (&older, "us-east-1"), (&theirs, "eu-west-1")]);
    let here = plan_in(&scan, &view, "us-east-1");
    assert_eq!(here.candidates.len(), 1, "{:?}", here.candidates);
    let only = &here.candidates[0];
    assert_eq!((only.reason, only.outcome), (Reason::Withdrawn, "would_delete"));
    assert_eq!(only.origins, vec!["us-east-1", "eu-west-1"], "oldest first");
    assert_eq!(only.item.0, older, "this region's item, not the tombstone of eu-west-1");
    assert_eq!(here.foreign, BTreeMap::from([("eu-west-1".to_owned(), 2)]));
    // In eu-west-1 the same table plans the other two items.
    let there = plan_in(&scan, &view, "eu-west-1");
    let deleted: Vec<&Record> = there.candidates.iter().map(|c| &c.item.0).collect();
    assert_eq!(deleted.len(), 2);
    assert!(deleted.contains(&&tomb) && deleted.contains(&&theirs), "{deleted:?}");
    assert!(there.candidates.iter().all(|c| c.outcome == "would_delete"));
    assert_eq!(there.foreign, BTreeMap::from([("us-east-1".to_owned(), 1)]));
}

fn cluster_key(cluster: &str) -> Key {
    Key::Cluster { cluster_id: mcs_core::fixtures::label(cluster) }
}

trait WithKey {
    fn with_key(self, key: Key) -> Self;
}

impl WithKey for Record {
    fn with_key(mut self, key: Key) -> Self {
        self.key = key;
        self
    }
}

#[test]
fn an_item_hiding_a_live_item_of_another_region_is_held() {
    // Withdrawn here two days ago; eu-west-1 still holds an older export
    // (of a cluster whose lease runs: it would be served) and an older
    // pool leased beyond the tombstone's retention.
    let cluster = mk_cluster("c1", 1, "inc", NOW + DAY);
    let tomb = at(mk_tombstone("p", 5, "w"), NOW - 2 * DAY);
    let leased = mk_pool("p", 3, "w", Some("relay"), Some(NOW + DAY));
    let export = at(mk_export("c1", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY);
    let mut withdrawn = at(mk_export("c1", "web", 2, mk_export_spec(0, vec![])), NOW - 2 * DAY);
    withdrawn.body = mcs_core::Body::Tombstone;
    let (scan, view) = scan_of(&[
        (&tomb, "us-east-1"),
        (&leased, "eu-west-1"),
        (&withdrawn, "us-east-1"),
        (&export, "eu-west-1"),
        (&cluster, "eu-west-1"),
    ]);
    let here = plan_in(&scan, &view, "us-east-1");
    let outcomes: Vec<&str> = here.candidates.iter().map(|c| c.outcome).collect();
    assert_eq!(outcomes, vec!["held", "held"], "{:?}", here.candidates);
    // gc in eu-west-1 deletes the hidden items first; then here goes.
    let there = plan_in(&scan, &view, "eu-west-1");
    assert!(there.candidates.iter().all(|c| c.outcome == "would_delete"));
    assert_eq!(there.candidates.len(), 2);
    // Had the cluster been gone for the retention, the older export
    // could never be served again: nothing to hold.
    let (scan, view) = scan_of(&[(&withdrawn, "us-east-1"), (&export, "eu-west-1")]);
    let orphan = plan_in(&scan, &view, "us-east-1");
    assert_eq!(orphan.candidates.len(), 1);
    assert_eq!(orphan.candidates[0].outcome, "would_delete", "{:?}", orphan.candidates);
    let (scan, view) = scan_of(&[(&tomb, "us-east-1"), (&withdrawn, "us-east-1")]);
    let after = plan_in(&scan, &view, "us-east-1");
    assert!(after.candidates.iter().all(|c| c.outcome == "would_delete"));
    assert_eq!(after.candidates.len(), 2);
}

#[test]
fn the_summary_counts_what_other_regions_hold() {
    let c = Collected {
        table: "t".into(),
        region: "us-east-1".into(),
        dry_run: false,
        retention_secs: 172_800,
        deleted: 2,
        kept: 0,
        held: 1,
        foreign: BTreeMap::from([("ap-south-1".to_owned(), 1), ("eu-west-1".to_owned(), 3)]),
        items: vec![],
    };
    assert_eq!(
        render(&c, Format::Table, NOW).unwrap(),
        "deleted 2 items of us-east-1 in t past the retention (172800s); kept 0 rewritten \
         meanwhile; held 1 hiding an older item of another region that could still be \
         served\nleft 4 items of other regions alone (ap-south-1: 1, eu-west-1: 3): run \
         mcs-admin gc in each of them\n"
    );
}
