//! What the command tests share: the DynamoDB endpoint (moto_server, from
//! `MCS_TEST_DYNAMODB_ENDPOINT`), a fresh table per test populated through
//! `DynamoStore::put` (the registry's own write), record builders at the
//! real time, and runs of the built `mcs-admin` binary.
//!
//! Without an endpoint each test prints a notice and passes without running,
//! except where the DynamoDB tests are required (`scripts/test`, CI), where
//! it fails.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::Client;
use mcs_api::{HostPort, RouterId, RouterReplica};
use mcs_core::fixtures::{label, mk_export, mk_export_spec, pool, pool_key, port};
use mcs_core::{Body, Key, Record, Version};
use mcs_store::dynamo::migrate;
use mcs_store::{DynamoConfig, DynamoStore, PutOutcome, Store};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The region fixtures live in.
pub const REGION: &str = "us-east-1";

pub const SECOND: u64 = 1_000;
pub const MINUTE: u64 = 60 * SECOND;
pub const DAY: u64 = 24 * 60 * MINUTE;

/// The registry's default retention, which fixtures write with.
pub const RETENTION: Duration = Duration::from_secs(172_800);

pub use mcs_store::testsuite::dynamodb_endpoint as endpoint;

/// The wall clock, epoch ms.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

pub use mcs_testkit::dynamo::unique_table;

async fn sdk_config(endpoint: &str, region: &str) -> SdkConfig {
    mcs_testkit::dynamo::sdk_config(Some(endpoint), region).await
}

/// What a run of the binary printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts the exit code, showing everything printed when it differs.
    #[track_caller]
    pub fn expect(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// stdout parsed as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Runs `mcs-admin args…` with `stdin`, in an environment of its own
/// (static test credentials, no `MCS_*` variables from the caller).
pub fn admin(args: &[&str], stdin: Option<&str>) -> Run {
    admin_in(args, stdin, &[("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")])
}

/// Runs `mcs-admin args…` in an environment of `env` only (and no
/// instance metadata, no AWS profile files).
pub fn admin_in(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcs-admin"))
        .args(args)
        .env_clear()
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/mcs-admin-test/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/mcs-admin-test/credentials")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcs-admin starts");
    if let Some(input) = stdin {
        // A run that fails before reading its input (a usage error) closes
        // the pipe first: a broken pipe here is no failure of the test.
        let written = child.stdin.take().unwrap().write_all(input.as_bytes());
        if let Err(e) = written {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "writing stdin: {e}");
        }
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// A table of one test, in [`REGION`] unless said otherwise.
#[derive(Debug)]
pub struct Fixture {
    pub endpoint: String,
    pub table: String,
    pub region: String,
    pub store: DynamoStore,
}

impl Fixture {
    /// A migrated table of its own; `None` when the tests skip.
    pub async fn new(name: &str) -> Option<Self> {
        let fixture = Self::unmigrated(name).await?;
        fixture.migrate().await;
        Some(fixture)
    }

    /// A table name of its own, not created yet.
    pub async fn unmigrated(name: &str) -> Option<Self> {
        let endpoint = endpoint()?;
        Some(Self::at(&endpoint, &unique_table(name), REGION, RETENTION).await)
    }

    /// The table `table` in `region` of `endpoint`, written with `retention`.
    pub async fn at(endpoint: &str, table: &str, region: &str, retention: Duration) -> Self {
        let sdk = sdk_config(endpoint, region).await;
        let mut config = DynamoConfig::new(table);
        config.retention = retention;
        config.initial_backoff = Duration::from_millis(5);
        Self {
            endpoint: endpoint.to_owned(),
            table: table.to_owned(),
            region: region.to_owned(),
            store: DynamoStore::from_sdk_config(&sdk, config).unwrap(),
        }
    }

    /// Creates the table (the library's migrate, as `mcs-admin migrate` does).
    pub async fn migrate(&self) {
        migrate(&Client::new(&sdk_config(&self.endpoint, &self.region).await), &self.table)
            .await
            .unwrap();
    }

    /// The same table written with another retention (its `ttl`s).
    pub async fn with_retention(&self, retention: Duration) -> Self {
        Self::at(&self.endpoint, &self.table, &self.region, retention).await
    }

    /// Another table on the same server (another region's, or a copy).
    pub async fn other(&self, table: &str, region: &str) -> Self {
        Self::at(&self.endpoint, table, region, RETENTION).await
    }

    /// Copies every record item of this table into `to`'s (the replica of
    /// the same global table in another region), as replication does:
    /// moto_server keeps one table per region and replicates nothing.
    pub async fn replicate_to(&self, to: &Fixture) {
        let mut pages = self.store.client().scan().table_name(&self.table).into_paginator().send();
        while let Some(page) = pages.next().await {
            for item in page.unwrap().items.unwrap_or_default() {
                if mcs_store::dynamo::raw::is_meta(&item) {
                    continue;
                }
                to.store
                    .client()
                    .put_item()
                    .table_name(&to.table)
                    .set_item(Some(item))
                    .send()
                    .await
                    .unwrap();
            }
        }
    }

    /// `mcs-admin args… --table … --region … --dynamodb-endpoint …`.
    pub fn admin(&self, args: &[&str]) -> Run {
        admin(&self.args(args), None)
    }

    /// The same, with `stdin`.
    pub fn admin_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        admin(&self.args(args), Some(stdin))
    }

    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend([
            "--table",
            &self.table,
            "--region",
            &self.region,
            "--dynamodb-endpoint",
            &self.endpoint,
        ]);
        all
    }

    /// Writes `records` through the registry's conditional write, at their
    /// write time.
    pub async fn put(&self, records: &[Record]) {
        for record in records {
            let outcome = self.store.put(record, record.changed_at_ms).await.unwrap();
            assert_eq!(outcome, PutOutcome::Applied, "{}", record.key);
        }
    }
}

/// A pool record of `dgd_name` (cluster `c1`, namespace `llm`) held by
/// `relay-{dgd_name}` until `lease_until_ms`, written at `changed_at_ms`.
pub fn pool_record(
    dgd_name: &str,
    generation: u64,
    lease_until_ms: u64,
    changed_at_ms: u64,
) -> Record {
    Record {
        terms: None,
        key: Key::Pool { pool_id: pool_key(dgd_name).id() },
        version: Version::new(generation, "reg-test"),
        owner: Some(format!("relay-{dgd_name}")),
        lease_until_ms: Some(lease_until_ms),
        changed_at_ms,
        body: Body::Pool(pool(dgd_name, "meta-llama/Llama-3.1-8B")),
    }
}

/// A live pool: leased for ten minutes from now.
pub fn live_pool(dgd_name: &str) -> Record {
    let now = now_ms();
    pool_record(dgd_name, now << 16, now + 10 * MINUTE, now)
}

/// A pool whose lease ended `ago_ms` ago.
pub fn expired_pool(dgd_name: &str, ago_ms: u64) -> Record {
    let then = now_ms() - ago_ms;
    pool_record(dgd_name, then << 16, then, then - 30 * SECOND)
}

/// A tombstone of pool `dgd_name` written `ago_ms` ago.
pub fn withdrawn_pool(dgd_name: &str, ago_ms: u64) -> Record {
    let then = now_ms() - ago_ms;
    Record {
        terms: None,
        key: Key::Pool { pool_id: pool_key(dgd_name).id() },
        version: Version::new(then << 16, "reg-test"),
        owner: None,
        lease_until_ms: None,
        changed_at_ms: then,
        body: Body::Tombstone,
    }
}

/// A cluster lease held by `inc-{cluster}` until `lease_until_ms`.
pub fn cluster_record(cluster: &str, lease_until_ms: u64) -> Record {
    let now = now_ms().min(lease_until_ms);
    Record {
        terms: None,
        key: Key::Cluster { cluster_id: label(cluster) },
        version: Version::new(1, format!("inc-{cluster}")),
        owner: Some(format!("inc-{cluster}")),
        lease_until_ms: Some(lease_until_ms),
        changed_at_ms: now,
        body: Body::Cluster,
    }
}

/// `cluster`'s export of service `llm/{service}` with one port `http`
/// numbered `port_number`, exported at `exported_at_secs`.
pub fn export_record(
    cluster: &str,
    service: &str,
    port_number: u16,
    exported_at_secs: i64,
) -> Record {
    let spec = mk_export_spec(exported_at_secs, vec![port("http", port_number)]);
    let mut record = mk_export(cluster, service, 1, spec);
    record.version = Version::new(1, format!("inc-{cluster}"));
    record.changed_at_ms = now_ms();
    record
}

/// A router replica leased for ten minutes.
pub fn router_record(router_id: &str) -> Record {
    let now = now_ms();
    let router_id = RouterId::new(router_id).unwrap();
    Record {
        terms: None,
        key: Key::Router { router_id: router_id.clone() },
        version: Version::new(now << 16, "reg-test"),
        owner: None,
        lease_until_ms: Some(now + 10 * MINUTE),
        changed_at_ms: now,
        body: Body::Router(RouterReplica {
            router_id,
            address: HostPort::new("10.0.0.9:8080").unwrap(),
            location: None,
        }),
    }
}

/// The id of pool `dgd_name`, as text.
pub fn pool_id(dgd_name: &str) -> String {
    pool_key(dgd_name).id().to_string()
}

/// A dump of `records` as `mcs-admin dump` writes it: the header line, one
/// record per line, the trailer with the count.
pub fn dump_of(records: &[&Record]) -> String {
    let header = serde_json::json!({
        "format": "mcs-admin-dump", "version": 1, "table": "source", "region": REGION,
        "dumped_at": "2026-12-03T00:00:00Z", "dumped_at_ms": 1_796_256_000_000u64,
    });
    let mut text = format!("{header}\n");
    for record in records {
        text.push_str(&serde_json::to_string(record).unwrap());
        text.push('\n');
    }
    text.push_str(&format!("{{\"end\":\"mcs-admin-dump\",\"records\":{}}}\n", records.len()));
    text
}

/// The records of a dump (what lies between its header and its trailer),
/// checking that both are there and that the count matches.
pub fn dump_records(dump: &str) -> Vec<Record> {
    let lines: Vec<&str> = dump.lines().collect();
    let (first, rest) = lines.split_first().expect("a header");
    let (last, body) = rest.split_last().expect("a trailer");
    let header: serde_json::Value = serde_json::from_str(first).unwrap();
    assert_eq!(header["format"], "mcs-admin-dump", "{first}");
    let trailer: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(trailer["end"], "mcs-admin-dump", "{last}");
    assert_eq!(trailer["records"].as_u64(), Some(body.len() as u64), "{last}");
    body.iter().map(|l| serde_json::from_str(l).unwrap()).collect()
}
