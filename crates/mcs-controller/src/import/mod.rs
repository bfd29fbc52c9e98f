//! The importer.

pub mod diff;
pub mod plan;
