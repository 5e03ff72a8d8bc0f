//! `caBundle` injection: every replica writes the Secret's bundle into the webhook
//! configurations and CRD conversion stanzas it is told to manage, where it differs. The bundle
//! is a pure function of the Secret, so replicas never fight; a write is a replace with the
//! resourceVersion read, and a lost race is retried on the next round. Nothing else in the
//! configurations is touched: they are the team's manifests.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

use super::error::CertsError;

/// A kind whose `caBundle` is managed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagedKind {
    /// `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration: every webhook's.
    Validating,
    /// `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration: every webhook's.
    Mutating,
    /// `apiextensions.k8s.io/v1` CustomResourceDefinition: the conversion webhook's.
    CustomResourceDefinition,
}

/// One object whose `caBundle` is managed, written `Kind/name`
/// (`ValidatingWebhookConfiguration/pools`, `CustomResourceDefinition/addresspools.metal.example.com`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    /// Its kind.
    pub kind: ManagedKind,
    /// Its name.
    pub name: String,
}

impl FromStr for Managed {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, name) = s
            .split_once('/')
            .filter(|(_, name)| !name.is_empty())
            .ok_or_else(|| format!("{s:?}: expected KIND/NAME"))?;
        let kind = match kind {
            "ValidatingWebhookConfiguration" => ManagedKind::Validating,
            "MutatingWebhookConfiguration" => ManagedKind::Mutating,
            "CustomResourceDefinition" => ManagedKind::CustomResourceDefinition,
            other => {
                return Err(format!(
                    "{s:?}: {other} is not ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CustomResourceDefinition"
                ));
            }
        };
        Ok(Managed {
            kind,
            name: name.to_string(),
        })
    }
}

impl fmt::Display for Managed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ManagedKind::Validating => "ValidatingWebhookConfiguration",
            ManagedKind::Mutating => "MutatingWebhookConfiguration",
            ManagedKind::CustomResourceDefinition => "CustomResourceDefinition",
        };
        write!(f, "{kind}/{}", self.name)
    }
}

impl Managed {
    /// The API of the object's kind.
    pub(crate) fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        let (group, kind, plural) = match self.kind {
            ManagedKind::Validating => (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
            ),
            ManagedKind::Mutating => (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
            ),
            ManagedKind::CustomResourceDefinition => (
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "customresourcedefinitions",
            ),
        };
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
        Api::all_with(client.clone(), &resource)
    }

    /// The `clientConfig`s whose `caBundle` is managed in `object`.
    fn client_configs<'a>(&self, object: &'a mut Value) -> Vec<&'a mut Value> {
        match self.kind {
            ManagedKind::CustomResourceDefinition => {
                let strategy = object
                    .pointer("/spec/conversion/strategy")
                    .and_then(Value::as_str);
                if strategy != Some("Webhook") {
                    return Vec::new();
                }
                object
                    .pointer_mut("/spec/conversion/webhook/clientConfig")
                    .into_iter()
                    .collect()
            }
            ManagedKind::Validating | ManagedKind::Mutating => object
                .get_mut("webhooks")
                .and_then(Value::as_array_mut)
                .map(|hooks| {
                    hooks
                        .iter_mut()
                        .filter_map(|h| h.get_mut("clientConfig"))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Writes `bundle` (PEM) into every managed `caBundle` of the object that differs;
    /// `Ok(true)` when it wrote.
    pub async fn inject(&self, client: &kube::Client, bundle: &str) -> Result<bool, CertsError> {
        let api = self.api(client);
        let object = api.get(&self.name).await?;
        let mut json = serde_json::to_value(&object)
            .map_err(|e| CertsError::Invalid(format!("{self}: {e}")))?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
        let mut changed = false;
        for config in self.client_configs(&mut json) {
            if config.get("caBundle").and_then(Value::as_str) != Some(encoded.as_str()) {
                config["caBundle"] = Value::String(encoded.clone());
                changed = true;
            }
        }
        if !changed {
            return Ok(false);
        }
        let updated: DynamicObject = serde_json::from_value(json)
            .map_err(|e| CertsError::Invalid(format!("{self}: {e}")))?;
        api.replace(&self.name, &PostParams::default(), &updated)
            .await?;
        Ok(true)
    }
}
