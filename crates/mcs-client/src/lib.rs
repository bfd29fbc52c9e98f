//! The typed async client of the mcs-registry API, for every Rust caller
//! (the controller, PoolRelays, Global Router replicas, the tests).
//!
//! ```text
//!  Client ── one method per endpoint, mcs-api types in and out
//!    │  retries 503s and transport errors (jittered backoff, Retry-After,
//!    │  a deadline); never a 4xx; errors are kinds (Error, Conflict)
//!    ├── watch::<PoolList>(token) ─▶ Watch: first complete list, then each change
//!    ├── watch_changes::<L>(token) ─▶ the same, as a list, then what changed
//!    └── keep(Registration)        ─▶ LeaseHandle: renewals, Lost/Regained, withdraw
//!  transport: hyper + rustls on aws-lc-rs; CA bundle and client identity
//!  reloaded when their files change; plain http only when asked for
//! ```
//!
//! ```no_run
//! use mcs_client::{Client, ClientConfig, Registration, TlsFiles};
//! use mcs_api::PoolList;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn example(pool: mcs_api::PoolRegistration) -> Result<(), mcs_client::Error> {
//! let mut config = ClientConfig::new("https://registry.example:8080");
//! config.tls = Some(TlsFiles {
//!     ca_bundle: "/etc/mcs/ca.crt".into(),
//!     client_identity: Some(("/etc/mcs/tls.crt".into(), "/etc/mcs/tls.key".into())),
//! });
//! let client = Client::new(config)?;
//!
//! // Hold a pool's lease until shutdown.
//! let mut lease = client.keep(Registration::Pool(pool)).await?;
//!
//! // Follow the pools: the first complete list, then every change.
//! let stop = CancellationToken::new();
//! let mut pools = client.watch::<PoolList>(stop.clone());
//! while let Some(list) = pools.next().await {
//!     let list = list?;
//!     println!("{} pools, complete: {}", list.pools.len(), list.complete);
//!     # break;
//! }
//! stop.cancel();
//! lease.shutdown().await?; // withdraws the pool
//! # Ok(())
//! # }
//! ```

mod backoff;
mod client;
mod config;
mod error;
pub mod keeper;
mod stream;
mod tls;
pub mod watch;

pub use backoff::{Attempts, Backoff};
pub use client::Client;
pub use config::{ClientConfig, TlsFiles, WriteFence};
pub use error::{Conflict, Error};
pub use keeper::{LeaseEvent, LeaseHandle, Registration};
pub use tokio_util::sync::CancellationToken;
pub use watch::{Changes, Update, Watch};

/// A section's list envelope (`PoolList`, `RouterList`, `ClusterList`,
/// `ExportList`, `ImportList`), for [`Client::list`] and [`Client::watch`].
pub trait Section: serde::de::DeserializeOwned + Send + 'static {
    /// The path segment after `/v1/`.
    const PATH: &'static str;
    /// Whether the registry served the list as complete.
    fn complete(&self) -> bool;
    /// The list's fingerprint (its `ETag` without quotes or suffix).
    fn fingerprint(&self) -> &str;
    /// One item of the list, as an event stream carries it.
    type Item: serde::de::DeserializeOwned + Clone + Send + Sync + 'static;
    /// The list of `items` (in key order), as the registry would serve it.
    fn assemble(items: Vec<Self::Item>, complete: bool, fingerprint: String) -> Self;
}
