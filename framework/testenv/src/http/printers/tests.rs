//! The printers against the cells kubectl shows for objects of each shape.
use super::*;
use crate::api::types::Served;

#[test]
fn event_rows_show_what_kubectl_get_events_shows() {
    for (group, plural) in [("", "events"), ("events.k8s.io", "events")] {
        let rt = &Served::Builtin(
            &crate::api::resources::TABLE
                [crate::api::resources::lookup(group, "v1", plural).unwrap()],
        );
        let event = if group.is_empty() {
            json!({"metadata": {"name": "web.1"}, "type": "Normal", "reason": "EnsuredLoadBalancer",
                "message": "Ensured load balancer ", "involvedObject": {"kind": "Service", "name": "web"},
                "source": {"component": "service-controller"}, "count": 3})
        } else {
            json!({"metadata": {"name": "web.1"}, "type": "Normal", "reason": "EnsuredLoadBalancer",
                "note": "Ensured load balancer", "regarding": {"kind": "Service", "name": "web"},
                "reportingController": "service-controller", "reportingInstance": "h1"})
        };
        let names: Vec<Value> = columns(rt).iter().map(|c| c["name"].clone()).collect();
        assert_eq!(
            names[..4],
            [
                json!("Last Seen"),
                json!("Type"),
                json!("Reason"),
                json!("Object")
            ]
        );
        let cells = cells(rt, &event);
        assert_eq!(cells.len(), names.len());
        assert_eq!(
            cells[1..4],
            [
                json!("Normal"),
                json!("EnsuredLoadBalancer"),
                json!("service/web")
            ]
        );
        assert_eq!(cells[6], "Ensured load balancer");
        assert_eq!(cells[9], "web.1");
        if group.is_empty() {
            assert_eq!(
                (cells[5].clone(), cells[8].clone()),
                (json!("service-controller"), json!(3))
            );
        } else {
            assert_eq!(
                (cells[5].clone(), cells[8].clone()),
                (json!("service-controller, h1"), json!(1))
            );
        }
    }
}

#[test]
fn endpoints_slices_pods_and_secrets() {
    let rt = |g: &str, p: &str| {
        Served::Builtin(
            &crate::api::resources::TABLE[crate::api::resources::lookup(g, "v1", p).unwrap()],
        )
    };
    let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]});
    assert_eq!(
        cells(&rt("", "endpoints"), &ep)[1],
        "10.0.0.1:80,10.0.0.1:443,10.0.0.2:80 + 1 more..."
    );
    assert_eq!(
        cells(&rt("", "endpoints"), &json!({"metadata": {"name": "e"}}))[1],
        "<none>"
    );
    let slice = json!({"metadata": {"name": "s"}, "addressType": "IPv4", "ports": [{"port": 443}], "endpoints": [{"addresses": ["10.0.0.9"]}]});
    assert_eq!(
        cells(&rt("discovery.k8s.io", "endpointslices"), &slice)[1..4],
        [json!("IPv4"), json!("443"), json!("10.0.0.9")]
    );
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {"phase": "Running", "podIP": "10.1.0.4", "containerStatuses": [{"ready": true, "restartCount": 2}, {"ready": false, "restartCount": 1}]}});
    let c = cells(&rt("", "pods"), &pod);
    assert_eq!(c[1..4], [json!("1/2"), json!("Running"), json!("3")]);
    assert_eq!(c[5..7], [json!("10.1.0.4"), json!("n1")]);
    assert_eq!(c.len(), columns(&rt("", "pods")).len());
    let secret = json!({"metadata": {"name": "x"}, "type": "Opaque", "data": {"a": "", "b": ""}});
    assert_eq!(
        cells(&rt("", "secrets"), &secret)[1..3],
        [json!("Opaque"), json!(2)]
    );
}

#[test]
fn node_and_service_rows() {
    let nodes = &Served::Builtin(
        &crate::api::resources::TABLE[crate::api::resources::lookup("", "v1", "nodes").unwrap()],
    );
    let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/worker": ""}}, "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
    let cells = crate::http::table::single(nodes, &node)["rows"][0]["cells"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        cells[..5],
        [
            json!("n"),
            json!("Ready,SchedulingDisabled"),
            json!("worker"),
            json!("<unknown>"),
            json!("v1.33.0")
        ]
    );
    let svcs = &Served::Builtin(
        &crate::api::resources::TABLE[crate::api::resources::lookup("", "v1", "services").unwrap()],
    );
    let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.5", "ports": [{"port": 80, "nodePort": 31000, "protocol": "TCP"}]}, "status": {"loadBalancer": {}}});
    let cells = crate::http::table::single(svcs, &svc)["rows"][0]["cells"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        cells[..5],
        [
            json!("s"),
            json!("LoadBalancer"),
            json!("10.96.0.5"),
            json!("<pending>"),
            json!("80:31000/TCP")
        ]
    );
}
