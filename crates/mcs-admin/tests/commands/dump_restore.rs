//! `dump` and `restore`: a dump restored into another table dumps the same;
//! a restore never overwrites anything newer.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, dump_of, dump_records, expired_pool, export_record,
    live_pool, now_ms, pool_record, router_record, unique_table, withdrawn_pool,
};
use aws_sdk_dynamodb::types::AttributeValue;

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

    let dumped = source.admin(&["dump"]).expect(0);
    assert_dump_summary(&dumped.stderr, 6, 7, &source.table);
    let dump = dumped.stdout;
    assert!(dump.starts_with("{\"format\":\"mcs-admin-dump\",\"version\":1,"), "{dump}");
    let header: serde_json::Value = serde_json::from_str(dump.lines().next().unwrap()).unwrap();
    assert_eq!(
        (header["table"].as_str(), header["region"].as_str()),
        (Some(&*source.table), Some("us-east-1"))
    );
    let mut dumped = dump_records(&dump);
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
            "dump of {} (us-east-1) taken {}\n\
             restored 6 records into {}: 6 applied, 0 unchanged, 0 stale, 0 owned, 0 too old\n",
            source.table,
            header["dumped_at"].as_str().unwrap(),
            target.table
        )
    );
    assert_eq!(
        dump_records(&target.admin(&["dump"]).expect(0).stdout),
        dump_records(&dump),
        "the copy dumps the same"
    );
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

/// `dump` ends with one line on stderr: the records dumped, the items read
/// (6 records and the schema item), the time and a whole rate. Before: it
/// printed nothing when stderr was not a terminal, and on one a rate with
/// four decimals.
fn assert_dump_summary(stderr: &str, records: usize, items: usize, table: &str) {
    let prefix =
        format!("mcs-admin: dumped {records} records ({items} items read) from {table} in ");
    let rest = stderr.strip_prefix(&prefix).unwrap_or_else(|| panic!("{stderr:?}"));
    let (secs, rate) = rest.trim_end().split_once(" s: ").unwrap_or_else(|| panic!("{stderr:?}"));
    let secs: f64 = secs.parse().unwrap_or_else(|_| panic!("{stderr:?}"));
    let rate: u64 = rate
        .strip_suffix(" items/s")
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("a whole number of items a second: {stderr:?}"));
    assert!(secs < 60.0, "{stderr:?}");
    assert!(rate > 0, "{stderr:?}");
    // The rate is the items over the whole run (at least a millisecond).
    let most = items as f64 / (secs - 0.05).max(0.001);
    assert!((rate as f64) <= most.ceil(), "{stderr:?}");
}

/// `restore --dry-run` judges every record against the table as a restore
/// does, counts them, and writes nothing.
#[tokio::test]
async fn a_dry_run_restore_counts_and_writes_nothing() {
    let Some(target) = Fixture::new("restore-dry-run").await else { return };
    let now = now_ms();
    let old = pool_record("alpha", 100, now + 10 * MINUTE, now);
    let newer = pool_record("alpha", 200, now + 10 * MINUTE, now);
    target.put(std::slice::from_ref(&newer)).await;
    let before = target.admin(&["dump"]).expect(0).stdout;
    let dump = dump_of(&[&old, &live_pool("beta"), &live_pool("gamma")]);

    let run = target.admin_with_stdin(&["restore", "-", "--dry-run"], &dump).expect(0);
    assert!(
        run.stdout.contains(&format!(
            "dry run: would restore 3 records into {}: 2 to write, 0 unchanged, 1 stale, 0 \
             owned, 0 too old; wrote nothing\n",
            target.table
        )),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("stale    table holds 200@reg-test"), "{}", run.stdout);
    let json = target
        .admin_with_stdin(&["restore", "-", "--dry-run", "-o", "json"], &dump)
        .expect(0)
        .json();
    assert_eq!(
        (&json["dry_run"], &json["to_write"], &json["applied"], &json["stale"]),
        (
            &serde_json::json!(true),
            &serde_json::json!(2),
            &serde_json::json!(0),
            &serde_json::json!(1)
        ),
        "{json}"
    );
    assert_eq!(
        dump_records(&target.admin(&["dump"]).expect(0).stdout),
        dump_records(&before),
        "the table is unchanged"
    );
    target.admin(&["get", "pool", "c1/llm/beta"]).expect(1);

    // The same restore, for real, writes what the dry run counted.
    let json = target.admin_with_stdin(&["restore", "-", "-o", "json"], &dump).expect(0).json();
    assert_eq!(
        (&json["to_write"], &json["applied"]),
        (&serde_json::json!(2), &serde_json::json!(2))
    );
}

#[tokio::test]
async fn restore_never_overwrites_newer() {
    let Some(target) = Fixture::new("restore-newer").await else { return };
    let now = now_ms();
    let old = pool_record("alpha", 100, now + 10 * MINUTE, now);
    let newer = pool_record("alpha", 200, now + 10 * MINUTE, now);
    target.put(std::slice::from_ref(&newer)).await;
    let dump = dump_of(&[&old, &live_pool("beta")]);
    let run = target.admin_with_stdin(&["restore", "-"], &dump).expect(0);
    assert!(
        run.stdout.contains(&format!(
            "restored 2 records into {}: 1 applied, 0 unchanged, 1 stale, 0 owned, 0 too old\n",
            target.table
        )),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("stale    table holds 200@reg-test"), "{}", run.stdout);
    let kept = target.admin(&["get", "pool", "c1/llm/alpha", "-o", "json"]).expect(0).json();
    assert_eq!(kept["record"]["version"]["generation"], 200);

    // A bad line: nothing is written, the line is named.
    let good = dump_of(&[&live_pool("gamma"), &live_pool("delta")]);
    let mut lines: Vec<&str> = good.lines().collect();
    lines[2] = "not json";
    let bad = lines.join("\n") + "\n";
    let run = target.admin_with_stdin(&["restore", "-"], &bad).expect(1);
    assert!(
        run.stderr.starts_with("mcs-admin: line 3 is not a record of mcs-admin dump"),
        "{}",
        run.stderr
    );
    target.admin(&["get", "pool", "c1/llm/gamma"]).expect(1);
}

/// An old dump brought back an export whose tombstone had been collected
/// since: restore now skips records older than the retention, unless
/// `--force`.
#[tokio::test]
async fn an_old_dump_does_not_bring_back_what_was_withdrawn_since() {
    let Some(t) = Fixture::new("restore-old").await else { return };
    let now = now_ms();
    let old = now - 5 * DAY;
    // Five days ago: west's cluster renewed its lease and exported llm/api;
    // east's export has not changed for a month, but east renewed a minute
    // before the dump.
    let mut west = cluster_record("west", old + 10 * MINUTE);
    west.changed_at_ms = old;
    let mut api = export_record("west", "api", 80, 1_700_000_000);
    api.changed_at_ms = old;
    let mut east = cluster_record("east", old + 10 * MINUTE);
    east.changed_at_ms = old;
    let mut web = export_record("east", "web", 81, 1_700_000_000);
    web.changed_at_ms = old - 30 * DAY;
    let gamma = withdrawn_pool("gamma", 4 * DAY);
    let dump = dump_of(&[&west, &api, &east, &web, &gamma]);
    // Since then llm/api was withdrawn and its tombstone collected; west
    // renews today, with a newer version.
    let mut renewed = cluster_record("west", now + 10 * MINUTE);
    renewed.version.generation = 2;
    t.put(&[renewed]).await;

    let run = t.admin_with_stdin(&["restore", "-"], &dump).expect(0);
    let served = t.admin(&["ls", "exports", "-o", "json"]).expect(0).json();
    assert_eq!(served, serde_json::json!([]), "nothing withdrawn comes back: {}", run.stdout);
    assert!(
        run.stdout.contains(&format!(
            "restored 5 records into {}: 0 applied, 0 unchanged, 0 stale, 0 owned, 5 too old\n\
             skipped 5 records older than the retention (172800s): a newer tombstone may have \
             been collected since; --force restores them\n",
            t.table
        )),
        "{}",
        run.stdout
    );
    let api_line = run.stdout.lines().find(|l| l.starts_with("export/west/llm/api ")).unwrap();
    assert!(
        api_line.ends_with(" too_old  last current 5d ago, before the retention"),
        "{api_line}"
    );

    // A dump as old as the retention allows is restored: east's export,
    // unchanged for a month, is as current as its cluster's renewal.
    let recent = now - DAY;
    let (mut east, mut web) = (east, web);
    east.changed_at_ms = recent;
    east.lease_until_ms = Some(recent + 10 * MINUTE);
    web.changed_at_ms = recent - 30 * DAY;
    let dump = dump_of(&[&east, &web]);
    let json = t.admin_with_stdin(&["restore", "-", "-o", "json"], &dump).expect(0).json();
    assert_eq!((json["applied"].as_u64(), json["too_old"].as_u64()), (Some(2), Some(0)), "{json}");

    // --force restores the old dump all the same: the version check alone
    // decides (west's older cluster record is stale).
    let json = t
        .admin_with_stdin(&["restore", "-", "--force", "-o", "json"], &dump_of(&[&west, &api]))
        .expect(0)
        .json();
    assert_eq!(json["too_old"], 0, "{json}");
    assert_eq!(json["applied"], 1, "{json}");
    assert_eq!(json["stale"], 1, "{json}");
    let served = t.admin(&["ls", "exports", "-o", "json"]).expect(0).json();
    assert_eq!(served.as_array().unwrap().len(), 1, "{served}");
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
    assert_eq!(dump_records(&run.stdout).len(), 1, "the readable record is dumped");
    assert!(
        run.stderr.contains("not dumped: item POOL#ffffffffffffffffffffffffffffffff #@us-east-1"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("dump incomplete: 1 item this"), "{}", run.stderr);
}

/// Issue 14, defect 9: a dump had no header or record count, so a
/// truncated one restored with exit 0.
#[tokio::test]
async fn a_truncated_dump_is_refused_and_nothing_is_written() {
    let Some(source) = Fixture::new("dump-cut").await else { return };
    source.put(&[live_pool("alpha"), live_pool("beta"), router_record("gr-0")]).await;
    let dump = source.admin(&["dump"]).expect(0).stdout;
    let target = source.other(&unique_table("restore-cut"), "us-east-1").await;
    target.migrate().await;
    let lines: Vec<&str> = dump.lines().collect();
    assert_eq!(lines.len(), 5, "header, 3 records, trailer: {dump}");
    // Cut at a line boundary: the trailer is missing.
    let cut = lines[..3].join("\n") + "\n";
    let run = target.admin_with_stdin(&["restore", "-"], &cut).expect(1);
    assert!(run.stderr.contains("the dump is truncated"), "{}", run.stderr);
    // A line lost in the middle: the count differs.
    let lost = [lines[0], lines[1], lines[3], lines[4]].join("\n") + "\n";
    let run = target.admin_with_stdin(&["restore", "-"], &lost).expect(1);
    assert!(run.stderr.contains("its trailer counts 3 records, 2 were read"), "{}", run.stderr);
    assert!(dump_records(&target.admin(&["dump"]).expect(0).stdout).is_empty(), "nothing written");

    // A dump of an older mcs-admin (records only): refused unless asked for.
    let headerless = lines[1..4].join("\n") + "\n";
    let run = target.admin_with_stdin(&["restore", "-"], &headerless).expect(1);
    assert!(run.stderr.contains("--allow-headerless"), "{}", run.stderr);
    let run =
        target.admin_with_stdin(&["restore", "-", "--allow-headerless"], &headerless).expect(0);
    assert!(
        run.stdout.starts_with("dump without a header: not checked for truncation\nrestored 3"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn dump_refuses_formats_it_cannot_write() {
    let Some(t) = Fixture::new("dump-yaml").await else { return };
    for format in ["yaml", "wide"] {
        let run = t.admin(&["dump", "-o", format]).expect(2);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert!(run.stderr.contains("dump writes JSON lines"), "{}", run.stderr);
        assert!(run.stderr.contains("Usage: mcs-admin dump"), "{}", run.stderr);
    }
    dump_records(&t.admin(&["dump", "-o", "json"]).expect(0).stdout);
}
