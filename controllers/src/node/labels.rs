//! Beta→GA label reconciliation for initialized Nodes (upstream `reconcileNodeLabels`): clusters
//! whose nodes were labelled before the GA topology labels existed get the GA twins, copied from
//! the deprecated beta labels, which remain the source of truth.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::json;

use super::modifiers::{
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE,
    LABEL_ZONE_BETA,
};
use crate::retry::patch_node_on_conflict;

/// (beta, GA) pairs; the beta label's value is copied to the GA label.
pub const BETA_TO_GA: [(&str, &str); 3] = [
    (LABEL_ZONE_BETA, LABEL_ZONE),
    (LABEL_REGION_BETA, LABEL_REGION),
    (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE),
];

/// The GA labels that must change: for each pair whose beta label is present, the GA label when it
/// is absent or differs. Empty when nothing needs writing.
pub fn labels_to_reconcile(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    BETA_TO_GA
        .iter()
        .filter_map(|(beta, ga)| {
            let value = labels.get(*beta)?;
            (labels.get(*ga) != Some(value)).then(|| (ga.to_string(), value.clone()))
        })
        .collect()
}

/// Writes the missing GA labels with a strategic-merge patch of `metadata.labels`. Like upstream,
/// the first GET may be served from the API server's cache (`resourceVersion=0`) and later ones
/// are fresh; conflicts are retried 5 times. Nothing is sent when nothing is missing.
pub async fn reconcile_node_labels(api: &Api<Node>, node: &Node) -> Result<(), kube::Error> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let wanted = labels_to_reconcile(&labels);
    if wanted.is_empty() {
        return Ok(());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    patch_node_on_conflict(api, &name, |current| {
        let current = current.metadata.labels.as_ref();
        let changed: BTreeMap<&String, &String> = wanted
            .iter()
            .filter(|(k, v)| current.and_then(|l| l.get(*k)) != Some(*v))
            .collect();
        (!changed.is_empty()).then(|| json!({ "metadata": { "labels": changed } }))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn beta_label_is_the_source_of_truth() {
        let got = labels_to_reconcile(&map(&[
            (LABEL_ZONE_BETA, "z1"),
            (LABEL_ZONE, "z0"),
            (LABEL_REGION_BETA, "r1"),
            (LABEL_INSTANCE_TYPE_BETA, "t1"),
            (LABEL_INSTANCE_TYPE, "t1"),
        ]));
        assert_eq!(got, map(&[(LABEL_ZONE, "z1"), (LABEL_REGION, "r1")]));
    }

    #[test]
    fn nothing_happens_without_beta_labels() {
        assert!(labels_to_reconcile(&map(&[(LABEL_ZONE, "z"), ("x", "y")])).is_empty());
        assert!(labels_to_reconcile(&BTreeMap::new()).is_empty());
    }
}
