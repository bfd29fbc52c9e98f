//! `get`: the merged record and every item of its key.

use crate::support::{Fixture, MINUTE, cluster_record, export_record, live_pool, now_ms, pool_id};

#[tokio::test]
async fn get_shows_the_record_and_its_items() {
    let Some(t) = Fixture::new("get").await else { return };
    let pool = live_pool("alpha");
    t.put(&[pool.clone(), cluster_record("east", now_ms() + 10 * MINUTE)]).await;
    t.put(&[export_record("east", "web", 80, 1_700_000_000)]).await;

    let id = pool_id("alpha");
    let json = t.admin(&["get", "pool", &id, "-o", "json"]).expect(0).json();
    assert_eq!(json["key"], format!("pool/{id}"));
    assert_eq!(json["reason"], "live");
    assert_eq!(json["record"], serde_json::to_value(&pool).unwrap(), "the decoded record");
    let items = json["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["origin"], "us-east-1");
    assert_eq!(items[0]["attributes"]["pk"], serde_json::json!({"S": format!("POOL#{id}")}));
    assert_eq!(items[0]["attributes"]["sk"], serde_json::json!({"S": "#@us-east-1"}));
    assert_eq!(items[0]["attributes"]["gen"]["N"], pool.version.generation.to_string());
    assert_eq!(items[0]["attributes"]["payload"]["M"]["type"], serde_json::json!({"S": "pool"}));

    // By the pool's key instead of its id; a table for people.
    let table = t.admin(&["get", "pool", "c1/llm/alpha"]).expect(0).stdout;
    assert!(table.starts_with(&format!("key          pool/{id}\nreason       live\n")), "{table}");
    assert!(table.contains("ATTRIBUTE"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("owner") && l.ends_with("relay-alpha")), "{table}");

    let export = t.admin(&["get", "export", "east/llm/web", "-o", "yaml"]).expect(0).stdout;
    assert!(export.contains("reason: live"), "{export}");
    assert!(export.contains("S: EXPORT#east@us-east-1"), "{export}");

    let missing = t.admin(&["get", "cluster", "nowhere"]).expect(1);
    assert_eq!(missing.stderr, format!("mcs-admin: no cluster/nowhere in table {}\n", t.table));
    t.admin(&["get", "export", "east/web"]).expect(2);
}
