use super::*;
use crate::commands::dump::{document, lines};
use mcs_core::Version;
use mcs_core::fixtures::{mk_pool, mk_tombstone};

#[test]
fn dumps_parse_back_and_bad_lines_are_named() {
    let records = vec![mk_pool("a", 1, "w", Some("x"), Some(5)), mk_tombstone("b", 2, "w")];
    let header = Header::new("t", "us-east-1", 1_764_662_400_000);
    assert_eq!(header.dumped_at, "2025-12-02T08:00:00Z");
    let text = document(&header, &records).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(text.ends_with("{\"end\":\"mcs-admin-dump\",\"records\":2}\n"), "{text}");
    let (read, back) = parse(&format!("\n{text}\n"), false).unwrap();
    assert_eq!((read, back), (Some(header.clone()), records.clone()));
    let body = lines(&records).unwrap();
    let with_bad_line = format!(
        "{}\n{body}{{\"key\":1}}\n{{\"end\":\"mcs-admin-dump\",\"records\":3}}\n",
        serde_json::to_string(&header).unwrap()
    );
    let err = parse(&with_bad_line, false).unwrap_err();
    assert_eq!(err.to_string(), "line 4 is not a record of mcs-admin dump");
}

#[test]
fn a_truncated_dump_is_refused() {
    let records = vec![mk_pool("a", 1, "w", Some("x"), Some(5)), mk_tombstone("b", 2, "w")];
    let text = document(&Header::new("t", "r", 0), &records).unwrap();
    let all: Vec<&str> = text.lines().collect();
    // Cut after the first record: no trailer.
    let cut = format!("{}\n{}\n", all[0], all[1]);
    let err = parse(&cut, false).unwrap_err().to_string();
    assert!(err.starts_with("the dump is truncated: it does not end with the trailer"), "{err}");
    // A record line lost, the trailer kept.
    let lost = format!("{}\n{}\n{}\n", all[0], all[1], all[3]);
    let err = parse(&lost, false).unwrap_err().to_string();
    assert!(err.contains("its trailer counts 2 records, 1 were read"), "{err}");
    // A line after the trailer. Before: "the dump is truncated: it does not
    // end with the trailer line … (3 records read)" for a dump whole but
    // for dump's own standard error appended (`> file 2>&1`), and
    // "line 4 is not a record" (the trailer) for two dumps in one file.
    let appended = format!("{text}mcs-admin: dumped 2 records (2 items read) from t\n");
    let err = parse(&appended, false).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "line 5 follows the dump's trailer (line 4), which mcs-admin dump writes last: \
             \"mcs-admin: dumped 2 records"
        ),
        "{err}"
    );
    let twice = format!("{text}{text}");
    let err = parse(&twice, false).unwrap_err().to_string();
    assert!(err.starts_with("line 5 follows the dump's trailer (line 4)"), "{err}");
    assert!(err.ends_with("; nothing was written"), "{err}");
    let long = format!("{text}{}\n", "x".repeat(500));
    let err = parse(&long, false).unwrap_err().to_string();
    assert!(err.contains(&format!("\"{}\"", "x".repeat(80))) && err.len() < 300, "{err}");
    // Headerless (an older dump): refused, unless asked for.
    let old = lines(&records).unwrap();
    let err = parse(&old, false).unwrap_err().to_string();
    assert!(err.contains("--allow-headerless"), "{err}");
    assert_eq!(parse(&old, true).unwrap(), (None, records.clone()));
    assert!(parse("", true).is_err(), "nothing at all is no dump");
    // A newer format.
    let newer = text.replacen("\"version\":1", "\"version\":2", 1);
    let err = parse(&newer, false).unwrap_err().to_string();
    assert!(err.contains("format version 2"), "{err}");
}

#[test]
fn restore_time_lets_versions_alone_decide() {
    // A newer record from another incarnation over an older item whose
    // lease still runs: refused as owned at the real time, applied here.
    let stored = mk_pool("a", 5, "w", Some("old"), Some(u64::MAX - 1));
    let newer = mk_pool("a", 6, "w", Some("new"), Some(10));
    assert!(matches!(decide(Some(&stored), &newer, 1_000), mcs_core::WriteDecision::Owned { .. }));
    assert_eq!(decide(Some(&stored), &newer, RESTORE_NOW_MS), mcs_core::WriteDecision::Apply);
    // Older never replaces newer.
    let older = mk_pool("a", 4, "w", Some("new"), Some(10));
    assert_eq!(
        decide(Some(&stored), &older, RESTORE_NOW_MS),
        mcs_core::WriteDecision::Stale { stored: Version::new(5, "w") }
    );
}

#[test]
fn records_are_judged_against_the_merged_record_first() {
    let held = mk_pool("a", 5, "w", Some("x"), Some(1_000));
    assert_eq!(judge(None, &held), None, "nothing stored: write");
    assert_eq!(judge(Some(&held), &held), Some(Judged::Unchanged));
    let longer = mk_pool("a", 5, "w", Some("x"), Some(2_000));
    assert_eq!(judge(Some(&held), &longer), None, "a longer lease is written");
    assert_eq!(judge(Some(&longer), &held), Some(Judged::Unchanged));
    assert_eq!(
        judge(Some(&held), &mk_pool("a", 4, "w", Some("x"), Some(9_000))),
        Some(Judged::Put(PutOutcome::Stale { stored: Version::new(5, "w") }))
    );
    assert_eq!(judge(Some(&held), &mk_pool("a", 6, "w", Some("y"), Some(9_000))), None);
}

#[test]
fn the_summary_names_what_was_refused() {
    let mut restored = Restored {
        table: "t".into(),
        records: 2,
        dump: Some(Header::new("t0", "us-east-1", 0)),
        ..Restored::default()
    };
    restored.tally("pool/a".into(), PutOutcome::Applied);
    restored.tally("pool/b".into(), PutOutcome::Stale { stored: Version::new(9, "w") });
    let text = render(&restored, output::Format::Table).unwrap();
    assert!(
        text.starts_with(
            "dump of t0 (us-east-1) taken 1970-01-01T00:00:00Z\n\
             restored 2 records into t: 1 applied, 0 unchanged, 1 stale, 0 owned, 0 too old\n"
        ),
        "{text}"
    );
    assert!(text.contains("pool/b  stale    table holds 9@w"), "{text}");
    let mut restored = Restored {
        table: "t".into(),
        records: 1,
        retention_secs: 172_800,
        now_ms: 10 * 86_400_000,
        ..Restored::default()
    };
    restored.tally("pool/c".into(), Judged::TooOld { last_current_ms: 7 * 86_400_000 });
    let text = render(&restored, output::Format::Table).unwrap();
    assert!(
        text.starts_with(
            "dump without a header: not checked for truncation\n\
             restored 1 records into t: 0 applied, 0 unchanged, 0 stale, 0 owned, 1 too old\n\
             skipped 1 record older than the retention (172800s): a newer tombstone may have \
             been collected since; --force restores them\n"
        ),
        "{text}"
    );
    assert!(text.contains("pool/c  too_old  last current 3d ago, before the retention"), "{text}");
}

#[test]
fn an_export_is_as_old_as_its_clusters_last_renewal_in_the_dump() {
    use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec};
    let day = 86_400_000;
    let at = |mut r: Record, ms| {
        r.changed_at_ms = ms;
        r
    };
    let now = 100 * day;
    let cutoff = too_old_before(now, 2 * day, 1_000);
    assert_eq!(cutoff, 98 * day + 2_000, "the retention less twice the skew allowance");
    let renewed = at(mk_cluster("east", 1, "inc", now + 30_000), now - 60_000);
    let lapsed = at(mk_cluster("west", 1, "inc", now - 5 * day), now - 5 * day);
    // Registered a month ago, renewed in place (changed_at kept) a minute
    // ago: its lease end and terms tell the renewal.
    let terms = Some(mcs_core::LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 });
    let in_place = |mut r: Record| {
        r.terms = terms;
        at(r, now - 30 * day)
    };
    let records = vec![
        renewed.clone(),
        lapsed.clone(),
        in_place(mk_cluster("south", 1, "inc", now - 30_000)),
        at(mk_export("south", "db", 1, mk_export_spec(0, vec![])), now - 30 * day),
        in_place(mk_pool("kept", 1, "w", None, Some(now - 30_000))),
        // Unchanged for a month, its cluster renewed a minute ago: current.
        at(mk_export("east", "web", 1, mk_export_spec(0, vec![])), now - 30 * day),
        // Its cluster stopped renewing five days ago.
        at(mk_export("west", "api", 1, mk_export_spec(0, vec![])), now - 30 * day),
        // No cluster in the dump: its own write.
        at(mk_export("north", "db", 1, mk_export_spec(0, vec![])), now - 3 * day),
        at(mk_tombstone("gone", 1, "w"), now - 3 * day),
        at(mk_tombstone("recent", 1, "w"), now - day),
        at(mk_pool("old", 1, "w", None, Some(now - 3 * day)), now - 3 * day - 30_000),
    ];
    let clusters = cluster_times(&records);
    let old: Vec<String> = records
        .iter()
        .filter(|r| last_current_ms(r, &clusters) < cutoff)
        .map(|r| r.key.to_string())
        .collect();
    let name = |n: &str| format!("pool/{}", mcs_core::fixtures::pool_key(n).id());
    assert_eq!(
        old,
        vec![
            "cluster/west".to_owned(),
            "export/west/llm/api".to_owned(),
            "export/north/llm/db".to_owned(),
            name("gone"),
            name("old"),
        ]
    );
    let mut withdrawn = at(mk_export("east", "gone", 2, mk_export_spec(0, vec![])), now - 3 * day);
    withdrawn.body = mcs_core::Body::Tombstone;
    assert_eq!(
        last_current_ms(&withdrawn, &clusters),
        now - 3 * day,
        "a withdrawn export is as old as its withdrawal"
    );
}
