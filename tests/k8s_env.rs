//! scripts/k8s-env through the test kit: a real API server starts, answers
//! as cluster-admin and, under a ServiceAccount, as RBAC decides; the audit
//! log records that account's requests; dropping the environment stops
//! every process it started.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams};
use mcs_testkit::k8s::{K8sEnv, client_of};

#[tokio::test]
async fn an_environment_serves_rbac_audits_and_stops_on_drop() {
    let Some(env) = K8sEnv::start("kit").await else { return };
    let admin = env.client().await;
    let version = admin.apiserver_version().await.expect("version");
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "37"));
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let names: Vec<_> = namespaces
        .list(&ListParams::default())
        .await
        .expect("namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.iter().any(|n| n == "kube-system"), "{names:?}");

    // A ServiceAccount with no role may not read secrets, and says so.
    let kubeconfig = env.service_account_kubeconfig("rbac-test", "nobody").await;
    let nobody = client_of(&kubeconfig).await.expect("client");
    let secrets: Api<Secret> = Api::namespaced(nobody, "rbac-test");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("expected 403, got {other:?}"),
    }
    let audit = std::fs::read_to_string(env.audit_log()).expect("audit log");
    assert!(
        audit.lines().any(|l| l.contains("system:serviceaccount:rbac-test:nobody")
            && l.contains(r#""resource":"secrets""#)),
        "the denied list is audited"
    );

    let pids: Vec<i32> = std::fs::read_to_string(env.dir().join("pids"))
        .expect("pids")
        .lines()
        .map(|l| l.parse().expect("pid"))
        .collect();
    assert_eq!(pids.len(), 3, "etcd, kube-apiserver, kube-controller-manager");
    let dir = env.dir().to_owned();
    drop(env);
    for pid in pids {
        // Gone, or a zombie waiting for its reaper.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = state.rsplit(") ").next().and_then(|s| s.chars().next());
        assert!(matches!(state, None | Some('Z' | 'X')), "{pid} still runs: {state:?}");
    }
    assert!(!dir.exists());
}

/// A free port taken between its choice and the API server's bind (another
/// process's outgoing connection draws from the same range) made `up` fail:
/// "kube-apiserver exited … bind: address already in use", seen as a
/// controller test that failed to start its cluster. `up` now starts again
/// on other ports. Here the first attempt's port is one this test holds.
#[tokio::test]
async fn a_taken_port_makes_up_start_again_on_another() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let port = busy.local_addr().expect("its address").port().to_string();
    let Some(env) = K8sEnv::start_with("busy", &[("MCS_K8S_ENV_FIRST_API_PORT", &port)]).await
    else {
        return;
    };
    let kubeconfig = std::fs::read_to_string(env.kubeconfig()).expect("kubeconfig");
    let server = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("server: "));
    let server = server.expect("a server in the kubeconfig");
    assert!(!server.ends_with(&format!(":{port}")), "{server} is the port held");
    let log = std::fs::read_to_string(env.dir().join("kube-apiserver.log")).expect("its log");
    assert!(!log.contains("address already in use"), "the log is the second attempt's");
    let version = env.client().await.apiserver_version().await.expect("version");
    assert_eq!(version.major, "1");
}

/// `down` signals only the processes of its cluster. It signalled every
/// PID in DIR/pids, and one whose process had exited early could belong
/// to another process since (PIDs wrap within a test run here): that
/// process was killed. Here the file names a process of this test's, with
/// nothing of the directory in its arguments, beside one that has.
#[test]
fn down_spares_a_process_that_is_not_its_clusters() {
    let dir = std::env::temp_dir().join(mcs_testkit::dynamo::unique_name("mcs-k8s-down"));
    std::fs::create_dir_all(&dir).expect("a directory");
    let log = dir.join("etcd.log");
    std::fs::write(&log, "").expect("a log");
    let spawn = |program: &str, args: &[&std::ffi::OsStr]| {
        std::process::Command::new(program).args(args).spawn().expect(program)
    };
    let mut ours = spawn("tail", &["-f".as_ref(), log.as_os_str()]);
    let mut other = spawn("sleep", &["300".as_ref()]);
    std::fs::write(dir.join("pids"), format!("{}\n{}\n", ours.id(), other.id())).expect("pids");

    let down = std::process::Command::new(mcs_testkit::k8s::script())
        .arg("down")
        .arg(&dir)
        .status()
        .expect("k8s-env down");
    assert!(down.success(), "{down}");
    let other_runs = matches!(other.try_wait(), Ok(None));
    // `down` returns once its processes are gone: no wait here.
    let ours_ended = ours.try_wait().expect("wait");
    let _ = (other.kill(), ours.kill());
    assert!(other_runs, "down killed a process that is not its cluster's");
    let ours_ended = ours_ended.expect("down left its cluster's process running");
    assert!(ours_ended.code().is_none(), "its cluster's process was signalled: {ours_ended}");
    assert!(!dir.join("pids").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
