//! `dump` and `restore`: a dump restored into another table dumps the same;
//! a restore never overwrites anything newer.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, expired_pool, export_record, live_pool, now_ms,
    pool_record, router_record, unique_table, withdrawn_pool,
};
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_core::Record;

#[tokio::test]
async fn dump_then_restore_round_trips() {
    let Some(source) = Fixture::new("dump").await else { return };
    let records = vec![
        live_pool("alpha"),
        expired_pool("beta", 5 * MINUTE),
        withdrawn_pool("gamma", DAY),
        cluster_record("east", now_ms() + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
        router_record("gr-0"),
    ];
    source.put(&records).await;

    let dump = source.admin(&["dump"]).expect(0).stdout;
    let mut dumped: Vec<Record> = dump.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(dumped.len(), records.len(), "{dump}");
    let mut want = records.clone();
    want.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(dumped, want, "every record, in key order, META excluded");
    dumped.clear();

    let target = source.other(&unique_table("restore"), "us-east-1").await;
    target.migrate().await;
    let restored = target.admin_with_stdin(&["restore", "-"], &dump).expect(0);
    assert_eq!(
        restored.stdout,
        format!(
            "restored 6 records into {}: 6 applied, 0 unchanged, 0 stale, 0 owned\n",
            target.table
        )
    );
    assert_eq!(target.admin(&["dump"]).expect(0).stdout, dump, "the copy dumps the same");
    assert_eq!(
        target.admin(&["ls", "pools", "-o", "json"]).expect(0).stdout,
        source.admin(&["ls", "pools", "-o", "json"]).expect(0).stdout
    );

    // Again, from a file: everything is there already.
    let file = std::env::temp_dir().join(format!("{}.jsonl", target.table));
    std::fs::write(&file, &dump).unwrap();
    let again = target.admin(&["restore", file.to_str().unwrap(), "-o", "json"]).expect(0).json();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(again["applied"], 0);
    assert_eq!(again["unchanged"], 6);
}

#[tokio::test]
async fn restore_never_overwrites_newer() {
    let Some(target) = Fixture::new("restore-newer").await else { return };
    let now = now_ms();
    let old = pool_record("alpha", 100, now + 10 * MINUTE, now);
    let newer = pool_record("alpha", 200, now + 10 * MINUTE, now);
    target.put(std::slice::from_ref(&newer)).await;
    let dump = format!(
        "{}\n{}\n",
        serde_json::to_string(&old).unwrap(),
        serde_json::to_string(&live_pool("beta")).unwrap()
    );
    let run = target.admin_with_stdin(&["restore", "-"], &dump).expect(0);
    assert!(
        run.stdout.starts_with(&format!(
            "restored 2 records into {}: 1 applied, 0 unchanged, 1 stale, 0 owned\n",
            target.table
        )),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("stale    table holds 200@reg-test"), "{}", run.stdout);
    let kept = target.admin(&["get", "pool", "c1/llm/alpha", "-o", "json"]).expect(0).json();
    assert_eq!(kept["record"]["version"]["generation"], 200);

    // A bad line: nothing is written, the line is named.
    let bad = format!("{}\nnot json\n", serde_json::to_string(&live_pool("gamma")).unwrap());
    let run = target.admin_with_stdin(&["restore", "-"], &bad).expect(1);
    assert!(
        run.stderr.starts_with("mcs-admin: line 2 is not a record of mcs-admin dump"),
        "{}",
        run.stderr
    );
    target.admin(&["get", "pool", "c1/llm/gamma"]).expect(1);
}

#[tokio::test]
async fn a_dump_with_unreadable_items_says_so() {
    let Some(t) = Fixture::new("dump-unreadable").await else { return };
    t.put(&[live_pool("alpha")]).await;
    t.store
        .client()
        .put_item()
        .table_name(&t.table)
        .item("pk", AttributeValue::S("POOL#ffffffffffffffffffffffffffffffff".into()))
        .item("sk", AttributeValue::S("#@us-east-1".into()))
        .item("payload_version", AttributeValue::N("99".into()))
        .send()
        .await
        .unwrap();
    let run = t.admin(&["dump"]).expect(1);
    assert_eq!(run.stdout.lines().count(), 1, "the readable record is dumped");
    assert!(
        run.stderr.contains("not dumped: item POOL#ffffffffffffffffffffffffffffffff #@us-east-1"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("dump incomplete: 1 item this"), "{}", run.stderr);
}
