//! Helpers shared by the integration test targets.

pub mod capture;
pub mod kubectl;
#[allow(dead_code)] // only the webhook test binaries serve TLS
pub mod tls;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use kube_testenv::TestEnv;
use serde_json::{Value, json};

/// A fresh cluster holding `node`, and its Node API.
#[allow(dead_code)] // only the Node test binaries start with a Node
pub async fn cluster_with(node: Node) -> (TestEnv, Api<Node>) {
    let env = TestEnv::start().await.unwrap();
    let nodes: Api<Node> = Api::all(env.client());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    (env, nodes)
}

/// The Status of an API error; any other error fails the test.
#[allow(dead_code)] // not every test binary checks API errors
pub fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Creates Service `name` with `spec` through `api`.
#[allow(dead_code)] // only the Service test binaries build Services
pub async fn create_svc(api: &Api<Service>, name: &str, spec: Value) -> kube::Result<Service> {
    api.create(&PostParams::default(), &svc(name, spec)).await
}

/// A Service `name` in the client's namespace with `spec`.
#[allow(dead_code)] // only the Service test binaries build Services
pub fn svc(name: &str, spec: Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}
