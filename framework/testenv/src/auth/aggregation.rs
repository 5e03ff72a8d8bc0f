//! ClusterRole aggregation, as kube-controller-manager's `clusterrole-aggregation` controller
//! does it, run in the server right after a ClusterRole is written: a ClusterRole with an
//! `aggregationRule` gets as `rules` the rules of every other ClusterRole its
//! `clusterRoleSelectors` match (roles taken in name order, duplicate rules dropped).

use serde_json::Value;

use crate::api::kinds::lookup;
use crate::storage::selectors::LabelSelector;
use crate::storage::store::{EventType, State};

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
            let Ok(selector) = LabelSelector::from_object(sel) else {
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
