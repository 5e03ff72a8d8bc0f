//! The objects the benchmarks cache: Nodes and Services shaped like a kubelet-registered node and
//! an ordinary ClusterIP Service, and the code that loads them into the API server.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, Service};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

/// How many namespaces the Services are spread over, as in a real cluster.
pub const SERVICE_NAMESPACES: usize = 20;
/// Namespace of the ConfigMaps the latency benchmark patches.
pub const LATENCY_NAMESPACE: &str = "bench-latency";
/// The annotation the latency patcher stamps with its wall-clock write time (ns since epoch).
pub const WRITTEN_AT: &str = "bench.example.com/written-at-ns";

/// A Node as a kubelet registers it on a cloud VM: ~3.5 KB of JSON (labels, addresses, capacity,
/// five conditions, node info, ten images). `managed_fields` adds the four entries a real API
/// server records for kubelet, its status updates, the CCM and kube-controller-manager.
pub fn node(i: usize, managed_fields: bool) -> Value {
    let name = format!("node-{i:05}");
    let ip = format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256);
    let zone = ["a", "b", "c"][i % 3];
    let condition = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "lastHeartbeatTime": "2026-11-30T08:00:00Z",
               "lastTransitionTime": "2026-11-30T07:00:00Z", "reason": reason, "message": message})
    };
    let images: Vec<Value> = (0..10)
        .map(|n| {
            json!({"names": [format!("registry.k8s.io/component-{n}@sha256:{:064x}", n * 7919 + 1),
                              format!("registry.k8s.io/component-{n}:v1.33.{n}")],
                   "sizeBytes": 10_000_000 + n * 1_234_567})
        })
        .collect();
    let resources = json!({"cpu": "8", "ephemeral-storage": "101430960Ki", "hugepages-1Gi": "0",
                           "hugepages-2Mi": "0", "memory": "32781064Ki", "pods": "110"});
    let mut obj = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": format!("eu-west-1{zone}"),
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
            },
        },
        "spec": {"podCIDR": format!("10.244.{}.0/24", i % 256), "podCIDRs": [format!("10.244.{}.0/24", i % 256)],
                 "providerID": format!("aws:///eu-west-1{zone}/i-{:017x}", i)},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip},
                          {"type": "Hostname", "address": format!("ip-{}.eu-west-1.compute.internal", ip.replace('.', "-"))},
                          {"type": "InternalDNS", "address": format!("ip-{}.eu-west-1.compute.internal", ip.replace('.', "-"))}],
            "allocatable": resources.clone(), "capacity": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                condition("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {"architecture": "amd64", "bootID": format!("{:032x}", i * 31),
                         "containerRuntimeVersion": "containerd://1.7.22", "kernelVersion": "6.1.0-27-cloud-amd64",
                         "kubeProxyVersion": "", "kubeletVersion": "v1.33.2",
                         "machineID": format!("{:032x}", i * 17), "operatingSystem": "linux",
                         "osImage": "Debian GNU/Linux 12 (bookworm)", "systemUUID": format!("ec2{:029x}", i)},
        }
    });
    if managed_fields {
        obj["metadata"]["managedFields"] = managed_fields_entries();
    }
    obj
}

/// The managedFields a real API server keeps on a kubelet-registered, CCM-initialized Node.
fn managed_fields_entries() -> Value {
    let keys = |names: &[&str]| -> Value {
        let mut m = serde_json::Map::new();
        m.insert(".".into(), json!({}));
        for n in names {
            m.insert(format!("f:{n}"), json!({}));
        }
        Value::Object(m)
    };
    let cond = |t: &str| {
        (
            format!("k:{{\"type\":\"{t}\"}}"),
            json!({".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {},
                "f:reason": {}, "f:status": {}, "f:type": {}}),
        )
    };
    let mut conditions = serde_json::Map::new();
    conditions.insert(".".into(), json!({}));
    for t in ["DiskPressure", "MemoryPressure", "PIDPressure", "Ready"] {
        let (k, v) = cond(t);
        conditions.insert(k, v);
    }
    let entry = |manager: &str, sub: Option<&str>, fields: Value| {
        let mut e = json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
                           "time": "2026-11-30T08:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields});
        if let Some(s) = sub {
            e["subresource"] = s.into();
        }
        e
    };
    json!([
        entry(
            "kubelet",
            None,
            json!({"f:metadata": {"f:annotations": keys(&["kubeadm.alpha.kubernetes.io/cri-socket", "node.alpha.kubernetes.io/ttl", "volumes.kubernetes.io/controller-managed-attach-detach"]),
            "f:labels": keys(&["beta.kubernetes.io/arch", "beta.kubernetes.io/os", "kubernetes.io/arch", "kubernetes.io/hostname", "kubernetes.io/os"])},
            "f:spec": {"f:providerID": {}}})
        ),
        entry(
            "kubelet",
            Some("status"),
            json!({"f:status": {"f:allocatable": keys(&["cpu", "ephemeral-storage", "memory", "pods"]),
            "f:capacity": keys(&["cpu", "ephemeral-storage", "memory", "pods"]), "f:conditions": Value::Object(conditions),
            "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}}, "f:images": {},
            "f:nodeInfo": keys(&["architecture", "bootID", "containerRuntimeVersion", "kernelVersion", "kubeProxyVersion", "kubeletVersion", "machineID", "operatingSystem", "osImage", "systemUUID"])}})
        ),
        entry(
            "cloud-controller-manager",
            None,
            json!({"f:metadata": {"f:labels": keys(&["node.kubernetes.io/instance-type", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"])}})
        ),
        entry(
            "cloud-controller-manager",
            Some("status"),
            json!({"f:status": {"f:addresses": {".": {},
            "k:{\"type\":\"Hostname\"}": {".": {}, "f:address": {}, "f:type": {}},
            "k:{\"type\":\"InternalDNS\"}": {".": {}, "f:address": {}, "f:type": {}},
            "k:{\"type\":\"InternalIP\"}": {".": {}, "f:address": {}, "f:type": {}}},
            "f:conditions": {"k:{\"type\":\"NetworkUnavailable\"}": {".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}})
        ),
        entry(
            "kube-controller-manager",
            None,
            json!({"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}},
            "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, "v:\"10.244.0.0/24\"": {}}}})
        ),
    ])
}

/// An ordinary ClusterIP Service of a Deployment (~0.8 KB of JSON once defaulted).
pub fn service(i: usize) -> Value {
    let app = format!("app-{i:05}");
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": app, "namespace": format!("bench-{}", i % SERVICE_NAMESPACES),
                     "labels": {"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "bench",
                                "app.kubernetes.io/managed-by": "helm"},
                     "annotations": {"meta.helm.sh/release-name": app, "meta.helm.sh/release-namespace": "bench"}},
        "spec": {"type": "ClusterIP", "selector": {"app.kubernetes.io/name": app},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                           {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"}]}
    })
}

/// Namespace of the Secrets of table 4c.
pub const SECRET_NAMESPACE: &str = "bench-secrets";

/// An Opaque Secret with `kb` KB of data (one key) and the labels and annotations a Helm chart
/// or cert-manager puts on one: what an operator that lists every Secret caches.
pub fn secret(i: usize, kb: usize) -> Value {
    let name = format!("secret-{i:05}");
    // Base64 of `kb` KB of varied bytes, so the payload is 1,024 × kb bytes once decoded.
    let payload: Vec<u8> = (0..kb * 1024).map(|b| (b * 31 + i) as u8).collect();
    let encoded = k8s_openapi::ByteString(payload);
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": SECRET_NAMESPACE,
                     "labels": {"app.kubernetes.io/name": format!("app-{}", i % 100),
                                "app.kubernetes.io/managed-by": "helm", "owner": "bench"},
                     "annotations": {"meta.helm.sh/release-name": format!("app-{}", i % 100),
                                     "meta.helm.sh/release-namespace": SECRET_NAMESPACE}},
        "data": {"payload": encoded}
    })
}

/// Loads `secrets` Secrets of `kb` KB into [`SECRET_NAMESPACE`]; returns how long it took.
pub async fn seed_secrets(
    client: kube::Client,
    secrets: usize,
    kb: usize,
) -> anyhow::Result<Duration> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SECRET_NAMESPACE}});
    create_all(vec![(namespaces, ns)], 1).await?;
    let api: Api<Secret> = Api::namespaced(client, SECRET_NAMESPACE);
    create_all(
        (0..secrets).map(|i| (api.clone(), secret(i, kb))).collect(),
        16,
    )
    .await
}

/// A small ConfigMap the latency benchmark patches.
pub fn config_map(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": format!("cm-{i:05}"), "namespace": LATENCY_NAMESPACE},
           "data": {"key": "value"}})
}

/// Creates each object through its `Api`, `concurrency` requests at a time; returns how long it
/// took.
async fn create_all<K>(
    objects: Vec<(Api<K>, Value)>,
    concurrency: usize,
) -> anyhow::Result<Duration>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let started = Instant::now();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(objects)
        .map(|(api, obj)| async move {
            let obj: K = serde_json::from_value(obj)?;
            api.create(&PostParams::default(), &obj).await?;
            Ok(())
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    Ok(started.elapsed())
}

/// What loading the server cost, reported as a finding about kube-testenv.
#[derive(Debug)]
pub struct Seeded {
    /// Nodes created.
    pub nodes: usize,
    /// Services created.
    pub services: usize,
    /// ConfigMaps created.
    pub config_maps: usize,
    /// Wall time to create the Nodes.
    pub nodes_took: Duration,
    /// Wall time to create the Services (the slow part: see docs/benchmarks.md).
    pub services_took: Duration,
}

/// Loads `nodes` Nodes, `services` Services (in [`SERVICE_NAMESPACES`] namespaces) and
/// `config_maps` ConfigMaps for the latency benchmark.
pub async fn seed(
    client: kube::Client,
    nodes: usize,
    services: usize,
    config_maps: usize,
) -> anyhow::Result<Seeded> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns: Vec<Value> = (0..SERVICE_NAMESPACES)
        .map(|i| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("bench-{i}")}}))
        .collect();
    ns.push(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LATENCY_NAMESPACE}}),
    );
    create_all(ns.into_iter().map(|n| (namespaces.clone(), n)).collect(), 8).await?;
    let node_api: Api<Node> = Api::all(client.clone());
    let nodes_took = create_all(
        (0..nodes)
            .map(|i| (node_api.clone(), node(i, false)))
            .collect(),
        16,
    )
    .await?;
    let service_apis: Vec<Api<Service>> = (0..SERVICE_NAMESPACES)
        .map(|n| Api::namespaced(client.clone(), &format!("bench-{n}")))
        .collect();
    let services_took = create_all(
        (0..services)
            .map(|i| (service_apis[i % SERVICE_NAMESPACES].clone(), service(i)))
            .collect(),
        16,
    )
    .await?;
    let cm_api: Api<ConfigMap> = Api::namespaced(client, LATENCY_NAMESPACE);
    create_all(
        (0..config_maps)
            .map(|i| (cm_api.clone(), config_map(i)))
            .collect(),
        16,
    )
    .await?;
    Ok(Seeded {
        nodes,
        services,
        config_maps,
        nodes_took,
        services_took,
    })
}

/// Loads `nodes` Nodes written by two field managers, as a real cluster's are: the kubelet
/// registers each one and a cloud controller then patches its addresses through `/status`, so
/// every Node carries the managedFields entries kube-testenv records for those writes.
/// Returns the average JSON size of one Node as the server sends it.
pub async fn seed_managed_nodes(client: kube::Client, nodes: usize) -> anyhow::Result<usize> {
    use kube::api::{Patch, PatchParams};
    let api: Api<Node> = Api::all(client);
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..nodes)
        .map(|i| {
            let api = api.clone();
            async move {
                let obj: Node = serde_json::from_value(node(i, false))?;
                let kubelet = PostParams {
                    field_manager: Some("kubelet".into()),
                    ..PostParams::default()
                };
                let created = api.create(&kubelet, &obj).await?;
                let name = created.metadata.name.unwrap_or_default();
                let ccm = PatchParams {
                    field_manager: Some("cloud-controller-manager".into()),
                    ..PatchParams::default()
                };
                let addresses = json!({"status": {"addresses": [
                    {"type": "InternalIP", "address": format!("10.1.{}.{}", i / 256 % 256, i % 256)},
                    {"type": "ExternalIP", "address": format!("198.51.{}.{}", i / 256 % 256, i % 256)}
                ]}});
                api.patch_status(&name, &ccm, &Patch::Strategic(addresses))
                    .await?;
                Ok(())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
    let listed = api.list(&Default::default()).await?;
    let bytes = serde_json::to_vec(&listed.items)?.len();
    Ok(bytes / listed.items.len().max(1))
}
