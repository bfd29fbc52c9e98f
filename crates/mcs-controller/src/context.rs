//! What every part of a running controller shares: the Kubernetes and
//! registry clients, the cluster's identity and the settings.

use mcs_api::{Incarnation, Label};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio::sync::watch;

/// The controller's name: the value of `endpointslice.kubernetes.io/managed-by`
/// on the slices it writes and of `app.kubernetes.io/managed-by` on the other
/// objects it creates; what it finds by to delete.
pub const MANAGED_BY: &str = "mcs-controller.mcs-registry.io";
/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "mcs-controller";

/// The shared state of a running controller.
#[derive(Clone)]
pub struct Context {
    /// The cluster's API server; its writes are fenced by the leadership
    /// term ([`crate::fence`]).
    pub kube: kube::Client,
    /// The registry; its writes are fenced likewise.
    pub registry: mcs_client::Client,
    /// This cluster's id (docs/design.md §13).
    pub cluster_id: Label,
    /// The incarnation holding the cluster's lease.
    pub incarnation: Incarnation,
    /// The settings from the flags.
    pub settings: Settings,
    /// Bumped each time the cluster (re-)registers: exports are re-sent then.
    pub registrations: watch::Receiver<u64>,
    /// The cluster lease's duration in seconds as the registry last granted
    /// it; 0 before the first registration.
    pub cluster_lease_secs: Arc<AtomicU64>,
    /// When a renewal of the cluster's lease last found it held as the
    /// keeper left it (`mcs_client::LeaseHandle::last_continued`): a list
    /// read before then came from a registry that had not lost its state.
    pub continued_renewal: watch::Receiver<Option<tokio::time::Instant>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster_id", &self.cluster_id)
            .field("incarnation", &self.incarnation)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// The controller's settings that its parts read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Period of the full reconcile of exports and imports (jittered).
    pub resync_interval: Duration,
    /// Label selector of the Services exported automatically; `None` turns
    /// auto-export off.
    pub auto_export_selector: Option<String>,
    /// Endpoints per imported EndpointSlice (at most 1000).
    pub max_endpoints_per_slice: usize,
    /// How long a mass removal of imports is held back; `None`: the
    /// cluster's lease as granted (docs/design.md §13).
    pub removal_hold: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            resync_interval: Duration::from_secs(300),
            auto_export_selector: None,
            max_endpoints_per_slice: 100,
            removal_hold: None,
        }
    }
}
