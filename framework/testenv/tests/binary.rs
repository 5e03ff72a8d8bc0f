//! The standalone binary: starts, writes a kubeconfig a client can load, and serves it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A fresh directory for one test's files.
fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kube-testenv-bin-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn testenv() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kube-testenv"))
}

/// Starts `cmd` and waits for the line the binary announces itself with on stderr once its
/// kubeconfig is written.
async fn serve(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let first_line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stderr).read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    (child, first_line)
}

async fn load(kubeconfig: &Path) -> kube::Config {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_and_writes_a_usable_kubeconfig() {
    let dir = temp_dir();
    let kubeconfig = dir.join("kubeconfig");
    let (mut child, first_line) = serve(
        testenv()
            .args(["--port", "0", "--kubeconfig"])
            .arg(&kubeconfig),
    )
    .await;
    assert!(
        first_line.starts_with("kube-testenv serving http://127.0.0.1:"),
        "{first_line}"
    );

    let config = load(&kubeconfig).await;
    assert_eq!(config.default_namespace, "default");
    let nss = Api::<Namespace>::all(kube::Client::try_from(config).unwrap());
    let listed = nss.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = listed
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    assert!(names.contains(&"kube-system"), "{names:?}");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn binary_rejects_unknown_flags() {
    let out = testenv().arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected argument '--bogus'"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_authenticates_static_tokens_and_enforces_rbac() {
    let dir = temp_dir();
    let kubeconfig = dir.join("kubeconfig");
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, "dev-token,dev,1001,\"devs,qa\"\n").unwrap();
    let (mut child, first_line) = serve(
        testenv()
            .args(["--port", "0", "--https", "--authorization-mode", "RBAC"])
            .arg("--token-auth-file")
            .arg(&tokens)
            .arg("--kubeconfig")
            .arg(&kubeconfig),
    )
    .await;
    assert!(
        first_line.starts_with("kube-testenv serving https://127.0.0.1:"),
        "{first_line}"
    );
    let mut config = load(&kubeconfig).await;
    let admin = kube::Client::try_from(config.clone()).unwrap();
    Api::<Namespace>::all(admin)
        .list(&ListParams::default())
        .await
        .unwrap();
    config.auth_info = serde_json::from_value(serde_json::json!({"token": "dev-token"})).unwrap();
    let dev = kube::Client::try_from(config).unwrap();
    let err = Api::<Namespace>::all(dev)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("User \"dev\" cannot list resource \"namespaces\""),
        "{err}"
    );
    let _ = child.kill();
    let _ = child.wait();

    std::fs::write(&tokens, "just-a-token\n").unwrap();
    let out = testenv()
        .arg("--token-auth-file")
        .arg(&tokens)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("must have at least 3 columns (token, user name, user uid), found 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = testenv()
        .args(["--authorization-mode", "Node"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
