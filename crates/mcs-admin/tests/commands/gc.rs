//! `gc`: a dry run deletes nothing; a run deletes only what is past the
//! retention.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, expired_pool, export_record, live_pool, now_ms, pool_id,
    withdrawn_pool,
};
use mcs_core::Record;
use std::collections::BTreeSet;

fn keys(dump: &str) -> BTreeSet<String> {
    dump.lines().map(|l| serde_json::from_str::<Record>(l).unwrap().key.to_string()).collect()
}

#[tokio::test]
async fn gc_deletes_only_what_is_past_the_retention() {
    let Some(t) = Fixture::new("gc").await else { return };
    let now = now_ms();
    t.put(&[
        live_pool("live"),
        expired_pool("recent", 5 * MINUTE),
        expired_pool("old", 3 * DAY),
        withdrawn_pool("buried", 3 * DAY),
        withdrawn_pool("fresh", MINUTE),
        cluster_record("gone", now - 3 * DAY),
        // Lives on its cluster's lease, has no expiry of its own: kept.
        export_record("gone", "web", 80, 1_700_000_000),
    ])
    .await;
    let before = t.admin(&["dump"]).expect(0).stdout;
    let doomed: BTreeSet<String> = [
        format!("pool/{}", pool_id("old")),
        format!("pool/{}", pool_id("buried")),
        "cluster/gone".to_owned(),
    ]
    .into();

    let dry =
        t.admin(&["gc", "--dry-run", "--retention-secs", "86400", "-o", "json"]).expect(0).json();
    assert_eq!(dry["dry_run"], true);
    let listed: BTreeSet<String> = dry["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, doomed);
    assert!(dry["items"].as_array().unwrap().iter().all(|i| i["outcome"] == "would_delete"));
    assert_eq!(t.admin(&["dump"]).expect(0).stdout, before, "a dry run deletes nothing");
    let table = t.admin(&["gc", "--dry-run"]).expect(0).stdout;
    assert!(
        table.ends_with(&format!(
            "dry run: would delete 3 keys of {} past the retention (86400s); deleted nothing\n",
            t.table
        )),
        "{table}"
    );

    let run = t.admin(&["gc", "--retention-secs", "86400"]).expect(0);
    assert!(
        run.stdout.ends_with(&format!(
            "deleted 3 keys of {} past the retention (86400s); kept 0 rewritten meanwhile\n",
            t.table
        )),
        "{}",
        run.stdout
    );
    let after = keys(&t.admin(&["dump"]).expect(0).stdout);
    let expected: BTreeSet<String> = keys(&before).difference(&doomed).cloned().collect();
    assert_eq!(after, expected);

    // With a shorter retention the recent ones go too; the live pool and the
    // export stay.
    t.admin(&["gc", "--retention-secs", "0"]).expect(0);
    let left = keys(&t.admin(&["dump"]).expect(0).stdout);
    let want: BTreeSet<String> =
        [format!("pool/{}", pool_id("live")), "export/gone/llm/web".to_owned()].into();
    assert_eq!(left, want);
    let nothing = t.admin(&["gc", "--retention-secs", "0", "-o", "json"]).expect(0).json();
    assert_eq!(nothing["items"], serde_json::json!([]));
}
