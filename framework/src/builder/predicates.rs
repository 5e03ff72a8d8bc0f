//! Event filters for [`ControllerBuilder::with_predicate`](super::ControllerBuilder::with_predicate):
//! which changes of the primary object are worth a reconcile.
//!
//! A predicate is any `Fn(&Event<K>) -> bool`; these are the ones every controller needs, named
//! after controller-runtime's (`GenerationChangedPredicate`, `LabelChangedPredicate`,
//! `AnnotationChangedPredicate`, `ResourceVersionChangedPredicate`) and kube-runtime's
//! `predicates::{generation, labels, annotations, resource_version}`. Creates and deletes always
//! pass; only updates are filtered, by comparing the old and the new object. Combine them with
//! [`or`]; several `with_predicate` calls must all pass (controller-runtime's `WithEventFilter`).

use kube::{Resource, ResourceExt};

use crate::informer::Event;

/// Passes updates that changed `metadata.generation`, i.e. the spec (the API server bumps it on
/// every change outside `metadata` and `status`): status-only writes, including the
/// controller's own, do not come back as reconciles.
///
/// Objects without a generation pass every update, as kube-runtime's `predicates::generation`
/// lets them through (controller-runtime's `GenerationChangedPredicate` drops them instead, which
/// would silently starve a controller of a kind that has none, such as ConfigMaps). A resync or
/// relist re-delivery (old == new) is dropped. An update that sets `deletionTimestamp` always
/// passes (kube-apiserver bumps the generation then too), so a finalizer's cleanup is never missed.
pub fn generation_changed<K: Resource>(event: &Event<K>) -> bool {
    updated(event, |old, new| {
        let deleting = |o: &K| o.meta().deletion_timestamp.is_some();
        match (old.meta().generation, new.meta().generation) {
            (Some(old_gen), Some(new_gen)) => old_gen != new_gen || deleting(old) != deleting(new),
            _ => true,
        }
    })
}

/// Passes updates that changed `metadata.labels` (controller-runtime's `LabelChangedPredicate`).
pub fn labels_changed<K: Resource>(event: &Event<K>) -> bool {
    updated(event, |old, new| old.labels() != new.labels())
}

/// Passes updates that changed `metadata.annotations` (`AnnotationChangedPredicate`).
pub fn annotations_changed<K: Resource>(event: &Event<K>) -> bool {
    updated(event, |old, new| old.annotations() != new.annotations())
}

/// Passes updates that changed `metadata.resourceVersion`: every real write, but no resync or
/// relist re-delivery of an unchanged object (`ResourceVersionChangedPredicate`).
pub fn resource_version_changed<K: Resource>(event: &Event<K>) -> bool {
    updated(event, |old, new| {
        old.meta().resource_version != new.meta().resource_version
    })
}

/// Passes what either predicate passes (controller-runtime's `predicate.Or`), e.g.
/// `or(generation_changed, labels_changed)` for a controller that reads its spec and its labels.
pub fn or<K>(
    a: impl Fn(&Event<K>) -> bool + Send + Sync + 'static,
    b: impl Fn(&Event<K>) -> bool + Send + Sync + 'static,
) -> impl Fn(&Event<K>) -> bool + Send + Sync + 'static {
    move |event| a(event) || b(event)
}

/// Creates and deletes pass; an update passes when `changed(old, new)`.
fn updated<K>(event: &Event<K>, changed: impl Fn(&K, &K) -> bool) -> bool {
    match event {
        Event::Updated { old, new } => changed(old, new),
        Event::Added(_) | Event::Deleted(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    fn cm(generation: Option<i64>, rv: &str, labels: serde_json::Value) -> Arc<ConfigMap> {
        let meta =
            json!({"name": "a", "generation": generation, "resourceVersion": rv, "labels": labels});
        Arc::new(serde_json::from_value(json!({"metadata": meta})).unwrap())
    }

    fn update(old: Arc<ConfigMap>, new: Arc<ConfigMap>) -> Event<ConfigMap> {
        Event::Updated { old, new }
    }

    #[test]
    fn generation_changed_drops_status_only_updates_and_resyncs() {
        let g1 = cm(Some(1), "1", json!({}));
        let g1_status = cm(Some(1), "2", json!({}));
        let g2 = cm(Some(2), "3", json!({}));
        assert!(!generation_changed(&update(g1.clone(), g1_status.clone())));
        assert!(generation_changed(&update(g1_status, g2)));
        assert!(!generation_changed(&update(g1.clone(), g1.clone())));
        assert!(generation_changed(&Event::Added(g1.clone())));
        assert!(generation_changed(&Event::Deleted(g1)));
        // Without a generation every update passes (kube-runtime's choice).
        let (a, b) = (cm(None, "1", json!({})), cm(None, "2", json!({})));
        assert!(generation_changed(&update(a, b)));
    }

    #[test]
    fn labels_annotations_and_resource_version() {
        let plain = cm(Some(1), "1", json!(null));
        let empty = cm(Some(1), "2", json!({}));
        let labelled = cm(Some(1), "3", json!({"x": "y"}));
        assert!(
            !labels_changed(&update(plain.clone(), empty.clone())),
            "none == empty"
        );
        assert!(labels_changed(&update(empty.clone(), labelled.clone())));
        assert!(!annotations_changed(&update(
            empty.clone(),
            labelled.clone()
        )));
        assert!(resource_version_changed(&update(plain.clone(), empty)));
        assert!(!resource_version_changed(&update(
            plain.clone(),
            plain.clone()
        )));
        let either = or(generation_changed, labels_changed);
        assert!(either(&update(plain, labelled)));
    }
}
