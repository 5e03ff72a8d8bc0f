//! Whether a webhook configuration sends each typed webhook the kind its Rust type decodes: a
//! [`Validator<T>`](super::Validator) or [`Defaulter<T>`](super::Defaulter) registered at a
//! path that a `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration` points at for
//! other groups, versions or resources (or for `*`) would refuse those reviews one by one, a
//! 400 on every write; and a defaulter behind a validating configuration answers a patch, which
//! kube-apiserver takes from mutating webhooks only (its admission response check: "validating
//! webhook may not return a patch"). [`mismatches`] names each such case, so the manager
//! refuses to start on them (for the configurations it manages).

use super::registry::Webhooks;
use super::typed::resource;

/// Which admission configuration a webhook sits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigurationKind {
    /// `ValidatingWebhookConfiguration`.
    Validating,
    /// `MutatingWebhookConfiguration`.
    Mutating,
}

impl ConfigurationKind {
    fn name(self) -> &'static str {
        match self {
            ConfigurationKind::Validating => "ValidatingWebhookConfiguration",
            ConfigurationKind::Mutating => "MutatingWebhookConfiguration",
        }
    }
}

/// Every way `configuration` (a webhook configuration of `kind`, as JSON) disagrees with the
/// typed webhooks of `webhooks` whose name `served` accepts, matched by the path its
/// `clientConfig` (`service.path`, or the path of `url`) points at; empty when it agrees.
/// Raw and conversion webhooks take whatever they are sent and are not checked.
pub fn mismatches<C: Send + Sync + 'static>(
    webhooks: &Webhooks<C>,
    served: impl Fn(&str) -> bool,
    kind: ConfigurationKind,
    configuration: &serde_json::Value,
) -> Vec<String> {
    let config_name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    let mut errors = Vec::new();
    for hook in configuration["webhooks"].as_array().into_iter().flatten() {
        let Some(path) = served_path(&hook["clientConfig"]) else {
            continue;
        };
        let Some(entry) = webhooks
            .iter()
            .find(|w| w.path() == path && served(w.name()))
        else {
            continue;
        };
        let Some(typed) = &entry.typed else {
            continue;
        };
        let hook_name = hook["name"].as_str().unwrap_or_default();
        let at = format!(
            "{} {config_name:?} (its webhook {hook_name:?} calls {path})",
            kind.name()
        );
        if typed.mutating && kind == ConfigurationKind::Validating {
            errors.push(format!(
                "defaulting webhook {:?} is called from {at}, where the server refuses its patch: list it in a MutatingWebhookConfiguration",
                entry.name()
            ));
        }
        let mut other = Vec::new();
        for rule in hook["rules"].as_array().into_iter().flatten() {
            for group in strings(&rule["apiGroups"]) {
                for version in strings(&rule["apiVersions"]) {
                    for resource in strings(&rule["resources"]) {
                        if !typed.takes(group, version, resource) {
                            other.push(self::resource(group, version, resource));
                        }
                    }
                }
            }
        }
        if !other.is_empty() {
            other.dedup();
            errors.push(format!(
                "webhook {:?} decodes {} ({}), but {at} also sends it {}: narrow the rules to {} or register a webhook for those types",
                entry.name(),
                typed.kind,
                typed.describe(),
                other.join(", "),
                typed.describe()
            ));
        }
    }
    errors
}

/// The path a `clientConfig` calls: `service.path`, or the path of `url`.
fn served_path(client_config: &serde_json::Value) -> Option<String> {
    if let Some(path) = client_config["service"]["path"].as_str() {
        return Some(path.to_string());
    }
    let url = client_config["url"].as_str()?;
    let uri: http::Uri = url.parse().ok()?;
    Some(uri.path().to_string())
}

fn strings(value: &serde_json::Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;
    use crate::webhook::{Defaulter, Review, Validator, Verdict, WebhookInitializer};

    struct Allow;
    impl Validator<ConfigMap> for Allow {
        async fn validate(&self, _: &Review<ConfigMap>) -> Verdict {
            Verdict::allow()
        }
    }
    impl Defaulter<ConfigMap> for Allow {
        async fn default(&self, _: &Review<ConfigMap>, _: &mut ConfigMap) -> Verdict {
            Verdict::allow()
        }
    }

    fn webhooks() -> Webhooks<()> {
        Webhooks::new()
            .with(WebhookInitializer::validating::<ConfigMap, _, _, _>(
                "cm-rules",
                "/validate-cm",
                |_| async { Ok(Allow) },
            ))
            .with(WebhookInitializer::defaulting::<ConfigMap, _, _, _>(
                "cm-defaults",
                "/default-cm",
                |_| async { Ok(Allow) },
            ))
    }

    fn configuration(
        path: &str,
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
    ) -> serde_json::Value {
        json!({
            "metadata": {"name": "hooks"},
            "webhooks": [{
                "name": "one.example.com",
                "clientConfig": {"url": format!("https://127.0.0.1:9443{path}?x=1")},
                "rules": [{"operations": ["CREATE"], "apiGroups": groups,
                           "apiVersions": versions, "resources": resources}]
            }]
        })
    }

    #[test]
    fn rules_for_the_webhooks_own_kind_agree() {
        let all = |_: &str| true;
        for config in [
            configuration("/validate-cm", &[""], &["v1"], &["configmaps"]),
            configuration(
                "/validate-cm",
                &[""],
                &["v1"],
                &["configmaps", "configmaps/status"],
            ),
            configuration("/elsewhere", &["apps"], &["v1"], &["deployments"]),
        ] {
            let errors = mismatches(&webhooks(), all, ConfigurationKind::Validating, &config);
            assert!(errors.is_empty(), "{errors:?}");
        }
        let service = json!({"metadata": {"name": "hooks"}, "webhooks": [{
            "name": "one.example.com",
            "clientConfig": {"service": {"name": "s", "namespace": "n", "path": "/default-cm"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
        }]});
        assert!(mismatches(&webhooks(), all, ConfigurationKind::Mutating, &service).is_empty());
    }

    #[test]
    fn another_kind_a_wildcard_or_a_patch_in_a_validating_configuration_is_named() {
        let all = |_: &str| true;
        let config = configuration(
            "/validate-cm",
            &["", "apps"],
            &["v1"],
            &["configmaps", "deployments"],
        );
        assert_eq!(
            mismatches(&webhooks(), all, ConfigurationKind::Validating, &config),
            vec![
                "webhook \"cm-rules\" decodes ConfigMap (v1 configmaps), but ValidatingWebhookConfiguration \"hooks\" (its webhook \"one.example.com\" calls /validate-cm) also sends it v1 deployments, apps/v1 configmaps, apps/v1 deployments: narrow the rules to v1 configmaps or register a webhook for those types"
            ]
        );
        let wildcard = configuration("/validate-cm", &["*"], &["*"], &["*"]);
        let errors = mismatches(&webhooks(), all, ConfigurationKind::Validating, &wildcard);
        assert!(
            errors.len() == 1 && errors[0].contains("also sends it */* *"),
            "{errors:?}"
        );

        let patching = configuration("/default-cm", &[""], &["v1"], &["configmaps"]);
        assert_eq!(
            mismatches(&webhooks(), all, ConfigurationKind::Validating, &patching),
            vec![
                "defaulting webhook \"cm-defaults\" is called from ValidatingWebhookConfiguration \"hooks\" (its webhook \"one.example.com\" calls /default-cm), where the server refuses its patch: list it in a MutatingWebhookConfiguration"
            ]
        );
        // A webhook `--webhooks` leaves out is not served, so not checked.
        let off = |name: &str| name != "cm-rules";
        assert!(mismatches(&webhooks(), off, ConfigurationKind::Validating, &config).is_empty());
    }
}
