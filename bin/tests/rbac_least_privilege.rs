//! Least privilege, checked with RBAC enforced: kube-testenv authorizes every request by RBAC,
//! the shipped roles of `docs/deploy/` are applied, and the binary runs as ServiceAccount
//! `kube-system/cloud-controller-manager` (and, with `--use-service-account-credentials`, each
//! controller as its own ServiceAccount) through every code path that writes (initialize,
//! shutdown taint, delete a Node, create and delete a load balancer, routes, events, Lease
//! release). It must converge with no 401/403; every request must be allowed by the rules bound
//! to the identity that made it; and every rule must have been used by that identity (or be a
//! listed exception, itself checked to be granted), so dropping any rule fails a check.

use std::collections::{BTreeMap, BTreeSet};
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
/// Every identity of the binary is a ServiceAccount in kube-system.
const SA_PREFIX: &str = "system:serviceaccount:kube-system:";

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
async fn run_every_code_path(
    env: &TestEnv,
    dir: &Path,
    kubeconfig_yaml: &str,
    extra: &[&str],
) -> Vec<RequestRecord> {
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
    std::fs::write(&kubeconfig, kubeconfig_yaml).unwrap();
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
        .args(extra)
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
        .filter(|r| r.user.starts_with(SA_PREFIX))
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

/// One grant: the rules of a role, cluster-wide (`None`) or in one namespace.
type Grants = Vec<(Option<String>, PolicyRule)>;

/// Every document of `docs/deploy/<file>`; `a.yaml+b.yaml` reads both, as applied together.
fn deploy_docs(file: &str) -> Vec<Value> {
    file.split('+')
        .flat_map(|name| {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../docs/deploy")
                .join(name);
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&std::fs::read_to_string(path).unwrap()).unwrap();
            docs
        })
        .collect()
}

/// Reads `docs/deploy/<file>`: the rules each ServiceAccount in `kube-system` is bound to, keyed
/// by ServiceAccount name. Every binding must name a role in the file and only ServiceAccounts
/// the file defines.
fn read_rbac(file: &str) -> BTreeMap<String, Grants> {
    let docs = deploy_docs(file);
    let of = |kind: &'static str| docs.iter().filter(move |d| d["kind"] == kind).cloned();
    let accounts: BTreeSet<String> = of("ServiceAccount")
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let cluster_roles: Vec<ClusterRole> = of("ClusterRole")
        .map(|d| serde_json::from_value(d).unwrap())
        .collect();
    let roles: Vec<Role> = of("Role")
        .map(|d| serde_json::from_value(d).unwrap())
        .collect();
    let mut grants: BTreeMap<String, Grants> = BTreeMap::new();
    let mut bind = |subjects: Option<Vec<k8s_openapi::api::rbac::v1::Subject>>,
                    rules: Vec<(Option<String>, PolicyRule)>| {
        for s in subjects.into_iter().flatten() {
            assert!(
                s.kind == "ServiceAccount"
                    && s.namespace.as_deref() == Some("kube-system")
                    && accounts.contains(&s.name),
                "{file}: binding to {s:?}, not a ServiceAccount the file ships"
            );
            grants
                .entry(s.name.clone())
                .or_default()
                .extend(rules.clone());
        }
    };
    for b in
        of("ClusterRoleBinding").map(|d| serde_json::from_value::<ClusterRoleBinding>(d).unwrap())
    {
        let role = cluster_roles
            .iter()
            .find(|r| r.name_any() == b.role_ref.name)
            .unwrap_or_else(|| panic!("{file}: {} names a ClusterRole in the file", b.name_any()));
        let rules = role.rules.clone().unwrap_or_default();
        bind(b.subjects, rules.into_iter().map(|r| (None, r)).collect());
    }
    for b in of("RoleBinding").map(|d| serde_json::from_value::<RoleBinding>(d).unwrap()) {
        let role = roles
            .iter()
            .find(|r| r.name_any() == b.role_ref.name && r.namespace() == b.namespace())
            .unwrap_or_else(|| panic!("{file}: {} names a Role in its namespace", b.name_any()));
        let rules = role.rules.clone().unwrap_or_default();
        let ns = b.namespace();
        bind(
            b.subjects,
            rules.into_iter().map(|r| (ns.clone(), r)).collect(),
        );
    }
    grants
}

/// Rules granted but not exercised by [`run_every_code_path`], each with why it must stay:
/// (ServiceAccount, verb, resource).
const EXCEPTIONS: &[(&str, &str, &str, &str)] = &[
    (
        "cloud-controller-manager",
        "list",
        "nodes",
        "the shared informers' LIST on servers without streaming lists (v1.23 to 1.33)",
    ),
    (
        "cloud-controller-manager",
        "list",
        "services",
        "the shared informers' LIST on servers without streaming lists (v1.23 to 1.33)",
    ),
    (
        "node-controller",
        "patch",
        "events",
        "a repeated node event (Synced is recorded once per Node here)",
    ),
    (
        "route-controller",
        "create",
        "events",
        "FailedToCreateRoute, recorded only when the cloud refuses a route",
    ),
    (
        "route-controller",
        "patch",
        "events",
        "a repeated FailedToCreateRoute",
    ),
];

/// Applies every object of `docs/deploy/<file>` to `env` as the admin.
async fn apply(env: &TestEnv, file: &str) {
    let docs = deploy_docs(file);
    let client = env.client();
    let pp = PostParams::default();
    for d in docs {
        let ns = d["metadata"]["namespace"]
            .as_str()
            .unwrap_or("kube-system")
            .to_string();
        let created = match d["kind"].as_str().unwrap() {
            "ServiceAccount" => {
                Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &ns)
                    .create(&pp, &serde_json::from_value(d).unwrap())
                    .await
                    .map(drop)
            }
            "ClusterRole" => Api::<ClusterRole>::all(client.clone())
                .create(&pp, &serde_json::from_value(d).unwrap())
                .await
                .map(drop),
            "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(client.clone())
                .create(&pp, &serde_json::from_value(d).unwrap())
                .await
                .map(drop),
            "Role" => Api::<Role>::namespaced(client.clone(), &ns)
                .create(&pp, &serde_json::from_value(d).unwrap())
                .await
                .map(drop),
            "RoleBinding" => Api::<RoleBinding>::namespaced(client.clone(), &ns)
                .create(&pp, &serde_json::from_value(d).unwrap())
                .await
                .map(drop),
            other => panic!("{file}: unexpected kind {other}"),
        };
        created.unwrap();
    }
}

/// Runs the binary as ServiceAccount `cloud-controller-manager` under the RBAC of `file` with
/// enforcement on, then checks: no request was refused, every request is allowed by the rules
/// bound to the ServiceAccount that made it, and every rule was used (or is an exception).
async fn check_least_privilege(file: &str, extra: &[&str]) {
    let env = TestEnv::builder()
        .authorization(true)
        .start()
        .await
        .unwrap();
    apply(&env, file).await;
    let token = env
        .token_for_service_account("kube-system", "cloud-controller-manager")
        .unwrap();
    let kubeconfig = kube_testenv::kubeconfig_yaml_with_token(&env.url(), &token);
    let tag = file.trim_end_matches(".yaml");
    let dir = std::env::temp_dir().join(format!("rbac-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let requests = run_every_code_path(&env, &dir, &kubeconfig, extra).await;
    std::fs::remove_dir_all(&dir).unwrap();
    let grants = read_rbac(file);

    let refused: Vec<String> = requests
        .iter()
        .filter(|r| r.status == 401 || r.status == 403)
        .map(|r| {
            format!(
                "{} {} {} {}/{} {:?}",
                r.status,
                r.user,
                r.verb,
                group(r),
                resource(r),
                r.name
            )
        })
        .collect();
    assert!(
        refused.is_empty(),
        "{file}: refused requests:\n{refused:#?}"
    );
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
    let mut used: BTreeSet<(String, Permission)> = BTreeSet::new();
    for r in &requests {
        let account = r.user.trim_start_matches(SA_PREFIX).to_string();
        let rules = grants.get(&account).map(Vec::as_slice).unwrap_or_default();
        let allowed = rules.iter().any(|(ns, rule)| {
            (ns.is_none() || r.namespace.as_deref() == ns.as_deref()) && allows(rule, r)
        });
        if !allowed {
            denied.insert(format!(
                "{account}: {} {}/{} ns={:?} name={:?}",
                r.verb,
                group(r),
                resource(r),
                r.namespace,
                r.name
            ));
        }
        let permission = Permission {
            verb: r.verb.clone(),
            group: group(r),
            resource: resource(r),
        };
        used.insert((account, permission));
    }
    assert!(
        denied.is_empty(),
        "used but not granted by docs/deploy/{file}:\n{denied:#?}"
    );

    let mut unused = Vec::new();
    for (account, rules) in &grants {
        for (_, rule) in rules {
            for verb in &rule.verbs {
                for g in rule.api_groups.iter().flatten() {
                    for res in rule.resources.iter().flatten() {
                        let p = Permission {
                            verb: verb.clone(),
                            group: g.clone(),
                            resource: res.clone(),
                        };
                        let excepted = EXCEPTIONS
                            .iter()
                            .any(|(a, v, r, _)| a == account && v == verb && r == res);
                        if !excepted && !used.contains(&(account.clone(), p.clone())) {
                            unused.push((account.clone(), p));
                        }
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "{file}: granted but never used (remove, or document as an exception):\n{unused:#?}\nused: {used:#?}"
    );
}

#[tokio::test]
async fn one_identity_roles_grant_exactly_what_the_controllers_use() {
    check_least_privilege("rbac.yaml", &[]).await;
}

/// Sharded service and cloud-node: the member Leases (create, renew, list, delete on shutdown)
/// need exactly `rbac-sharding.yaml` beside the one-identity roles.
#[tokio::test]
async fn sharding_roles_grant_exactly_what_the_rings_use() {
    check_least_privilege(
        "rbac.yaml+rbac-sharding.yaml",
        &["--sharded-controllers=service,cloud-node"],
    )
    .await;
}

/// Label mode adds the label writes, `rbac-sharding-label.yaml` (its lists by label and by name
/// use the informers' `list`).
#[tokio::test]
async fn label_mode_roles_grant_exactly_what_the_label_writes_use() {
    check_least_privilege(
        "rbac.yaml+rbac-sharding.yaml+rbac-sharding-label.yaml",
        &[
            "--sharded-controllers=service,cloud-node",
            "--shard-assignment=label",
        ],
    )
    .await;
}

#[tokio::test]
async fn per_controller_roles_grant_exactly_what_each_controller_uses() {
    check_least_privilege(
        "rbac-service-account-credentials.yaml",
        &["--use-service-account-credentials"],
    )
    .await;
    // Each exception is a real grant of the file, so dropping it is caught too.
    let grants = read_rbac("rbac-service-account-credentials.yaml");
    for (account, verb, res, why) in EXCEPTIONS {
        let granted = grants[*account].iter().any(|(_, r)| {
            r.verbs.iter().any(|v| v == verb) && r.resources.iter().flatten().any(|x| x == res)
        });
        assert!(granted, "{account} must keep {verb} {res}: {why}");
    }
}

/// The `kubectl auth can-i` block of docs/operating.md (the code block after "Check what each
/// identity may do:"), as (RBAC file, args, expected answer): a `# ... (FILE)` comment line
/// names the file the following commands check.
fn documented_checks() -> Vec<(String, Vec<String>, bool)> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operating.md"))
            .unwrap();
    let mut checks = Vec::new();
    let mut file = String::new();
    let mut pending = String::new();
    let block = doc
        .split_once("Check what each identity may do:")
        .and_then(|(_, rest)| rest.split_once("```sh"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("the kubectl auth can-i block in docs/operating.md");
    for line in block.lines() {
        let line = line.trim_end();
        if let Some(rest) = line.strip_prefix("# ")
            && let Some((_, f)) = rest.split_once('(')
            && f.ends_with(".yaml)")
        {
            file = f.trim_end_matches(')').to_string();
            continue;
        }
        if !line.starts_with("kubectl auth can-i") && pending.is_empty() {
            continue;
        }
        if let Some(start) = line.strip_suffix('\\') {
            pending.push_str(start);
            continue;
        }
        pending.push_str(line);
        let (command, answer) = pending.rsplit_once('#').unwrap();
        let args: Vec<String> = command
            .split_whitespace()
            .skip(1)
            .map(String::from)
            .collect();
        checks.push((file.clone(), args, answer.trim() == "yes"));
        pending.clear();
    }
    checks
}

#[tokio::test]
async fn the_documented_kubectl_auth_can_i_checks_hold() {
    let checks = documented_checks();
    assert!(checks.len() >= 8, "{checks:?}");
    let files: BTreeSet<String> = checks.iter().map(|(f, _, _)| f.clone()).collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for file in files {
        let env = TestEnv::builder()
            .authorization(true)
            .https(true)
            .start()
            .await
            .unwrap();
        apply(&env, &file).await;
        let dir = std::env::temp_dir().join(format!("rbac-can-i-{}-{}", std::process::id(), file));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        env.write_kubeconfig(&kubeconfig).unwrap();
        for (_, args, yes) in checks.iter().filter(|(f, _, _)| *f == file) {
            let mut kubectl = Command::new("kubectl");
            kubectl
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .args(args);
            let out = tokio::task::spawn_blocking(move || kubectl.output())
                .await
                .unwrap()
                .expect("kubectl is installed (.ci/run installs it)");
            let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
            assert_eq!(
                said,
                if *yes { "yes" } else { "no" },
                "{file}: kubectl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
