//! ClusterRole aggregation, as kube-controller-manager's `clusterrole-aggregation` controller
//! does it, run in the server right after a ClusterRole is written: a ClusterRole with an
//! `aggregationRule` gets as `rules` the rules of every other ClusterRole its
//! `clusterRoleSelectors` match (roles taken in name order, duplicate rules dropped).

use serde_json::Value;

use crate::api::kinds::lookup;
use crate::storage::selectors::LabelSelector;
use crate::storage::store::{EventType, State};

/// `metav1.LabelSelector` in the query syntax [`LabelSelector::parse`] reads.
fn selector_string(sel: &Value) -> String {
    let mut terms: Vec<String> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            terms.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        terms.push(match e.get("operator").and_then(Value::as_str) {
            Some("In") => format!("{key} in ({})", values.join(",")),
            Some("NotIn") => format!("{key} notin ({})", values.join(",")),
            Some("DoesNotExist") => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    terms.join(",")
}

/// Recomputes the rules of every aggregated ClusterRole; writes those that changed.
pub fn aggregate(state: &mut State) {
    let Some(res) = lookup("rbac.authorization.k8s.io", "v1", "clusterroles") else {
        return;
    };
    // Store order is name order, which is the order upstream sorts matching roles in.
    let roles: Vec<Value> = state
        .iter(res, None, None)
        .map(|(_, v)| (**v).clone())
        .collect();
    for role in &roles {
        let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let name = role.pointer("/metadata/name").and_then(Value::as_str);
        let mut rules: Vec<Value> = Vec::new();
        for sel in selectors {
            let Ok(selector) = LabelSelector::parse(&selector_string(sel)) else {
                continue;
            };
            for other in roles.iter().filter(|r| selector.matches(r)) {
                if other.pointer("/metadata/name").and_then(Value::as_str) == name {
                    continue;
                }
                for rule in other
                    .get("rules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if !rules.contains(rule) {
                        rules.push(rule.clone());
                    }
                }
            }
        }
        let current = role
            .get("rules")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        if current != Value::Array(rules.clone()) {
            let mut updated = role.clone();
            updated["rules"] = Value::Array(rules);
            state.put(res, updated, EventType::Modified);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::selector_string;
    use serde_json::json;

    #[test]
    fn label_selectors_render_as_queries() {
        let sel = json!({"matchLabels": {"a": "b"}, "matchExpressions": [
            {"key": "x", "operator": "In", "values": ["1", "2"]},
            {"key": "y", "operator": "DoesNotExist"},
            {"key": "z", "operator": "Exists"}
        ]});
        assert_eq!(selector_string(&sel), "a=b,x in (1,2),!y,z");
        assert_eq!(selector_string(&json!({})), "");
    }
}
