//! Writes only while leading: the leader's clients refuse to send a write
//! once its [`LeaderGuard`] says the term is over (docs/design.md §13).
//!
//! ```text
//!  export / import / auto-export ── kube::Client (fenced) ── GET: always
//!                                                          └─ other verbs: LeaderGuard::check, else refused unsent
//!  export / registration ── mcs_client::Client (write_fence = LeaderGuard)
//!  leader election ── its own kube::Client, not fenced (it writes the Lease to lead)
//! ```
//!
//! Fencing the clients rather than each call site means no write path can
//! forget the check, including ones added later.

use crate::leader::LeaderGuard;
use http::{Method, Request};
use kube::client::{Body, ClientBuilder};

/// A Kubernetes client for `config` whose requests other than reads
/// (`GET`, `HEAD`: gets, lists, watches) fail unsent, with
/// [`crate::leader::NotLeader`] as the cause, while `guard` refuses.
pub fn kube_client(config: kube::Config, guard: LeaderGuard) -> kube::Result<kube::Client> {
    let layer = tower::filter::FilterLayer::new(move |request: Request<Body>| {
        if matches!(*request.method(), Method::GET | Method::HEAD) {
            return Ok(request);
        }
        guard.check().map(|()| request)
    });
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::NotLeader;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, PostParams};
    use std::time::{Duration, Instant};

    /// A client of an address nothing listens on: a request that is sent
    /// fails to connect, one the fence refuses fails with `NotLeader`.
    fn client(guard: LeaderGuard) -> kube::Client {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        kube_client(config, guard).unwrap()
    }

    fn not_leader(error: &kube::Error) -> Option<NotLeader> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = source {
            if let Some(n) = e.downcast_ref::<NotLeader>() {
                return Some(n.clone());
            }
            source = e.source();
        }
        None
    }

    #[tokio::test]
    async fn writes_fail_unsent_once_the_term_is_over_and_reads_go_on() {
        let guard = LeaderGuard::new(Instant::now(), Duration::from_secs(60));
        let leases: Api<Lease> = Api::namespaced(client(guard.clone()), "ns");
        let lease = Lease {
            metadata: kube::api::ObjectMeta { name: Some("l".into()), ..Default::default() },
            spec: None,
        };
        // While leading, the write is sent (and finds nothing listening).
        let sent = leases.create(&PostParams::default(), &lease).await.unwrap_err();
        assert_eq!(not_leader(&sent), None, "{sent:?}");
        guard.end();
        let refused = leases.create(&PostParams::default(), &lease).await.unwrap_err();
        assert_eq!(not_leader(&refused), Some(NotLeader::Ended), "{refused:?}");
        let refused = leases.delete("l", &Default::default()).await.unwrap_err();
        assert_eq!(not_leader(&refused), Some(NotLeader::Ended), "{refused:?}");
        let read = leases.get("l").await.unwrap_err();
        assert_eq!(not_leader(&read), None, "reads are not fenced: {read:?}");
    }
}
