//! Table tests for the service controller predicates.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ClientIPConfig, Node, Service, ServicePort, ServiceSpec, SessionAffinityConfig, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

fn lb_service() -> Service {
    Service {
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: 80,
                node_port: Some(30080),
                target_port: Some(IntOrString::Int(8080)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        metadata: ObjectMeta {
            namespace: Some("default".into()),
            name: Some("web".into()),
            uid: Some("uid-1".into()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    }
}

fn with(f: impl FnOnce(&mut Service)) -> Service {
    let mut svc = lb_service();
    f(&mut svc);
    svc
}

fn spec(svc: &mut Service) -> &mut ServiceSpec {
    svc.spec.get_or_insert_with(Default::default)
}

fn port(svc: &mut Service) -> &mut ServicePort {
    &mut spec(svc).ports.get_or_insert_with(Vec::new)[0]
}

fn deleted() -> Option<Time> {
    Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
}

fn finalized(svc: &mut Service) {
    svc.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.into()]);
}

#[test]
fn wants_load_balancer_table() {
    let cases: Vec<(&str, Service, bool)> = vec![
        ("type LoadBalancer", lb_service(), true),
        (
            "type ClusterIP",
            with(|s| spec(s).type_ = Some("ClusterIP".into())),
            false,
        ),
        ("no type", with(|s| spec(s).type_ = None), false),
        ("no spec", with(|s| s.spec = None), false),
        (
            "loadBalancerClass set",
            with(|s| spec(s).load_balancer_class = Some("other.io/lb".into())),
            false,
        ),
    ];
    for (name, svc, want) in cases {
        assert_eq!(wants_load_balancer(&svc), want, "{name}");
    }
}

#[test]
fn needs_cleanup_table() {
    let cases: Vec<(&str, Service, bool)> = vec![
        ("LB, no finalizer", lb_service(), false),
        ("LB with finalizer", with(finalized), false),
        (
            "deleting with finalizer",
            with(|s| {
                finalized(s);
                s.metadata.deletion_timestamp = deleted();
            }),
            true,
        ),
        (
            "deleting without finalizer",
            with(|s| s.metadata.deletion_timestamp = deleted()),
            false,
        ),
        (
            "type changed with finalizer",
            with(|s| {
                finalized(s);
                spec(s).type_ = Some("NodePort".into());
            }),
            true,
        ),
        (
            "class set but still type LB with finalizer",
            with(|s| {
                finalized(s);
                spec(s).load_balancer_class = Some("x".into());
            }),
            false,
        ),
        (
            "other finalizer only, deleting",
            with(|s| {
                s.metadata.finalizers = Some(vec!["example.com/other".into()]);
                s.metadata.deletion_timestamp = deleted();
            }),
            false,
        ),
    ];
    for (name, svc, want) in cases {
        assert_eq!(needs_cleanup(&svc), want, "{name}");
    }
}

#[test]
fn update_cause_table() {
    use UpdateCause::*;
    let base = lb_service();
    let cluster_ip = with(|s| spec(s).type_ = Some("ClusterIP".into()));
    let cases: Vec<(&str, Service, Service, Option<UpdateCause>)> = vec![
        ("identical", base.clone(), base.clone(), None),
        (
            "neither wants LB",
            cluster_ip.clone(),
            with(|s| {
                spec(s).type_ = Some("ClusterIP".into());
                s.metadata.annotations = Some(BTreeMap::from([("a".into(), "b".into())]));
            }),
            None,
        ),
        (
            "1 becomes LB",
            cluster_ip.clone(),
            base.clone(),
            Some(WantsLoadBalancer),
        ),
        (
            "1 stops being LB",
            base.clone(),
            cluster_ip,
            Some(WantsLoadBalancer),
        ),
        (
            "1 class added",
            base.clone(),
            with(|s| spec(s).load_balancer_class = Some("c".into())),
            Some(WantsLoadBalancer),
        ),
        (
            "2 source ranges",
            base.clone(),
            with(|s| spec(s).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()])),
            Some(SourceRanges),
        ),
        (
            "2 source ranges reordered",
            with(|s| spec(s).load_balancer_source_ranges = Some(vec!["a".into(), "b".into()])),
            with(|s| spec(s).load_balancer_source_ranges = Some(vec!["b".into(), "a".into()])),
            Some(SourceRanges),
        ),
        (
            "3 port count",
            base.clone(),
            with(|s| {
                spec(s).ports.as_mut().unwrap().push(ServicePort {
                    port: 443,
                    ..Default::default()
                })
            }),
            Some(Ports),
        ),
        (
            "3 port name",
            base.clone(),
            with(|s| port(s).name = Some("web".into())),
            Some(Ports),
        ),
        (
            "3 port protocol",
            base.clone(),
            with(|s| port(s).protocol = Some("UDP".into())),
            Some(Ports),
        ),
        (
            "3 port number",
            base.clone(),
            with(|s| port(s).port = 81),
            Some(Ports),
        ),
        (
            "3 nodePort",
            base.clone(),
            with(|s| port(s).node_port = Some(30081)),
            Some(Ports),
        ),
        (
            "3 targetPort",
            base.clone(),
            with(|s| port(s).target_port = Some(IntOrString::String("http".into()))),
            Some(Ports),
        ),
        (
            "3 appProtocol",
            base.clone(),
            with(|s| port(s).app_protocol = Some("h2c".into())),
            Some(Ports),
        ),
        (
            "4 sessionAffinity",
            base.clone(),
            with(|s| spec(s).session_affinity = Some("ClientIP".into())),
            Some(SessionAffinity),
        ),
        (
            "4 sessionAffinityConfig",
            base.clone(),
            with(|s| {
                spec(s).session_affinity_config = Some(SessionAffinityConfig {
                    client_ip: Some(ClientIPConfig {
                        timeout_seconds: Some(60),
                    }),
                })
            }),
            Some(SessionAffinity),
        ),
        (
            "5 loadBalancerIP",
            base.clone(),
            with(|s| spec(s).load_balancer_ip = Some("1.2.3.4".into())),
            Some(LoadBalancerIp),
        ),
        (
            "6 externalIPs count",
            base.clone(),
            with(|s| spec(s).external_ips = Some(vec!["1.1.1.1".into()])),
            Some(ExternalIps),
        ),
        (
            "6 externalIPs element",
            with(|s| spec(s).external_ips = Some(vec!["1.1.1.1".into()])),
            with(|s| spec(s).external_ips = Some(vec!["2.2.2.2".into()])),
            Some(ExternalIps),
        ),
        (
            "6 externalIPs empty equals unset",
            base.clone(),
            with(|s| spec(s).external_ips = Some(vec![])),
            None,
        ),
        (
            "7 annotation added",
            base.clone(),
            with(|s| s.metadata.annotations = Some(BTreeMap::from([("k".into(), "v".into())]))),
            Some(Annotations),
        ),
        (
            "8 uid",
            base.clone(),
            with(|s| s.metadata.uid = Some("uid-2".into())),
            Some(Uid),
        ),
        (
            "9 externalTrafficPolicy",
            base.clone(),
            with(|s| spec(s).external_traffic_policy = Some("Local".into())),
            Some(ExternalTrafficPolicy),
        ),
        (
            "10 healthCheckNodePort",
            base.clone(),
            with(|s| spec(s).health_check_node_port = Some(32000)),
            Some(HealthCheckNodePort),
        ),
        (
            "11 ipFamilies count",
            base.clone(),
            with(|s| spec(s).ip_families = Some(vec!["IPv4".into(), "IPv6".into()])),
            Some(IpFamilies),
        ),
        (
            "11 ipFamilies swapped is ignored",
            with(|s| spec(s).ip_families = Some(vec!["IPv4".into()])),
            with(|s| spec(s).ip_families = Some(vec!["IPv6".into()])),
            None,
        ),
        (
            "ignored: labels",
            base.clone(),
            with(|s| s.metadata.labels = Some(BTreeMap::from([("k".into(), "v".into())]))),
            None,
        ),
        (
            "ignored: selector",
            base.clone(),
            with(|s| spec(s).selector = Some(BTreeMap::from([("app".into(), "x".into())]))),
            None,
        ),
        (
            "ignored: clusterIP",
            base.clone(),
            with(|s| spec(s).cluster_ip = Some("10.0.0.9".into())),
            None,
        ),
        ("ignored: finalizers", base.clone(), with(finalized), None),
        (
            "ignored: internalTrafficPolicy",
            base.clone(),
            with(|s| spec(s).internal_traffic_policy = Some("Local".into())),
            None,
        ),
        (
            "ignored: publishNotReadyAddresses",
            base.clone(),
            with(|s| spec(s).publish_not_ready_addresses = Some(true)),
            None,
        ),
        (
            "ignored: allocateLoadBalancerNodePorts",
            base.clone(),
            with(|s| spec(s).allocate_load_balancer_node_ports = Some(false)),
            None,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(update_cause(&old, &new), want, "{name}");
        assert_eq!(needs_update(&old, &new), want.is_some(), "{name}");
    }
}

fn node(name: &str) -> Node {
    fake_cloud::objects::node(name, Some(&format!("fake://{name}")))
}

fn labelled(name: &str, value: &str) -> Node {
    let mut n = node(name);
    n.metadata.labels = Some(BTreeMap::from([(
        EXCLUDE_FROM_LOAD_BALANCERS_LABEL.into(),
        value.into(),
    )]));
    n
}

#[test]
fn exclusion_label_table() {
    let cases = [
        (None, true),
        (Some("true"), false),
        (Some("True"), false),
        (Some("1"), false),
        (Some("t"), false),
        (Some(""), false),
        (Some("yes"), false),
        (Some("false"), true),
        (Some("False"), true),
        (Some("FALSE"), true),
        (Some("0"), true),
        (Some("f"), true),
    ];
    for (value, included) in cases {
        let n = match value {
            None => node("a"),
            Some(v) => labelled("a", v),
        };
        assert_eq!(node_included(&n), included, "label value {value:?}");
    }
}

#[test]
fn stable_node_predicate_table() {
    let mut deleting = node("d");
    deleting.metadata.deletion_timestamp = deleted();
    let mut tainted = node("t");
    tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: TO_BE_DELETED_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let mut other_taint = node("o");
    other_taint.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: "node.kubernetes.io/not-ready".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let mut not_ready = node("nr");
    not_ready.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
            type_: "Ready".into(),
            status: "False".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let cases = [
        ("plain", node("a"), true),
        ("deleting", deleting, false),
        ("autoscaler taint", tainted, false),
        ("other taint", other_taint, true),
        ("not ready still included", not_ready, true),
        ("excluded", labelled("x", "true"), false),
        ("exclusion false", labelled("x", "false"), true),
    ];
    for (name, n, want) in cases {
        assert_eq!(stable_node_predicate(&n), want, "{name}");
    }
    let all: Vec<Arc<Node>> = vec![
        Arc::new(node("a")),
        Arc::new(labelled("b", "true")),
        Arc::new(node("c")),
    ];
    let names: Vec<_> = filter_lb_nodes(&all)
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn should_sync_updated_node_table() {
    let mut pid = node("a");
    pid.spec.as_mut().unwrap().provider_id = Some("fake://other".into());
    let mut tainted = node("a");
    tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
        key: TO_BE_DELETED_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let mut other_label = node("a");
    other_label.metadata.labels = Some(BTreeMap::from([("role".into(), "x".into())]));
    let cases = [
        ("unchanged", node("a"), node("a"), false),
        ("excluded", node("a"), labelled("a", "true"), true),
        (
            "re-included",
            labelled("a", "true"),
            labelled("a", "false"),
            true,
        ),
        (
            "true to unparsable stays excluded",
            labelled("a", "true"),
            labelled("a", "maybe"),
            false,
        ),
        ("provider id", node("a"), pid, true),
        ("autoscaler taint ignored", node("a"), tainted, false),
        ("other label ignored", node("a"), other_label, false),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(should_sync_updated_node(&old, &new), want, "{name}");
    }
}

#[test]
fn nodes_sufficiently_equal_table() {
    let a = Arc::new(node("a"));
    let b = Arc::new(node("b"));
    let mut moved = node("b");
    moved.spec.as_mut().unwrap().provider_id = Some("fake://new".into());
    let moved = Arc::new(moved);
    type Case = (&'static str, Vec<Arc<Node>>, Vec<Arc<Node>>, bool);
    let cases: Vec<Case> = vec![
        ("both empty", vec![], vec![], true),
        (
            "same",
            vec![a.clone(), b.clone()],
            vec![a.clone(), b.clone()],
            true,
        ),
        (
            "order ignored",
            vec![a.clone(), b.clone()],
            vec![b.clone(), a.clone()],
            true,
        ),
        ("added", vec![a.clone()], vec![a.clone(), b.clone()], false),
        (
            "removed",
            vec![a.clone(), b.clone()],
            vec![a.clone()],
            false,
        ),
        (
            "provider id changed",
            vec![a.clone(), b.clone()],
            vec![a.clone(), moved],
            false,
        ),
        ("replaced", vec![a.clone()], vec![b.clone()], false),
    ];
    for (name, x, y, want) in cases {
        assert_eq!(nodes_sufficiently_equal(&x, &y), want, "{name}");
    }
}
