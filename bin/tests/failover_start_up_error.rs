//! Start-up errors end the process, as upstream's `klog.Fatalf` does, with the error as the last
//! log line: the real binary against kube-testenv and the fake cloud (which has routes).
//!
//! One that can be known before start is refused before anything starts (issue 23): the route
//! controller with an empty `--cluster-cidr` exits 1 with leader election on and never creates
//! the Lease.
//!
//! One that appears only after the Lease is won (issue 13) gives the Lease up: with RBAC
//! enforced and `--use-service-account-credentials`, replica A may read the ServiceAccounts of
//! its first controllers but not the route controller's. A wins the Lease, starts its first
//! controllers (slowly, with `--controller-start-interval`, so a standby B is waiting by then),
//! fails on the route controller's client, gives the Lease up and exits non-zero; B, an admin
//! without routes, takes over within the lease duration. Without leader election the process
//! exits the same way.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
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

/// A kubeconfig for `env` as `token`, or as its admin without one.
fn kubeconfig(env: &TestEnv, tag: &str, token: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccm-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("kubeconfig");
    match token {
        Some(token) => std::fs::write(
            &path,
            kube_testenv::kubeconfig_yaml_with_token(&env.url(), token),
        )
        .expect("write kubeconfig"),
        None => env.write_kubeconfig(&path).expect("write kubeconfig"),
    }
    path
}

/// The identity of the replica that fails after winning the Lease.
const FAILING_SA: &str = "ccm-failing";
/// The ServiceAccounts of the controllers before the route controller (`--use-service-account-
/// credentials` client names); the route controller's, `route-controller`, stays out of reach.
const READABLE_SAS: [&str; 2] = ["node-controller", "service-controller"];

/// With RBAC enforced: a token that may hold the Lease and get the first controllers'
/// ServiceAccounts (created here) and their tokens, and nothing else.
async fn token_failing_on_the_route_controller(env: &TestEnv) -> String {
    for sa in READABLE_SAS {
        env.token_for_service_account(LEASE_NS, sa)
            .expect("controller ServiceAccount");
    }
    let role = serde_json::json!({
        "metadata": {"name": FAILING_SA, "namespace": LEASE_NS},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
            {"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": READABLE_SAS, "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": READABLE_SAS, "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        ],
    });
    let binding = serde_json::json!({
        "metadata": {"name": FAILING_SA, "namespace": LEASE_NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": FAILING_SA},
        "subjects": [{"kind": "ServiceAccount", "name": FAILING_SA, "namespace": LEASE_NS}],
    });
    let pp = kube::api::PostParams::default();
    Api::<Role>::namespaced(env.client(), LEASE_NS)
        .create(&pp, &serde_json::from_value(role).expect("role"))
        .await
        .expect("create role");
    Api::<RoleBinding>::namespaced(env.client(), LEASE_NS)
        .create(&pp, &serde_json::from_value(binding).expect("binding"))
        .await
        .expect("create binding");
    env.token_for_service_account(LEASE_NS, FAILING_SA)
        .expect("token")
}

/// A testenv with RBAC enforced and the kubeconfig of the replica that fails after the Lease.
async fn rbac_env(tag: &str) -> (TestEnv, PathBuf) {
    let env = TestEnv::builder()
        .authorization(true)
        .start()
        .await
        .expect("testenv");
    let token = token_failing_on_the_route_controller(&env).await;
    let kubeconfig = kubeconfig(&env, tag, Some(&token));
    (env, kubeconfig)
}

/// The flags under which the replica of [`rbac_env`] fails on the route controller's client.
const FAILING_FLAGS: [&str; 2] = [
    "--use-service-account-credentials",
    "--cluster-cidr=10.244.0.0/16",
];

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

/// A failure exit (status 1) whose last log line names the controller and `says`.
fn assert_failed_with_the_error(status: ExitStatus, log: &[String], says: &str) {
    assert_eq!(
        status.code(),
        Some(1),
        "exit status {status}; log:\n{}",
        log.join("\n")
    );
    let last = log.last().map(String::as_str).unwrap_or_default();
    for says in ["node-route-controller", says] {
        assert!(
            last.contains(says),
            "last log line does not name the error ({says:?}): {last:?}\nlog:\n{}",
            log.join("\n")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_controller_cannot_start_exits_and_the_standby_takes_over() {
    let (env, a_kubeconfig) = rbac_env("start-up-error").await;
    // 1–2 s of jittered pause after each of the three controllers before the route controller.
    let mut a_flags = vec!["--controller-start-interval=1s"];
    a_flags.extend(FAILING_FLAGS);
    let mut a = Binary::start(&a_kubeconfig, &a_flags);
    let a_id = wait_holder(&env, None, START).await;
    let admin = kubeconfig(&env, "start-up-error-admin", None);
    let mut b = Binary::start(&admin, &["--configure-cloud-routes=false"]);

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
    assert_failed_with_the_error(
        status,
        &a.log(),
        "ServiceAccount kube-system/route-controller",
    );
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
    let (env, kubeconfig) = rbac_env("start-up-error-no-le").await;
    let mut flags = vec!["--leader-elect=false"];
    flags.extend(FAILING_FLAGS);
    let mut a = Binary::start(&kubeconfig, &flags);
    let status = a
        .exit(START)
        .await
        .unwrap_or_else(|| panic!("still running:\n{}", a.log().join("\n")));
    assert_failed_with_the_error(
        status,
        &a.log(),
        "ServiceAccount kube-system/route-controller",
    );
    assert!(
        lease(&env).await.is_none(),
        "no Lease without leader election"
    );
}

/// Issue 23: `--controllers=*` with a cloud that has routes and no `--cluster-cidr` can never
/// start; with leader election on, the process exits 1 before serving or campaigning, and not one
/// request reaches the API server (so no Lease exists, ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requirement_that_cannot_be_met_is_refused_before_the_lease() {
    let env = TestEnv::start().await.expect("testenv");
    let kubeconfig = kubeconfig(&env, "unmet-requirement", None);
    let mut a = Binary::start(&kubeconfig, &[]);
    let status = a
        .exit(START)
        .await
        .unwrap_or_else(|| panic!("still running:\n{}", a.log().join("\n")));
    assert_failed_with_the_error(status, &a.log(), "--cluster-cidr is empty");
    let log = a.log();
    assert!(
        log.last()
            .is_some_and(|l| l.contains("nothing was started")),
        "{log:?}"
    );
    assert!(
        !log.iter()
            .any(|l| l.contains("leader lease") || l.contains("serving")),
        "campaigned or served before refusing:\n{}",
        log.join("\n")
    );
    assert!(env.requests().is_empty(), "{:?}", env.requests());
    assert!(lease(&env).await.is_none(), "a Lease was created");
}
