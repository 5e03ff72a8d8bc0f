//! A start-up error that appears only after the Lease is won ends the process (issue 13), as
//! upstream's `klog.Fatalf` does: the real binary against kube-testenv, the fake cloud (which has
//! routes) and an empty `--cluster-cidr`, so the route controller's initializer fails.
//!
//! With leader election on, replica A wins the Lease, starts its first controllers (slowly, with
//! `--controller-start-interval`, so a standby B is waiting by then), fails on the route
//! controller, gives the Lease up and exits non-zero with the error as its last log line; B,
//! configured without routes, takes over within the lease duration. Without leader election the
//! process exits the same way.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_testenv::TestEnv;
use parking_lot::Mutex;

const LEASE_NS: &str = "kube-system";
const LEASE: &str = "cloud-controller-manager";
/// The lease duration both replicas use.
const LEASE_DURATION: Duration = Duration::from_secs(4);
/// Generous: the binary is a debug build and the machine is shared.
const START: Duration = Duration::from_secs(90);

/// The binary, its stderr (where it logs) collected line by line; killed when dropped.
struct Binary {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Binary {
    fn start(kubeconfig: &Path, extra: &[&str]) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
            .arg("--cloud-provider=fake")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--secure-port=0")
            .arg("--leader-elect-lease-duration=4s")
            .arg("--leader-elect-renew-deadline=3s")
            .arg("--leader-elect-retry-period=500ms")
            .args(extra)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("binary starts");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        // A plain thread: the pipe is blocking and must keep draining.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().push(line);
            }
        });
        Binary { child, log }
    }

    /// Waits for the process to exit; `None` if it is still running after `within`.
    async fn exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader thread take the last lines out of the pipe.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    fn logged(&self, what: &str) -> bool {
        self.log.lock().iter().any(|l| l.contains(what))
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kubeconfig(env: &TestEnv, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccm-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kube_testenv::kubeconfig_yaml(&env.url())).expect("write kubeconfig");
    path
}

async fn lease(env: &TestEnv) -> Option<Lease> {
    Api::<Lease>::namespaced(env.client(), LEASE_NS)
        .get_opt(LEASE)
        .await
        .expect("read lease")
}

fn holder_of(lease: &Option<Lease>) -> Option<String> {
    lease
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

async fn wait_holder(env: &TestEnv, not: Option<&str>, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        if let Some(h) = holder_of(&lease(env).await)
            && Some(h.as_str()) != not
        {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "no holder other than {not:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The assertions both variants share: a failure exit whose last log line names the error.
fn assert_failed_with_the_error(status: ExitStatus, log: &[String]) {
    assert!(
        !status.success(),
        "exit status {status}; log:\n{}",
        log.join("\n")
    );
    let last = log.last().map(String::as_str).unwrap_or_default();
    for says in ["node-route-controller", "--cluster-cidr"] {
        assert!(
            last.contains(says),
            "last log line does not name the error ({says:?}): {last:?}\nlog:\n{}",
            log.join("\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_controller_cannot_start_exits_and_the_standby_takes_over() {
    let env = TestEnv::start().await.expect("testenv");
    let kubeconfig = kubeconfig(&env, "start-up-error");
    // 1–2 s of jittered pause after each of the three controllers before the route controller.
    let mut a = Binary::start(&kubeconfig, &["--controller-start-interval=1s"]);
    let a_id = wait_holder(&env, None, START).await;
    let mut b = Binary::start(&kubeconfig, &["--configure-cloud-routes=false"]);

    let status = a.exit(START).await.unwrap_or_else(|| {
        panic!(
            "A kept running (and holding the Lease) after its route controller failed:\n{}",
            a.log().join("\n")
        )
    });
    let exited_at = Instant::now();
    assert!(
        b.logged("attempting to acquire leader lease"),
        "B was not a standby yet: {:?}",
        b.log()
    );
    assert_failed_with_the_error(status, &a.log());
    assert_ne!(
        holder_of(&lease(&env).await).as_deref(),
        Some(a_id.as_str()),
        "A exited and still holds the Lease"
    );

    let b_id = wait_holder(&env, Some(&a_id), LEASE_DURATION).await;
    println!(
        "start-up error: A exited with {status}; B ({b_id}) leads {:?} later",
        exited_at.elapsed()
    );
    assert!(
        b.exit(Duration::ZERO).await.is_none(),
        "B exited: {:?}",
        b.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_leader_election_the_process_exits_with_the_error() {
    let env = TestEnv::start().await.expect("testenv");
    let kubeconfig = kubeconfig(&env, "start-up-error-no-le");
    let mut a = Binary::start(&kubeconfig, &["--leader-elect=false"]);
    let status = a
        .exit(START)
        .await
        .unwrap_or_else(|| panic!("still running:\n{}", a.log().join("\n")));
    assert_failed_with_the_error(status, &a.log());
    assert!(
        lease(&env).await.is_none(),
        "no Lease without leader election"
    );
}
