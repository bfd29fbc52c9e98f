//! CoreDNS for the ClusterSet DNS tests (`dns.rs`, and the deployment
//! guide's DNS section in `deployment_guide.rs`): the binary
//! `scripts/k8s-env` builds, run outside a cluster against its API server
//! under the ServiceAccount `kube-system/coredns`, and a DNS client that
//! asks it over UDP and keeps the response code, so that NXDOMAIN and an
//! empty answer stay apart.
//!
//! ```text
//!  coredns_rbac(kube)    kubeadm's role of CoreDNS (+ ServiceImports: the guide's addition)
//!  CoreDns::start(env, kubernetes block)
//!     Corefile: bind, ready, errors, log, <block + kubeconfig of kube-system/coredns>
//!     waits for /ready (every informer synced, ServiceImports included)
//!  .ask(name, type) ─► Answer { code, addresses, srv, glue }
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a failure fails the test

use crate::controller::apply;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::Api;
use mcs_testkit::k8s::{K8sEnv, tools_dir};
use serde_json::json;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// CoreDNS's ServiceAccount (in `kube-system`), as kubeadm names it.
pub const ACCOUNT: &str = "coredns";

/// The audit log's name of [`ACCOUNT`].
pub const USERNAME: &str = "system:serviceaccount:kube-system:coredns";

/// The `kubernetes` block of the tests' Corefile: both zones, the
/// clusterset one read from ServiceImports, no caching by clients.
pub const MULTICLUSTER_BLOCK: &str = "kubernetes cluster.local clusterset.local {\n    \
                                      multicluster clusterset.local\n    ttl 0\n}";

/// The Corefile kubeadm writes into ConfigMap `kube-system/coredns`, which
/// docs/deployment.md's DNS section and the controller chart edit.
pub use mcs_controller::coredns::corefile::KUBEADM_COREFILE;

/// The `kubernetes { … }` block of `corefile`, braces included, or `None`.
pub fn kubernetes_block(corefile: &str) -> Option<String> {
    let start = corefile.find("kubernetes ")?;
    let mut depth = 0usize;
    for (i, c) in corefile[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(corefile[start..=start + i].to_owned());
                }
            }
            _ => {}
        }
    }
    None
}

/// Binds [`ACCOUNT`] to what kubeadm's `system:coredns` ClusterRole grants
/// (Services, Endpoints, EndpointSlices, Namespaces, Pods: list and
/// watch), and with `serviceimports` to ServiceImports too (the grant
/// docs/deployment.md adds).
pub async fn coredns_rbac(kube: &kube::Client, serviceimports: bool) {
    let mut rules = vec![
        json!({"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]}),
        json!({"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}),
    ];
    let name = if serviceimports {
        rules.push(json!({"apiGroups": ["multicluster.x-k8s.io"], "resources": ["serviceimports"], "verbs": ["list", "watch"]}));
        "mcs-tests-coredns-clusterset"
    } else {
        "system:coredns"
    };
    let role: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap();
    apply(&Api::all(kube.clone()), &role).await;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "kube-system"}],
    }))
    .unwrap();
    apply(&Api::all(kube.clone()), &binding).await;
}

/// A CoreDNS process serving one cluster's names on loopback.
#[derive(Debug)]
pub struct CoreDns {
    _child: Child,
    name: String,
    dns: SocketAddr,
    log: PathBuf,
}

impl CoreDns {
    /// Starts CoreDNS for `env` with the `kubernetes` block `block` (a
    /// `kubeconfig` line of [`ACCOUNT`] added: outside the cluster), and
    /// waits until its `ready` plugin says every informer has synced.
    pub async fn start(env: &K8sEnv, block: &str) -> Self {
        let kubeconfig = env.service_account_kubeconfig("kube-system", ACCOUNT).await;
        let (open, rest) = block.split_once('{').expect("a kubernetes block");
        let block = format!("{open}{{\n    kubeconfig {}{rest}", kubeconfig.display());
        let dns_port = free_port();
        let ready_port = free_port();
        let corefile = env.dir().join("Corefile");
        std::fs::write(
            &corefile,
            format!(
                ".:{dns_port} {{\n    bind 127.0.0.1\n    ready 127.0.0.1:{ready_port}\n    \
                 errors\n    log\n{block}\n}}\n"
            ),
        )
        .unwrap();
        let log = env.dir().join("coredns.log");
        let out = std::fs::File::create(&log).unwrap();
        let binary = tools_dir().join("coredns");
        let child = Command::new(&binary)
            .arg("-conf")
            .arg(&corefile)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let coredns = Self {
            _child: child,
            name: env.name().to_owned(),
            dns: ([127, 0, 0, 1], dns_port).into(),
            log,
        };
        let ready = format!("http://127.0.0.1:{ready_port}/ready");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(reply) = http.get(&ready).send().await
                && reply.status().is_success()
            {
                return coredns;
            }
            assert!(
                Instant::now() < deadline,
                "CoreDNS of {} not ready within 60 s; its Corefile:\n{}\nits log:\n{}",
                coredns.name,
                std::fs::read_to_string(&corefile).unwrap_or_default(),
                coredns.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// What CoreDNS has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Asks for `name`'s records of `kind`, once, over UDP.
    pub async fn ask(&self, name: &str, kind: RecordType) -> Answer {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut query = Message::query();
        query.add_query(Query::query(Name::from_ascii(name).unwrap(), kind));
        socket.send_to(&query.to_vec().unwrap(), self.dns).await.unwrap();
        let mut buffer = vec![0; 65_535];
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buffer))
            .await
            .unwrap_or_else(|_| panic!("no answer to {name} {kind} within 5 s:\n{}", self.log()))
            .unwrap();
        let reply = Message::from_vec(&buffer[..n]).unwrap();
        assert!(!reply.metadata.truncation, "{name} {kind}: truncated");
        Answer::of(&reply)
    }

    /// Asks until `check` accepts the answer, for `within`; the answer.
    pub async fn until(
        &self,
        name: &str,
        kind: RecordType,
        within: Duration,
        what: &str,
        check: impl Fn(&Answer) -> bool,
    ) -> Answer {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.ask(name, kind).await;
            if check(&answer) {
                return answer;
            }
            assert!(
                Instant::now() < deadline,
                "{}: {name} {kind}: not {what} within {within:?}; last answer {answer:?}; \
                 CoreDNS log:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A response, in the forms the tests compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The response code.
    pub code: ResponseCode,
    /// The A and AAAA answers' addresses.
    pub addresses: BTreeSet<String>,
    /// The SRV answers: port and target.
    pub srv: BTreeSet<(u16, String)>,
    /// The additional section's A and AAAA records: name and address.
    pub glue: BTreeSet<(String, String)>,
}

impl Answer {
    fn of(reply: &Message) -> Self {
        let address = |data: &RData| match data {
            RData::A(a) => Some(a.0.to_string()),
            RData::AAAA(a) => Some(a.0.to_string()),
            _ => None,
        };
        Self {
            code: reply.metadata.response_code,
            addresses: reply.answers.iter().filter_map(|r| address(&r.data)).collect(),
            srv: reply
                .answers
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(s) => Some((s.port, s.target.to_ascii())),
                    _ => None,
                })
                .collect(),
            glue: reply
                .additionals
                .iter()
                .filter_map(|r| Some((r.name.to_ascii(), address(&r.data)?)))
                .collect(),
        }
    }

    /// Whether the name does not exist.
    pub fn nxdomain(&self) -> bool {
        self.code == ResponseCode::NXDomain
    }

    /// Whether the answer is exactly `addresses`.
    pub fn has(&self, addresses: &[&str]) -> bool {
        self.code == ResponseCode::NoError
            && self.addresses == addresses.iter().map(|s| (*s).to_owned()).collect()
    }
}

fn free_port() -> u16 {
    // Free for TCP now; CoreDNS binds UDP and TCP and, should either be
    // taken, fails loudly (its log, in the readiness panic).
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_block_is_found_with_its_nested_braces() {
        let block = kubernetes_block(KUBEADM_COREFILE).unwrap();
        assert!(block.starts_with("kubernetes cluster.local in-addr.arpa ip6.arpa {"));
        assert!(block.ends_with("ttl 30\n    }"), "{block}");
        let nested = "x {\n kubernetes a {\n  b {\n  }\n }\n prometheus\n}";
        assert_eq!(kubernetes_block(nested).unwrap(), "kubernetes a {\n  b {\n  }\n }");
        assert_eq!(kubernetes_block("kubernetes a {"), None);
        assert_eq!(kubernetes_block("forward . /etc/resolv.conf"), None);
    }
}
