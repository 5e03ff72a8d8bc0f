//! Helpers shared by the integration test targets.

pub mod capture;
pub mod kubectl;

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

/// The Status of an API error; any other error fails the test.
#[allow(dead_code)] // not every test binary checks API errors
pub fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A Service `name` in the client's namespace with `spec`.
#[allow(dead_code)] // only the Service test binaries build Services
pub fn svc(name: &str, spec: Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}
