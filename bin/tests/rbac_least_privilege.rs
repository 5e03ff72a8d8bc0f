//! Least privilege, checked: the binary runs all four controllers and leader election against
//! kube-testenv through every code path that writes (initialize, shutdown taint, delete a Node,
//! create and delete a load balancer, routes, events, Lease release), the (verb, group,
//! resource/subresource, namespace, name) of every request it made is taken from the request log,
//! and compared with the RBAC in `docs/deploy/rbac.yaml`: every request must be allowed by it,
//! and every permission it grants must have been used.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, ResourceExt};
use kube::runtime::wait::{Condition, await_condition, conditions::is_deleted};
use kube::runtime::{WatchStreamExt, watcher};
use kube_testenv::{RequestRecord, TestEnv};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

const CLOUD: &str = r#"
facets: {loadBalancer: true, instancesV2: true, instances: false, zones: false, routes: true, clusters: false}
instances:
  - {name: node-1, zone: zone-a, region: r, addresses: [{type: InternalIP, address: 10.0.0.1}]}
  - {name: node-2, zone: zone-b, region: r, addresses: [{type: InternalIP, address: 10.0.0.2}], state: shutdown}
  - {name: gone, state: gone}   # the fake leaves Nodes it was not told about alone
loadBalancerPool: {cidr: 203.0.113.0/29}
"#;

/// One permission as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Permission {
    verb: String,
    group: String,
    resource: String,
}

/// The binary, killed if the test fails before stopping it.
struct Ccm(Child, PathBuf);

impl Ccm {
    fn logs(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
    async fn wait_for<K>(&self, api: &Api<K>, name: &str, what: &str, cond: impl Condition<K>)
    where
        K: kube::Resource
            + Clone
            + k8s_openapi::serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
    {
        match tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond)).await {
            Ok(Ok(_)) => {}
            other => panic!("{what}: {other:?}\n--- logs ---\n{}", self.logs()),
        }
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn node(name: &str, pod_cidr: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "podCIDR": pod_cidr, "podCIDRs": [pod_cidr],
            "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]
        }
    }))
    .unwrap()
}

fn has_taint(key: &'static str) -> impl Fn(Option<&Node>) -> bool {
    move |n| {
        let taints = n.and_then(|n| n.spec.as_ref()?.taints.clone());
        taints.iter().flatten().any(|t| t.key == key)
    }
}

/// Drives every write path of the four controllers and returns the binary's requests.
async fn run_every_code_path(env: &TestEnv, dir: &Path) -> Vec<RequestRecord> {
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    for (name, cidr) in [
        ("node-1", "10.244.1.0/24"),
        ("node-2", "10.244.2.0/24"),
        ("gone", "10.244.3.0/24"),
    ] {
        nodes
            .create(&PostParams::default(), &node(name, cidr))
            .await
            .unwrap();
    }
    nodes
        .patch_status("node-1", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .unwrap();
    let gone_uid = nodes.get("gone").await.unwrap().uid().unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();

    let (cloud, kubeconfig, log) = (
        dir.join("cloud.yaml"),
        dir.join("kubeconfig"),
        dir.join("ccm.log"),
    );
    std::fs::write(&cloud, CLOUD).unwrap();
    env.write_kubeconfig(&kubeconfig).unwrap();
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cloud-controller-manager"))
        .args([
            format!("--kubeconfig={}", kubeconfig.display()),
            "--cloud-provider=fake".into(),
            format!("--cloud-config={}", cloud.display()),
            "--cluster-cidr=10.244.0.0/16".into(),
            "--node-deletion-grace-period=0s".into(),
            "--secure-port=0".into(),
        ])
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    let ccm = Ccm(child, log);

    let initialized = |n: Option<&Node>| {
        n.and_then(|n| n.spec.as_ref()?.provider_id.clone())
            .is_some()
            && !has_taint(UNINITIALIZED)(n)
    };
    ccm.wait_for(&nodes, "node-1", "node-1 initialized", initialized)
        .await;
    ccm.wait_for(
        &nodes,
        "node-2",
        "node-2 shutdown-tainted",
        has_taint(SHUTDOWN),
    )
    .await;
    ccm.wait_for(&nodes, "gone", "gone deleted", is_deleted(&gone_uid))
        .await;
    let route_made = |n: Option<&Node>| {
        let conds = n.and_then(|n| n.status.as_ref()?.conditions.clone());
        conds
            .iter()
            .flatten()
            .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
    };
    ccm.wait_for(&nodes, "node-1", "node-1 route created", route_made)
        .await;
    let has_ingress = |s: Option<&Service>| {
        s.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.clone())
            .is_some_and(|i| !i.is_empty())
    };
    ccm.wait_for(&services, "web", "web has an ingress IP", has_ingress)
        .await;
    // A spec change makes service-lb record "EnsuringLoadBalancer" again: the recorder patches
    // the first event's count instead of creating a second one.
    let ports =
        json!({"spec": {"ports": [{"name": "http", "port": 80}, {"name": "tls", "port": 443}]}});
    services
        .patch("web", &PatchParams::default(), &Patch::Merge(&ports))
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let repeated = watcher(events, watcher::Config::default())
        .applied_objects()
        .try_filter(|e| {
            let again = e.reason.as_deref() == Some("EnsuringLoadBalancer") && e.count >= Some(2);
            std::future::ready(again)
        });
    let mut repeated = std::pin::pin!(repeated);
    let seen = tokio::time::timeout(WAIT, repeated.try_next()).await;
    assert!(matches!(seen, Ok(Ok(Some(_)))), "{seen:?}\n{}", ccm.logs());
    let svc_uid = services.get("web").await.unwrap().uid().unwrap();
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    ccm.wait_for(
        &services,
        "web",
        "web finalized and deleted",
        is_deleted(&svc_uid),
    )
    .await;

    // Graceful stop releases the Lease.
    let mut ccm = ccm;
    let pid = ccm.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let mut child = std::mem::replace(&mut ccm.0, Command::new("true").spawn().unwrap());
    let status =
        tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || child.wait())).await;
    let logs = ccm.logs();
    let status = status
        .unwrap_or_else(|_| panic!("no exit after SIGTERM\n{logs}"))
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}\n{logs}");

    env.requests()
        .into_iter()
        .filter(|r| {
            r.user_agent
                .as_deref()
                .is_some_and(|ua| ua.starts_with("cloud-controller-manager"))
        })
        .collect()
}

/// The API group from the request path (`/api/v1/...` is the core group `""`).
fn group(r: &RequestRecord) -> String {
    let mut parts = r.path.trim_start_matches('/').split('/');
    match parts.next() {
        Some("apis") => parts.next().unwrap_or_default().to_string(),
        _ => String::new(),
    }
}

fn resource(r: &RequestRecord) -> String {
    match &r.subresource {
        Some(sub) => format!("{}/{sub}", r.resource),
        None => r.resource.clone(),
    }
}

/// RBAC's rule match: verb, group, resource and (when the rule names any) resource name.
fn allows(rule: &PolicyRule, r: &RequestRecord) -> bool {
    let has =
        |list: &Option<Vec<String>>, v: &str| list.iter().flatten().any(|x| x == "*" || x == v);
    rule.verbs.iter().any(|v| v == "*" || *v == r.verb)
        && has(&rule.api_groups, &group(r))
        && has(&rule.resources, &resource(r))
        && match &rule.resource_names {
            Some(names) if !names.is_empty() => r.name.as_ref().is_some_and(|n| names.contains(n)),
            _ => true,
        }
}

struct Rbac {
    cluster: Vec<PolicyRule>,
    /// (namespace, rules) of each Role.
    namespaced: Vec<(String, Vec<PolicyRule>)>,
}

/// Reads `docs/deploy/rbac.yaml`, checking each binding grants its role to the ServiceAccount.
fn read_rbac() -> Rbac {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/deploy/rbac.yaml");
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&std::fs::read_to_string(path).unwrap()).unwrap();
    let of = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind).cloned();
    let cluster_roles: Vec<ClusterRole> = of("ClusterRole")
        .map(|d| serde_json::from_value(d).unwrap())
        .collect();
    let roles: Vec<Role> = of("Role")
        .map(|d| serde_json::from_value(d).unwrap())
        .collect();
    let sa = ("cloud-controller-manager", "kube-system");
    let binds = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        subjects.iter().flatten().any(|s| {
            s.kind == "ServiceAccount" && s.name == sa.0 && s.namespace.as_deref() == Some(sa.1)
        })
    };
    for b in
        of("ClusterRoleBinding").map(|d| serde_json::from_value::<ClusterRoleBinding>(d).unwrap())
    {
        assert!(
            binds(&b.subjects),
            "{} binds the ServiceAccount",
            b.name_any()
        );
        assert!(
            cluster_roles
                .iter()
                .any(|r| r.name_any() == b.role_ref.name),
            "{} names a ClusterRole in the file",
            b.name_any()
        );
    }
    for b in of("RoleBinding").map(|d| serde_json::from_value::<RoleBinding>(d).unwrap()) {
        assert!(
            binds(&b.subjects),
            "{} binds the ServiceAccount",
            b.name_any()
        );
        assert!(
            roles
                .iter()
                .any(|r| r.name_any() == b.role_ref.name && r.namespace() == b.namespace())
        );
    }
    assert_eq!(of("ServiceAccount").count(), 1);
    Rbac {
        cluster: cluster_roles
            .into_iter()
            .flat_map(|r| r.rules.unwrap_or_default())
            .collect(),
        namespaced: roles
            .into_iter()
            .map(|r| {
                (
                    r.namespace().unwrap_or_default(),
                    r.rules.unwrap_or_default(),
                )
            })
            .collect(),
    }
}

#[tokio::test]
async fn cluster_role_grants_exactly_what_the_controllers_use() {
    let env = TestEnv::start().await.unwrap();
    let dir = std::env::temp_dir().join(format!("rbac-least-privilege-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let requests = run_every_code_path(&env, &dir).await;
    std::fs::remove_dir_all(&dir).unwrap();
    let rbac = read_rbac();

    let non_resource: Vec<&str> = requests
        .iter()
        .filter(|r| r.resource.is_empty())
        .map(|r| r.path.as_str())
        .collect();
    assert!(
        non_resource.is_empty(),
        "non-resource requests need nonResourceURLs rules: {non_resource:?}"
    );

    let mut denied = BTreeSet::new();
    let mut used = BTreeSet::new();
    for r in &requests {
        let in_role = |(ns, rules): &(String, Vec<PolicyRule>)| {
            r.namespace.as_deref() == Some(ns.as_str()) && rules.iter().any(|rule| allows(rule, r))
        };
        let allowed =
            rbac.cluster.iter().any(|rule| allows(rule, r)) || rbac.namespaced.iter().any(in_role);
        if !allowed {
            denied.insert(format!(
                "{} {}/{} ns={:?} name={:?}",
                r.verb,
                group(r),
                resource(r),
                r.namespace,
                r.name
            ));
        }
        used.insert(Permission {
            verb: r.verb.clone(),
            group: group(r),
            resource: resource(r),
        });
    }
    assert!(
        denied.is_empty(),
        "used but not granted by docs/deploy/rbac.yaml:\n{denied:#?}"
    );

    let all_rules = rbac
        .cluster
        .iter()
        .chain(rbac.namespaced.iter().flat_map(|(_, rules)| rules));
    let mut unused = Vec::new();
    for rule in all_rules {
        for verb in &rule.verbs {
            for g in rule.api_groups.iter().flatten() {
                for res in rule.resources.iter().flatten() {
                    let p = Permission {
                        verb: verb.clone(),
                        group: g.clone(),
                        resource: res.clone(),
                    };
                    if !used.contains(&p) {
                        unused.push(p);
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "granted but never used (remove, or document as an exception):\n{unused:#?}\nused: {used:#?}"
    );
}
