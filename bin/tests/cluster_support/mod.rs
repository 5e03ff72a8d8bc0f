//! What the multi-process tests of the binary share: a cluster of Ready Nodes and LoadBalancer
//! Services on kube-testenv, and each process's fake-cloud call log (`callLogFile`) read back.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

/// Creates `names` as Nodes with a `fake://` provider ID (initialized) and a Ready condition.
pub async fn create_ready_nodes(client: &kube::Client, names: impl IntoIterator<Item = String>) {
    let api: Api<Node> = Api::all(client.clone());
    for name in names {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"providerID": format!("fake://{name}")},
        }))
        .expect("node");
        let mut created = api
            .create(&PostParams::default(), &node)
            .await
            .expect("node");
        created.status = Some(
            serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}]}))
                .expect("status"),
        );
        api.replace_status(&name, &PostParams::default(), &created)
            .await
            .expect("ready");
    }
}

/// Creates `names` as LoadBalancer Services (one port) in `default`.
pub async fn create_lb_services(client: &kube::Client, names: impl IntoIterator<Item = String>) {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    for name in names {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        }))
        .expect("service");
        api.create(&PostParams::default(), &svc)
            .await
            .expect("service");
    }
}

/// Whether the Service's status shows a load-balancer address.
pub fn has_ingress(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

/// Now, in µs since the epoch: the call log's clock.
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

/// One line of a fake cloud's call-log file.
#[derive(Debug)]
pub struct Call {
    pub method: String,
    pub key: String,
    pub ok: bool,
    pub started: u64,
    pub finished: u64,
}

/// Every call in the call-log file at `path`, in order (none if it does not exist yet).
pub fn read_call_log(path: &Path) -> Vec<Call> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a whole JSON line"))
        .map(|v| Call {
            method: v["method"].as_str().unwrap_or_default().to_owned(),
            key: v["key"].as_str().unwrap_or_default().to_owned(),
            ok: v.get("error").is_none(),
            started: v["startedUnixMicros"].as_u64().expect("start"),
            finished: v["finishedUnixMicros"].as_u64().expect("finish"),
        })
        .collect()
}
