//! The export side: ServiceExports (with their Services and EndpointSlices)
//! sent to the registry, their conditions, and auto-export.
//! See docs/design.md §13.

pub mod build;
pub mod conditions;
