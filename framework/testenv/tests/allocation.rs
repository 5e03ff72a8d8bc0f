//! Service clusterIP and nodePort allocation: unique across Services, held until the Service is
//! really gone (delete, finalizer removal, namespace deletion, deletecollection), freed by a type
//! change that drops nodePorts, and a taken explicit value refused with upstream's message.

mod support;

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};
use support::{api_err, create_svc};

fn cluster_ip(s: &Service) -> String {
    s.spec.as_ref().unwrap().cluster_ip.clone().unwrap()
}

fn node_ports(s: &Service) -> Vec<i32> {
    let spec = s.spec.as_ref().unwrap();
    spec.ports
        .iter()
        .flatten()
        .filter_map(|p| p.node_port)
        .collect()
}

fn one_port() -> Value {
    json!({"ports": [{"port": 80}]})
}

#[tokio::test]
async fn cluster_ips_are_unique_until_the_range_is_full_and_freed_on_delete() {
    // 10.0.0.0/27: .0 network, .1 the kubernetes Service, .31 broadcast, 29 left.
    let env = TestEnv::builder()
        .service_cluster_ip_range("10.0.0.0/27")
        .start()
        .await
        .unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let mut ips = HashSet::new();
    for i in 0..29 {
        let s = create_svc(&svcs, &format!("s{i}"), one_port())
            .await
            .unwrap();
        let ip: std::net::Ipv4Addr = cluster_ip(&s).parse().unwrap();
        assert!((2..=30).contains(&ip.octets()[3]), "{ip} in range");
        assert!(ips.insert(ip), "{ip} handed out twice");
    }
    let err = api_err(create_svc(&svcs, "full", one_port()).await.unwrap_err());
    assert_eq!(err.code, 500);
    assert!(err.message.contains("range is full"), "{}", err.message);
    // Headless Services hold no address, so they still fit, and any number share "None".
    for name in ["h1", "h2"] {
        create_svc(
            &svcs,
            name,
            json!({"clusterIP": "None", "ports": [{"port": 80}]}),
        )
        .await
        .unwrap();
    }

    let freed = cluster_ip(&svcs.get("s7").await.unwrap());
    svcs.delete("s7", &DeleteParams::default()).await.unwrap();
    let again = create_svc(&svcs, "reuse", one_port()).await.unwrap();
    assert_eq!(cluster_ip(&again), freed, "the only free address is reused");

    // A restart keeps the data and so what is allocated.
    env.restart().await;
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    assert_eq!(
        api_err(create_svc(&svcs, "full", one_port()).await.unwrap_err()).code,
        500
    );

    svcs.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    for i in 0..29 {
        create_svc(&svcs, &format!("t{i}"), one_port())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn addresses_are_held_until_finalizers_are_removed_and_freed_by_namespace_deletion() {
    // A /30 leaves exactly one address for Services.
    let env = TestEnv::builder()
        .service_cluster_ip_range("10.0.0.0/30")
        .start()
        .await
        .unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let held: Service = serde_json::from_value(json!({
        "metadata": {"name": "held", "finalizers": ["example.com/cleanup"]},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    svcs.create(&PostParams::default(), &held).await.unwrap();
    svcs.delete("held", &DeleteParams::default()).await.unwrap();
    let err = api_err(create_svc(&svcs, "next", one_port()).await.unwrap_err());
    assert!(
        err.message.contains("range is full"),
        "terminating still holds it"
    );
    svcs.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    create_svc(&svcs, "next", one_port()).await.unwrap();
    svcs.delete("next", &DeleteParams::default()).await.unwrap();

    let nss: Api<Namespace> = Api::all(env.client());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
    )
    .await
    .unwrap();
    let team: Api<Service> = Api::namespaced(env.client(), "team");
    create_svc(&team, "in-team", one_port()).await.unwrap();
    assert!(create_svc(&svcs, "blocked", one_port()).await.is_err());
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    create_svc(&svcs, "after-ns", one_port()).await.unwrap();
}

#[tokio::test]
async fn node_ports_are_unique_and_freed_on_delete_and_type_change() {
    let env = TestEnv::builder()
        .node_port_range(30000..=30003)
        .start()
        .await
        .unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let two = |ty: &str| json!({"type": ty, "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]});
    let lb = create_svc(&svcs, "lb", two("LoadBalancer")).await.unwrap();
    let np = create_svc(&svcs, "np", two("NodePort")).await.unwrap();
    let all: HashSet<i32> = node_ports(&lb).into_iter().chain(node_ports(&np)).collect();
    assert_eq!(all, HashSet::from([30000, 30001, 30002, 30003]));
    let err = api_err(
        create_svc(
            &svcs,
            "full",
            json!({"type": "NodePort", "ports": [{"port": 80}]}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 500);
    assert!(
        err.message
            .contains("failed to allocate a nodePort: range is full"),
        "{}",
        err.message
    );

    // LoadBalancer -> ClusterIP drops the nodePorts and frees them.
    let changed = svcs
        .patch(
            "lb",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"type": "ClusterIP"}})),
        )
        .await
        .unwrap();
    assert!(node_ports(&changed).is_empty());
    let reused = create_svc(&svcs, "reused", two("NodePort")).await.unwrap();
    let mut got = node_ports(&reused);
    let mut want = node_ports(&lb);
    got.sort();
    want.sort();
    assert_eq!(got, want);

    // Deleting frees them for an explicit request too.
    let port = node_ports(&np)[0];
    svcs.delete("np", &DeleteParams::default()).await.unwrap();
    let explicit = create_svc(
        &svcs,
        "explicit",
        json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": port}]}),
    )
    .await
    .unwrap();
    assert_eq!(node_ports(&explicit), [port]);
}

#[tokio::test]
async fn a_taken_explicit_cluster_ip_or_node_port_is_refused_with_upstream_messages() {
    let env = TestEnv::start().await.unwrap();
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    create_svc(
        &svcs,
        "a",
        json!({"type": "NodePort", "clusterIP": "10.96.0.50",
               "ports": [{"port": 80, "nodePort": 30080}]}),
    )
    .await
    .unwrap();

    let err = api_err(
        create_svc(
            &svcs,
            "b",
            json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "Service \"b\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let err = api_err(
        create_svc(
            &svcs,
            "c",
            json!({"clusterIP": "10.96.0.50", "ports": [{"port": 80}]}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "Service \"c\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.50\"}: failed to allocate IP 10.96.0.50: provided IP is already allocated"
    );
    assert!(svcs.get_opt("b").await.unwrap().is_none(), "nothing stored");

    // A Service's own ports are not "taken" from itself on update, and one port number may
    // serve both protocols of the same Service, as upstream allows.
    svcs.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"ports": [
            {"name": "tcp", "port": 80, "protocol": "TCP", "nodePort": 30080},
            {"name": "udp", "port": 80, "protocol": "UDP", "nodePort": 30080}
        ]}})),
    )
    .await
    .unwrap();
    let dual = create_svc(
        &svcs,
        "dual",
        json!({"type": "NodePort", "ports": [
            {"name": "tcp", "port": 53, "protocol": "TCP", "nodePort": 30053},
            {"name": "udp", "port": 53, "protocol": "UDP", "nodePort": 30053}
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(node_ports(&dual), [30053, 30053]);
}
