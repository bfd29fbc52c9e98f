//! The multi-region world of the scenarios: one table name migrated in
//! every region of one moto_server, a [`Replicator`] between them, and one
//! real `mcs-registry` process per region.
//!
//! ```text
//!  MultiRegion ─┬─ table T in us-east-1 ◄─ registry (us-east-1)
//!               ├─ table T in eu-west-1 ◄─ registry (eu-west-1)
//!               ├─ …                                       ▲ HTTP from the scenario
//!               └─ Replicator (streams → conditional puts, faults)
//! ```
//!
//! Scenarios run one at a time (a process-wide lock): moto_server answers
//! one request at a time and every registry polls it.

pub mod replicator;

pub use replicator::{Faults, LinkFaults, Replicator};

use crate::{RegistryProcess, dynamo};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use crate::eventually;

/// The list sections, in the order of [`MultiRegion::snapshot`].
pub const SECTIONS: [&str; 5] = ["pools", "routers", "clusters", "exports", "imports"];

/// The flags every registry gets unless a scenario overrides them: fast
/// polls and resyncs, a small skew allowance, long default leases.
const FAST_FLAGS: [(&str, &str); 5] = [
    ("--refresh-interval-ms", "500"),
    ("--full-resync-interval-secs", "2"),
    ("--skew-allowance-ms", "200"),
    ("--lease-duration-secs", "60"),
    ("--heartbeat-interval-secs", "10"),
];

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every region's served lists at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Per region, per section: the list body.
    pub lists: BTreeMap<String, BTreeMap<&'static str, Value>>,
}

impl Snapshot {
    /// The sections whose fingerprint differs between regions, or that some
    /// region serves as incomplete.
    pub fn disagreements(&self) -> Vec<String> {
        let mut out = Vec::new();
        for section in SECTIONS {
            let prints: BTreeMap<&str, (&Value, &Value)> = self
                .lists
                .iter()
                .map(|(r, l)| (r.as_str(), (&l[section]["fingerprint"], &l[section]["complete"])))
                .collect();
            let first = prints.values().next().map(|(f, _)| *f);
            if prints.values().any(|(f, _)| Some(*f) != first) {
                out.push(format!("{section}: fingerprints {prints:?}"));
            } else if prints.values().any(|(_, c)| **c != Value::Bool(true)) {
                out.push(format!("{section}: incomplete somewhere {prints:?}"));
            }
        }
        out
    }
}

/// The regions, their tables and registries, and the replicator.
#[derive(Debug)]
pub struct MultiRegion {
    bin: PathBuf,
    endpoint: String,
    table: String,
    regions: Vec<String>,
    flags: Vec<(String, String)>,
    registries: BTreeMap<String, RegistryProcess>,
    replicator: Replicator,
    http: reqwest::Client,
    // Last: released after the processes are gone.
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl MultiRegion {
    /// Creates table `name` in each of `regions`, starts the replicator
    /// (seeded with `seed`) and a registry (the binary at `bin`) per region
    /// with the fast flags, overridden or extended by `flags`. `None`
    /// (after a notice) without a DynamoDB endpoint.
    pub async fn start(
        bin: impl AsRef<Path>,
        name: &str,
        regions: &[&str],
        flags: &[(&str, &str)],
        seed: u64,
    ) -> Option<Self> {
        let endpoint = dynamo::dynamodb_endpoint()?;
        let serial = SERIAL.lock().await;
        let table = create_table(&endpoint, name, regions).await;
        let replicator = Replicator::start(&endpoint, &table, regions, seed).await;
        let mut merged: Vec<(String, String)> =
            FAST_FLAGS.iter().map(|(f, v)| ((*f).to_owned(), (*v).to_owned())).collect();
        for (flag, value) in flags {
            match merged.iter_mut().find(|(f, _)| f == flag) {
                Some(slot) => slot.1 = (*value).to_owned(),
                None => merged.push(((*flag).to_owned(), (*value).to_owned())),
            }
        }
        let mut world = Self {
            bin: bin.as_ref().to_path_buf(),
            endpoint,
            table,
            regions: regions.iter().map(|r| (*r).to_owned()).collect(),
            flags: merged,
            registries: BTreeMap::new(),
            replicator,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client"),
            _serial: serial,
        };
        for region in regions {
            world.launch(region).await;
        }
        Some(world)
    }

    async fn launch(&mut self, region: &str) {
        self.launch_as(region, region, writer_id(region)).await;
    }

    /// Starts a second registry process in `region`, on the same table
    /// replica as the first; it is addressed as the returned name (for
    /// [`MultiRegion::api`], [`MultiRegion::call`], ...).
    pub async fn launch_second(&mut self, region: &str) -> String {
        let name = format!("{region}#2");
        self.launch_as(&name, region, format!("{}-2", writer_id(region))).await;
        name
    }

    async fn launch_as(&mut self, name: &str, region: &str, writer: String) {
        let mut args = dynamo::registry_args_in(&self.endpoint, region, &self.table);
        args.extend(["--writer-id".to_owned(), writer]);
        for (flag, value) in &self.flags {
            args.extend([flag.clone(), value.clone()]);
        }
        let process = RegistryProcess::start(&self.bin, &args).await;
        self.registries.insert(name.to_owned(), process);
    }

    /// The table's name (the same in every region).
    pub fn table(&self) -> &str {
        &self.table
    }

    /// A DynamoDB client for `region`'s table.
    pub fn dynamodb(&self, region: &str) -> aws_sdk_dynamodb::Client {
        dynamo::client(&self.endpoint, region)
    }

    /// A store on `region`'s table, to look at what the registries stored.
    pub async fn store(&self, region: &str) -> mcs_store::DynamoStore {
        dynamo::store_in(&self.endpoint, region, &self.table).await
    }

    /// The replicator.
    pub fn replicator(&self) -> &Replicator {
        &self.replicator
    }

    /// The replicator's fault controls.
    pub fn faults(&self) -> Faults {
        self.replicator.faults()
    }

    /// The HTTP client of the scenario.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    fn registry(&self, region: &str) -> &RegistryProcess {
        self.registries.get(region).unwrap_or_else(|| panic!("no registry runs in {region}"))
    }

    /// The base URL of `region`'s registry API.
    pub fn api(&self, region: &str) -> String {
        self.registry(region).api_url().to_owned()
    }

    /// The base URL of `region`'s registry admin port.
    pub fn admin(&self, region: &str) -> String {
        self.registry(region).admin_url().to_owned()
    }

    /// Kills `region`'s registry with SIGKILL.
    pub async fn kill(&mut self, region: &str) {
        let process = self.registries.remove(region).expect("a running registry");
        process.kill().await;
    }

    /// Starts `region`'s registry again (on new ports).
    pub async fn restart(&mut self, region: &str) {
        assert!(!self.registries.contains_key(region), "{region} still runs");
        self.launch(region).await;
    }

    /// Sends `method path` with an optional JSON body to `region`; the
    /// status and the JSON reply (`Null` when it has none).
    pub async fn call(
        &self,
        region: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        send(&self.http, method, &format!("{}{path}", self.api(region)), body).await
    }

    /// `GET /v1/{section}` of `region`.
    pub async fn list(&self, region: &str, section: &str) -> Value {
        let (status, body) = self.call(region, Method::GET, &format!("/v1/{section}"), None).await;
        assert_eq!(status, StatusCode::OK, "GET /v1/{section} in {region}: {body}");
        body
    }

    /// The value of the metric sample `sample` (name and labels exactly as
    /// rendered) on `region`'s `/metrics`; 0 when absent.
    pub async fn metric(&self, region: &str, sample: &str) -> f64 {
        self.registry(region).metric(&self.http, sample).await
    }

    /// Deletes from every region's table what DynamoDB's TTL would have
    /// deleted once `later` has passed from now ([`dynamo::emulate_ttl`]);
    /// how many items, per region. A global table replicates a TTL delete
    /// to every replica; the replicator ignores deletes, but an item's
    /// `ttl` is the same in every replica, so expiring each table on its
    /// own has the same effect.
    pub async fn emulate_ttl(&self, later: Duration) -> BTreeMap<String, usize> {
        let mut deleted = BTreeMap::new();
        for region in &self.regions {
            let n = dynamo::emulate_ttl(&self.endpoint, region, &self.table, later).await;
            deleted.insert(region.clone(), n);
        }
        deleted
    }

    /// Every section of every region.
    pub async fn snapshot(&self) -> Snapshot {
        let mut lists = BTreeMap::new();
        for region in &self.regions {
            let mut sections = BTreeMap::new();
            for section in SECTIONS {
                sections.insert(section, self.list(region, section).await);
            }
            lists.insert(region.clone(), sections);
        }
        Snapshot { lists }
    }

    /// Waits until every region serves every section complete and with the
    /// same fingerprint; how long that took, or a panic naming what still
    /// differs after `within`.
    pub async fn await_converged(&self, within: Duration) -> (Duration, Snapshot) {
        let started = Instant::now();
        loop {
            let snapshot = self.snapshot().await;
            let differ = snapshot.disagreements();
            if differ.is_empty() {
                return (started.elapsed(), snapshot);
            }
            assert!(
                started.elapsed() < within,
                "regions did not converge within {within:?}: {differ:#?}\nreplicator: {:?}",
                self.replicator.stats()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts recording `GET /v1/{section}` of `region` every `every`.
    pub fn observe(&self, region: &str, section: &'static str, every: Duration) -> Observer {
        let http = self.http.clone();
        let url = format!("{}/v1/{section}", self.api(region));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => return seen,
                }
                let (status, body) = send(&http, Method::GET, &url, None).await;
                assert_eq!(status, StatusCode::OK, "GET {url}: {body}");
                seen.push(Observation {
                    at: Instant::now(),
                    items: body[section].as_array().expect("a list").clone(),
                    complete: body["complete"] == Value::Bool(true),
                    fingerprint: body["fingerprint"].as_str().expect("a fingerprint").to_owned(),
                });
            }
        });
        Observer { stop, task }
    }
}

/// Creates and migrates a table of its own, named after `name`, in each of
/// `regions` at `endpoint`; its name.
pub async fn create_table(endpoint: &str, name: &str, regions: &[&str]) -> String {
    let table = dynamo::unique_table(&format!("mr-{name}"));
    for region in regions {
        dynamo::migrate_table_in(endpoint, region, &table).await;
    }
    table
}

/// The `--writer-id` of `region`'s registry.
pub fn writer_id(region: &str) -> String {
    format!("reg-{region}")
}

/// One observed list.
#[derive(Debug, Clone)]
pub struct Observation {
    /// When the reply arrived.
    pub at: Instant,
    /// The list's entries.
    pub items: Vec<Value>,
    /// Its `complete` flag.
    pub complete: bool,
    /// Its fingerprint.
    pub fingerprint: String,
}

/// A running observation of one region's list.
#[derive(Debug)]
pub struct Observer {
    stop: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<Vec<Observation>>,
}

impl Observer {
    /// Stops observing; what was seen, oldest first.
    pub async fn finish(self) -> Vec<Observation> {
        let _ = self.stop.send(true);
        self.task.await.expect("the observer does not panic")
    }
}

/// Sends one request; the status and the JSON reply (`Null` without one).
pub async fn send(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let mut request = http.request(method.clone(), url);
    if let Some(body) = body {
        request = request.json(body);
    }
    let reply = request.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = reply.status();
    let bytes = reply.bytes().await.unwrap_or_else(|e| panic!("{method} {url}: body: {e}"));
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{method} {url}: {e}"))
    };
    (status, value)
}
