//! Service defaulting, allocation and immutability as kube-apiserver does them.

mod support;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::{api_err, create_svc};

/// Patches Service `name` through `svcs`.
async fn patch_svc(svcs: &Api<Service>, name: &str, patch: Patch<Value>) -> kube::Result<Service> {
    svcs.patch(name, &PatchParams::default(), &patch).await
}

#[tokio::test]
async fn load_balancer_defaults_match_the_captured_create() {
    let env = TestEnv::builder()
        .service_cluster_ip_range("10.100.0.0/16")
        .node_port_range(31000..=31010)
        .start()
        .await
        .unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let created = create_svc(&svcs, "golden-lb", json!({"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}))
        .await
        .unwrap();
    let spec = serde_json::to_value(created.spec.clone().unwrap()).unwrap();
    let ip = spec["clusterIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("10.100."), "{ip}");
    let node_port = spec["ports"][0]["nodePort"].as_i64().unwrap();
    assert!((31000..=31010).contains(&node_port));
    assert_eq!(
        spec,
        json!({
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": node_port}],
            "selector": {"app": "web"},
            "clusterIP": ip, "clusterIPs": [ip],
            "type": "LoadBalancer", "sessionAffinity": "None", "externalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "allocateLoadBalancerNodePorts": true, "internalTrafficPolicy": "Cluster"
        })
    );
    assert_eq!(
        serde_json::to_value(created.status.unwrap()).unwrap(),
        json!({"loadBalancer": {}})
    );
}

#[tokio::test]
async fn cluster_ip_is_immutable_and_allocations_survive_updates() {
    let env = TestEnv::start().await.unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let created = create_svc(
        &svcs,
        "golden-lb",
        json!({"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}),
    )
    .await
    .unwrap();
    let spec = created.spec.clone().unwrap();
    let err = api_err(
        patch_svc(
            &svcs,
            "golden-lb",
            Patch::Merge(json!({"spec": {"clusterIP": "10.96.99.99"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "Service \"golden-lb\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"10.96.99.99\"}: may not change once set"
    );

    // A PUT that omits clusterIP and nodePort keeps them (upstream patchAllocatedValues).
    let mut replacement = created.clone();
    let s = replacement.spec.as_mut().unwrap();
    s.cluster_ip = None;
    s.cluster_ips = None;
    s.ports.as_mut().unwrap()[0].node_port = None;
    let updated = svcs
        .replace("golden-lb", &PostParams::default(), &replacement)
        .await
        .unwrap();
    let u = updated.spec.unwrap();
    assert_eq!(u.cluster_ip, spec.cluster_ip);
    assert_eq!(
        u.ports.unwrap()[0].node_port,
        spec.ports.unwrap()[0].node_port
    );

    // Strategic merge on ports merges by port.
    let merged = patch_svc(
        &svcs,
        "golden-lb",
        Patch::Strategic(json!({"spec": {"ports": [{"name": "https", "port": 443}]}})),
    )
    .await
    .unwrap();
    let ports: Vec<i32> = merged
        .spec
        .unwrap()
        .ports
        .unwrap()
        .iter()
        .map(|p| p.port)
        .collect();
    // Upstream's order: the patch's items first, then the original's others (kubectl sends
    // `$setElementOrder/ports` to keep its own order).
    assert_eq!(ports, [443, 80]);

    // Changing to ClusterIP drops the nodePorts and LB-only fields.
    let cip = patch_svc(
        &svcs,
        "golden-lb",
        Patch::Merge(json!({"spec": {"type": "ClusterIP"}})),
    )
    .await
    .unwrap()
    .spec
    .unwrap();
    assert!(cip.ports.unwrap().iter().all(|p| p.node_port.is_none()));
    assert_eq!(
        (
            cip.external_traffic_policy,
            cip.allocate_load_balancer_node_ports
        ),
        (None, None)
    );
}

#[tokio::test]
async fn validation_errors_and_headless_and_taken_ips() {
    let env = TestEnv::start().await.unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let err = api_err(create_svc(&svcs, "noports", json!({})).await.unwrap_err());
    assert_eq!(
        err.message,
        "Service \"noports\" is invalid: spec.ports: Required value"
    );
    let err = api_err(
        create_svc(&svcs, "Bad", json!({"ports": [{"port": 80}]}))
            .await
            .unwrap_err(),
    );
    assert!(
        err.message.contains("a DNS-1035 label must consist of"),
        "{}",
        err.message
    );
    let headless = create_svc(
        &svcs,
        "headless",
        json!({"clusterIP": "None", "ports": [{"port": 80}]}),
    )
    .await
    .unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ips.unwrap(), ["None"]);
    let err = api_err(
        create_svc(
            &svcs,
            "dup",
            json!({"clusterIP": "10.96.0.1", "ports": [{"port": 80}]}),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message.contains("provided IP is already allocated"),
        "{}",
        err.message
    );
    let err = api_err(
        create_svc(
            &svcs,
            "multi",
            json!({"ports": [{"port": 80}, {"port": 81}]}),
        )
        .await
        .unwrap_err(),
    );
    assert!(
        err.message.contains("spec.ports[0].name: Required value"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn local_traffic_load_balancers_get_a_health_check_node_port() {
    let env = TestEnv::builder()
        .node_port_range(30000..=30002)
        .start()
        .await
        .unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let created = create_svc(
        &svcs,
        "local",
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}),
    )
    .await
    .unwrap();
    let spec = created.spec.unwrap();
    let hc = spec.health_check_node_port.expect("allocated");
    let np = spec.ports.unwrap()[0].node_port.unwrap();
    assert!((30000..=30002).contains(&hc) && hc != np, "{hc} {np}");
    let kept = patch_svc(
        &svcs,
        "local",
        Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
    assert_eq!(kept.spec.unwrap().health_check_node_port, Some(hc));
    let cluster = patch_svc(
        &svcs,
        "local",
        Patch::Merge(json!({"spec": {"externalTrafficPolicy": "Cluster"}})),
    )
    .await
    .unwrap();
    assert_eq!(cluster.spec.unwrap().health_check_node_port, None);
}
