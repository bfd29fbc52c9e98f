//! The process's stop signal as every long-running task waits on it (the
//! listeners, connections, watches, the discovery watch and the TLS
//! reloader): a floor below all of them and the server that sends it.

use tokio::sync::watch;

/// Resolves once `stop` turns true (or its sender is gone).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: drop it here, not across
    // an await of the caller.
    let _ = stop.wait_for(|stopping| *stopping).await;
}
