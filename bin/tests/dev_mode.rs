//! `cloud-controller-manager --dev` started as a process, checked from outside with a real
//! `kube::Client` built from the kubeconfig it writes — what the README promises a newcomer.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

const WAIT: Duration = Duration::from_secs(60);

struct Manager {
    child: Child,
    kubeconfig: PathBuf,
    admin_port: u16,
    _dir: TempDir,
}

/// A directory removed on drop (std has no tempdir).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Manager {
    fn start(extra: &[&str]) -> Manager {
        let dir =
            std::env::temp_dir().join(format!("ccm-dev-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let admin_port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
            .arg("--dev")
            .arg(format!("--dev-kubeconfig={}", kubeconfig.display()))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={admin_port}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Manager {
            child,
            kubeconfig,
            admin_port,
            _dir: TempDir(dir),
        }
    }

    async fn client(&self) -> kube::Client {
        wait_for("the kubeconfig file", || self.kubeconfig.exists()).await;
        client_from(&self.kubeconfig).await
    }

    /// SIGTERM, then the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "manager did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    async fn healthz_verbose(&self) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.admin_port))
            .await
            .unwrap();
        stream
            .write_all(
                b"GET /healthz?verbose HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).await.unwrap();
        body
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn client_from(path: &Path) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn nodes_initialized(nodes: &Api<Node>) -> bool {
    let Ok(list) = nodes.list(&Default::default()).await else {
        return false;
    };
    list.items.len() == 3
        && list.items.iter().all(|n| {
            let spec = n.spec.clone().unwrap_or_default();
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let addresses = n
                .status
                .as_ref()
                .and_then(|s| s.addresses.clone())
                .unwrap_or_default();
            spec.provider_id.is_some_and(|p| p.starts_with("fake://"))
                && !spec
                    .taints
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
                && labels.contains_key("topology.kubernetes.io/zone")
                && labels.contains_key("node.kubernetes.io/instance-type")
                && addresses.iter().any(|a| a.type_ == "ExternalIP")
        })
}

async fn ingress_ip(services: &Api<Service>) -> Option<String> {
    let svc = services.get("hello").await.ok()?;
    svc.status?.load_balancer?.ingress?.first()?.ip.clone()
}

async fn eventually_async<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn dev_mode_initializes_nodes_and_gives_the_service_an_ingress_ip() {
    let manager = Manager::start(&[]);
    let client = manager.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    eventually_async("three initialized nodes", || nodes_initialized(&nodes)).await;
    eventually_async("an ingress IP on default/hello", || async {
        ingress_ip(&services).await.is_some()
    })
    .await;
    let ip = ingress_ip(&services).await.unwrap();
    assert!(
        ip.starts_with("203.0.113."),
        "IP from the dev pool, got {ip}"
    );
    eventually_async("routes reported on every node", || async {
        nodes.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().all(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter().any(|c| {
                            c.type_ == "NetworkUnavailable"
                                && c.status == "False"
                                && c.reason.as_deref() == Some("RouteCreated")
                        })
                    })
            })
        })
    })
    .await;
    let health = manager.healthz_verbose().await;
    for check in [
        "[+]leaderElection ok",
        "[+]cloud-node-controller ok",
        "[+]cloud-node-lifecycle-controller ok",
        "[+]service-lb-controller ok",
        "[+]node-route-controller ok",
    ] {
        assert!(health.contains(check), "missing {check} in:\n{health}");
    }
    let status = manager.stop();
    assert!(status.success(), "SIGTERM is a clean exit, got {status:?}");
}

#[tokio::test]
async fn controllers_flag_runs_exactly_the_named_controllers() {
    let manager = Manager::start(&["--controllers=cloud-node,service"]);
    let client = manager.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    eventually_async("three initialized nodes", || nodes_initialized(&nodes)).await;
    eventually_async("an ingress IP", || async {
        ingress_ip(&services).await.is_some()
    })
    .await;

    let health = manager.healthz_verbose().await;
    assert!(health.contains("[+]cloud-node-controller ok"), "{health}");
    assert!(health.contains("[+]service-lb-controller ok"), "{health}");
    assert!(!health.contains("node-route-controller"), "{health}");
    assert!(
        !health.contains("cloud-node-lifecycle-controller"),
        "{health}"
    );
    // The route controller never ran: nobody wrote the NetworkUnavailable condition.
    let list = nodes.list(&Default::default()).await.unwrap();
    assert!(list.items.iter().all(|n| {
        !n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "NetworkUnavailable"))
    }));
    assert!(manager.stop().success());
}

/// `--dev` runs against its own API server and the fake cloud: a cluster or config named beside
/// it would be ignored, so it is refused with the flags named, before anything starts.
#[test]
fn dev_refuses_the_flags_it_would_ignore() {
    let out = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args([
            "--dev",
            "--cloud-config=/nonexistent",
            "--kubeconfig=/nonexistent",
            "--master=https://10.0.0.1",
        ])
        .output()
        .expect("binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for flag in ["--cloud-config", "--kubeconfig", "--master"] {
        assert!(
            err.contains(&format!("{flag} cannot be used with --dev")),
            "{flag}: {err}"
        );
    }
    assert!(
        err.contains("3 invalid flag value(s); nothing was started"),
        "{err}"
    );
}
