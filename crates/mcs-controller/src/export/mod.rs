//! The export side: ServiceExports (with their Services and EndpointSlices)
//! sent to the registry, their conditions, and auto-export.
//! See docs/design.md §13.

pub mod build;
pub mod caches;
pub mod conditions;
pub mod reconciler;
pub mod slice_index;
pub mod state;
pub mod tombstones;

pub use reconciler::FINALIZER;

use crate::Context;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Runs the export reconciler and, when `settings.auto_export_selector`
/// is set, auto-export, until `cancel`. Stopping withdraws nothing.
pub async fn run(ctx: Arc<Context>, cancel: CancellationToken) -> anyhow::Result<()> {
    let selector = match &ctx.settings.auto_export_selector {
        Some(text) => Some(
            crate::autoexport::parse_selector(text)
                .map_err(|e| anyhow::anyhow!("--auto-export-selector: {e}"))?,
        ),
        None => None,
    };
    // One part failing stops the other, not the caller's other tasks.
    let stop = cancel.child_token();
    let exporter = reconciler::run(ctx.clone(), stop.clone());
    match selector {
        Some(selector) => {
            let auto = crate::autoexport::run(ctx, selector, stop.clone());
            let result = tokio::try_join!(exporter, auto);
            stop.cancel();
            result.map(|_| ())
        }
        None => exporter.await,
    }
}
