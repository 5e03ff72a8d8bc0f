//! `metal-ccm` against kube-testenv: started as operators start it, with
//! `--controllers=*,-route,node-inventory`, it initializes the Nodes its inventory lists,
//! deletes the one it does not, gives the LoadBalancer Service a VIP from the pool, keeps the
//! node-inventory ConfigMap, and stops cleanly on SIGTERM.

use controller_manager::testing::{ManagerProcess, Requests, TestEnv};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::api::{Api, PostParams, ResourceExt};
use kube::runtime::wait::conditions::is_deleted;
use serde_json::json;

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const INVENTORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/inventory.example.yaml");

async fn create_node(nodes: &Api<Node>, name: &str) -> Node {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap()
}

fn initialized(provider_id: &'static str, zone: &'static str) -> impl Fn(Option<&Node>) -> bool {
    move |node| {
        let Some(node) = node else { return false };
        let spec = node.spec.clone().unwrap_or_default();
        let tainted = spec.taints.iter().flatten().any(|t| t.key == UNINITIALIZED);
        spec.provider_id.as_deref() == Some(provider_id)
            && !tainted
            && node
                .labels()
                .get("topology.kubernetes.io/zone")
                .map(String::as_str)
                == Some(zone)
    }
}

#[tokio::test]
async fn metal_ccm_runs_stock_controllers_own_provider_and_own_controller() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    create_node(&nodes, "rack1-node1").await;
    create_node(&nodes, "rack2-node1").await;
    let stray = create_node(&nodes, "not-in-inventory").await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();

    let mut ccm = ManagerProcess::start(
        env!("CARGO_BIN_EXE_metal-ccm"),
        &env,
        [
            "--cloud-provider=static-inventory",
            &format!("--cloud-config={INVENTORY}"),
            "--controllers=*,-route,node-inventory",
            "--node-inventory-configmap=kube-system/node-inventory",
            "--node-deletion-grace-period=0s",
            "--secure-port=0",
        ],
    )
    .unwrap();

    ccm.wait_for(
        &nodes,
        "rack1-node1",
        "rack1-node1 initialized",
        initialized("static-inventory://SN-4411", "rack-1"),
    )
    .await
    .unwrap();
    ccm.wait_for(
        &nodes,
        "rack2-node1",
        "rack2-node1 initialized",
        initialized("static-inventory://rack2-node1", "rack-2"),
    )
    .await
    .unwrap();
    let uid = stray.uid().unwrap();
    ccm.wait_for(
        &nodes,
        "not-in-inventory",
        "stray Node deleted",
        is_deleted(&uid),
    )
    .await
    .unwrap();

    let has_vip = |svc: Option<&Service>| {
        let ingress = svc.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone());
        ingress.is_some_and(|i| i.iter().any(|i| i.ip.as_deref() == Some("192.0.2.10")))
    };
    ccm.wait_for(&services, "web", "Service gets the first VIP", has_vip)
        .await
        .unwrap();

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let lists_both = |cm: Option<&ConfigMap>| {
        let data = cm.and_then(|c| c.data.clone()).unwrap_or_default();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        keys == ["rack1-node1", "rack2-node1"]
            && data["rack1-node1"].contains("\"providerID\":\"static-inventory://SN-4411\"")
            && data["rack1-node1"].contains("InternalIP=10.1.1.11")
    };
    ccm.wait_for(
        &configmaps,
        "node-inventory",
        "ConfigMap lists both Nodes",
        lists_both,
    )
    .await
    .unwrap();

    // `-route` is honoured (the provider has no routes facet, so only the log can tell).
    let logs = ccm.output();
    assert!(
        logs.contains("controller is disabled controller=node-route-controller"),
        "{logs}"
    );
    ccm.stop().await.unwrap();

    // One shared cache: a single LIST+WATCH of Nodes served every controller in the process.
    let by_ccm = Requests::of(&env).user_agent("metal-ccm");
    let node_watches = by_ccm.verb("watch").resource("nodes").count();
    assert_eq!(node_watches, 1, "one Node watch for the whole process");
}

/// Runs `metal-ccm` with `args` to completion; (exit code, stdout + stderr).
fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_metal-ccm"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text.into_owned())
}

#[test]
fn one_flag_set_with_every_error_reported_before_anything_starts() {
    let (code, help) = run_to_exit(&["--help"]);
    assert_eq!(code, Some(0));
    for flag in [
        "--cloud-provider",
        "--leader-elect",
        "--node-inventory-configmap",
    ] {
        assert!(help.contains(flag), "{flag} in --help:\n{help}");
    }
    // The distro's own controllers are listed with the stock ones (issue 23), from the map the
    // binary runs, though `main` parses its flags before building that map.
    for listed in [
        "All controllers: address-pool, cloud-node-controller, cloud-node-lifecycle-controller, node-inventory, node-route-controller, service-lb-controller",
        "Disabled-by-default controllers: address-pool, node-inventory",
        "Usage: metal-ccm",
    ] {
        assert!(help.contains(listed), "{listed:?} in --help:\n{help}");
    }
    let (code, short) = run_to_exit(&["-h", "--cloud-provider=static-inventory"]);
    assert_eq!(code, Some(0), "{short}");
    assert!(short.contains("node-inventory"), "{short}");

    let (code, out) = run_to_exit(&[
        "--cloud-provider=static-inventory",
        "--controllers=*,bogus",
        "--concurrent-node-syncs=0",
    ]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("--concurrent-node-syncs must be at least 1"),
        "{out}"
    );
    assert!(
        out.contains("\"bogus\" is not in the list of known controllers"),
        "{out}"
    );
    assert!(
        out.contains("node-inventory"),
        "the distro's controller is known: {out}"
    );
    assert!(
        out.contains("2 invalid flag value(s); nothing was started"),
        "{out}"
    );

    let (code, out) = run_to_exit(&["--contention-profiling"]);
    assert_eq!(code, Some(2));
    assert!(
        out.contains("--contention-profiling=true: tokio has no block profile"),
        "{out}"
    );

    let (code, out) = run_to_exit(&["--node-inventory-configmap=no-namespace"]);
    assert_eq!(code, Some(2));
    assert!(out.contains("is not NAMESPACE/NAME"), "{out}");
}
