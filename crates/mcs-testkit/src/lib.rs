//! What the tests (and the benchmarks) of mcs-registry share, so that each
//! concept is written once:
//!
//! ```text
//!  process      RegistryProcess: the real binary on free loopback ports, ready
//!  upload       post_oversized: an upload past the body limit, as a plain client sends it
//!  dynamo       the endpoint rule, unique tables, the SDK config and clients
//!  moto         a moto_server of a test's own (the venv scripts/with-moto.sh makes)
//!  eventually   polling until a condition holds
//!  fake         FakeRegistry: the real router in-process, with faults (feature `fake`)
//!  pki          Ca, Leaf, TestPki: CAs, server and SPIFFE client certificates from rcgen (feature `pki`)
//!  fixtures     JSON bodies of pools, routers and exports
//!  k8s          K8sEnv: a real kube-apiserver per test via scripts/k8s-env (feature `k8s`)
//!  metrics      an in-memory `metrics` recorder
//!  net          RefusedPort: a loopback port that refuses connections while held
//!  multiregion  regional tables, a replicator between them, a registry per region
//! ```
//!
//! `publish = false`: a dev-dependency of the crates whose tests use it
//! (and a dependency of `mcs-bench`).

pub mod dynamo;
mod eventually;
#[cfg(feature = "fake")]
pub mod fake;
pub mod fixtures;
#[cfg(feature = "k8s")]
pub mod k8s;
pub mod metrics;
pub mod moto;
pub mod multiregion;
pub mod net;
#[cfg(feature = "pki")]
pub mod pki;
pub mod process;
pub mod upload;

pub use eventually::eventually;
pub use process::RegistryProcess;
