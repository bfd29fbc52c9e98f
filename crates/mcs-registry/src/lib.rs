//! mcs-registry: the registry server of docs/design.md §4–§7 and §14.
//!
//! ```text
//!  HTTP (http) ──► Registrar ──conditional write──► Store
//!       │              └─apply (read-your-writes)─┐
//!       ▼                                          ▼
//!  LiveView ◄──── Reader (delta polls, full reads) ◄── Store
//!     ▲
//!     └── discovery (--pool-discovery mcs|karmada): pools and routers
//!         from imported EndpointSlices (docs/design.md §14)
//! ```
//!
//! `main.rs` parses [`config::Args`] and calls [`server::run`]; everything
//! else is here so that tests can assemble a [`server::Registry`] in process.

pub mod authz;
pub mod clock;
pub mod config;
mod connection;
pub mod discovery;
pub mod events;
pub mod http;
pub mod live;
pub mod metrics;
pub mod reader;
pub mod registrar;
pub mod server;
#[path = "../../shared_cli.rs"]
mod shared_cli;
#[path = "../../shared_kube.rs"]
mod shared_kube;
#[path = "../../shared_metrics.rs"]
mod shared_metrics;
mod shutdown;
pub mod tls;

pub use server::{Registry, run};
