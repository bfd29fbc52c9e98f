//! Pool discovery from Kubernetes (`--pool-discovery mcs|karmada`,
//! docs/design.md §14): the pools and router replicas served are derived
//! from the EndpointSlices a Multi-Cluster Services implementation imports
//! into this cluster, instead of from registrations.
//!
//! ```text
//!  EndpointSlices ─watch─┐
//!  ServiceImports ─watch─┼─► derive (pure) ─► LiveView::replace_discovered ─► GET /v1/pools, /v1/routers
//!   (mcs only, metadata) │
//!  list/watch errors ────┴─► Health ─► complete: false after the error window
//! ```

pub mod derive;
pub mod health;
pub mod watch;

pub use derive::{Derived, Rules, derive};

/// What pool discovery asks of the API server, as ClusterRole rules
/// `(API group, resource, verbs)`: read-only, lists and watches only
/// (ServiceImports only under `--pool-discovery mcs`). docs/design.md §14;
/// the tests run the registry under exactly these.
pub const RBAC_RULES: [(&str, &str, &[&str]); 2] = [
    ("discovery.k8s.io", "endpointslices", &["list", "watch"]),
    ("multicluster.x-k8s.io", "serviceimports", &["list", "watch"]),
];
