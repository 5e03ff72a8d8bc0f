//! The stored `MutatingWebhookConfiguration`s and `ValidatingWebhookConfiguration`s as the chain
//! reads them: every webhook of every configuration, configurations in name order (the store's
//! order) and webhooks in list order, as upstream's webhook sources sort them. They are read from
//! the store at each write, so a configuration applies from the write after it is stored, as on
//! a real server once its informer has seen it.

use std::time::Duration;

use serde_json::Value;

use crate::api::kinds::lookup;
use crate::storage::store::State;
use crate::webhook_client::ClientConfig;

/// Which of the two configuration kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `MutatingWebhookConfiguration`: called first, one after another.
    Mutating,
    /// `ValidatingWebhookConfiguration`: called after validation, all at once.
    Validating,
}

impl Phase {
    fn plural(self) -> &'static str {
        match self {
            Phase::Mutating => "mutatingwebhookconfigurations",
            Phase::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// One webhook of a configuration, defaults applied as the server stored them.
#[derive(Debug, Clone)]
pub struct Hook {
    /// `<configuration>/<webhook>/<index>`: how upstream tells webhooks apart for reinvocation.
    pub uid: String,
    /// `name`.
    pub name: String,
    /// `clientConfig`.
    pub client: ClientConfig,
    /// `rules`.
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore`: a failed call lets the write through.
    pub fail_open: bool,
    /// `matchPolicy: Equivalent`: a rule naming another version of the resource matches too.
    pub equivalent: bool,
    /// `namespaceSelector`.
    pub namespace_selector: Value,
    /// `objectSelector`.
    pub object_selector: Value,
    /// `sideEffects`.
    pub side_effects: String,
    /// `timeoutSeconds`.
    pub timeout: Duration,
    /// `admissionReviewVersions`, in preference order.
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks only).
    pub reinvoke: bool,
    /// `matchConditions`' expressions, in order.
    pub match_conditions: Vec<String>,
}

/// One `rules` entry.
#[derive(Debug, Clone, Default)]
pub struct Rule {
    /// `operations`.
    pub operations: Vec<String>,
    /// `apiGroups`.
    pub groups: Vec<String>,
    /// `apiVersions`.
    pub versions: Vec<String>,
    /// `resources` (`pods`, `pods/status`, `*/status`, `*`, `*/*`).
    pub resources: Vec<String>,
    /// `scope`: `*`, `Namespaced` or `Cluster`.
    pub scope: String,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

fn text<'a>(v: &'a Value, key: &str, default: &'a str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or(default)
}

impl Hook {
    fn from_json(configuration: &str, index: usize, w: &Value) -> Hook {
        let name = text(w, "name", "").to_string();
        let rules = w
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| Rule {
                operations: strings(r.get("operations")),
                groups: strings(r.get("apiGroups")),
                versions: strings(r.get("apiVersions")),
                resources: strings(r.get("resources")),
                scope: text(r, "scope", "*").to_string(),
            })
            .collect();
        let selector = |k: &str| w.get(k).cloned().unwrap_or_else(|| serde_json::json!({}));
        Hook {
            uid: format!("{configuration}/{name}/{index}"),
            client: ClientConfig::from_json(w.get("clientConfig").unwrap_or(&Value::Null)),
            rules,
            fail_open: text(w, "failurePolicy", "Fail") == "Ignore",
            equivalent: text(w, "matchPolicy", "Equivalent") == "Equivalent",
            namespace_selector: selector("namespaceSelector"),
            object_selector: selector("objectSelector"),
            side_effects: text(w, "sideEffects", "").to_string(),
            timeout: Duration::from_secs(
                w.get("timeoutSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(10),
            ),
            review_versions: strings(w.get("admissionReviewVersions")),
            reinvoke: text(w, "reinvocationPolicy", "Never") == "IfNeeded",
            match_conditions: w
                .get("matchConditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| text(c, "expression", "").to_string())
                .collect(),
            name,
        }
    }
}

/// Every webhook of `phase`, in the order the server calls (mutating) or starts (validating)
/// them; none while the kind is not served.
pub fn load(state: &State, phase: Phase) -> Vec<Hook> {
    let Some(res) = lookup("admissionregistration.k8s.io", "v1", phase.plural()) else {
        return Vec::new();
    };
    let mut hooks = Vec::new();
    for ((_, configuration), obj) in state.iter(res, None, None) {
        let list = obj.get("webhooks").and_then(Value::as_array);
        for (i, w) in list.into_iter().flatten().enumerate() {
            hooks.push(Hook::from_json(configuration, i, w));
        }
    }
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_webhook_reads_with_its_defaults() {
        let h = Hook::from_json(
            "z-reinvoke",
            1,
            &json!({
                "name": "y.wh.example.com",
                "clientConfig": {"url": "https://127.0.0.1:9443/mutate-a"},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "failurePolicy": "Ignore", "matchPolicy": "Exact", "sideEffects": "None",
                "timeoutSeconds": 5, "admissionReviewVersions": ["v1beta1", "v1"],
                "reinvocationPolicy": "IfNeeded"
            }),
        );
        assert_eq!(h.uid, "z-reinvoke/y.wh.example.com/1");
        assert!(h.fail_open && !h.equivalent && h.reinvoke);
        assert_eq!(h.timeout, Duration::from_secs(5));
        assert_eq!(h.rules[0].scope, "*");
        assert_eq!(h.review_versions, ["v1beta1", "v1"]);
        assert_eq!(h.object_selector, json!({}));
    }
}
