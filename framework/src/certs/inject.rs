//! `caBundle` injection: every replica writes the Secret's bundle into the webhook
//! configurations and CRD conversion stanzas it is told to manage, where it differs, and, when
//! told where the webhooks are ([`ClientTarget`]: `--webhook-service` or `--webhook-url`), the
//! client config too (a Service, or a URL for a process outside the cluster), keeping each
//! webhook's path. Both are pure functions of the Secret and the flags, so replicas never
//! fight; a write is a JSON patch testing the resourceVersion read, and a lost race is retried
//! on the next round. Nothing else in the configurations is touched: they are the team's
//! manifests.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

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

impl ManagedKind {
    /// The kind named `kind` (`ValidatingWebhookConfiguration`, ...), if it is one.
    pub fn of(kind: &str) -> Option<Self> {
        match kind {
            "ValidatingWebhookConfiguration" => Some(ManagedKind::Validating),
            "MutatingWebhookConfiguration" => Some(ManagedKind::Mutating),
            "CustomResourceDefinition" => Some(ManagedKind::CustomResourceDefinition),
            _ => None,
        }
    }

    /// Its API, cluster-wide.
    pub fn api(&self, client: &kube::Client) -> Api<DynamicObject> {
        let (group, kind, plural) = match self {
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

    /// The `clientConfig`s of `object` (a configuration's webhooks', or a CRD's conversion
    /// webhook's when its strategy is `Webhook`).
    pub fn client_configs<'a>(&self, object: &'a mut Value) -> Vec<&'a mut Value> {
        match self {
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
}

/// Where managed client configs point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientTarget {
    /// A Service, for webhooks served in the cluster (`--webhook-service=NAMESPACE/NAME[:PORT]`).
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port (443 unless given, the server's default).
        port: u16,
    },
    /// A base URL `https://host:port`, for a process outside the cluster (`--webhook-url`), as
    /// envtest points a cluster at a test process.
    Url(String),
}

impl ClientTarget {
    /// Reads `NAMESPACE/NAME` or `NAMESPACE/NAME:PORT`.
    pub fn service(text: &str) -> Result<Self, String> {
        let (namespace, rest) = text
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
            .ok_or_else(|| format!("{text:?}: expected NAMESPACE/NAME or NAMESPACE/NAME:PORT"))?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => {
                let port = port
                    .parse()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| format!("{text:?}: {port:?} is not a port (1-65535)"))?;
                (name, port)
            }
            None => (rest, 443),
        };
        Ok(ClientTarget::Service {
            namespace: namespace.to_string(),
            name: name.to_string(),
            port,
        })
    }

    /// Reads `https://host[:port]`: as the server requires of a webhook URL, https, with no
    /// user, query or fragment; each webhook's own path is appended.
    pub fn url(text: &str) -> Result<Self, String> {
        let rest = text
            .strip_prefix("https://")
            .ok_or_else(|| format!("{text:?}: the URL must start with https://"))?;
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains(['/', '?', '#', '@']) {
            return Err(format!(
                "{text:?}: expected https://HOST[:PORT], with no path, user, query or fragment"
            ));
        }
        Ok(ClientTarget::Url(format!("https://{host}")))
    }

    /// Points `config` here, keeping its `caBundle` and the path it calls; whether it changed.
    pub fn point(&self, config: &mut Value) -> bool {
        let path = path_of(config);
        let mut wanted = match self {
            ClientTarget::Service {
                namespace,
                name,
                port,
            } => {
                let mut service = json!({"namespace": namespace, "name": name, "port": port});
                if let Some(path) = &path {
                    service["path"] = json!(path);
                }
                json!({ "service": service })
            }
            ClientTarget::Url(base) => {
                json!({"url": format!("{base}{}", path.unwrap_or_default())})
            }
        };
        if let Some(bundle) = config.get("caBundle") {
            wanted["caBundle"] = bundle.clone();
        }
        if *config == wanted {
            return false;
        }
        *config = wanted;
        true
    }
}

impl fmt::Display for ClientTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientTarget::Service {
                namespace,
                name,
                port,
            } => write!(f, "service {namespace}/{name}:{port}"),
            ClientTarget::Url(url) => write!(f, "{url}"),
        }
    }
}

impl ClientTarget {
    /// The path a client config calls: its Service's `path`, or its URL's.
    pub fn path_in(config: &Value) -> Option<String> {
        path_of(config)
    }
}

fn path_of(config: &Value) -> Option<String> {
    if let Some(path) = config.pointer("/service/path").and_then(Value::as_str) {
        return Some(path.to_string());
    }
    let url = config.get("url").and_then(Value::as_str)?;
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = rest.find('/').map(|i| &rest[i..])?;
    Some(path.split(['?', '#']).next().unwrap_or(path).to_string())
}

/// One object whose `caBundle` is managed, written `Kind/name`
/// (`ValidatingWebhookConfiguration/pools`, `CustomResourceDefinition/addresspools.metal.example.com`),
/// and where its client configs point, if that is managed too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    /// Its kind.
    pub kind: ManagedKind,
    /// Its name.
    pub name: String,
    /// Where its client configs point; `None` leaves them as the manifest wrote them.
    pub client: Option<ClientTarget>,
}

impl FromStr for Managed {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, name) = s
            .split_once('/')
            .filter(|(_, name)| !name.is_empty())
            .ok_or_else(|| format!("{s:?}: expected KIND/NAME"))?;
        let kind = ManagedKind::of(kind).ok_or_else(|| {
            format!(
                "{s:?}: {kind} is not ValidatingWebhookConfiguration, MutatingWebhookConfiguration or CustomResourceDefinition"
            )
        })?;
        Ok(Managed {
            kind,
            name: name.to_string(),
            client: None,
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
    /// Points its client configs at `target` too (`None`: leaves them as written).
    pub fn pointing_at(mut self, target: Option<ClientTarget>) -> Self {
        self.client = target;
        self
    }

    /// Whether every managed `caBundle` of the object is `bundle` (PEM); an object that does
    /// not exist calls nothing, so it holds any bundle.
    pub async fn holds(&self, client: &kube::Client, bundle: &str) -> Result<bool, CertsError> {
        let Some(object) = self.kind.api(client).get_opt(&self.name).await? else {
            return Ok(true);
        };
        let mut json = serde_json::to_value(&object)
            .map_err(|e| CertsError::Invalid(format!("{self}: {e}")))?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
        Ok(self
            .kind
            .client_configs(&mut json)
            .iter()
            .all(|c| c.get("caBundle").and_then(Value::as_str) == Some(encoded.as_str())))
    }

    /// Writes `bundle` (PEM) into every managed `caBundle` of the object that differs, and
    /// points its client configs at [`Self::client`]; `Ok(true)` when it wrote. The write is a
    /// JSON patch testing the resourceVersion read, so it never undoes a concurrent change.
    /// A write that loses a race with another replica's (the resourceVersion test fails) is
    /// tried again at once, twice, before it waits for the next round.
    pub async fn inject(&self, client: &kube::Client, bundle: &str) -> Result<bool, CertsError> {
        let mut attempt = 1;
        loop {
            match self.inject_once(client, bundle).await {
                Err(CertsError::Api(kube::Error::Api(status)))
                    if attempt < 3 && matches!(status.code, 409 | 422) =>
                {
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    async fn inject_once(&self, client: &kube::Client, bundle: &str) -> Result<bool, CertsError> {
        let api = self.kind.api(client);
        let object = api.get(&self.name).await?;
        let mut json = serde_json::to_value(&object)
            .map_err(|e| CertsError::Invalid(format!("{self}: {e}")))?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
        let mut changed = false;
        for config in self.kind.client_configs(&mut json) {
            if let Some(target) = &self.client {
                changed |= target.point(config);
            }
            if config.get("caBundle").and_then(Value::as_str) != Some(encoded.as_str()) {
                config["caBundle"] = Value::String(encoded.clone());
                changed = true;
            }
        }
        if !changed {
            return Ok(false);
        }
        let (field, value) = match self.kind {
            ManagedKind::CustomResourceDefinition => {
                ("/spec/conversion", json.pointer("/spec/conversion"))
            }
            ManagedKind::Validating | ManagedKind::Mutating => ("/webhooks", json.get("webhooks")),
        };
        let patch = json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": object.metadata.resource_version},
            {"op": "replace", "path": field, "value": value},
        ]);
        let patch: json_patch::Patch = serde_json::from_value(patch)
            .map_err(|e| CertsError::Invalid(format!("{self}: {e}")))?;
        api.patch(
            &self.name,
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_read_with_clear_errors() {
        assert_eq!(
            ClientTarget::service("kube-system/metal-ccm-webhook"),
            Ok(ClientTarget::Service {
                namespace: "kube-system".into(),
                name: "metal-ccm-webhook".into(),
                port: 443
            })
        );
        assert!(matches!(
            ClientTarget::service("ns/svc:9443"),
            Ok(ClientTarget::Service { port: 9443, .. })
        ));
        assert_eq!(
            ClientTarget::url("https://127.0.0.1:9443/"),
            Ok(ClientTarget::Url("https://127.0.0.1:9443".into()))
        );
        for (bad, why) in [
            (ClientTarget::service("svc"), "expected NAMESPACE/NAME"),
            (ClientTarget::service("ns/svc:x"), "is not a port"),
            (ClientTarget::url("http://h:1"), "must start with https://"),
            (ClientTarget::url("https://h:1/path"), "no path"),
            (ClientTarget::url("https://"), "no path"),
        ] {
            let err = bad.unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn pointing_keeps_the_path_and_the_bundle() {
        let mut config = json!({
            "service": {"namespace": "ns", "name": "svc", "path": "/validate", "port": 443},
            "caBundle": "Q0E="
        });
        let url = ClientTarget::Url("https://127.0.0.1:9443".into());
        assert!(url.point(&mut config));
        assert_eq!(
            config,
            json!({"url": "https://127.0.0.1:9443/validate", "caBundle": "Q0E="})
        );
        assert!(!url.point(&mut config), "already there: no write");
        let service = ClientTarget::service("kube-system/hooks").unwrap();
        assert!(service.point(&mut config));
        assert_eq!(
            config,
            json!({"service": {"namespace": "kube-system", "name": "hooks", "port": 443, "path": "/validate"}, "caBundle": "Q0E="})
        );
        let mut bare = json!({"url": "https://old:1"});
        assert!(url.point(&mut bare));
        assert_eq!(bare, json!({"url": "https://127.0.0.1:9443"}));
    }
}
