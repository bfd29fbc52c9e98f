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
