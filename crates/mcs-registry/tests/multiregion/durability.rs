//! Durability: a registry killed mid-load loses no acknowledged write.

use super::*;

/// What a writer of many registrations saw.
#[derive(Debug, Default)]
struct Tally {
    /// Every pool it tried.
    tried: Vec<String>,
    /// Requests that failed or were refused.
    failed: usize,
}

/// Writers of many registrations to one region, whose registry may be
/// killed and restarted under them.
#[derive(Clone)]
struct Writers {
    http: reqwest::Client,
    /// The registry's API; a restarted one listens elsewhere.
    target: Arc<RwLock<String>>,
    /// Pools whose registration was acknowledged with a 2xx, in order.
    acked: Arc<Mutex<Vec<String>>>,
    stop: tokio::sync::watch::Receiver<bool>,
}

impl Writers {
    fn acked(&self) -> Vec<String> {
        self.acked.lock().unwrap().clone()
    }

    /// Waits until `more` registrations beyond `since` were acknowledged.
    async fn await_acks(&self, since: usize, more: usize) -> usize {
        let what = format!("{more} more registrations acknowledged");
        eventually(Duration::from_secs(15), &what, async || self.acked().len() >= since + more)
            .await;
        self.acked().len()
    }

    /// Registers pools `{prefix}-0`, `{prefix}-1`, … until stopped.
    async fn run(self, prefix: &str) -> Tally {
        let mut tally = Tally::default();
        for i in 0.. {
            if *self.stop.borrow() {
                break;
            }
            let name = format!("{prefix}-{i}");
            let lease = json!({"lease": {"duration_secs": 600, "heartbeat_interval_secs": 60}});
            let body = pool("c1", &name, 1, lease);
            let url = format!("{}/v1/pools", self.target.read().unwrap());
            tally.tried.push(name.clone());
            let sent = self.http.post(url).json(&body).timeout(Duration::from_secs(3)).send().await;
            match sent {
                Ok(reply) if reply.status().is_success() => self.acked.lock().unwrap().push(name),
                Ok(_) | Err(_) => tally.failed += 1,
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tally
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_killed_mid_load_loses_no_acknowledged_write() {
    let Some(mut world) = MultiRegion::start(REGISTRY, "sigkill", &[A, B], &[], 5).await else {
        return;
    };
    world.faults().set_all(&LinkFaults {
        delay: Duration::from_millis(100),
        jitter: Duration::from_millis(100),
        ..LinkFaults::default()
    });
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let writers = |region: &str| Writers {
        http: world.http().clone(),
        target: Arc::new(RwLock::new(world.api(region))),
        acked: Arc::new(Mutex::new(Vec::new())),
        stop: stopped.clone(),
    };
    let (to_a, to_b) = (writers(A), writers(B));
    let tasks = [(to_a.clone(), "ka0"), (to_a.clone(), "ka1"), (to_b.clone(), "kb0")]
        .map(|(w, prefix)| tokio::spawn(async move { w.run(prefix).await }));

    // Phases by progress, not time: the machine may be slow. Replication
    // stalls before the kill, so A's last acknowledged writes are only in
    // its own table when it dies.
    let acks = to_a.await_acks(0, 10).await;
    world.faults().stall();
    to_a.await_acks(acks, 5).await;
    world.kill(A).await;
    let killed = Instant::now();
    let acked_before_kill = to_a.acked();
    tokio::time::sleep(Duration::from_millis(300)).await;
    world.restart(A).await;
    *to_a.target.write().unwrap() = world.api(A);
    let down = killed.elapsed();
    let listed = pools_of(&world, A).await;
    let lost: Vec<&String> =
        acked_before_kill.iter().filter(|n| listed.binary_search(n).is_err()).collect();
    assert!(lost.is_empty(), "restarted A lists what it acknowledged before the kill: {lost:?}");
    world.faults().resume();
    to_a.await_acks(acked_before_kill.len(), 10).await;
    stop.send(true).unwrap();
    let mut tallies = Vec::new();
    for task in tasks {
        tallies.push(task.await.unwrap());
    }
    let acked: Vec<String> = to_a.acked().into_iter().chain(to_b.acked()).collect();
    let tried: BTreeSet<&String> = tallies.iter().flat_map(|t| &t.tried).collect();
    let failed: Vec<usize> = tallies.iter().map(|t| t.failed).collect();
    assert!(failed[0] + failed[1] > 0, "A's writers saw it down for {down:?}");
    assert!(!to_b.acked().is_empty(), "B took writes meanwhile");

    world.replicator().quiesce(Duration::from_secs(15)).await;
    for region in [A, B] {
        let what = format!("every acknowledged pool listed in {region}");
        eventually(Duration::from_secs(10), &what, async || {
            let listed = pools_of(&world, region).await;
            acked.iter().all(|name| listed.binary_search(name).is_ok())
        })
        .await;
        let listed = pools_of(&world, region).await;
        assert!(listed.iter().all(|n| tried.contains(n)), "nothing listed that was never sent");
    }
    let (_, snapshot) = world.await_converged(Duration::from_secs(5)).await;
    let pools = snapshot.lists[A]["pools"]["pools"].as_array().unwrap().len();
    eprintln!(
        "A down {down:?}; {} tried, {} acknowledged ({} before the kill), {failed:?} failed, \
         {pools} listed everywhere; {:?}",
        tried.len(),
        acked.len(),
        acked_before_kill.len(),
        world.replicator().stats()
    );
}
