//! Store error kinds: what a caller can branch on.

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend cannot be reached or refuses service for now (network,
    /// throttling past retries, 5xx). Retry later; nothing was half-written.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The table is unmigrated or at an older schema version, or missing
    /// when a migration looks for it.
    #[error("storage schema: {0}")]
    Schema(String),
    /// The table, or an index a call uses, does not exist: never created,
    /// or deleted under a running process. Nothing was written; calls can
    /// succeed once it is created again (`mcs-admin migrate --create`).
    /// The message names the table, its region and endpoint.
    #[error("storage table missing: {0}")]
    Missing(String),
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
    /// The record's item would be over [`MAX_ITEM_BYTES`](crate::MAX_ITEM_BYTES)
    /// (DynamoDB's item limit, enforced alike by every store). Nothing was
    /// written; the same record will always be refused.
    #[error("the stored item would be {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The item's size by the rule of [`record_item_size`](crate::record_item_size).
        size: usize,
        /// The limit.
        limit: usize,
        /// The payload's largest field (`endpoints`, `annotations`, ...), if any.
        field: Option<String>,
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
