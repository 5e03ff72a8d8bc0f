//! Starting an example binary against kube-testenv and waiting for what it should do.

use std::path::PathBuf;
use std::time::Duration;

use kube::Api;
use kube::runtime::wait::{Condition, await_condition};
use kube_testenv::TestEnv;
use serde::de::DeserializeOwned;
use tokio::process::{Child, Command};

/// Generous: the example must do its job well within it, even on a loaded 2-core machine.
pub const WAIT: Duration = Duration::from_secs(60);

/// A scratch directory for kubeconfigs, inventories and logs, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running example binary whose stdout and stderr go to a log file.
pub struct Example {
    child: Child,
    log: PathBuf,
}

impl Example {
    /// Starts `exe` with `args` and `--kubeconfig` pointing at `env`.
    pub fn start(exe: &str, env: &TestEnv, scratch: &Scratch, args: &[&str]) -> Self {
        let kubeconfig = scratch.path("kubeconfig");
        env.write_kubeconfig(&kubeconfig).unwrap();
        let log = scratch.path("example.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(exe)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Example { child, log }
    }

    /// Starts `metal-ccm` on the static-inventory provider with `inventory.example.yaml`, and
    /// `args`.
    #[allow(dead_code)] // not every test binary runs metal-ccm
    pub fn metal_ccm(env: &TestEnv, scratch: &Scratch, args: &[&str]) -> Self {
        let inventory = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("inventory.example.yaml");
        let config = format!("--cloud-config={}", inventory.display());
        let provider = ["--cloud-provider=static-inventory", &config];
        let exe = env!("CARGO_BIN_EXE_metal-ccm");
        Example::start(exe, env, scratch, &[&provider[..], args].concat())
    }

    /// The example's output so far, for failure messages.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the object `name` satisfies `cond`, failing with the example's logs.
    pub async fn wait_for<K>(&self, api: &Api<K>, name: &str, what: &str, cond: impl Condition<K>)
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    {
        let waited = tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond)).await;
        match waited {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!(
                "watching {name} for {what}: {e}\n--- logs ---\n{}",
                self.logs()
            ),
            Err(_) => panic!("{what}: not within {WAIT:?}\n--- logs ---\n{}", self.logs()),
        }
    }

    /// SIGTERM, then waits for a clean exit (drained controllers, released Lease).
    pub async fn stop(mut self) {
        let pid = self.child.id().expect("still running");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = tokio::time::timeout(WAIT, self.child.wait()).await;
        let logs = self.logs();
        let status = status
            .unwrap_or_else(|_| panic!("no exit after SIGTERM\n{logs}"))
            .unwrap();
        assert!(
            status.success(),
            "exit status {status}\n--- logs ---\n{logs}"
        );
    }
}
