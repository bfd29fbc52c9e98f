//! A PoolRelay as the simulation drives it: it registers its pool,
//! heartbeats with unchanged content, changes content, withdraws, fails over
//! to another registrar, crashes, and comes back as a new incarnation that
//! waits for the old lease when it is refused as `Owned`.

use mcs_api::{Capacity, HostPort, Label, Location, NonBlank, Pool, PoolId, PoolKey};
use mcs_core::{Key, Version};

/// How an incarnation versions its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sends its own generation with its incarnation (writer = incarnation).
    ClientOrdered,
    /// Sends its incarnation; the registrar's HLC assigns generations.
    Hlc,
    /// Sends neither: no ownership, HLC generations.
    Anonymous,
}

/// Where the relay is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No process running; the next tick starts a new incarnation.
    Down,
    /// Registering or heartbeating.
    Up,
    /// Withdrew its pool; may register again.
    Withdrawn,
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `POST /v1/pools`: register, heartbeat or change content.
    Register,
    /// `DELETE /v1/pools/{id}`: withdraw.
    Withdraw,
}

/// One pool's relay.
#[derive(Debug, Clone)]
pub struct Relay {
    /// Its record's key.
    pub key: Key,
    /// Its pool's key.
    pub pool_key: PoolKey,
    /// Its index (names its incarnations and addresses).
    pub index: usize,
    /// How many incarnations have started.
    pub incarnation_no: u32,
    /// How the current incarnation versions its writes.
    pub mode: Mode,
    /// The client's last generation (used in [`Mode::ClientOrdered`]).
    pub generation: u64,
    /// Where it is in its life.
    pub phase: Phase,
    /// The content it registers.
    pub workers: u32,
    /// The registrar slot it talks to.
    pub home: usize,
    /// The request in flight, if any.
    pub pending: Option<u64>,
    /// An operation to send again on the next tick.
    pub redo: Option<Op>,
    /// The last acknowledged withdrawal: `(incarnation_no, true time, version)`.
    pub withdrawn: Option<(u32, u64, Version)>,
}

impl Relay {
    /// A relay that has not started yet.
    pub fn new(index: usize, home: usize) -> Self {
        let label = |s: String| Label::new(s).expect("a valid label");
        let pool_key = PoolKey {
            cluster_id: label("c1".into()),
            namespace: label("llm".into()),
            dgd_name: label(format!("pool-{index}")),
        };
        Self {
            key: Key::Pool { pool_id: pool_key.id() },
            pool_key,
            index,
            incarnation_no: 0,
            mode: Mode::Hlc,
            generation: 0,
            phase: Phase::Down,
            workers: 1,
            home,
            pending: None,
            redo: None,
            withdrawn: None,
        }
    }

    /// The incarnation it sends, if any.
    pub fn incarnation(&self) -> Option<String> {
        (self.mode != Mode::Anonymous)
            .then(|| format!("relay-{}-{}", self.index, self.incarnation_no))
    }

    /// The generation it sends, if any.
    pub fn client_generation(&self) -> Option<u64> {
        (self.mode == Mode::ClientOrdered).then_some(self.generation)
    }

    /// The pool's id (derived once, from its key).
    pub fn pool_id(&self) -> &PoolId {
        match &self.key {
            Key::Pool { pool_id } => pool_id,
            _ => unreachable!("a relay's key is a pool key"),
        }
    }

    /// The pool as this incarnation registers it.
    pub fn pool(&self) -> Pool {
        Pool {
            pool_id: self.pool_id().clone(),
            pool_key: self.pool_key.clone(),
            model: NonBlank::new("m").expect("a model"),
            location: Location { region: NonBlank::new("r").expect("a region"), zone: None },
            capacity: Capacity { workers: self.workers },
            relay_address: HostPort::new(format!(
                "10.0.{}.{}:9000",
                self.index,
                self.incarnation_no % 250
            ))
            .expect("an address"),
            relay_identities: vec![],
        }
    }
}
