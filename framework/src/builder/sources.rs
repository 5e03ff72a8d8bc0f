//! Owns the builder's event sources besides the primary kind: owned kinds (mapped to their
//! controlling owner) and watched kinds (mapped by a function), each over the shared informer
//! of its kind and scope, as a compile-time type, its metadata, or a kind given at run time.

use std::sync::Arc;

use crate::informer::{
    CacheResource, Event, InformerResource, InformerScope, KindScope, ObjectKey, WithSource,
};
use crate::object::controller_owner_of;

use super::ControllerBuilder;

impl<K: CacheResource> ControllerBuilder<K> {
    /// Also reconciles the owner when an object of kind `O` changes: every event of an `O` whose
    /// controlling owner reference (`controller: true`) names a `K` enqueues that `K`, both the
    /// old and the new owner on an update (controller-runtime's `Owns`, kube-runtime's `owns`).
    /// Uses the process's informer of every `O` ([`owns_scoped`](Self::owns_scoped) for part);
    /// `O` may be `PartialObjectMeta<T>`, which caches only the `T`s' metadata (all an owner
    /// mapping reads) unless another controller wants them whole.
    pub fn owns<O: InformerResource>(self) -> Self {
        self.owns_scoped::<O>(InformerScope::all())
    }

    /// [`owns`](Self::owns) over the informer of the `O`s in `scope` only (a namespace,
    /// selectors), so the process caches no other `O`. Owner references never cross namespaces;
    /// for copies in other namespaces see [`watches_annotated`](Self::watches_annotated).
    pub fn owns_scoped<O: InformerResource>(self, scope: InformerScope) -> Self {
        self.owns_kind::<O>((), scope)
    }

    /// [`owns_scoped`](Self::owns_scoped) for an owned kind given at run time:
    /// `owns_kind::<PartialObjectMeta<DynamicObject>>(dynamic_type("apps/v1/ReplicaSet")?, scope)`.
    pub fn owns_kind<O: CacheResource>(self, kind: O::DynamicType, scope: InformerScope) -> Self {
        let (group, owner_kind) = (
            K::group(&self.kind).into_owned(),
            K::kind(&self.kind).into_owned(),
        );
        let namespaced = K::Scope::NAMESPACED;
        self.watches_source(
            kind,
            scope,
            |_: &Event<O>| true,
            move |primary| {
                move |obj: &O| {
                    // A kind given at run time is namespaced as discovery found it; before that (no
                    // event of it yet), as the owned object is.
                    let namespaced = namespaced
                        .or_else(|| primary.namespaced())
                        .unwrap_or_else(|| obj.meta().namespace.is_some());
                    controller_owner_of(obj, &group, &owner_kind, namespaced)
                }
            },
        )
    }

    /// Also reconciles the keys `mapper` derives from each event of an object of kind `W`: on an
    /// update, those of the old and of the new object (controller-runtime's `Watches` with
    /// `EnqueueRequestsFromMapFunc`, kube-runtime's `watches`). Uses the process's informer of
    /// every `W`, which caches them all: [`watches_scoped`](Self::watches_scoped) caches part.
    pub fn watches<W, I>(self, mapper: impl Fn(&W) -> I + Send + Sync + 'static) -> Self
    where
        W: InformerResource,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_with_predicate(|_: &Event<W>| true, mapper)
    }

    /// [`watches`](Self::watches) over the informer of the `W`s in `scope` only, e.g.
    /// `InformerScope::all().in_namespace("sources")` or `.with_labels("example.com/mirror")`:
    /// the process lists, watches and caches no other `W` for this controller (the informer is
    /// shared with every user of the same kind and equal scope; another scope is another watch).
    pub fn watches_scoped<W, I>(
        self,
        scope: InformerScope,
        mapper: impl Fn(&W) -> I + Send + Sync + 'static,
    ) -> Self
    where
        W: InformerResource,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_scoped_with_predicate(scope, |_: &Event<W>| true, mapper)
    }

    /// [`watches`](Self::watches), mapping only the events `predicate` passes (controller-runtime's
    /// `Watches(.., builder.WithPredicates(..))`), e.g. "every pool, when any pool's spec changes":
    /// `.watches_with_predicate(generation_changed, move |_: &Pool| pools.keys())`.
    pub fn watches_with_predicate<W, I>(
        self,
        predicate: impl Fn(&Event<W>) -> bool + Send + Sync + 'static,
        mapper: impl Fn(&W) -> I + Send + Sync + 'static,
    ) -> Self
    where
        W: InformerResource,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_scoped_with_predicate(InformerScope::all(), predicate, mapper)
    }

    /// [`watches_with_predicate`](Self::watches_with_predicate) over the informer of the `W`s in
    /// `scope` only.
    pub fn watches_scoped_with_predicate<W, I>(
        self,
        scope: InformerScope,
        predicate: impl Fn(&Event<W>) -> bool + Send + Sync + 'static,
        mapper: impl Fn(&W) -> I + Send + Sync + 'static,
    ) -> Self
    where
        W: InformerResource,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_kind((), scope, predicate, mapper)
    }

    /// [`watches_scoped_with_predicate`](Self::watches_scoped_with_predicate) for a watched kind
    /// given at run time (`W` = `DynamicObject` or `PartialObjectMeta<DynamicObject>`, `kind`
    /// from [`dynamic_type`](crate::informer::dynamic_type)); every other `watches*`/`owns*`
    /// call is this one.
    pub fn watches_kind<W, I>(
        self,
        kind: W::DynamicType,
        scope: InformerScope,
        predicate: impl Fn(&Event<W>) -> bool + Send + Sync + 'static,
        mapper: impl Fn(&W) -> I + Send + Sync + 'static,
    ) -> Self
    where
        W: CacheResource,
        I: IntoIterator<Item = ObjectKey>,
    {
        self.watches_source(kind, scope, predicate, move |_| mapper)
    }

    /// Registers, at build, a handler on the informer of the `W`s in `scope` that queues the
    /// keys of every event `predicate` passes; `mapper` is made from the primary informer.
    fn watches_source<W, I, M>(
        mut self,
        kind: W::DynamicType,
        scope: InformerScope,
        predicate: impl Fn(&Event<W>) -> bool + Send + Sync + 'static,
        mapper: impl FnOnce(crate::informer::Informer<K>) -> M + Send + 'static,
    ) -> Self
    where
        W: CacheResource,
        I: IntoIterator<Item = ObjectKey>,
        M: Fn(&W) -> I + Send + 'static,
    {
        self.sources.push(Box::new(move |factory, queue, primary| {
            let queue = queue.clone();
            let mapper = mapper(primary.clone());
            factory
                .informer_with::<W>(&kind, scope)
                .add_handler(WithSource(move |event: &Event<W>, source| {
                    if !predicate(event) {
                        return;
                    }
                    if let Event::Updated { old, new } = event
                        && !Arc::ptr_eq(old, new)
                    {
                        mapper(old)
                            .into_iter()
                            .for_each(|k| queue.add_from(k, source));
                    }
                    mapper(event.object())
                        .into_iter()
                        .for_each(|k| queue.add_from(k, source));
                }))
                .detach();
        }));
        self
    }
}
