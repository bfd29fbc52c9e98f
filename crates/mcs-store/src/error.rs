//! Store error kinds: what a caller can branch on.

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend cannot be reached or refuses service for now (network,
    /// throttling past retries, 5xx). Retry later; nothing was half-written.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The table is missing, unmigrated or at an older schema version.
    #[error("storage schema: {0}")]
    Schema(String),
    /// The table's schema is newer than this binary knows, and not one
    /// additive migration ahead of it: a newer binary migrated it. Nothing
    /// was changed; upgrade this binary.
    #[error(
        "storage schema version {found} is newer than this binary knows ({known}) and not one \
         additive migration ahead of it: upgrade this binary"
    )]
    SchemaTooNew {
        /// The version the table records.
        found: u32,
        /// The newest version this binary knows.
        known: u32,
    },
    /// An item could not be encoded or decoded.
    #[error("storage item: {0}")]
    Corrupt(String),
    /// Anything else the backend reported.
    #[error("storage: {0}")]
    Other(String),
}

impl StoreError {
    /// Whether retrying later can succeed.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}
