//! `gc`: a dry run deletes nothing; a run deletes only what is past the
//! retention, and only the items of its own region.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, dump_records, expired_pool, export_record, live_pool,
    now_ms, pool_id, withdrawn_pool,
};
use mcs_core::Record;
use std::collections::BTreeSet;

fn written_at(mut record: Record, changed_at_ms: u64) -> Record {
    record.changed_at_ms = changed_at_ms;
    record
}

fn keys(dump: &str) -> BTreeSet<String> {
    dump_records(dump).iter().map(|r| r.key.to_string()).collect()
}

#[tokio::test]
async fn gc_deletes_only_what_is_past_the_retention() {
    let Some(t) = Fixture::new("gc").await else { return };
    let now = now_ms();
    t.put(&[
        live_pool("live"),
        expired_pool("recent", 36 * 60 * MINUTE),
        expired_pool("old", 3 * DAY),
        withdrawn_pool("buried", 3 * DAY),
        withdrawn_pool("fresh", 36 * 60 * MINUTE),
        cluster_record("gone", now - 3 * DAY),
        // Lives on its cluster's lease: goes a retention after the later
        // of that lease's end and its own last write.
        written_at(export_record("gone", "api", 80, 1_700_000_000), now - 4 * DAY),
        export_record("gone", "web", 80, 1_700_000_000),
        cluster_record("up", now + 10 * MINUTE),
        written_at(export_record("up", "web", 80, 1_700_000_000), now - 30 * DAY),
    ])
    .await;
    let before = dump_records(&t.admin(&["dump"]).expect(0).stdout);
    let doomed: BTreeSet<String> = [
        format!("pool/{}", pool_id("old")),
        format!("pool/{}", pool_id("buried")),
        "cluster/gone".to_owned(),
        "export/gone/llm/api".to_owned(),
    ]
    .into();

    let dry = t.admin(&["gc", "--dry-run", "-o", "json"]).expect(0).json();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["retention_secs"], 172_800, "the registry's default");
    let listed: BTreeSet<String> = dry["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, doomed);
    assert!(dry["items"].as_array().unwrap().iter().all(|i| i["outcome"] == "would_delete"));
    assert_eq!(
        dump_records(&t.admin(&["dump"]).expect(0).stdout),
        before,
        "a dry run deletes nothing"
    );
    let table = t.admin(&["gc", "--dry-run"]).expect(0).stdout;
    assert!(
        table.ends_with(&format!(
            "dry run: would delete 4 items of us-east-1 in {} past the retention (172800s); \
             deleted nothing\nleft 0 items of other regions alone\n",
            t.table
        )),
        "{table}"
    );

    let run = t.admin(&["gc", "--retention-secs", "172800"]).expect(0);
    assert!(
        run.stdout.ends_with(&format!(
            "deleted 4 items of us-east-1 in {} past the retention (172800s); kept 0 rewritten \
             meanwhile\nleft 0 items of other regions alone\n",
            t.table
        )),
        "{}",
        run.stdout
    );
    let after = keys(&t.admin(&["dump"]).expect(0).stdout);
    let before: BTreeSet<String> = before.iter().map(|r| r.key.to_string()).collect();
    let expected: BTreeSet<String> = before.difference(&doomed).cloned().collect();
    assert_eq!(after, expected);

    // With the shortest retention allowed the recent ones go too; the live
    // pool, the export written since its cluster ended and the export of
    // the live cluster stay.
    t.admin(&["gc", "--retention-secs", "86402"]).expect(0);
    let left = keys(&t.admin(&["dump"]).expect(0).stdout);
    let want: BTreeSet<String> = [
        format!("pool/{}", pool_id("live")),
        "export/gone/llm/web".to_owned(),
        "cluster/up".to_owned(),
        "export/up/llm/web".to_owned(),
    ]
    .into();
    assert_eq!(left, want);
    let nothing = t.admin(&["gc", "--retention-secs", "86402", "-o", "json"]).expect(0).json();
    assert_eq!(nothing["items"], serde_json::json!([]));
}

#[tokio::test]
async fn a_retention_shorter_than_a_day_plus_twice_the_skew_is_refused() {
    let Some(t) = Fixture::new("gc-short").await else { return };
    t.put(&[withdrawn_pool("buried", 3 * DAY)]).await;
    let dump = t.admin(&["dump"]).expect(0).stdout;
    let before = dump_records(&dump);
    for args in [
        &["gc", "--retention-secs", "86401"][..],
        &["gc", "--retention-secs", "86402", "--skew-allowance-ms", "1500"],
        &["gc", "--retention-secs", "0", "--dry-run"],
        &["doctor", "--retention-secs", "3600"],
        &["restore", "-", "--retention-secs", "86400"],
    ] {
        let run = t.admin_with_stdin(args, &dump).expect(2);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.contains("is below the minimum of 8640")
                && run.stderr.contains("one day (the longest lease) plus twice"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(dump_records(&t.admin(&["dump"]).expect(0).stdout), before, "nothing deleted");
}

/// gc in one region deleted the other regions' items through its own
/// replica, where a re-registration made there meanwhile could be erased
/// by last-writer-wins: it now deletes only its own, and says what it left.
#[tokio::test]
async fn gc_leaves_the_items_of_other_regions_to_gc_there() {
    let Some(here) = Fixture::new("gc-foreign").await else { return };
    let there = here.other(&here.table, "eu-west-1").await;
    there.migrate().await;
    // Withdrawn three days ago through each region; both items replicate.
    here.put(&[withdrawn_pool("mine", 3 * DAY)]).await;
    there.put(&[withdrawn_pool("theirs", 3 * DAY)]).await;
    there.replicate_to(&here).await;
    here.replicate_to(&there).await;
    let mine = format!("pool/{}", pool_id("mine"));
    let theirs = format!("pool/{}", pool_id("theirs"));

    let run = here.admin(&["gc"]).expect(0);
    assert_eq!(
        keys(&here.admin(&["dump"]).expect(0).stdout),
        [theirs.clone()].into(),
        "the other region's item is still there: {}",
        run.stdout
    );
    assert!(
        run.stdout.ends_with(&format!(
            "deleted 1 item of us-east-1 in {} past the retention (172800s); kept 0 rewritten \
             meanwhile\nleft 1 item of other regions alone (eu-west-1: 1): run mcs-admin gc in \
             that region\n",
            here.table
        )),
        "{}",
        run.stdout
    );
    let left = here.admin(&["get", "pool", "c1/llm/theirs", "-o", "json"]).expect(0).json();
    let origins: Vec<&str> =
        left["items"].as_array().unwrap().iter().map(|i| i["origin"].as_str().unwrap()).collect();
    assert_eq!(origins, vec!["eu-west-1"], "{left}");

    let doctor = there.admin(&["doctor", "-o", "json"]).expect(0).json();
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "foreign garbage")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "ok", "{check}");
    assert_eq!(
        check["items"],
        serde_json::json!([
            "us-east-1: 1 item past the retention: run mcs-admin gc --region us-east-1"
        ])
    );

    // gc in eu-west-1 collects its own, and leaves the replica of ours
    // (not yet deleted there: moto replicates nothing) alone.
    let json = there.admin(&["gc", "-o", "json"]).expect(0).json();
    assert_eq!(json["region"], "eu-west-1");
    assert_eq!(json["deleted"], 1);
    assert_eq!(json["foreign"], serde_json::json!({"us-east-1": 1}));
    assert_eq!(keys(&there.admin(&["dump"]).expect(0).stdout), [mine].into());
}
