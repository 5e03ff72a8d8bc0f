//! What the auth test suites share: kubectl run against a written admin kubeconfig (skipped with a
//! message when kubectl is not installed), and raw requests with a chosen bearer token.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use http_body_util::BodyExt;
use kube_testenv::TestEnv;
use serde_json::Value;

/// kubectl with a kubeconfig for the admin user in a directory removed on drop.
pub struct Kubectl {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Kubectl {
    /// `None` (with a SKIPPED message) when kubectl is not installed.
    pub fn new(env: &TestEnv) -> Option<Kubectl> {
        let installed = Command::new("kubectl")
            .args(["version", "--client"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            eprintln!("SKIPPED: kubectl is not installed");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("kube-testenv-auth-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        env.write_kubeconfig(&kubeconfig).unwrap();
        Some(Kubectl { dir, kubeconfig })
    }

    /// Whether this kubectl has `create token` (1.24+; older ones, like Debian's, do not).
    pub async fn has_create_token(&self) -> bool {
        let (ok, _, _) = self.run(&["create", "token", "--help"]).await;
        if !ok {
            eprintln!("SKIPPED: this kubectl has no `create token`");
        }
        ok
    }

    /// Writes `content` to a file in the kubeconfig's directory and returns its path.
    pub fn write(&self, name: &str, content: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, content).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// Runs kubectl off the async runtime: (exit success, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let kubeconfig = self.kubeconfig.clone();
        let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let out = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(&args)
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            )
        })
        .await
        .unwrap()
    }
}

/// Sends `method path` with an optional JSON body and bearer token: (status, body).
pub async fn send(
    env: &TestEnv,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let client = kube::Client::try_from(kube::Config::new(env.url().parse().unwrap())).unwrap();
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("{}{path}", env.url()))
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let resp = client
        .send(req.body(kube::client::Body::from(bytes)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, v)
}
