//! kubectl as an independent client: get -o yaml, apply, patch (strategic, merge, json), label,
//! taint, delete and get --watch, run as subprocesses against a written kubeconfig (a missing
//! kubectl fails them).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::json;
use support::kubectl::Kubectl;

const NODE_YAML: &str =
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: k1\n  labels:\n    tier: a\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_patch_label_taint_delete() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let manifest = k.write("node.yaml", NODE_YAML);
    let m = manifest.to_str().unwrap();
    assert_eq!(k.run(&["apply", "-f", m]).await.trim(), "node/k1 created");
    k.write("node.yaml", &NODE_YAML.replace("tier: a", "tier: b"));
    assert_eq!(
        k.run(&["apply", "-f", m]).await.trim(),
        "node/k1 configured"
    );
    assert_eq!(k.run(&["apply", "-f", m]).await.trim(), "node/k1 unchanged");
    let requests = env.requests();
    assert!(
        requests.iter().any(
            |r| r.verb == "patch" && r.query.contains("fieldManager=kubectl-client-side-apply")
        )
    );

    let yaml = k.run(&["get", "node", "k1", "-o", "yaml"]).await;
    assert!(
        yaml.contains("kind: Node")
            && yaml.contains("tier: b")
            && yaml.contains("node.kubernetes.io/not-ready"),
        "{yaml}"
    );
    assert!(
        yaml.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{yaml}"
    );

    k.run(&[
        "patch",
        "node",
        "k1",
        "--type=strategic",
        "-p",
        r#"{"spec":{"taints":[{"key":"x","effect":"NoExecute"}]}}"#,
    ])
    .await;
    k.run(&[
        "patch",
        "node",
        "k1",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"m":"1"}}}"#,
    ])
    .await;
    k.run(&[
        "patch",
        "node",
        "k1",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/j","value":"2"}]"#,
    ])
    .await;
    k.run(&["label", "node", "k1", "l=3"]).await;
    k.run(&["taint", "node", "k1", "t=v:NoSchedule"]).await;
    let nodes: Api<Node> = Api::all(env.client());
    let n = nodes.get("k1").await.unwrap();
    assert_eq!(
        serde_json::to_value(&n.metadata.labels).unwrap(),
        json!({"tier": "b", "m": "1", "j": "2", "l": "3"})
    );
    let taints: Vec<(String, String)> = n
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect();
    // kubectl taint sends the whole list with the new taint first; the server replaces the list.
    assert_eq!(
        taints,
        [
            ("t".to_string(), "NoSchedule".to_string()),
            ("x".into(), "NoExecute".into())
        ]
    );

    let (ok, _, err) = k
        .try_run(&[
            "patch",
            "node",
            "k1",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/metadata/labels/l","value":"nope"}]"#,
        ])
        .await;
    assert!(!ok && err.contains("test failed"), "{err}");

    assert_eq!(
        k.run(&["delete", "node", "k1"]).await.trim(),
        "node \"k1\" deleted"
    );
    let (ok, _, err) = k.try_run(&["get", "node", "k1"]).await;
    assert!(
        !ok && err.contains("Error from server (NotFound): nodes \"k1\" not found"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_changes() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let nodes: Api<Node> = Api::all(env.client());
    let node = |name: &str| -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    nodes
        .create(&PostParams::default(), &node("w1"))
        .await
        .unwrap();
    let mut child = Command::new("kubectl")
        .env("KUBECONFIG", &k.kubeconfig)
        .args([
            "get",
            "nodes",
            "--watch",
            "--output-watch-events",
            "--no-headers",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Lines look like `ADDED      w1     0s`.
    let mut next = async || -> (String, String) {
        let line = rx.recv().await.unwrap();
        let mut cols = line.split_whitespace().map(String::from);
        (cols.next().unwrap(), cols.next().unwrap())
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(next().await, pair("ADDED", "w1"));
    nodes
        .create(&PostParams::default(), &node("w2"))
        .await
        .unwrap();
    assert_eq!(next().await, pair("ADDED", "w2"));
    k.run(&["label", "node", "w2", "x=y"]).await;
    assert_eq!(next().await, pair("MODIFIED", "w2"));
    k.run(&["delete", "node", "w1"]).await;
    assert_eq!(next().await, pair("DELETED", "w1"));
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_serves_kubectl_api_resources() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let out = k
        .run(&["api-resources", "--no-headers", "-o", "name"])
        .await;
    for want in [
        "nodes",
        "services",
        "namespaces",
        "configmaps",
        "events",
        "endpoints",
        "leases.coordination.k8s.io",
        "events.events.k8s.io",
    ] {
        assert!(
            out.lines().any(|l| l == want),
            "{want} missing from:\n{out}"
        );
    }
    let svc = k
        .run(&[
            "get",
            "svc",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
        .await;
    assert_eq!(svc, "10.96.0.1");
    let ns = k.run(&["get", "ns", "-o", "name"]).await;
    assert_eq!(
        ns.lines().collect::<Vec<_>>(),
        [
            "namespace/default",
            "namespace/kube-node-lease",
            "namespace/kube-public",
            "namespace/kube-system"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prints_upstream_columns() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let nodes: Api<Node> = Api::all(env.client());
    let n: Node = serde_json::from_value(json!({"metadata": {"name": "p1", "labels": {"node-role.kubernetes.io/control-plane": ""}}})).unwrap();
    nodes.create(&PostParams::default(), &n).await.unwrap();
    let out = k.run(&["get", "nodes"]).await;
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(lines[1][..3], ["p1", "Unknown", "control-plane"]);
    let out = k.run(&["get", "svc", "-n", "default"]).await;
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        lines[1][..5],
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    );
}

const CM_YAML: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  mode: fast\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_conflicts_and_force_conflicts() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let manifest = k.write("cm.yaml", CM_YAML);
    let m = manifest.to_str().unwrap();
    assert_eq!(
        k.run(&["apply", "--server-side", "-f", m]).await.trim(),
        "configmap/settings serverside-applied"
    );
    let yaml = k
        .run(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await;
    assert!(
        yaml.contains("manager: kubectl") && yaml.contains("operation: Apply"),
        "{yaml}"
    );
    // The same manager changing its own field is an update, not a conflict.
    k.write("cm.yaml", &CM_YAML.replace("fast", "safe"));
    k.run(&["apply", "--server-side", "-f", m]).await;

    // Another manager changing it conflicts, and kubectl shows upstream's message.
    k.write("cm.yaml", &CM_YAML.replace("fast", "slow"));
    let (ok, _, err) = k
        .try_run(&["apply", "--server-side", "--field-manager=ops", "-f", m])
        .await;
    assert!(!ok);
    assert!(
        err.contains("conflict with \"kubectl\"") && err.contains(".data.mode"),
        "{err}"
    );
    k.run(&[
        "apply",
        "--server-side",
        "--field-manager=ops",
        "--force-conflicts",
        "-f",
        m,
    ])
    .await;
    let mode = k
        .run(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.mode}",
        ])
        .await;
    assert_eq!(mode, "slow");
    // Without --show-managed-fields kubectl hides them, as against kube-apiserver.
    let yaml = k.run(&["get", "configmap", "settings", "-o", "yaml"]).await;
    assert!(!yaml.contains("managedFields"), "{yaml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_shows_last_seen_type_reason_object_message() {
    let env = TestEnv::start().await.unwrap();
    let k = Kubectl::new(&env);
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(env.client(), "default");
    let event = serde_json::from_value(json!({
        "metadata": {"name": "web.17f"},
        "type": "Normal", "reason": "EnsuredLoadBalancer", "message": "Ensured load balancer",
        "involvedObject": {"kind": "Service", "namespace": "default", "name": "web"},
        "source": {"component": "service-controller"}, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"
    }))
    .unwrap();
    events.create(&PostParams::default(), &event).await.unwrap();
    let out = k.run(&["get", "events"]).await;
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    let row = lines.next().unwrap();
    assert!(
        row.contains("Normal")
            && row.contains("EnsuredLoadBalancer")
            && row.contains("service/web")
            && row.ends_with("Ensured load balancer"),
        "{out}"
    );
}
