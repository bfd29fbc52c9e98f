//! mcs-controller: the Kubernetes half of Multi-Cluster Services.
//!
//! ```text
//!  ServiceExport + Service + EndpointSlices ──export reconciler──▶ registry (PUT export)
//!  registry imports (watch) ──importer──▶ ServiceImport + derived Service + EndpointSlices
//!  cluster lease held through mcs-client's keeper; leader election on a Lease
//! ```
//!
//! See docs/design.md §13.

pub mod autoexport;
pub mod config;
pub mod context;
pub mod coredns;
pub mod crd;
pub mod export;
pub mod fence;
pub mod health;
pub mod identity;
pub mod import;
pub mod leader;
pub mod metadata;
pub mod metrics;
mod pace;
pub mod plugin;
pub mod rbac;
pub mod registration;
pub mod run;
#[path = "../../shared_cli.rs"]
mod shared_cli;
#[path = "../../shared_kube.rs"]
mod shared_kube;
#[path = "../../shared_metrics.rs"]
mod shared_metrics;
pub mod watch;

pub use context::{Context, FIELD_MANAGER, MANAGED_BY, Settings};
