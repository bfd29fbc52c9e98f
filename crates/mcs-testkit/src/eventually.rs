//! Waiting for a condition the system reaches by itself.

use std::time::Duration;
use tokio::time::Instant;

/// Polls `check` every 20 ms until it holds; how long that took, or a panic
/// naming `what` after `within`.
pub async fn eventually<F: AsyncFnMut() -> bool>(
    within: Duration,
    what: &str,
    mut check: F,
) -> Duration {
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
