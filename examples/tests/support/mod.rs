//! What several tests here share: kubectl against kube-testenv.

#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;

use controller_manager::testing::TestEnv;

/// `docs/deploy/<file>`.
pub fn deploy(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/deploy")
        .join(file)
}

/// kubectl against `env`, off the async runtime; `None` when kubectl is not installed.
pub struct Kubectl(PathBuf);

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Kubectl {
    /// A kubeconfig for `env`, named for `test`; `None` (said on stderr) without kubectl.
    pub fn new(env: &TestEnv, test: &str) -> Option<Self> {
        let name = format!("{test}-kubectl-{}.kubeconfig", std::process::id());
        let kubectl = Self::at(std::env::temp_dir().join(name))?;
        env.write_kubeconfig(&kubectl.0).unwrap();
        Some(kubectl)
    }

    /// kubectl with the kubeconfig at `path` (removed on drop); `None` without kubectl.
    pub fn at(path: PathBuf) -> Option<Self> {
        let installed = std::process::Command::new("kubectl")
            .args(["version", "--client"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            eprintln!("SKIPPED: kubectl steps (kubectl is not installed)");
            return None;
        }
        Some(Kubectl(path))
    }

    /// The kubeconfig it uses.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.0
    }

    /// Runs kubectl, feeding `stdin`; its stdout, or its stderr when it fails.
    pub async fn try_run(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut cmd = Command::new("kubectl");
        cmd.env("KUBECONFIG", &self.0)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let stdin = stdin.unwrap_or_default().to_string();
        let out = tokio::task::spawn_blocking(move || {
            let mut child = cmd.spawn()?;
            if let Some(mut input) = child.stdin.take() {
                input.write_all(stdin.as_bytes())?;
            }
            child.wait_with_output()
        })
        .await
        .unwrap()
        .unwrap();
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// Runs kubectl; its stdout (the test fails with its stderr when it fails).
    pub async fn run(&self, args: &[&str]) -> String {
        match self.try_run(args, None).await {
            Ok(out) => out,
            Err(stderr) => panic!("kubectl {args:?}: {stderr}"),
        }
    }
}
