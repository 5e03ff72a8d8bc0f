//! Where delegated auth gets its clients and its missing configuration: `--authentication-kubeconfig`
//! / `--authorization-kubeconfig`, else the in-cluster service account, else nothing (outside a
//! cluster, as upstream's optional kubeconfig); and the `kube-system/extension-apiserver-authentication`
//! ConfigMap the API server publishes its client CA and front-proxy settings in.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::authn::RequestHeaderConfig;
use super::error::AuthSetupError;
use crate::client::client_from_config;
use crate::serving::x509::CaBundle;

/// Namespace and name of the ConfigMap kube-apiserver keeps up to date.
pub(crate) const CONFIGMAP_NAMESPACE: &str = "kube-system";
pub(crate) const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// Upstream raises the delegated clients' limits so they never throttle the server's answers.
const QPS: f32 = 200.0;
const BURST: u32 = 400;

/// The client for `purpose` (`authentication` or `authorization`); `None` when no kubeconfig is
/// given and the process is not in a cluster.
pub(crate) async fn delegated_client(
    kubeconfig: Option<&Path>,
    purpose: &str,
    user_agent: &str,
) -> Result<Option<kube::Client>, AuthSetupError> {
    let failed = |message: String| AuthSetupError::Kubeconfig {
        purpose: purpose.to_string(),
        message,
    };
    let config = match kubeconfig {
        Some(path) => crate::client::config_from_kubeconfig(path)
            .await
            .map_err(|e| failed(e.to_string()))?,
        None => {
            // client-go's rest.ErrNotInCluster: quietly nothing.
            let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
                && std::env::var_os("KUBERNETES_SERVICE_PORT").is_some();
            if !in_cluster {
                return Ok(None);
            }
            match kube::Config::incluster() {
                Ok(config) => config,
                Err(e) => {
                    tracing::warn!(error = %e, "failed to read in-cluster kubeconfig for delegated {purpose}");
                    return Ok(None);
                }
            }
        }
    };
    client_from_config(config, QPS, BURST, user_agent, None)
        .map(Some)
        .map_err(|e| failed(e.to_string()))
}

/// The ConfigMap's data; `Ok(None)` when it does not exist (the API server publishes none).
pub(crate) async fn read_configmap(
    client: &kube::Client,
) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), CONFIGMAP_NAMESPACE);
    match api.get_opt(CONFIGMAP_NAME).await {
        Ok(cm) => Ok(cm.map(|cm| cm.data.unwrap_or_default())),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            tracing::info!(
                "Unable to get configmap/{CONFIGMAP_NAME} in {CONFIGMAP_NAMESPACE}. Usually fixed by 'kubectl create rolebinding -n {CONFIGMAP_NAMESPACE} ROLEBINDING_NAME --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'"
            );
            Err(kube::Error::Api(status))
        }
        Err(e) => Err(e),
    }
}

/// `client-ca-file` from the ConfigMap.
pub(crate) fn client_ca(data: &BTreeMap<String, String>) -> Result<Option<CaBundle>, String> {
    match data.get("client-ca-file") {
        Some(pem) => CaBundle::from_pem(pem.as_bytes())
            .map_err(|e| format!("client-ca-file in configmap/{CONFIGMAP_NAME}: {e}")),
        None => Ok(None),
    }
}

/// The front-proxy settings from the ConfigMap (lists are JSON arrays); `None` without a CA.
pub(crate) fn request_header(
    data: &BTreeMap<String, String>,
) -> Result<Option<RequestHeaderConfig>, String> {
    let Some(pem) = data
        .get("requestheader-client-ca-file")
        .filter(|p| !p.is_empty())
    else {
        return Ok(None);
    };
    let list = |key: &str| -> Result<Vec<String>, String> {
        match data.get(key).filter(|v| !v.trim().is_empty()) {
            Some(json) => serde_json::from_str(json)
                .map_err(|e| format!("{key} in configmap/{CONFIGMAP_NAME}: {e}")),
            None => Ok(Vec::new()),
        }
    };
    Ok(Some(RequestHeaderConfig {
        ca: CaBundle::from_pem(pem.as_bytes()).map_err(|e| {
            format!("requestheader-client-ca-file in configmap/{CONFIGMAP_NAME}: {e}")
        })?,
        allowed_names: list("requestheader-allowed-names")?,
        username_headers: list("requestheader-username-headers")?,
        uid_headers: list("requestheader-uid-headers")?,
        group_headers: list("requestheader-group-headers")?,
        extra_prefixes: list("requestheader-extra-headers-prefix")?,
    }))
}
