//! Owns ownership across namespaces: an owner reference cannot name an owner in another
//! namespace (the garbage collector treats it as absent), so copies name their primary in an
//! annotation, `namespace/name`, and [`ControllerBuilder::watches_annotated`] maps each copy's
//! change back to it.

use kube::Resource;

use crate::informer::{CacheResource, InformerResource, InformerScope, ObjectKey};

use super::ControllerBuilder;

/// The primary an object names in its annotation `annotation`: `namespace/name`, or `name` for
/// a cluster-scoped primary (client-go's key format); `None` without it or when it is empty.
pub fn annotated_owner(obj: &impl Resource, annotation: &str) -> Option<ObjectKey> {
    let value = obj.meta().annotations.as_ref()?.get(annotation)?.trim();
    (!value.is_empty() && !value.ends_with('/')).then(|| ObjectKey::parse(value))
}

impl<K: CacheResource> ControllerBuilder<K> {
    /// Also reconciles the primary a `W` names in its annotation `annotation` (see
    /// [`annotated_owner`]) when that `W` changes, both the old and the new one on an update:
    /// `.owns` for objects in other namespaces, e.g. the copies a mirror controller writes into
    /// every namespace. Only the `W`s in `scope` are cached: label the copies and scope on that
    /// label (`InformerScope::all().with_labels("example.com/mirrored-from")`), since
    /// annotations cannot be selected on.
    pub fn watches_annotated<W: InformerResource>(
        self,
        scope: InformerScope,
        annotation: impl Into<String>,
    ) -> Self {
        let annotation = annotation.into();
        self.watches_scoped::<W, _>(scope, move |obj: &W| annotated_owner(obj, &annotation))
    }
}
