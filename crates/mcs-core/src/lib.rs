//! The domain core of mcs-registry: records, merge rules, leases and the
//! fingerprinted view. Pure: no I/O, no async runtime, no clock of its own
//! (every rule takes `now_ms`), so every rule is tested without a server.
//!
//! ```text
//!  Registrar ── Record ──► rules::decide ──► Store (conditional write)
//!                                               │
//!  Reader ◄── Records (delta or full read) ◄────┘
//!     │
//!     └─► View::apply / View::advance ──► sections (pools, routers, clusters,
//!                                          exports, imports) + fingerprints,
//!                                          each named by a SectionKind
//! ```

pub mod expiry;
pub mod fingerprint;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod hlc;
pub mod imports;
pub mod lease;
pub mod record;
pub mod rules;
pub mod section;
pub mod view;
pub mod write;

pub use expiry::{ExpiryGuard, HoldPolicy, LeaseCounts, Verdict};
pub use fingerprint::{Fingerprint, Section};
pub use hlc::Hlc;
pub use lease::LeasePolicy;
pub use record::{Body, ChangeStamp, Key, Kind, LeaseEnd, LeaseTerms, Record, Version};
pub use rules::{WriteDecision, decide};
pub use section::{SectionKind, Served, ServedItem};
pub use view::View;
pub use write::{PlannedWrite, Refusal, WithdrawalPlan, plan_withdrawal};
