//! `diff`: two regions of the same moto server are two tables of one name.

use crate::support::{
    Fixture, MINUTE, cluster_record, export_record, live_pool, now_ms, pool_id, pool_record,
};

#[tokio::test]
async fn diff_of_equal_then_different_replicas() {
    let Some(here) = Fixture::new("diff").await else { return };
    let there = here.other(&here.table, "eu-west-1").await;
    there.migrate().await;
    let now = now_ms();
    let shared = [
        live_pool("alpha"),
        live_pool("beta"),
        cluster_record("east", now + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
    ];
    here.put(&shared).await;
    there.put(&shared).await;

    let same = here.admin(&["diff", "--other-region", "eu-west-1"]).expect(0);
    assert!(same.stdout.ends_with("\nidentical\n"), "{}", same.stdout);
    assert!(
        same.stdout
            .starts_with(&format!("here:  {0} (us-east-1)\nthere: {0} (eu-west-1)\n", here.table)),
        "{}",
        same.stdout
    );

    // Only there, only here, and different content.
    there.put(&[live_pool("gamma")]).await;
    here.put(&[live_pool("delta")]).await;
    let mut changed = pool_record("alpha", u64::MAX >> 1, now + 10 * MINUTE, now);
    if let mcs_core::Body::Pool(p) = &mut changed.body {
        p.capacity.workers = 99;
    }
    here.put(&[changed]).await;

    let run = here.admin(&["diff", "--other-region", "eu-west-1"]).expect(1);
    assert!(run.stdout.ends_with("\ndifferent\n"), "{}", run.stdout);
    for (pool, how) in [
        ("delta", format!("only in {} (us-east-1)", here.table)),
        ("gamma", format!("only in {} (eu-west-1)", here.table)),
        ("alpha", "different content".to_owned()),
    ] {
        let line = format!("pools    {}  {how}", pool_id(pool));
        assert!(run.stdout.contains(&line), "{line} in:\n{}", run.stdout);
    }

    let json = here.admin(&["diff", "--other-region", "eu-west-1", "-o", "json"]).expect(1).json();
    assert_eq!(json["identical"], false);
    let sections = json["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 5);
    assert_eq!(sections[0]["section"], "pools");
    assert_ne!(sections[0]["here_fingerprint"], sections[0]["there_fingerprint"]);
    assert_eq!(sections[0]["only_here"], serde_json::json!([pool_id("delta")]));
    assert_eq!(sections[0]["only_there"], serde_json::json!([pool_id("gamma")]));
    assert_eq!(sections[0]["different"], serde_json::json!([pool_id("alpha")]));
    for other in &sections[1..] {
        assert_eq!(other["identical"], true, "{other}");
    }

    // Another table name on the other side, and a missing one.
    let missing =
        here.admin(&["diff", "--other-region", "eu-west-1", "--other-table", "absent"]).expect(1);
    assert!(
        missing.stderr.starts_with("mcs-admin: reading absent (eu-west-1)"),
        "{}",
        missing.stderr
    );

    // Issue 23, item 13: another table of the same region, without naming
    // the region again (before: --other-region was required).
    let copy = here.other(&format!("{}-copy", here.table), "us-east-1").await;
    copy.migrate().await;
    here.replicate_to(&copy).await;
    let run = here.admin(&["diff", "--other-table", &copy.table]).expect(0);
    assert!(run.stdout.contains(&format!("there: {} (us-east-1)", copy.table)), "{}", run.stdout);
    // Nothing names another replica: a usage error naming the flags.
    let none = here.admin(&["diff"]).expect(2);
    assert!(none.stderr.contains("--other-region"), "{}", none.stderr);
}
