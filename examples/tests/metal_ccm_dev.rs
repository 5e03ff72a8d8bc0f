//! `metal-ccm --dev` started as a newcomer starts it: the embedded API server comes up with the
//! AddressPool CRD, the example pools and the webhook configurations, metal-ccm points them at
//! itself with its own CA, and `kubectl apply` of an overlapping pool is refused with the
//! webhook's message, as on a cluster; `--dev` refuses the flags it would have to ignore.

mod support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::Kubectl;

const WAIT: Duration = Duration::from_secs(60);
const OVERLAPPING: &str = "apiVersion: metal.example.com/v1\nkind: AddressPool\nmetadata: {name: late}\nspec:\n  ranges: [{start: 192.0.2.20, end: 192.0.2.30}]\n";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `--dev` process, stopped with SIGTERM (and killed if it lingers) on drop.
struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
    }
}

#[tokio::test]
async fn kubectl_apply_of_an_overlapping_pool_is_refused_in_dev_mode() {
    let kubeconfig = std::env::temp_dir().join(format!("metal-ccm-dev-{}.kubeconfig", free_port()));
    let Some(kubectl) = Kubectl::at(kubeconfig.clone()) else {
        return;
    };
    let mut dev = Dev(Command::new(env!("CARGO_BIN_EXE_metal-ccm"))
        .arg("--dev")
        .arg(format!("--dev-kubeconfig={}", kubeconfig.display()))
        .arg("--secure-port=0")
        .arg(format!("--webhook-secure-port={}", free_port()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());

    // Until the webhooks answer (the process is up, the caBundle and URL injected), the dry run
    // fails some other way.
    let deadline = Instant::now() + WAIT;
    let refusal = "admission webhook \"address-pool-overlap.metal.example.com\" denied the request: spec.ranges[0] (192.0.2.20-192.0.2.30) overlaps AddressPool \"default\" (192.0.2.10-192.0.2.23): two pools may not hand out the same address";
    loop {
        assert!(
            dev.0.try_wait().unwrap().is_none(),
            "metal-ccm --dev exited"
        );
        if kubeconfig.exists() {
            let dry = kubectl
                .try_run(&["apply", "--dry-run=server", "-f", "-"], Some(OVERLAPPING))
                .await;
            if dry.as_ref().is_err_and(|e| e.contains(refusal)) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the webhooks never answered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stderr = kubectl
        .try_run(&["apply", "-f", "-"], Some(OVERLAPPING))
        .await
        .unwrap_err();
    assert!(stderr.contains(refusal), "{stderr}");
    let pools = kubectl
        .run(&[
            "get",
            "addresspools",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await;
    assert_eq!(pools, "default reserved");
}

#[test]
fn dev_refuses_the_flags_it_would_ignore() {
    let out = Command::new(env!("CARGO_BIN_EXE_metal-ccm"))
        .args([
            "--dev",
            "--kubeconfig=/k",
            "--webhook-url=https://h:1",
            "--webhook-secure-port=0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for flag in ["--kubeconfig", "--webhook-url"] {
        assert!(
            stderr.contains(&format!("error: {flag} cannot be used with --dev, which runs against its own embedded API server, inventory and webhook certificates; drop one of them")),
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("error: --webhook-secure-port=0 cannot be used with --dev"),
        "{stderr}"
    );
}
