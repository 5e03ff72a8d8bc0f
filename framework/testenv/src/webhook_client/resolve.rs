//! Where a webhook is reached: `clientConfig.url` as written, or `clientConfig.service` resolved
//! as kube-apiserver resolves it with endpoint routing: the Service's port with the configured
//! number, then a ready address and that port's number from the Service's EndpointSlices (its
//! Endpoints when it has no slice), picked at random on every call as upstream's
//! `RandomEndpoint` picks (slices in random order, each searched from a random endpoint), so
//! reviews spread over the replicas; TLS checks the certificate for
//! `<service>.<namespace>.svc`. A manifest written for a cluster thus works unchanged against
//! a webhook on loopback whose Service has a hand-written EndpointSlice.

use std::sync::Arc;

use rand::Rng;
use rand::seq::SliceRandom;
use serde_json::Value;
use tokio_rustls::rustls;

use super::error::CallError;
use super::{ClientConfig, ServiceRef, tls};
use crate::api::kinds::lookup;
use crate::api::status::go_quote;
use crate::storage::store::State;

/// A resolved webhook: what to dial, what to call it in TLS and in errors.
#[derive(Clone)]
pub struct Target {
    /// The URL client-go would build, without its query (`https://127.0.0.1:8443/validate`,
    /// `https://svc.ns.svc:443/validate`).
    pub url: String,
    /// `host:port` to dial, or why it cannot be (a Service without endpoints): Go reports that
    /// from the dial, inside the `POST`.
    pub dial: Result<String, String>,
    /// The name the serving certificate must hold.
    pub server_name: String,
    /// The path and the configuration's TLS roots.
    pub(super) path: String,
    pub(super) tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("dial", &self.dial)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// Resolves this configuration against the stored Services and endpoints.
    pub fn resolve(&self, state: &State) -> Result<Target, CallError> {
        let tls = tls::config(&self.ca_bundle)?;
        if let Some(svc) = &self.service {
            let server_name = format!("{}.{}.svc", svc.name, svc.namespace);
            let path = svc.path.clone().unwrap_or_default();
            return Ok(Target {
                url: format!("https://{server_name}:{}{path}", svc.port),
                dial: endpoint(state, svc),
                server_name,
                path,
                tls,
            });
        }
        let url = self.url.as_deref().unwrap_or_default();
        let uri: http::Uri = url.parse().map_err(|e| {
            CallError::Setup(format!("Unparsable URL: parse {}: {e}", go_quote(url)))
        })?;
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().unwrap_or(443);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let dial = if bare.contains(':') {
            format!("[{bare}]:{port}")
        } else {
            format!("{bare}:{port}")
        };
        Ok(Target {
            url: format!("https://{authority}{}", uri.path().trim_end_matches('/')),
            dial: Ok(dial),
            server_name: bare.to_string(),
            path: uri.path().to_string(),
            tls,
        })
    }
}

/// The `ip:port` of a ready endpoint of `svc`, or upstream's words for why there is none.
fn endpoint(state: &State, svc: &ServiceRef) -> Result<String, String> {
    let services = lookup("", "v1", "services").ok_or("services are not served")?;
    let service = state
        .get(services, &svc.namespace, &svc.name)
        .ok_or_else(|| format!("service {} not found", go_quote(&svc.name)))?;
    let ty = service
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    if !matches!(ty, "ClusterIP" | "NodePort" | "LoadBalancer") {
        return Err(format!("unsupported service type {}", go_quote(ty)));
    }
    let port_name = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(svc.port)))
        .map(|p| {
            p.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .ok_or_else(|| {
            format!(
                "no service port {} found for service {}",
                svc.port,
                go_quote(&svc.name)
            )
        })?;
    let none = || format!("no endpoints available for service {}", go_quote(&svc.name));
    let mut slices = slices_of(state, svc);
    let found = if slices.is_empty() {
        from_endpoints(state, svc, &port_name)
    } else {
        slices.shuffle(&mut rand::rng());
        slices.iter().find_map(|s| from_slice(s, &port_name))
    };
    found.ok_or_else(none)
}

fn slices_of<'a>(state: &'a State, svc: &'a ServiceRef) -> Vec<&'a Value> {
    let Some(res) = lookup("discovery.k8s.io", "v1", "endpointslices") else {
        return Vec::new();
    };
    state
        .iter(res, Some(&svc.namespace), None)
        .map(|(_, v)| v.as_ref())
        .filter(|v| {
            v.pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(svc.name.as_str())
        })
        .collect()
}

fn host_port(ip: &str, port: u64) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

fn from_slice(slice: &Value, port_name: &str) -> Option<String> {
    let port = slice
        .get("ports")
        .and_then(Value::as_array)?
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)?
        .get("port")
        .and_then(Value::as_u64)?;
    let endpoints = slice.get("endpoints").and_then(Value::as_array)?;
    let start = rand::rng().random_range(0..endpoints.len().max(1));
    endpoints[start..]
        .iter()
        .chain(&endpoints[..start])
        .filter(|e| e.pointer("/conditions/ready") != Some(&Value::Bool(false)))
        .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str))
        .map(|ip| host_port(ip, port))
}

fn from_endpoints(state: &State, svc: &ServiceRef, port_name: &str) -> Option<String> {
    let res = lookup("", "v1", "endpoints")?;
    let eps = state.get(res, &svc.namespace, &svc.name)?;
    let subsets = eps.get("subsets").and_then(Value::as_array)?;
    let start = rand::rng().random_range(0..subsets.len().max(1));
    subsets[start..]
        .iter()
        .chain(&subsets[..start])
        .find_map(|subset| {
            let port = subset
                .get("ports")
                .and_then(Value::as_array)?
                .iter()
                .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)?
                .get("port")
                .and_then(Value::as_u64)?;
            let addresses = subset.get("addresses").and_then(Value::as_array)?;
            let address = addresses.get(rand::rng().random_range(0..addresses.len().max(1)))?;
            Some(host_port(address.get("ip").and_then(Value::as_str)?, port))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_slice_gives_a_ready_address_and_the_named_port() {
        let slice = json!({
            "ports": [{"name": "metrics", "port": 9090}, {"name": "https", "port": 8443}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": true}}
            ]
        });
        assert_eq!(
            from_slice(&slice, "https").as_deref(),
            Some("10.0.0.2:8443")
        );
        assert_eq!(from_slice(&slice, "grpc"), None);
    }

    #[test]
    fn every_ready_endpoint_of_a_slice_is_picked_and_no_other() {
        let slice = json!({
            "ports": [{"name": "https", "port": 8443}],
            "endpoints": [
                {"addresses": ["10.0.0.1"]},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": true}}
            ]
        });
        let picked: std::collections::BTreeSet<_> = (0..200)
            .filter_map(|_| from_slice(&slice, "https"))
            .collect();
        assert_eq!(
            picked.into_iter().collect::<Vec<_>>(),
            ["10.0.0.1:8443", "10.0.0.3:8443"]
        );
    }

    #[test]
    fn a_url_keeps_its_host_and_path() {
        let cc = ClientConfig {
            url: Some("https://127.0.0.1:8443/validate".into()),
            ..ClientConfig::default()
        };
        let store = crate::storage::store::Store::new(10, 10);
        let t = store.with(|s| cc.resolve(s)).unwrap();
        assert_eq!(t.url, "https://127.0.0.1:8443/validate");
        assert_eq!(t.dial.as_deref(), Ok("127.0.0.1:8443"));
        assert_eq!(t.server_name, "127.0.0.1");
    }
}
