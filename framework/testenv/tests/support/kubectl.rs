//! kubectl as a subprocess against a written kubeconfig, for the test targets that drive kube-testenv
//! with it; `Kubectl::new` fails the test when kubectl is not installed, since these tests exist
//! to check kube-testenv with an independent client.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use kube_testenv::TestEnv;

pub struct Kubectl {
    pub kubeconfig: PathBuf,
    _dir: TempDir,
}

/// A directory removed on drop (no tempfile crate in the stack).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn kubectl_installed() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Kubectl {
    pub fn new(env: &TestEnv) -> Kubectl {
        let k = Kubectl::unconfigured();
        env.write_kubeconfig(&k.kubeconfig).unwrap();
        k
    }

    /// A kubectl whose kubeconfig path is not written yet: the standalone binary writes it.
    pub fn unconfigured() -> Kubectl {
        assert!(
            kubectl_installed(),
            "kubectl is not installed: these tests need it as an independent client \
             (Debian: apt-get install kubernetes-client; .ci/run installs it)"
        );
        let dir = std::env::temp_dir().join(format!("kube-testenv-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        Kubectl {
            kubeconfig,
            _dir: TempDir(dir),
        }
    }

    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let p = self._dir.0.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Runs kubectl off the async runtime; returns stdout, panics with stderr on failure.
    pub async fn run(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.try_run(args).await;
        assert!(ok, "kubectl {args:?} failed: {err}");
        out
    }

    pub async fn try_run(&self, args: &[&str]) -> (bool, String, String) {
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.kubeconfig).args(args);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}
