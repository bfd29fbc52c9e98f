//! The pace of the controllers' loops: jittered intervals, periodic ticks,
//! and draining a controller's stream of results. A floor below the
//! exporter, the auto-exporter and the importer, which all use it.

use futures::StreamExt;
use std::time::Duration;

/// `base` scaled by a random factor in [0.9, 1.1).
pub(crate) fn jittered(base: Duration) -> Duration {
    base.mul_f64(0.9 + fastrand::f64() * 0.2)
}

/// A tick every `interval` ± 10 %, for the periodic resyncs.
pub(crate) fn ticks(interval: Duration) -> impl futures::Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(jittered(interval)).await;
        Some(((), ()))
    })
}

/// Runs a controller's stream to its end, logging what it reports.
pub(crate) async fn drain<T, E: std::fmt::Display>(
    results: impl futures::Stream<Item = Result<T, E>>,
    controller: &'static str,
) {
    results
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, controller, "controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(100));
            assert!(d >= Duration::from_secs(90) && d < Duration::from_secs(110), "{d:?}");
        }
    }
}
